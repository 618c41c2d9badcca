#include "core/host_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace pf::core {
namespace {

bool usable(const BenchRun& r) {
  return std::isfinite(r.rate) && std::isfinite(r.at);
}
bool clean(const BenchRun& r) {
  return !r.contended && !r.throttled;
}

// `sorted` must be non-empty and ascending. q in [0, 1].
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

}  // namespace

HostSummary summarize_host(const HostKey& host, std::vector<BenchRun> runs, double alpha) {
  if (!(alpha > 0 && alpha <= 1)) {
    throw std::invalid_argument("EWMA alpha must be in (0, 1], got " + std::to_string(alpha));
  }
  HostSummary summary;
  summary.host = host;
  summary.runs = static_cast<int>(runs.size());

  std::erase_if(runs, [](const BenchRun& r) { return !usable(r); });
  if (runs.empty()) return summary;
  // Stable: runs recorded at the same instant keep the order they were given (store order).
  std::stable_sort(runs.begin(), runs.end(),
                   [](const BenchRun& a, const BenchRun& b) { return a.at < b.at; });

  summary.latest = runs.back().rate;
  summary.last_at = runs.back().at;

  const bool any_clean = std::any_of(runs.begin(), runs.end(), clean);
  std::vector<double> rates;  // the runs the estimate rests on, in time order
  for (const auto& r : runs)
    if (!any_clean || clean(r)) rates.push_back(r.rate);

  summary.ewma = rates.front();
  for (std::size_t i = 1; i < rates.size(); ++i)
    summary.ewma = alpha * rates[i] + (1 - alpha) * summary.ewma;

  std::sort(rates.begin(), rates.end());
  summary.median = quantile(rates, 0.5);
  summary.p10 = quantile(rates, 0.1);
  return summary;
}

std::vector<HostSummary> summarize_hosts(const std::vector<BenchRun>& runs, double alpha) {
  using Key = std::tuple<std::int64_t, std::string, int>;
  std::map<Key, std::vector<BenchRun>> by_host;
  for (const auto& r : runs)
    by_host[Key{r.host.machine_id, r.host.gpu_name, r.host.num_gpus}].push_back(r);
  std::vector<HostSummary> out;
  out.reserve(by_host.size());
  for (auto& [key, host_runs] : by_host) {
    HostKey host{std::get<0>(key), std::get<1>(key), std::get<2>(key)};
    out.push_back(summarize_host(host, std::move(host_runs), alpha));
  }
  return out;
}

MachineHistory machine_history(const HostKey& host, std::span<const InstanceRecord> fleet,
                               std::span<const BenchRun> runs, std::span<const BadHost> bad_hosts,
                               double now) {
  MachineHistory h;
  h.machine_id = host.machine_id;
  const InstanceRecord* latest = nullptr;
  for (const auto& rec : fleet) {
    if (rec.offer.machine_id != host.machine_id) continue;
    ++h.rentals;
    h.ooms += std::max(0, rec.ooms);
    h.crashes += std::max(0, rec.prover_crashes);
    // The latest rental that got a verdict or was closed: what the machine did last time.
    const bool judged = rec.verdict.has_value() || rec.close_cause.has_value();
    if (!judged) continue;
    if (!latest || rec.created_at > latest->created_at ||
        (rec.created_at == latest->created_at && rec.id > latest->id)) {
      latest = &rec;
    }
  }
  for (const auto& rec : fleet) {
    if (rec.offer.machine_id == host.machine_id) h.last_at = std::max(h.last_at, rec.created_at);
  }
  if (latest) {
    if (latest->verdict && latest->verdict->decision != Verdict::Decision::Continue) {
      h.last_verdict = to_string(latest->verdict->decision);
      h.last_verdict_reason = latest->verdict->reason;
    } else if (latest->close_cause) {
      h.last_verdict = to_string(*latest->close_cause);
      h.last_verdict_reason = latest->destroy_reason;
    }
  }
  std::vector<BenchRun> slice;
  for (const auto& r : runs) {
    if (r.host == host) slice.push_back(r);
  }
  if (!slice.empty()) {
    const HostSummary s = summarize_host(host, slice);
    h.runs = s.runs;
    if (std::any_of(slice.begin(), slice.end(), usable)) h.median_rate = s.median;
  }
  for (const auto& b : bad_hosts) {
    if (b.machine_id != host.machine_id || !is_active(b, now)) continue;
    if (!h.bad_host || (h.bad_host->source != "operator" && b.source == "operator")) h.bad_host = b;
  }
  return h;
}

}  // namespace pf::core
