// Ranks offers by what they would really earn, with what the fleet knows about each machine.
// The prediction is the autopilot's (learned_predictor.h: the machine's own runs first, then
// its GPU model's fleet data, CPU effects, then priors); the break-even is the one verdicts,
// deadlines and the autopilot use (break_even.h); setup uses the fleet's measured download
// ratio (or the machine's own measured download). Every row also carries its machine's history
// (host_stats.h: "did this machine fail before?").
#pragma once

#include <span>
#include <vector>

#include "core/break_even.h"
#include "core/economics.h"
#include "core/fleet.h"
#include "core/host_stats.h"
#include "core/learned_predictor.h"
#include "core/offer.h"
#include "core/predictor.h"

namespace pf::core {

struct RankedOffer {
  Offer offer;
  Prediction prediction;
  Valuation valuation;  // min_rate is break_even.rate (the objective's)
  BreakEvenRates break_even;
  MachineHistory history;
  int our_others_on_machine = 0;  // live instances of ours on the machine (contention applied)
  double download_fraction = 0;   // real ÷ advertised download speed the setup assumed
  std::optional<double> measured_download_mbps;  // this machine's own, when measured
};

enum class RankOrder {
  Cost,    // expected $/proof ascending (offers that prove nothing last)
  Profit,  // expected profit/hour descending
};

struct RankConfig {
  PredictorConfig predictor;
  EconomicsConfig economics;
  SetupConfig setup;
  // Break-even against revenue (true) or the operator's $/proof target: the same flag the
  // verdicts and the autopilot use (ManagerConfig::profit_objective, [economics]).
  bool profit_objective = true;
};

// What the fleet has seen, as views (the caller keeps the data alive). Empty: priors only.
struct RankHistory {
  std::span<const InstanceRecord> fleet;  // destroyed rows included
  std::span<const BenchRun> runs;         // every measured run
  std::span<const BadHost> bad_hosts;
  double now = 0;
};

// Predicts and values every offer, then sorts; ties broken by offer id for a stable order.
std::vector<RankedOffer> rank_offers(std::vector<Offer> offers, const RankConfig& config,
                                     RankOrder order, const RankHistory& history = {});

}  // namespace pf::core
