#include "core/lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/break_even.h"
#include "core/close.h"

namespace pf::core {
namespace {

using ::testing::HasSubstr;
using S = InstanceState;

InstanceRecord rec(S state = S::Renting, double now = 1000) {
  InstanceRecord r;
  r.id = 1;
  r.deployment_id = "d1";
  r.offer.dph_total = 0.4;
  r.offer.inet_down_mbps = 1000;
  r.offer.inet_down_cost_per_gb = 0.01;
  r.state = state;
  r.created_at = now;
  r.state_since = now;
  return r;
}

TEST(Lifecycle, ForwardTransitionsOnlyAndDestroyFromAnywhere) {
  EXPECT_TRUE(transition_allowed(S::Renting, S::Booting));
  EXPECT_TRUE(transition_allowed(S::Registered, S::WarmingUp));  // skipping allowed
  EXPECT_FALSE(transition_allowed(S::Proving, S::Benchmarking));
  EXPECT_FALSE(transition_allowed(S::Booting, S::Destroyed));  // must go through destroying
  for (int s = 0; s <= static_cast<int>(S::Proving); ++s) {
    EXPECT_TRUE(transition_allowed(static_cast<S>(s), S::Destroying));
  }
  EXPECT_FALSE(transition_allowed(S::Destroying, S::Destroying));
  EXPECT_TRUE(transition_allowed(S::Destroying, S::Destroyed));
  EXPECT_FALSE(transition_allowed(S::Destroyed, S::Destroying));
  EXPECT_FALSE(transition_allowed(S::Destroying, S::Proving));
}

TEST(Lifecycle, ApplyTransitionSetsDeadlineAndReason) {
  LifecycleConfig cfg;
  auto r = rec();
  auto msg = apply_transition(r, S::Booting, 2000, "created", 25, cfg);
  ASSERT_TRUE(msg);
  EXPECT_EQ(*msg, "renting → booting: created");
  EXPECT_EQ(r.state_since, 2000);
  EXPECT_EQ(r.deadline_at, 2000 + cfg.boot_loading_max_s);
  EXPECT_FALSE(apply_transition(r, S::Renting, 2100, "", 25, cfg));
  EXPECT_EQ(r.state, S::Booting);  // unchanged
  ASSERT_TRUE(apply_transition(r, S::Destroying, 2200, "operator request", 25, cfg));
  EXPECT_EQ(r.destroy_reason, "operator request");
  EXPECT_EQ(r.deadline_at, 0);
  ASSERT_TRUE(apply_transition(r, S::Destroyed, 2300, "confirmed", 25, cfg));
  EXPECT_EQ(r.destroyed_at, 2300);
}

TEST(Lifecycle, ParamsDeadlineFollowsBytesAndSpeed) {
  LifecycleConfig cfg;
  cfg.params_min_s = 60;
  auto fast = rec();
  fast.params_total_bytes = 47e9;
  fast.offer.inet_down_mbps = 1000;
  auto slow = fast;
  slow.offer.inet_down_mbps = 100;
  double df = state_deadline(fast, S::FetchingParams, 0, 25, cfg);
  double ds = state_deadline(slow, S::FetchingParams, 0, 25, cfg);
  EXPECT_NEAR(df, 47e9 * 8 / (1000e6 * 0.35) * 2, 1e-6);
  EXPECT_NEAR(ds / df, 10, 1e-9);
  slow.offer.inet_down_mbps = 1;  // clamped to the max
  EXPECT_EQ(state_deadline(slow, S::FetchingParams, 0, 25, cfg), cfg.params_max_s);
}

TEST(Lifecycle, BenchmarkDeadlineFromBreakEven) {
  LifecycleConfig cfg;
  auto cheap = rec();
  cheap.offer.dph_total = 0.2;  // break-even 25/hr
  auto pricey = cheap;
  pricey.offer.dph_total = 0.6;  // break-even 75/hr: must show it faster
  // The rate each instance must show: core/break_even.h at the classic $0.008/proof target.
  EconomicsConfig econ;
  econ.target_cost_per_proof_usd = 0.008;
  double dc = state_deadline(cheap, S::Benchmarking, 0,
                             instance_break_even_rate(cheap.offer.dph_total, 0, econ, false), cfg);
  double dp = state_deadline(pricey, S::Benchmarking, 0,
                             instance_break_even_rate(pricey.offer.dph_total, 0, econ, false), cfg);
  EXPECT_NEAR(dc, 20 * 3600.0 / 25 * 2, 1e-6);
  EXPECT_LT(dp, dc);
  EXPECT_GE(dp, cfg.bench_min_s);
}

TEST(Lifecycle, DestroyReasons) {
  LifecycleConfig cfg;
  auto r = rec(S::Proving);
  r.last_heartbeat_at = 1000;
  r.market_status = "running";
  r.market_status_since = 1000;
  EXPECT_FALSE(destroy_reason(r, 1100, cfg));
  EXPECT_THAT(destroy_reason(r, 1000 + cfg.heartbeat_timeout_s, cfg)->reason,
              HasSubstr("heartbeat lost"));

  auto exited = r;
  exited.market_status = "exited";
  EXPECT_THAT(destroy_reason(exited, 1001, cfg)->reason, HasSubstr("exited"));
  auto offline = r;
  offline.market_status = "offline";
  EXPECT_THAT(destroy_reason(offline, 1001, cfg)->reason, HasSubstr("offline"));

  auto unknown = r;
  unknown.market_status = "unknown";
  unknown.last_heartbeat_at = 1000 + cfg.market_unknown_grace_s;  // agent still talking
  EXPECT_FALSE(destroy_reason(unknown, 1000 + cfg.market_unknown_grace_s - 1, cfg));
  EXPECT_THAT(destroy_reason(unknown, 1000 + cfg.market_unknown_grace_s + 60, cfg)->reason,
              HasSubstr("unknown"));

  auto crashy = r;
  crashy.prover_crashes = cfg.max_prover_crashes;
  EXPECT_THAT(destroy_reason(crashy, 1001, cfg)->reason, HasSubstr("crashed 3 times"));

  auto late = rec(S::FetchingParams);
  late.deadline_at = 5000;
  late.last_heartbeat_at = 4990;
  EXPECT_FALSE(destroy_reason(late, 4999, cfg));
  EXPECT_THAT(destroy_reason(late, 5000, cfg)->reason,
              HasSubstr("deadline passed in fetching_params"));

  auto gone = rec(S::Destroying);
  gone.market_status = "exited";
  EXPECT_FALSE(destroy_reason(gone, 9999, cfg));  // already on its way out
}

// The cause is typed where the verdict is made: a reason text that reads like another cause
// (the old code parsed it with rfind("deadline")) changes nothing.
TEST(Lifecycle, DestroyReasonsCarryTypedCauses) {
  LifecycleConfig cfg;
  auto r = rec(S::Proving);
  r.last_heartbeat_at = 1000;
  r.market_status = "running";
  r.market_status_since = 1000;
  EXPECT_EQ(destroy_reason(r, 1000 + cfg.heartbeat_timeout_s, cfg)->cause, CloseCause::HostOffline);
  auto exited = r;
  exited.market_status = "exited";
  EXPECT_EQ(destroy_reason(exited, 1001, cfg)->cause, CloseCause::MarketExited);
  auto crashy = r;
  crashy.prover_crashes = cfg.max_prover_crashes;
  EXPECT_EQ(destroy_reason(crashy, 1001, cfg)->cause, CloseCause::OtherLifecycle);
  auto late = rec(S::FetchingParams);
  late.deadline_at = 5000;
  late.last_heartbeat_at = 4990;
  EXPECT_EQ(destroy_reason(late, 5000, cfg)->cause, CloseCause::Deadline);
}

TEST(Lifecycle, CloseStoresTheCauseAndYieldsTheStrike) {
  LifecycleConfig cfg;
  auto r = rec(S::FetchingParams);
  r.offer.machine_id = 77;
  auto step = close_instance(r, {CloseCause::Deadline, "deadline passed in fetching_params"}, 3000,
                             0, std::nullopt, cfg);
  ASSERT_TRUE(step);
  EXPECT_EQ(r.state, S::Destroying);
  EXPECT_EQ(r.close_cause, CloseCause::Deadline);
  EXPECT_EQ(r.destroy_reason, "deadline passed in fetching_params");
  EXPECT_EQ(step->state_before, S::FetchingParams);
  ASSERT_TRUE(step->strike);
  EXPECT_EQ(step->strike->kind, StrikeKind::SlowDownload);
  // Closing again changes nothing.
  EXPECT_FALSE(close_instance(r, {CloseCause::Operator, "again"}, 3100, 0, std::nullopt, cfg));
  EXPECT_EQ(r.close_cause, CloseCause::Deadline);

  auto op = rec(S::Proving);
  op.offer.machine_id = 78;
  step = close_instance(op, {CloseCause::Operator, "operator request"}, 3000, 0, std::nullopt, cfg);
  ASSERT_TRUE(step);
  EXPECT_FALSE(step->strike);  // the operator blames nobody
  EXPECT_EQ(op.close_cause, CloseCause::Operator);
}

// Issue 26: the market stopped it (contract end, outbid, credit run out). Its agent falls silent
// and its deadlines pass, but that is not the host: nothing is judged while it may resume, then
// it is closed without a strike (stopped, it still pays for its disk).
// An interruptible rental stopped was most likely outbid: it is waited for longer (its disk is
// all it pays meanwhile; a replacement pays a whole setup), measured best at an hour on the
// bundled /3 scenarios (docs/architecture.md, Policy simulator).
TEST(Lifecycle, AStoppedBidIsWaitedForLongerThanAnOnDemandRental) {
  LifecycleConfig cfg;
  auto r = rec(S::Proving);
  r.market_status = "stopped";
  r.market_status_since = 1000;
  r.bid_price = 0.2;
  ASSERT_GT(cfg.bid_stopped_grace_s, cfg.market_stopped_grace_s);
  EXPECT_FALSE(destroy_reason(r, 1000 + cfg.market_stopped_grace_s, cfg));
  EXPECT_FALSE(destroy_reason(r, 1000 + cfg.bid_stopped_grace_s - 1, cfg));
  const auto closing = destroy_reason(r, 1000 + cfg.bid_stopped_grace_s, cfg);
  ASSERT_TRUE(closing);
  EXPECT_EQ(closing->cause, CloseCause::MarketStopped);
  EXPECT_THAT(closing->reason, HasSubstr("60 min ago"));
}

TEST(Lifecycle, AMarketStopIsWaitedOutThenClosedWithoutBlamingTheHost) {
  LifecycleConfig cfg;
  auto r = rec(S::Proving);
  r.offer.machine_id = 78;
  r.last_heartbeat_at = 1000;
  r.deadline_at = 1500;
  r.market_status = "stopped";
  r.market_status_since = 1000;
  const double silent = 1000 + cfg.heartbeat_timeout_s + 60;  // heartbeat lost, deadline passed
  ASSERT_LT(silent, 1000 + cfg.market_stopped_grace_s);
  EXPECT_FALSE(destroy_reason(r, silent, cfg));
  const auto closing = destroy_reason(r, 1000 + cfg.market_stopped_grace_s, cfg);
  ASSERT_TRUE(closing);
  EXPECT_EQ(closing->cause, CloseCause::MarketStopped);
  EXPECT_THAT(closing->reason, HasSubstr("the market stopped the instance 10 min ago"));
  auto step = close_instance(r, *closing, 1000 + cfg.market_stopped_grace_s, 0, std::nullopt, cfg);
  ASSERT_TRUE(step);
  EXPECT_FALSE(step->strike);
  EXPECT_EQ(r.close_cause, CloseCause::MarketStopped);

  // Running again within the grace: its agent stopped with its container and starts again, so
  // it has a whole heartbeat timeout from the resume to be heard; then it is judged as any.
  auto resumed = r;
  resumed.state = S::Proving;
  resumed.close_cause.reset();
  resumed.market_status = "running";
  resumed.market_status_since = silent;
  EXPECT_FALSE(destroy_reason(resumed, silent + 1, cfg));
  const auto lost = destroy_reason(resumed, silent + cfg.heartbeat_timeout_s + 1, cfg);
  ASSERT_TRUE(lost);
  EXPECT_THAT(lost->reason, HasSubstr("heartbeat lost"));
}

TEST(Lifecycle, CloseCauseNamesRoundTrip) {
  for (auto c : {CloseCause::Rejected, CloseCause::Deadline, CloseCause::MarketExited,
                 CloseCause::MarketStopped, CloseCause::HostOffline, CloseCause::OtherLifecycle,
                 CloseCause::Dropped, CloseCause::Operator, CloseCause::Horizon,
                 CloseCause::Vanished, CloseCause::NotRented, CloseCause::Orphan}) {
    EXPECT_EQ(parse_close_cause(to_string(c)), c);
  }
  EXPECT_FALSE(parse_close_cause("operator request"));
}

TEST(Lifecycle, BootingAgentMustRegisterSoonAfterRunning) {
  LifecycleConfig cfg;
  auto r = rec(S::Booting);
  r.deadline_at = 1000 + cfg.boot_loading_max_s;
  r.market_status = "loading";
  r.market_status_since = 1000;
  EXPECT_FALSE(destroy_reason(r, 1000 + cfg.boot_register_grace_s + 10, cfg));  // loading is free
  r.market_status = "running";
  r.market_status_since = 1500;
  EXPECT_FALSE(destroy_reason(r, 1500 + cfg.boot_register_grace_s - 1, cfg));
  EXPECT_THAT(destroy_reason(r, 1500 + cfg.boot_register_grace_s, cfg)->reason,
              HasSubstr("never registered"));
}

TEST(States, NamesRoundTrip) {
  for (int s = 0; s <= static_cast<int>(S::Destroyed); ++s) {
    auto state = static_cast<S>(s);
    EXPECT_EQ(parse_instance_state(to_string(state)), state);
  }
  EXPECT_FALSE(parse_instance_state("bogus"));
  EXPECT_EQ(parse_proof_phase("production"), ProofPhase::Production);
  EXPECT_FALSE(parse_proof_phase("x"));
}

}  // namespace
}  // namespace pf::core
