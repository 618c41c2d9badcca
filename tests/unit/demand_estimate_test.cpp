#include "core/demand_estimate.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kStart = 1'750'000'000;

// `per_hour` evenly spaced arrivals from `from` to `to` (epoch seconds).
std::vector<double> steady(double from, double to, double per_hour) {
  std::vector<double> out;
  const double gap = 3600 / per_hour;
  for (double t = from + gap; t <= to; t += gap) out.push_back(t);
  return out;
}

QueueObservation seen(const std::vector<double>& arrivals, double now, int queued = 0) {
  return QueueObservation{now, kStart, arrivals, queued};
}

TEST(DemandEstimate, NothingUntilEnoughHasBeenWatched) {
  const auto arrivals = steady(kStart, kStart + 120, 600);
  EXPECT_FALSE(estimate_demand(seen(arrivals, kStart + 120), std::nullopt, {}));
}

TEST(DemandEstimate, ArrivalRateOverTheTrailingWindow) {
  // 200/hr for two hours, then 500/hr for one: the hour-long window sees only the latest.
  auto arrivals = steady(kStart, kStart + 7200, 200);
  const auto later = steady(kStart + 7200, kStart + 10800, 500);
  arrivals.insert(arrivals.end(), later.begin(), later.end());
  const auto e = estimate_demand(seen(arrivals, kStart + 10800), std::nullopt, {});
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->arrival_rate, 500, 2);
  EXPECT_NEAR(e->proofs_per_hour, 500, 2);
  EXPECT_FALSE(e->held);
}

TEST(DemandEstimate, ShortWatchScalesToTheTimeWatched) {
  // Ten minutes at 300/hr: 50 jobs over 10 min, not over the full hour window.
  const auto arrivals = steady(kStart, kStart + 600, 300);
  const auto e = estimate_demand(seen(arrivals, kStart + 600), std::nullopt, {});
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->arrival_rate, 300, 7);
}

TEST(DemandEstimate, BacklogAddsTheRateThatDrainsIt) {
  const auto arrivals = steady(kStart, kStart + 3600, 400);
  DemandEstimateConfig cfg;
  cfg.drain_within_s = 1800;
  const auto e = estimate_demand(seen(arrivals, kStart + 3600, 100), std::nullopt, cfg);
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->backlog_rate, 200, 1e-9);
  EXPECT_NEAR(e->proofs_per_hour, 600, 2);
  EXPECT_THAT(e->reason, HasSubstr("100 queued"));
}

TEST(DemandEstimate, HoldsThePreviousFigureWithinPoissonNoise) {
  // 420/hr observed against 400 sized for: within 10% → held, the fleet does not move.
  const auto arrivals = steady(kStart, kStart + 3600, 420);
  const auto e = estimate_demand(seen(arrivals, kStart + 3600), 400.0, {});
  ASSERT_TRUE(e);
  EXPECT_TRUE(e->held);
  EXPECT_DOUBLE_EQ(e->proofs_per_hour, 400);
  EXPECT_THAT(e->reason, HasSubstr("held"));
}

TEST(DemandEstimate, MovesWhenTheRateLeavesTheBand) {
  const auto arrivals = steady(kStart, kStart + 3600, 520);
  const auto up = estimate_demand(seen(arrivals, kStart + 3600), 400.0, {});
  ASSERT_TRUE(up);
  EXPECT_FALSE(up->held);
  EXPECT_NEAR(up->proofs_per_hour, 520, 2);
  const auto down =
      estimate_demand(seen(steady(kStart, kStart + 3600, 150), kStart + 3600), 400.0, {});
  ASSERT_TRUE(down);
  EXPECT_NEAR(down->proofs_per_hour, 150, 2);
}

TEST(DemandEstimate, NoArrivalsMeansNoDemand) {
  const std::vector<double> none;
  const auto e = estimate_demand(seen(none, kStart + 3600), 300.0, {});
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->proofs_per_hour, 0);
}

}  // namespace
}  // namespace pf::core
