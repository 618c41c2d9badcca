#include "core/acceptance.h"

#include <algorithm>
#include <cmath>

#include "core/text.h"

namespace pf::core {

namespace {

// Rate and interval from the time each proof took (its interval): mean m, rate 3600/m; the
// interval on the mean maps to one on the rate (high rate = short interval).
RateEstimate estimate_from_intervals(const std::vector<double>& intervals, double z) {
  RateEstimate e;
  e.samples = static_cast<int>(intervals.size());
  if (intervals.empty()) return e;
  double sum = 0;
  for (double g : intervals) sum += g;
  double mean = sum / static_cast<double>(intervals.size());
  double var = 0;
  for (double g : intervals) var += (g - mean) * (g - mean);
  var = intervals.size() > 1 ? var / static_cast<double>(intervals.size() - 1) : mean * mean;
  double se = std::sqrt(var / static_cast<double>(intervals.size()));
  e.rate = 3600 / mean;
  double gap_low = std::max(mean - z * se, mean * 0.05);
  double gap_high = mean + z * se;
  e.low = 3600 / gap_high;
  e.high = 3600 / gap_low;
  return e;
}

// Completions in time order, each with the interval since the one before (the first since
// `since`); `busy_only` caps each at the proof's own wall time when it reports one.
std::vector<double> completion_intervals(std::vector<ProofSample> samples, double since,
                                         bool busy_only) {
  std::sort(samples.begin(), samples.end(),
            [](const ProofSample& a, const ProofSample& b) { return a.at < b.at; });
  std::vector<double> gaps;
  double prev = since;
  for (const auto& s : samples) {
    if (s.at > prev) {
      const double gap = s.at - prev;
      gaps.push_back(busy_only && s.seconds > 0 ? std::min(gap, s.seconds) : gap);
    }
    prev = std::max(prev, s.at);
  }
  return gaps;
}

}  // namespace

RateEstimate estimate_rate(std::vector<ProofSample> samples, double since, double z) {
  return estimate_from_intervals(completion_intervals(std::move(samples), since, false), z);
}

RateEstimate estimate_busy_rate(std::vector<ProofSample> samples, double since, double z) {
  return estimate_from_intervals(completion_intervals(std::move(samples), since, true), z);
}

Verdict IntervalAcceptance::evaluate(const BenchmarkInput& in) const {
  using D = Verdict::Decision;
  RateEstimate e = estimate_rate(in.samples, in.since, config_.z);
  Verdict v;
  v.rate = e.rate;
  v.low = e.low;
  v.high = e.high;
  v.samples = e.samples;
  v.break_even_rate = in.break_even_rate;
  const std::string summary = fixed(e.rate, 1) + "/hr [" + fixed(e.low, 1) + ", " +
                              fixed(e.high, 1) + "] from " + std::to_string(e.samples) +
                              " proofs vs break-even " + fixed(in.break_even_rate, 1) + "/hr";
  bool timed_out = in.now - in.since >= config_.max_seconds;
  if (e.samples < config_.min_samples && !timed_out) {
    v.decision = D::Continue;
    v.reason = "need " + std::to_string(config_.min_samples) + " proofs, have " +
               std::to_string(e.samples);
    return v;
  }
  if (e.samples == 0) {
    v.decision = D::Reject;
    v.reason = "no measured proof within " + fixed(config_.max_seconds / 60, 0) + " min";
    return v;
  }
  if (e.low >= in.break_even_rate) {
    v.decision = D::Accept;
    v.reason = "accepted: " + summary;
  } else if (e.high < in.break_even_rate) {
    v.decision = D::Reject;
    v.reason = "rejected: " + summary;
  } else if (e.samples >= config_.max_samples || timed_out) {
    bool ok = e.rate >= in.break_even_rate;
    v.decision = ok ? D::Accept : D::Reject;
    v.reason = std::string(ok ? "accepted" : "rejected") + " at the " +
               (timed_out ? "time cap" : "sample cap") + ": " + summary;
  } else {
    v.decision = D::Continue;
    v.reason = "undecided: " + summary;
  }
  return v;
}

}  // namespace pf::core
