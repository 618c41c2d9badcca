// Why the market stopped an instance (core/market_stop.h): the cause read from vast's status
// fields, and whether it can come back.
#include "core/market_stop.h"

#include <gtest/gtest.h>

#include "core/benchmark_step.h"
#include "core/lifecycle.h"

namespace pf::core {
namespace {

constexpr double kStoppedAt = 1'750'000'000;

MarketStatus stopped(const std::string& intended, bool bid = false, double end_date = 0) {
  MarketStatus s;
  s.actual_status = "stopped";
  s.intended_status = intended;
  s.cur_state = "stopped";
  s.next_state = intended;
  s.end_date = end_date;
  s.is_bid = bid;
  return s;
}

TEST(MarketStop, OnlyAStoppedInstanceHasAStopToExplain) {
  MarketStatus running = stopped("running");
  running.actual_status = "running";
  EXPECT_FALSE(explain_market_stop(running, kStoppedAt));
  MarketStatus exited = stopped("running");
  exited.actual_status = "exited";  // the container died: not a stop (the lifecycle's MarketExited)
  EXPECT_FALSE(explain_market_stop(exited, kStoppedAt));
}

TEST(MarketStop, AnEndedContractCannotComeBack) {
  const auto stop = explain_market_stop(stopped("running", false, kStoppedAt - 600), kStoppedAt);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->cause, StopCause::ContractEnded);
  EXPECT_FALSE(stop->may_resume);
  EXPECT_NE(stop->reason.find("contract ended 10 min ago"), std::string::npos) << stop->reason;
  // Whatever else the fields say: a bid past its contract's end cannot resume either.
  EXPECT_EQ(explain_market_stop(stopped("stopped", true, kStoppedAt), kStoppedAt)->cause,
            StopCause::ContractEnded);
  // A contract that ends later is not the cause.
  EXPECT_NE(explain_market_stop(stopped("running", false, kStoppedAt + 60), kStoppedAt)->cause,
            StopCause::ContractEnded);
}

TEST(MarketStop, AnOutbidInterruptibleMayResume) {
  const auto stop = explain_market_stop(stopped("stopped", true), kStoppedAt);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->cause, StopCause::Outbid);
  EXPECT_TRUE(stop->may_resume);
  EXPECT_STREQ(to_string(stop->cause), "outbid");
}

TEST(MarketStop, AnOnDemandRentalStoppedOnPurposeWasStoppedByTheAccount) {
  MarketStatus s = stopped("stopped");
  s.status_msg = "insufficient credit";
  const auto stop = explain_market_stop(s, kStoppedAt);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->cause, StopCause::StoppedByAccount);
  EXPECT_TRUE(stop->may_resume);
  EXPECT_NE(stop->reason.find("credit"), std::string::npos) << stop->reason;
  EXPECT_NE(stop->reason.find("\"insufficient credit\""), std::string::npos) << stop->reason;
}

TEST(MarketStop, StoppedWhileMeantToRunIsHeld) {
  const auto stop = explain_market_stop(stopped("running"), kStoppedAt);
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->cause, StopCause::Held);
  EXPECT_TRUE(stop->may_resume);
}

// A stop is not the host's: the time it stood stopped moves the state's deadline on, and only
// leaving a stop does.
TEST(MarketStop, AResumedInstanceIsNotDueEarlierForTheTimeItStoodStopped) {
  InstanceRecord rec;
  rec.state = InstanceState::FetchingParams;
  rec.deadline_at = kStoppedAt + 600;
  rec.market_status = "running";
  rec.market_status_since = kStoppedAt - 3600;
  record_market_status(rec, "stopped", kStoppedAt);
  EXPECT_EQ(rec.market_status, "stopped");
  EXPECT_DOUBLE_EQ(rec.market_status_since, kStoppedAt);
  EXPECT_DOUBLE_EQ(rec.deadline_at, kStoppedAt + 600);  // stopping moves nothing
  record_market_status(rec, "running", kStoppedAt + 1800);
  EXPECT_EQ(rec.market_status, "running");
  EXPECT_DOUBLE_EQ(rec.market_status_since, kStoppedAt + 1800);
  EXPECT_DOUBLE_EQ(rec.deadline_at, kStoppedAt + 600 + 1800);
  record_market_status(rec, "running", kStoppedAt + 2000);  // no stop left: nothing moves
  EXPECT_DOUBLE_EQ(rec.deadline_at, kStoppedAt + 2400);
}

// A benchmark's time cap and a download's judgement measure the state's running time: a stop
// by the market (outbid, a contract pause) is not the host's slowness.
TEST(MarketStop, TheStatesClocksLeaveOutTheTimeTheMarketHeldItStopped) {
  InstanceRecord rec;
  rec.state = InstanceState::Benchmarking;
  rec.state_since = kStoppedAt;
  rec.market_status = "running";
  rec.market_status_since = kStoppedAt - 3600;
  EXPECT_DOUBLE_EQ(running_seconds_in_state(rec, kStoppedAt + 600), 600);
  record_market_status(rec, "stopped", kStoppedAt + 600);
  // While the stop goes on, its time is left out already.
  EXPECT_DOUBLE_EQ(running_seconds_in_state(rec, kStoppedAt + 1200), 600);
  record_market_status(rec, "running", kStoppedAt + 1800);
  EXPECT_DOUBLE_EQ(rec.market_stopped_s, 1200);
  EXPECT_DOUBLE_EQ(running_seconds_in_state(rec, kStoppedAt + 2400), 1200);
  record_market_status(rec, "stopped", kStoppedAt + 3000);
  EXPECT_DOUBLE_EQ(running_seconds_in_state(rec, kStoppedAt + 3600), 1800);

  // The benchmark's clock (core::benchmark_input): its start plus the running time.
  rec.bench_since = kStoppedAt + 100;
  const std::vector<ProofSample> none;
  const BenchmarkInput in = benchmark_input(rec, none, kStoppedAt + 3600, 1.0);
  EXPECT_DOUBLE_EQ(in.now - in.since, 1800);
}

TEST(MarketStop, OnlyTheStopsTimeInTheCurrentStateIsLeftOutAndANewStateStartsAfresh) {
  InstanceRecord rec;
  rec.state = InstanceState::FetchingParams;
  rec.state_since = kStoppedAt - 7200;
  rec.market_status = "stopped";
  rec.market_status_since = kStoppedAt - 600;
  rec.market_stopped_s = 900;
  LifecycleConfig cfg;
  ASSERT_TRUE(apply_transition(rec, InstanceState::WarmingUp, kStoppedAt, "params done", 1.0, cfg));
  EXPECT_DOUBLE_EQ(rec.market_stopped_s, 0);
  // The stop began 600 s before this state: only its part in the state is left out.
  EXPECT_DOUBLE_EQ(running_seconds_in_state(rec, kStoppedAt + 300), 0);
  record_market_status(rec, "running", kStoppedAt + 300);
  EXPECT_DOUBLE_EQ(rec.market_stopped_s, 300);
  EXPECT_DOUBLE_EQ(running_seconds_in_state(rec, kStoppedAt + 900), 600);
}

}  // namespace
}  // namespace pf::core
