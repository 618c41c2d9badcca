#include "core/acceptance.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace pf::core {
namespace {

using D = Verdict::Decision;

// n completions at a steady rate (proofs/hour) with lognormal jitter of coefficient cv.
std::vector<ProofSample> completions(int n, double rate, double cv, double since, unsigned seed) {
  std::mt19937 rng(seed);
  double sigma = std::sqrt(std::log(1 + cv * cv));
  double mu = std::log(3600 / rate) - sigma * sigma / 2;
  std::lognormal_distribution<double> gap(mu, sigma);
  std::vector<ProofSample> out;
  double t = since;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    ProofSample s;
    s.seq = i;
    s.at = t;
    out.push_back(s);
  }
  return out;
}

TEST(EstimateRate, RecoversSteadyRate) {
  auto s = completions(200, 60, 0.1, 0, 1);
  auto e = estimate_rate(s, 0, 1.645);
  EXPECT_NEAR(e.rate, 60, 3);
  EXPECT_LT(e.low, e.rate);
  EXPECT_GT(e.high, e.rate);
  EXPECT_EQ(e.samples, 200);
}

TEST(EstimateRate, OrderDoesNotMatter) {
  auto s = completions(10, 30, 0.2, 100, 2);
  auto a = estimate_rate(s, 100, 1.645);
  std::reverse(s.begin(), s.end());
  auto b = estimate_rate(s, 100, 1.645);
  EXPECT_DOUBLE_EQ(a.rate, b.rate);
}

// Jobs (the gateway, scenario /2): a host proving at 60/hr that waits idle between jobs
// completes fewer proofs per hour than it can prove; its busy rate is still 60/hr, and with
// proofs back to back (wall time = interval) the two estimates agree.
TEST(EstimateBusyRate, IdleTimeBetweenJobsIsNotSlowness) {
  std::vector<ProofSample> samples;
  double t = 0;
  for (int i = 0; i < 12; ++i) {
    t += i % 2 == 0 ? 600 : 0;  // idle 10 min before every other job
    t += 60;                    // the proof itself: 1 min
    ProofSample s;
    s.seq = i;
    s.at = t;
    s.seconds = 60;
    samples.push_back(s);
  }
  EXPECT_NEAR(estimate_rate(samples, 0, 1.645).rate, 3600.0 / 360, 1e-9);  // 10/hr
  const RateEstimate busy = estimate_busy_rate(samples, 0, 1.645);
  EXPECT_NEAR(busy.rate, 60, 1e-9);
  EXPECT_EQ(busy.samples, 12);

  auto steady = completions(50, 40, 0.15, 0, 7);
  double prev = 0;
  for (auto& s : steady) s.seconds = s.at - prev, prev = s.at;
  EXPECT_DOUBLE_EQ(estimate_busy_rate(steady, 0, 1.645).rate, estimate_rate(steady, 0, 1.645).rate);
  // Without a reported wall time the interval stands.
  for (auto& s : samples) s.seconds = 0;
  EXPECT_NEAR(estimate_busy_rate(samples, 0, 1.645).rate, 10, 1e-9);
}

TEST(IntervalAcceptance, WaitsForMinimumSamples) {
  IntervalAcceptance acc({});
  BenchmarkInput in{completions(3, 200, 0.05, 0, 3), 0, 100, 20};
  auto v = acc.evaluate(in);
  EXPECT_EQ(v.decision, D::Continue);
  EXPECT_THAT(v.reason, ::testing::HasSubstr("need 6"));
}

TEST(IntervalAcceptance, ClearHostsDecideEarly) {
  IntervalAcceptance acc({});
  auto fast = completions(6, 90, 0.08, 0, 4);
  auto v = acc.evaluate({fast, 0, fast.back().at, 50});
  EXPECT_EQ(v.decision, D::Accept);
  EXPECT_EQ(v.samples, 6);
  auto slow = completions(6, 20, 0.08, 0, 5);
  auto r = acc.evaluate({slow, 0, slow.back().at, 50});
  EXPECT_EQ(r.decision, D::Reject);
  EXPECT_THAT(r.reason, ::testing::HasSubstr("rejected"));
}

TEST(IntervalAcceptance, MarginalHostsRunToTheCap) {
  AcceptanceConfig cfg;
  cfg.max_samples = 12;
  IntervalAcceptance acc(cfg);
  auto s = completions(12, 52, 0.3, 0, 6);
  auto early = acc.evaluate({std::vector<ProofSample>(s.begin(), s.begin() + 6), 0, s[5].at, 50});
  EXPECT_EQ(early.decision, D::Continue);
  auto done = acc.evaluate({s, 0, s.back().at, 50});
  EXPECT_NE(done.decision, D::Continue);
  EXPECT_THAT(done.reason, ::testing::HasSubstr("sample cap"));
}

TEST(IntervalAcceptance, TimeCapWithoutProofsRejects) {
  AcceptanceConfig cfg;
  cfg.max_seconds = 600;
  IntervalAcceptance acc(cfg);
  auto v = acc.evaluate({{}, 0, 601, 50});
  EXPECT_EQ(v.decision, D::Reject);
  EXPECT_THAT(v.reason, ::testing::HasSubstr("no measured proof"));
}

}  // namespace
}  // namespace pf::core
