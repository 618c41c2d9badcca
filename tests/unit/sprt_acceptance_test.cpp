#include "core/sprt_acceptance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

namespace pf::core {
namespace {

using D = Verdict::Decision;
using ::testing::HasSubstr;

// Completions after `since` at a steady rate (proofs/hour), lognormal intervals of CV cv.
std::vector<ProofSample> completions(int n, double rate, double cv, double since, unsigned seed) {
  std::mt19937 rng(seed);
  const double sigma = std::sqrt(std::log(1 + cv * cv));
  std::lognormal_distribution<double> gap(std::log(3600 / rate) - sigma * sigma / 2, sigma);
  std::vector<ProofSample> out;
  double t = since;
  for (int i = 0; i < n; ++i) {
    t += cv > 0 ? gap(rng) : 3600 / rate;
    ProofSample s;
    s.seq = i;
    s.at = t;
    out.push_back(s);
  }
  return out;
}

struct Decision {
  D decision = D::Continue;
  int samples = 0;  // proofs seen when it decided
  Verdict verdict;
};

// Feeds the proofs one at a time, as the manager does, until the test decides.
Decision run_until_decided(const SprtAcceptance& test, double rate, double break_even, double cv,
                           unsigned seed) {
  const auto all = completions(test.config().max_samples + 5, rate, cv, 0, seed);
  Decision d;
  for (std::size_t n = 1; n <= all.size(); ++n) {
    BenchmarkInput in;
    in.samples.assign(all.begin(), all.begin() + static_cast<long>(n));
    in.since = 0;
    in.now = all[n - 1].at;
    in.break_even_rate = break_even;
    d.verdict = test.evaluate(in);
    if (d.verdict.decision != D::Continue) {
      d.decision = d.verdict.decision;
      d.samples = static_cast<int>(n);
      return d;
    }
  }
  return d;
}

TEST(SprtAcceptance, IsAnAcceptanceTheManagerCanSwitchTo) {
  std::unique_ptr<Acceptance> acceptance = std::make_unique<SprtAcceptance>(SprtConfig{});
  BenchmarkInput in{completions(3, 100, 0.05, 0, 1), 0, 0, 40};
  in.now = in.samples.back().at;
  EXPECT_EQ(acceptance->evaluate(in).decision, D::Accept);
}

TEST(SprtAcceptance, ClearlyFastHostIsAcceptedAtTheMinimumSampleCount) {
  SprtAcceptance test({});
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const Decision d = run_until_decided(test, 80, 40, 0.15, seed);
    EXPECT_EQ(d.decision, D::Accept) << "seed " << seed;
    EXPECT_EQ(d.samples, test.config().min_samples) << "seed " << seed;
  }
}

TEST(SprtAcceptance, ClearlySlowHostIsRejectedAtTheMinimumSampleCount) {
  SprtAcceptance test({});
  for (unsigned seed = 1; seed <= 10; ++seed) {
    const Decision d = run_until_decided(test, 15, 40, 0.15, seed);
    EXPECT_EQ(d.decision, D::Reject) << "seed " << seed;
    EXPECT_EQ(d.samples, test.config().min_samples) << "seed " << seed;
  }
}

TEST(SprtAcceptance, MarginalHostsRunLongerThanClearOnes) {
  SprtAcceptance test({});
  double clear = 0;
  double marginal = 0;
  for (unsigned seed = 1; seed <= 40; ++seed) {
    clear += run_until_decided(test, 60, 40, 0.15, seed).samples;
    marginal += run_until_decided(test, 43, 40, 0.15, seed).samples;
  }
  EXPECT_GT(marginal / 40, clear / 40 + 3);
}

TEST(SprtAcceptance, ErrorRatesStayNearTheirBounds) {
  SprtAcceptance test({});
  int slow_accepted = 0;
  int fast_rejected = 0;
  const int runs = 200;
  for (unsigned seed = 1; seed <= runs; ++seed) {
    // 10% below break-even: worth nothing, must rarely be kept.
    if (run_until_decided(test, 36, 40, 0.2, seed).decision == D::Accept) ++slow_accepted;
    // 25% above: clearly worth keeping, must rarely be thrown away.
    if (run_until_decided(test, 50, 40, 0.2, 1000 + seed).decision == D::Reject) ++fast_rejected;
  }
  EXPECT_LE(slow_accepted, runs * 5 / 100);
  EXPECT_LE(fast_rejected, runs * 10 / 100);
}

TEST(SprtAcceptance, TimeCapDecidesOnThePointEstimate) {
  SprtConfig cfg;
  cfg.max_seconds = 150;
  SprtAcceptance test(cfg);
  // Two proofs (below min_samples) at 1.5× break-even when the cap is reached.
  BenchmarkInput fast{completions(2, 60, 0, 0, 1), 0, 150, 40};
  Verdict v = test.evaluate(fast);
  EXPECT_EQ(v.decision, D::Accept);
  EXPECT_THAT(v.reason, HasSubstr("time cap"));
  // The same at 0.9× break-even is rejected.
  cfg.max_seconds = 210;
  SprtAcceptance later(cfg);
  BenchmarkInput slow{completions(2, 36, 0, 0, 1), 0, 210, 40};
  v = later.evaluate(slow);
  EXPECT_EQ(v.decision, D::Reject);
  EXPECT_THAT(v.reason, HasSubstr("time cap"));
}

TEST(SprtAcceptance, SampleCapDecidesAMarginalHostOnThePointEstimate) {
  SprtConfig cfg;
  cfg.max_samples = 5;
  cfg.prior_cv = 1.0;  // a wide prior keeps the likelihood ratio undecided
  SprtAcceptance test(cfg);
  const auto s = completions(5, 42.4, 0, 0, 1);  // 6% above break-even
  BenchmarkInput in{s, 0, s.back().at, 40};
  const Verdict v = test.evaluate(in);
  EXPECT_EQ(v.decision, D::Accept);
  EXPECT_THAT(v.reason, HasSubstr("sample cap"));
  EXPECT_EQ(v.samples, 5);
  EXPECT_NEAR(v.rate, 42.4, 0.1);
}

TEST(SprtAcceptance, LeadingWarmupIntervalIsLeftOut) {
  SprtAcceptance test({});
  // The first interval takes 10× the steady one: warm-up the agent did not mark.
  auto s = completions(6, 60, 0.05, 0, 3);
  for (auto& p : s) p.at += 9 * 60;  // the first gap grows by 9 minutes
  BenchmarkInput in{s, 0, s.back().at, 40};
  const Verdict v = test.evaluate(in);
  EXPECT_EQ(v.decision, D::Accept);
  EXPECT_THAT(v.reason, HasSubstr("warm-up"));
  EXPECT_EQ(v.samples, 5);
  EXPECT_NEAR(v.rate, 60, 6);
}

TEST(SprtAcceptance, SilentHostIsRejectedWithoutWaitingForTheCaps) {
  SprtAcceptance test({});
  // Break-even 40/hr needs a proof every 90 s; nothing for 10 minutes.
  BenchmarkInput in{{}, 0, 600, 40};
  const Verdict v = test.evaluate(in);
  EXPECT_EQ(v.decision, D::Reject);
  EXPECT_THAT(v.reason, HasSubstr("no proof for 10 min"));
  // After only 2 minutes it waits.
  in.now = 120;
  EXPECT_EQ(test.evaluate(in).decision, D::Continue);
}

TEST(SprtAcceptance, HostStillSlowingDownIsNotAcceptedEarly) {
  SprtAcceptance test({});
  // Four proofs at 3× break-even, then four at 1.2×: fast but not steady.
  auto s = completions(4, 120, 0, 0, 1);
  const auto later = completions(4, 48, 0, s.back().at, 1);
  s.insert(s.end(), later.begin(), later.end());
  for (std::size_t i = 0; i < s.size(); ++i) s[i].seq = static_cast<std::int64_t>(i);
  BenchmarkInput in{s, 0, s.back().at, 40};
  const Verdict v = test.evaluate(in);
  EXPECT_EQ(v.decision, D::Continue);
  EXPECT_THAT(v.reason, HasSubstr("getting slower"));
}

TEST(SprtAcceptance, VerdictStoresRateIntervalSamplesAndBreakEven) {
  SprtAcceptance test({});
  const auto s = completions(4, 70, 0.1, 100, 9);
  BenchmarkInput in{s, 100, s.back().at, 40};
  const Verdict v = test.evaluate(in);
  EXPECT_EQ(v.samples, 4);
  EXPECT_GT(v.rate, 0);
  EXPECT_LT(v.low, v.rate);
  EXPECT_GT(v.high, v.rate);
  EXPECT_DOUBLE_EQ(v.break_even_rate, 40);
  EXPECT_FALSE(v.reason.empty());
}

}  // namespace
}  // namespace pf::core
