// What an offer would earn: break-even rate, expected $/proof and profit/hour with the setup
// cost (boot, parameter download, warm-up, benchmark) amortised over an expected lifetime.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/offer.h"
#include "core/predictor.h"

namespace pf::core {

struct EconomicsConfig {
  double revenue_per_proof_usd = 0.012;
  double target_cost_per_proof_usd = 0.008;  // the classic ceiling; sets the break-even rate
};

struct SetupConfig {
  double boot_h = 0.25;        // image pull and agent start
  double params_bytes = 47e9;  // parameters every new instance downloads
  // Advertised inet_down is self-measured and shared; real downloads are often far slower.
  double download_speed_fraction = 0.35;
  double unknown_download_mbps = 100;  // when the offer does not advertise a speed
  double warmup_h = 0.25;              // parameter load + constraint-evaluator cache
  double benchmark_proofs = 8;         // proofs measured before a verdict
  double expected_lifetime_h = 72;     // how long an accepted instance is expected to live
  double slow_download_h = 1.0;        // downloads longer than this earn a reason
};

struct Valuation {
  double min_rate = 0;     // break-even: dph_total / target $/proof
  double setup_hours = 0;  // boot + download + warm-up + benchmark
  double download_hours = 0;
  double setup_cost_usd = 0;  // compute billed during setup + parameter bandwidth
  // Over the expected lifetime, setup included. nullopt when the offer proves nothing.
  std::optional<double> expected_cost_per_proof;
  double expected_profit_per_hour = 0;
  std::vector<std::string> reasons;
};

// dph_total / target_cost_per_proof; 0 when the target is not positive.
double break_even_rate(double dph_total, double target_cost_per_proof_usd);

double download_hours(const Offer& offer, const SetupConfig& setup);

// Reasons::Skipped: the same numbers without the words (predictor.h).
Valuation value_offer(const Offer& offer, const Prediction& prediction,
                      const EconomicsConfig& economics, const SetupConfig& setup,
                      Reasons reasons = Reasons::Written);

}  // namespace pf::core
