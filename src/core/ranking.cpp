#include "core/ranking.h"

#include <algorithm>

namespace pf::core {

std::vector<RankedOffer> rank_offers(std::vector<Offer> offers, const RankConfig& config,
                                     RankOrder order) {
  std::vector<RankedOffer> ranked;
  ranked.reserve(offers.size());
  for (auto& offer : offers) {
    Prediction p = predict_from_prior(offer, config.predictor);
    Valuation v = value_offer(offer, p, config.economics, config.setup);
    ranked.push_back(RankedOffer{std::move(offer), std::move(p), std::move(v)});
  }
  auto by_cost = [](const RankedOffer& a, const RankedOffer& b) {
    const auto& ca = a.valuation.expected_cost_per_proof;
    const auto& cb = b.valuation.expected_cost_per_proof;
    if (ca.has_value() != cb.has_value()) return ca.has_value();
    if (ca && cb && *ca != *cb) return *ca < *cb;
    return a.offer.id < b.offer.id;
  };
  auto by_profit = [](const RankedOffer& a, const RankedOffer& b) {
    if (a.valuation.expected_profit_per_hour != b.valuation.expected_profit_per_hour) {
      return a.valuation.expected_profit_per_hour > b.valuation.expected_profit_per_hour;
    }
    return a.offer.id < b.offer.id;
  };
  if (order == RankOrder::Cost) {
    std::sort(ranked.begin(), ranked.end(), by_cost);
  } else {
    std::sort(ranked.begin(), ranked.end(), by_profit);
  }
  return ranked;
}

}  // namespace pf::core
