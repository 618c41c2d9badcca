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

// --- "did this machine fail before?" ----------------------------------------------------

InstanceRecord rental_on(std::int64_t id, std::int64_t machine, double created_at) {
  InstanceRecord r;
  r.id = id;
  r.offer.machine_id = machine;
  r.offer.gpu_name = "RTX 4090";
  r.offer.num_gpus = 1;
  r.created_at = created_at;
  r.state = InstanceState::Destroyed;
  return r;
}

TEST(MachineHistory, UnknownMachineHasNoHistory) {
  const auto h = machine_history(kHost, {}, {}, {}, 1000);
  EXPECT_FALSE(h.known());
  EXPECT_EQ(h.rentals, 0);
  EXPECT_FALSE(h.median_rate.has_value());
  EXPECT_EQ(h.last_verdict, "");
}

TEST(MachineHistory, RunsMedianLastVerdictAndActiveBadHost) {
  auto accepted = rental_on(1, kHost.machine_id, 100);
  accepted.verdict = Verdict{Verdict::Decision::Accept, 61, 55, 67, 6, 30, "clears break-even"};
  accepted.ooms = 1;
  auto rejected = rental_on(2, kHost.machine_id, 500);
  rejected.verdict = Verdict{Verdict::Decision::Reject, 20, 18, 22, 6, 30, "below break-even"};
  rejected.close_cause = CloseCause::Rejected;
  rejected.prover_crashes = 2;
  auto other_machine = rental_on(3, 999, 900);
  other_machine.close_cause = CloseCause::Deadline;
  const std::vector<InstanceRecord> fleet = {accepted, rejected, other_machine};
  // Three runs on the slice (the fast one contended-free), one on another slice of the machine.
  const std::vector<BenchRun> runs = {run(100, 61.4), run(200, 58), run(300, 46.2, true),
                                      run(400, 90, false, false, {4242, "RTX 3090", 1})};
  BadHost auto_entry{kHost.machine_id, "slow benchmark", "{}", 500, 500 + 3600, 1, "auto"};
  BadHost expired{kHost.machine_id, "old", "{}", 0, 10, 1, "operator"};
  const std::vector<BadHost> bad = {expired, auto_entry};

  const auto h = machine_history(kHost, fleet, runs, bad, 1000);
  EXPECT_TRUE(h.known());
  EXPECT_EQ(h.rentals, 2);
  EXPECT_EQ(h.runs, 3);
  ASSERT_TRUE(h.median_rate.has_value());
  EXPECT_DOUBLE_EQ(*h.median_rate, (61.4 + 58) / 2);  // clean runs only, never the max
  EXPECT_EQ(h.last_verdict, "reject");
  EXPECT_EQ(h.last_verdict_reason, "below break-even");
  EXPECT_DOUBLE_EQ(h.last_at, 500);
  EXPECT_EQ(h.ooms, 1);
  EXPECT_EQ(h.crashes, 2);
  ASSERT_TRUE(h.bad_host.has_value());
  EXPECT_EQ(h.bad_host->reason, "slow benchmark");  // the expired operator entry does not count

  // Once the automatic entry expired, none applies; an operator entry wins over an automatic one.
  EXPECT_FALSE(machine_history(kHost, fleet, runs, bad, 500 + 3601).bad_host.has_value());
  BadHost op{kHost.machine_id, "operator says no", "{}", 600, std::nullopt, 1, "operator"};
  const std::vector<BadHost> both = {auto_entry, op};
  EXPECT_EQ(machine_history(kHost, fleet, runs, both, 1000).bad_host->reason, "operator says no");
}

TEST(MachineHistory, ARentalClosedWithoutVerdictShowsItsCause) {
  auto crashed = rental_on(5, kHost.machine_id, 50);
  crashed.close_cause = CloseCause::MarketExited;
  crashed.destroy_reason = "market status exited";
  auto live = rental_on(6, kHost.machine_id, 80);
  live.state = InstanceState::FetchingParams;  // no verdict, not closed: says nothing yet
  const std::vector<InstanceRecord> fleet = {crashed, live};
  const auto h = machine_history(kHost, fleet, {}, {}, 100);
  EXPECT_EQ(h.rentals, 2);
  EXPECT_EQ(h.last_verdict, "market_exited");
  EXPECT_EQ(h.last_verdict_reason, "market status exited");
  EXPECT_DOUBLE_EQ(h.last_at, 80);
  EXPECT_FALSE(h.median_rate.has_value());
}

}  // namespace
}  // namespace pf::core
