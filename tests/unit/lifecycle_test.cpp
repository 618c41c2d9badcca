#include "core/lifecycle.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
  auto msg = apply_transition(r, S::Booting, 2000, "created", 0.008, cfg);
  ASSERT_TRUE(msg);
  EXPECT_EQ(*msg, "renting → booting: created");
  EXPECT_EQ(r.state_since, 2000);
  EXPECT_EQ(r.deadline_at, 2000 + cfg.boot_loading_max_s);
  EXPECT_FALSE(apply_transition(r, S::Renting, 2100, "", 0.008, cfg));
  EXPECT_EQ(r.state, S::Booting);  // unchanged
  ASSERT_TRUE(apply_transition(r, S::Destroying, 2200, "operator request", 0.008, cfg));
  EXPECT_EQ(r.destroy_reason, "operator request");
  EXPECT_EQ(r.deadline_at, 0);
  ASSERT_TRUE(apply_transition(r, S::Destroyed, 2300, "confirmed", 0.008, cfg));
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
  double df = state_deadline(fast, S::FetchingParams, 0, 0.008, cfg);
  double ds = state_deadline(slow, S::FetchingParams, 0, 0.008, cfg);
  EXPECT_NEAR(df, 47e9 * 8 / (1000e6 * 0.35) * 2, 1e-6);
  EXPECT_NEAR(ds / df, 10, 1e-9);
  slow.offer.inet_down_mbps = 1;  // clamped to the max
  EXPECT_EQ(state_deadline(slow, S::FetchingParams, 0, 0.008, cfg), cfg.params_max_s);
}

TEST(Lifecycle, BenchmarkDeadlineFromBreakEven) {
  LifecycleConfig cfg;
  auto cheap = rec();
  cheap.offer.dph_total = 0.2;  // break-even 25/hr
  auto pricey = cheap;
  pricey.offer.dph_total = 0.6;  // break-even 75/hr: must show it faster
  double dc = state_deadline(cheap, S::Benchmarking, 0, 0.008, cfg);
  double dp = state_deadline(pricey, S::Benchmarking, 0, 0.008, cfg);
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
  EXPECT_THAT(*destroy_reason(r, 1000 + cfg.heartbeat_timeout_s, cfg), HasSubstr("heartbeat lost"));

  auto exited = r;
  exited.market_status = "exited";
  EXPECT_THAT(*destroy_reason(exited, 1001, cfg), HasSubstr("exited"));
  auto offline = r;
  offline.market_status = "offline";
  EXPECT_THAT(*destroy_reason(offline, 1001, cfg), HasSubstr("offline"));

  auto unknown = r;
  unknown.market_status = "unknown";
  unknown.last_heartbeat_at = 1000 + cfg.market_unknown_grace_s;  // agent still talking
  EXPECT_FALSE(destroy_reason(unknown, 1000 + cfg.market_unknown_grace_s - 1, cfg));
  EXPECT_THAT(*destroy_reason(unknown, 1000 + cfg.market_unknown_grace_s + 60, cfg),
              HasSubstr("unknown"));

  auto crashy = r;
  crashy.prover_crashes = cfg.max_prover_crashes;
  EXPECT_THAT(*destroy_reason(crashy, 1001, cfg), HasSubstr("crashed 3 times"));

  auto late = rec(S::FetchingParams);
  late.deadline_at = 5000;
  late.last_heartbeat_at = 4990;
  EXPECT_FALSE(destroy_reason(late, 4999, cfg));
  EXPECT_THAT(*destroy_reason(late, 5000, cfg), HasSubstr("deadline passed in fetching_params"));

  auto gone = rec(S::Destroying);
  gone.market_status = "exited";
  EXPECT_FALSE(destroy_reason(gone, 9999, cfg));  // already on its way out
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
  EXPECT_THAT(*destroy_reason(r, 1500 + cfg.boot_register_grace_s, cfg),
              HasSubstr("never registered"));
}

TEST(Spend, AccruesOnlyWhileBilled) {
  auto r = rec(S::Booting, 0);
  r.offer.dph_total = 0.36;
  r.market_status = "loading";
  EXPECT_EQ(accrue_compute_spend(r, 3600), 0);
  r.market_status = "running";
  EXPECT_NEAR(accrue_compute_spend(r, 7200), 0.36, 1e-12);
  EXPECT_NEAR(accrue_compute_spend(r, 9000), 0.18, 1e-12);
  r.market_status = "offline";
  EXPECT_EQ(accrue_compute_spend(r, 12600), 0);
  EXPECT_NEAR(r.spend_usd, 0.54, 1e-12);
  EXPECT_EQ(accrue_compute_spend(r, 12000), 0);  // time never runs backwards
  EXPECT_NEAR(accrue_bandwidth_spend(r, 10e9), 0.1, 1e-12);
  EXPECT_NEAR(accrue_bandwidth_spend(r, 5e9), 0, 1e-12);  // stale report adds nothing
  EXPECT_NEAR(r.spend_usd, 0.64, 1e-12);
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
