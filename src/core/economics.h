// What an offer would earn: break-even rate, expected $/proof and profit/hour with the setup
// cost (boot, parameter download, warm-up, benchmark) amortised over an expected lifetime.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/offer.h"
#include "core/predictor.h"

namespace pf::core {

// What a paid proof moves through the instance's network, which vast.ai bills per GB
// (inet_down_cost, inet_up_cost): its job's input down — a PoRep C2 input is Curio's C1 output
// in the cuzk envelope, about 51 MB (curio lib/ffi/cuzk_funcs.go wrapC1Output; the Snark Market's
// sample c1.json) — and its proof up (a PoRep C2 proof: 10 partitions × 192 bytes).
inline constexpr double kPorepC2InputBytes = 51e6;
inline constexpr double kPorepC2ProofBytes = 1920;

struct EconomicsConfig {
  double revenue_per_proof_usd = 0.012;
  double target_cost_per_proof_usd = 0.008;  // the classic ceiling; sets the break-even rate
  // Bytes each paid proof moves (above); 0 where proofs move nothing (no gateway: an instance
  // proves its benchmark input again).
  double job_input_bytes = kPorepC2InputBytes;
  double proof_bytes = kPorepC2ProofBytes;
};

// What the network of `offer` costs a paid proof: its input down and its proof up.
double transfer_per_proof_usd(const Offer& offer, const EconomicsConfig& economics);

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

// dph_total / target_cost_per_proof; infinite (it never breaks even) when the target is not
// positive and the offer costs anything, 0 when it costs nothing.
double break_even_rate(double dph_total, double target_cost_per_proof_usd);

double download_hours(const Offer& offer, const SetupConfig& setup);

// Reasons::Skipped: the same numbers without the words (predictor.h).
Valuation value_offer(const Offer& offer, const Prediction& prediction,
                      const EconomicsConfig& economics, const SetupConfig& setup,
                      Reasons reasons = Reasons::Written);

}  // namespace pf::core
