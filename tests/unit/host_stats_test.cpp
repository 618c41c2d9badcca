#include "core/host_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace pf::core {
namespace {

const HostKey kHost{4242, "RTX 4090", 1};

BenchRun run(double at, double rate, bool contended = false, bool throttled = false,
             HostKey host = kHost) {
  BenchRun r;
  r.host = std::move(host);
  r.at = at;
  r.rate = rate;
  r.contended = contended;
  r.throttled = throttled;
  return r;
}

TEST(HostStats, NoRunsGivesEmptySummary) {
  const auto s = summarize_host(kHost, {});
  EXPECT_EQ(s.host, kHost);
  EXPECT_EQ(s.runs, 0);
  EXPECT_EQ(s.median, 0);
  EXPECT_EQ(s.latest, 0);
}

TEST(HostStats, ContendedRunDoesNotReplaceCleanOne) {
  // Field case: 61.4 clean, then 46.2 while our own second instance shared the machine.
  const auto s = summarize_host(kHost, {run(100, 61.4), run(200, 46.2, /*contended=*/true)});
  EXPECT_EQ(s.runs, 2);
  EXPECT_DOUBLE_EQ(s.median, 61.4);
  EXPECT_DOUBLE_EQ(s.p10, 61.4);
  EXPECT_DOUBLE_EQ(s.ewma, 61.4);
  EXPECT_DOUBLE_EQ(s.latest, 46.2);  // still shown as what happened last
  EXPECT_DOUBLE_EQ(s.last_at, 200);
}

TEST(HostStats, ThrottledRunIsLeftOutLikeContended) {
  const auto s = summarize_host(kHost, {run(1, 50), run(2, 20, false, /*throttled=*/true)});
  EXPECT_DOUBLE_EQ(s.median, 50);
  EXPECT_DOUBLE_EQ(s.latest, 20);
}

TEST(HostStats, OnlyDisturbedRunsAreUsedWhenNothingCleanExists) {
  const auto s = summarize_host(kHost, {run(1, 40, true), run(2, 44, false, true)});
  EXPECT_EQ(s.runs, 2);
  EXPECT_DOUBLE_EQ(s.median, 42);
}

TEST(HostStats, MedianOfThreeCleanRunsIsTheMiddleNotTheMax) {
  const auto s = summarize_host(kHost, {run(3, 70), run(1, 50), run(2, 60)});
  EXPECT_DOUBLE_EQ(s.median, 60);
  EXPECT_NE(s.median, 70);
  EXPECT_DOUBLE_EQ(s.latest, 70);  // sorted by time: the run at t=3
}

TEST(HostStats, MedianOfEvenCountAveragesTheMiddleTwo) {
  const auto s = summarize_host(kHost, {run(1, 10), run(2, 40), run(3, 20), run(4, 30)});
  EXPECT_DOUBLE_EQ(s.median, 25);
}

TEST(HostStats, P10InterpolatesLinearly) {
  // Sorted 10, 20, 30, 40, 50: position 0.1 * 4 = 0.4 -> 10 + 0.4 * 10.
  const auto s =
      summarize_host(kHost, {run(1, 50), run(2, 10), run(3, 30), run(4, 20), run(5, 40)});
  EXPECT_DOUBLE_EQ(s.p10, 14);
  EXPECT_DOUBLE_EQ(s.median, 30);
}

TEST(HostStats, EwmaWeightsNewerRunsByAlphaInTimeOrder) {
  // Given out of order; in time order the rates are 10, 20, 40.
  const auto s = summarize_host(kHost, {run(3, 40), run(1, 10), run(2, 20)}, 0.5);
  EXPECT_DOUBLE_EQ(s.ewma, 27.5);  // 10 -> 15 -> 27.5
  const auto d = summarize_host(kHost, {run(3, 40), run(1, 10), run(2, 20)});
  EXPECT_DOUBLE_EQ(d.ewma, 0.3 * 40 + 0.7 * (0.3 * 20 + 0.7 * 10));
}

TEST(HostStats, RejectsAlphaOutsideUnitInterval) {
  EXPECT_THROW(summarize_host(kHost, {run(1, 1)}, 0), std::invalid_argument);
  EXPECT_THROW(summarize_host(kHost, {run(1, 1)}, 1.5), std::invalid_argument);
  EXPECT_THROW(summarize_host(kHost, {run(1, 1)}, std::nan("")), std::invalid_argument);
  EXPECT_NO_THROW(summarize_host(kHost, {run(1, 1)}, 1));
}

TEST(HostStats, NonFiniteRunsCountButDoNotPoisonTheEstimate) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const auto s = summarize_host(kHost, {run(1, 50), run(2, nan), run(nan, 70), run(3, 60)});
  EXPECT_EQ(s.runs, 4);
  EXPECT_DOUBLE_EQ(s.median, 55);
  EXPECT_DOUBLE_EQ(s.latest, 60);
  EXPECT_FALSE(std::isnan(s.ewma));
}

TEST(HostStats, SummarizeHostsGroupsByFullHostKey) {
  const HostKey two_gpus{4242, "RTX 4090", 2};
  const HostKey other{7, "A100", 1};
  const auto all = summarize_hosts({run(1, 50), run(2, 90, false, false, two_gpus), run(3, 60),
                                    run(4, 30, false, false, other), run(5, 70)});
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].host, other);  // ordered by machine_id first
  EXPECT_EQ(all[0].runs, 1);
  EXPECT_EQ(all[1].host, kHost);
  EXPECT_EQ(all[1].runs, 3);
  EXPECT_DOUBLE_EQ(all[1].median, 60);
  EXPECT_EQ(all[2].host, two_gpus);
  EXPECT_DOUBLE_EQ(all[2].median, 90);
}

}  // namespace
}  // namespace pf::core
