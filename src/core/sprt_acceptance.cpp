#include "core/sprt_acceptance.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/text.h"

namespace pf::core {
namespace {

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  double s = 0;
  for (std::size_t i = from; i < to; ++i) s += v[i];
  return to > from ? s / static_cast<double>(to - from) : 0;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double sd_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v, 0, v.size());
  double ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return std::sqrt(ss / static_cast<double>(v.size() - 1));
}

std::string minutes(double seconds) {
  return fixed(seconds / 60, 0) + " min";
}

}  // namespace

Verdict SprtAcceptance::evaluate(const BenchmarkInput& in) const {
  using D = Verdict::Decision;
  const SprtConfig& c = config_;
  Verdict v;
  v.break_even_rate = in.break_even_rate;

  // Completions in time order; the first interval runs from the start of the benchmark.
  std::vector<ProofSample> sorted = in.samples;
  std::sort(sorted.begin(), sorted.end(),
            [](const ProofSample& a, const ProofSample& b) { return a.at < b.at; });
  std::vector<ProofSample> completions;
  std::vector<double> x;  // ln(interval)
  double prev = in.since;
  for (const auto& s : sorted) {
    if (s.at <= prev) continue;
    x.push_back(std::log(s.at - prev));
    completions.push_back(s);
    prev = s.at;
  }
  const double last_at = prev;

  // Leading intervals far above the rest are warm-up the agent did not mark.
  const double sigma0 = std::sqrt(std::log(1 + c.prior_cv * c.prior_cv));
  std::size_t start = 0;
  while (static_cast<int>(start) < c.max_warmup_discard &&
         static_cast<int>(x.size() - start) - 1 >= c.min_samples) {
    std::vector<double> rest(x.begin() + static_cast<long>(start) + 1, x.end());
    const double spread = std::max(sd_of(rest), sigma0 / 2);
    if (x[start] > median_of(rest) + c.warmup_outlier_sd * spread) {
      ++start;
    } else {
      break;
    }
  }
  const double kept_since = start == 0 ? in.since : completions[start - 1].at;
  std::vector<double> kx(x.begin() + static_cast<long>(start), x.end());
  std::vector<ProofSample> kept(completions.begin() + static_cast<long>(start), completions.end());
  const int n = static_cast<int>(kx.size());
  const std::string trimmed =
      start > 0 ? " (" + std::to_string(start) + " slow leading proof(s) left out as warm-up)" : "";

  const RateEstimate all = estimate_rate(kept, kept_since, c.z);
  v.rate = all.rate;
  v.low = all.low;
  v.high = all.high;
  v.samples = all.samples;
  auto summary = [&](const RateEstimate& e) {
    return fixed(e.rate, 1) + "/hr [" + fixed(e.low, 1) + ", " + fixed(e.high, 1) + "] from " +
           std::to_string(e.samples) + " proofs vs break-even " + fixed(in.break_even_rate, 1) +
           "/hr" + trimmed;
  };

  const double be = in.break_even_rate;
  const bool timed_out = in.now - in.since >= c.max_seconds;
  const double r0 = be * (1 - c.reject_margin);
  const double r1 = be * (1 + c.accept_margin);

  if (be > 0 && r0 > 0 && n < c.max_samples) {
    const double silence = in.now - last_at;
    const double needed_gap = 3600 / r0;
    if (silence >= c.stall_factor * needed_gap) {
      v.decision = D::Reject;
      v.reason = "rejected: no proof for " + minutes(silence) + " while break-even " +
                 fixed(be, 1) + "/hr needs one every " + minutes(needed_gap) +
                 (n > 0 ? "; so far " + summary(all) : "");
      return v;
    }
  }
  if (n < c.min_samples && !timed_out) {
    v.decision = D::Continue;
    v.reason = "need " + std::to_string(c.min_samples) + " measured proofs, have " +
               std::to_string(n) + trimmed;
    return v;
  }
  if (n == 0) {
    v.decision = D::Reject;
    v.reason = "rejected: no measured proof within the " + minutes(c.max_seconds) + " cap";
    return v;
  }
  if (be <= 0) {
    v.decision = D::Accept;
    v.reason = "accepted: no break-even to clear (price 0); " + summary(all);
    return v;
  }

  // σ from the samples, shrunk toward the prior while they are few.
  double ss = 0;
  const double xbar = mean_of(kx, 0, kx.size());
  for (double xi : kx) ss += (xi - xbar) * (xi - xbar);
  const double sigma2 =
      (c.prior_weight * sigma0 * sigma0 + ss) / (c.prior_weight + std::max(0, n - 1));
  const double sigma = std::sqrt(sigma2);
  const double mu0 = std::log(3600 / r0) - sigma2 / 2;
  const double mu1 = std::log(3600 / r1) - sigma2 / 2;
  double llr = 0;
  for (double xi : kx) llr += ((xi - mu0) * (xi - mu0) - (xi - mu1) * (xi - mu1)) / (2 * sigma2);
  const double upper = std::log((1 - c.beta) / c.alpha);
  const double lower = std::log(c.beta / (1 - c.alpha));
  const std::string test =
      "; SPRT log-LR " + fixed(llr, 2) + " in (" + fixed(lower, 2) + ", " + fixed(upper, 2) + ")";

  bool slowing = false;
  const int half = n / 2;
  if (n >= 6) {
    const double first = mean_of(kx, 0, static_cast<std::size_t>(half));
    const double second = mean_of(kx, kx.size() - static_cast<std::size_t>(half), kx.size());
    slowing = second - first > c.trend_sd * sigma * std::sqrt(2.0 / half);
  }

  const bool capped = n >= c.max_samples || timed_out;
  if (capped) {
    RateEstimate judged = all;
    std::string basis;
    if (slowing) {
      std::vector<ProofSample> later(kept.end() - half, kept.end());
      judged = estimate_rate(later, (kept.end() - half - 1)->at, c.z);
      basis = " (still slowing down: judged on the later " + std::to_string(half) + " proofs)";
      v.rate = judged.rate;
      v.low = judged.low;
      v.high = judged.high;
      v.samples = judged.samples;
    }
    const bool ok = judged.rate >= be * (1 + c.cap_accept_margin);
    v.decision = ok ? D::Accept : D::Reject;
    v.reason = std::string(ok ? "accepted" : "rejected") + " at the " +
               (timed_out ? "time cap" : "sample cap") + ": " + summary(judged) + basis + test;
    return v;
  }
  if (llr >= upper && !slowing) {
    v.decision = D::Accept;
    v.reason = "accepted: " + summary(all) + test;
  } else if (llr <= lower) {
    v.decision = D::Reject;
    v.reason = "rejected: " + summary(all) + test;
  } else {
    v.decision = D::Continue;
    v.reason = std::string(slowing ? "not steady yet (getting slower): " : "undecided: ") +
               summary(all) + test;
  }
  return v;
}

SprtConfig with_caps(SprtConfig tuning, const AcceptanceConfig& caps) {
  tuning.min_samples = caps.min_samples;
  tuning.max_samples = caps.max_samples;
  tuning.max_seconds = caps.max_seconds;
  tuning.z = caps.z;
  return tuning;
}

}  // namespace pf::core
