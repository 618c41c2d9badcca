#include "core/economics.h"

#include <algorithm>
#include <limits>

#include "core/text.h"

namespace pf::core {

double break_even_rate(double dph_total, double target) {
  if (target > 0) return dph_total / target;
  return dph_total > 0 ? std::numeric_limits<double>::infinity() : 0;
}

double transfer_per_proof_usd(const Offer& offer, const EconomicsConfig& economics) {
  return std::max(0.0, economics.job_input_bytes) / 1e9 * offer.inet_down_cost_per_gb +
         std::max(0.0, economics.proof_bytes) / 1e9 * offer.inet_up_cost_per_gb;
}

double download_hours(const Offer& offer, const SetupConfig& s) {
  double mbps = offer.inet_down_mbps > 0 ? offer.inet_down_mbps * s.download_speed_fraction
                                         : s.unknown_download_mbps;
  if (mbps <= 0) return 0;
  return s.params_bytes * 8 / (mbps * 1e6) / 3600;
}

Valuation value_offer(const Offer& offer, const Prediction& pred, const EconomicsConfig& econ,
                      const SetupConfig& s, Reasons reasons) {
  Valuation v;
  // A proof's own transfer comes out of the $/proof it must beat.
  const double transfer = transfer_per_proof_usd(offer, econ);
  v.min_rate = break_even_rate(offer.dph_total, econ.target_cost_per_proof_usd - transfer);
  v.download_hours = download_hours(offer, s);
  double bench_h = pred.rate > 0 ? s.benchmark_proofs / pred.rate : 0;
  v.setup_hours = s.boot_h + v.download_hours + s.warmup_h + bench_h;
  double bandwidth_usd = s.params_bytes / 1e9 * offer.inet_down_cost_per_gb;
  // Boot is billed too: vast bills storage while loading, and assuming the worst keeps the
  // estimate conservative.
  v.setup_cost_usd = v.setup_hours * offer.dph_total + bandwidth_usd;

  double lifetime = std::max(s.expected_lifetime_h, v.setup_hours);
  double productive_h = lifetime - v.setup_hours;
  double proofs = pred.rate * productive_h;
  double cost = lifetime * offer.dph_total + bandwidth_usd + proofs * transfer;
  if (proofs > 0) v.expected_cost_per_proof = cost / proofs;
  v.expected_profit_per_hour = (proofs * econ.revenue_per_proof_usd - cost) / lifetime;

  if (reasons == Reasons::Skipped) return v;
  if (v.download_hours >= s.slow_download_h) {
    v.reasons.push_back("slow download: ~" + fixed(v.download_hours, 1) + " h for " +
                        fixed(s.params_bytes / 1e9, 0) + " GB at a conservative " +
                        fixed(offer.inet_down_mbps > 0
                                  ? offer.inet_down_mbps * s.download_speed_fraction
                                  : s.unknown_download_mbps,
                              0) +
                        " Mb/s");
  }
  if (bandwidth_usd >= 0.05) {
    v.reasons.push_back("parameter bandwidth costs $" + fixed(bandwidth_usd, 2));
  }
  if (pred.rate > 0 && pred.high < v.min_rate) {
    v.reasons.push_back("even the optimistic " + fixed(pred.high, 1) + "/hr is below break-even " +
                        fixed(v.min_rate, 1) + "/hr");
  } else if (pred.rate > 0 && pred.low >= v.min_rate) {
    v.reasons.push_back("clears break-even " + fixed(v.min_rate, 1) + "/hr even at the low end (" +
                        fixed(pred.low, 1) + "/hr)");
  }
  v.reasons.push_back("setup ~" + fixed(v.setup_hours, 1) + " h costs $" +
                      fixed(v.setup_cost_usd, 2) + ", amortised over " + fixed(lifetime, 0) + " h");
  return v;
}

}  // namespace pf::core
