// Ranks offers by what they would really earn.
#pragma once

#include <vector>

#include "core/economics.h"
#include "core/offer.h"
#include "core/predictor.h"

namespace pf::core {

struct RankedOffer {
  Offer offer;
  Prediction prediction;
  Valuation valuation;
};

enum class RankOrder {
  Cost,    // expected $/proof ascending (offers that prove nothing last)
  Profit,  // expected profit/hour descending
};

struct RankConfig {
  PredictorConfig predictor;
  EconomicsConfig economics;
  SetupConfig setup;
};

// Predicts and values every offer, then sorts; ties broken by offer id for a stable order.
std::vector<RankedOffer> rank_offers(std::vector<Offer> offers, const RankConfig& config,
                                     RankOrder order);

}  // namespace pf::core
