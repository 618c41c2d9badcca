#include "scenario/truth_model.h"

#include <algorithm>
#include <cmath>

#include "core/memory_model.h"

namespace pf::scenario {

double contention_factor(const Truth& truth, int others) {
  return std::pow(truth.contention, std::max(0, others));
}

double truth_rate(const Truth& truth, int partitions, int others, bool throttled) {
  double r = truth.rate_full * core::rate_fraction(partitions, truth.partitions_full);
  r *= contention_factor(truth, others);
  if (throttled && truth.throttle) r *= truth.throttle->factor;
  return r;
}

double peak_memory_gib(const Truth& truth, int partitions) {
  return truth.mem_base_gib + truth.mem_per_partition_gib * std::max(0, partitions);
}

bool out_of_memory(const Truth& truth, int partitions) {
  return peak_memory_gib(truth, partitions) > truth.ram_visible_gib;
}

double oom_after_start_s(const Truth& truth) {
  return std::max(1.0, truth.warmup_min * 60);
}

double observed_peak_memory_gib(const Truth& truth, int partitions) {
  return std::min(peak_memory_gib(truth, partitions), truth.ram_visible_gib);
}

double warmup_extra_s(const Truth& truth, int proof_index) {
  if (proof_index < 1 || proof_index > truth.warmup_proofs) return 0;
  return truth.warmup_min * 60 * std::ldexp(1.0, -(proof_index - 1));
}

double draw_proof_work(const Truth& truth, Stream& stream) {
  return stream.unit_lognormal(truth.proof_time_cv);
}

double boot_after_rent_s(const Truth& truth) {
  return truth.failure.kind == FailureKind::NeverBoots ? kNeverS : truth.boot_min * 60;
}

double download_s(const Truth& truth, double params_bytes) {
  const double bytes_per_s = truth.download_mbps * 1e6 / 8;
  return bytes_per_s > 0 ? params_bytes / bytes_per_s : kNeverS;
}

std::optional<double> throttle_after_proving_s(const Truth& truth) {
  if (!truth.throttle) return std::nullopt;
  return truth.throttle->after_h * 3600;
}

bool throttle_reported(const Truth& truth) {
  return truth.throttle && truth.throttle->reported;
}

std::optional<double> crash_after_proving_s(const Truth& truth) {
  if (truth.failure.kind != FailureKind::Crash) return std::nullopt;
  return truth.failure.after_h * 3600;
}

std::optional<double> offline_after_boot_s(const Truth& truth) {
  if (truth.failure.kind != FailureKind::Offline) return std::nullopt;
  return truth.failure.after_h * 3600;
}

RentalTimeline rental_timeline(const Truth& truth, double params_bytes) {
  RentalTimeline t;
  t.boot_s = boot_after_rent_s(truth);
  if (t.boot_s >= kNeverS) return t;
  const double download = download_s(truth, params_bytes);
  if (download < kNeverS) t.prover_start_s = t.boot_s + download;
  if (auto crash = crash_after_proving_s(truth); crash && t.prover_start_s < kNeverS) {
    t.exit_s = t.prover_start_s + *crash;
  }
  if (auto offline = offline_after_boot_s(truth)) t.offline_s = t.boot_s + *offline;
  return t;
}

double listed_dph(const ScenarioOffer& offer, double at_h) {
  double dph = offer.offer.dph_total;
  for (const auto& change : offer.dph_changes) {
    if (change.at_h > at_h) break;
    dph = change.dph_total;
  }
  return dph;
}

double arrival_rate(const Demand& demand, double at_h) {
  for (const auto& segment : demand.arrivals) {
    if (at_h >= segment.from_h && at_h < segment.to_h) return segment.proofs_per_hour;
  }
  return 0;
}

std::vector<double> draw_arrivals(const Demand& demand, double horizon_s, Stream& stream) {
  std::vector<double> out;
  for (const auto& segment : demand.arrivals) {
    if (segment.proofs_per_hour <= 0) continue;
    const double rate_per_s = segment.proofs_per_hour / 3600;
    const double end = std::min(segment.to_h * 3600, horizon_s);
    // Memorylessness: each segment starts its own process at its start.
    for (double t = segment.from_h * 3600 + stream.exponential(rate_per_s); t < end;
         t += stream.exponential(rate_per_s)) {
      out.push_back(t);
    }
  }
  return out;
}

}  // namespace pf::scenario
