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
