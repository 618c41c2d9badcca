// core/leader_lease.h: the lease decision, the fence, and which routes a follower forwards.
#include "core/leader_lease.h"

#include <gtest/gtest.h>

namespace pf::core {
namespace {

const LeaseTiming kTiming{.ttl_s = 15, .guard_s = 2};

LeaseRow held_by(const std::string& holder, std::int64_t epoch, double expires_at) {
  LeaseRow row;
  row.name = "manager";
  row.holder = holder;
  row.holder_url = "http://" + holder;
  row.epoch = epoch;
  row.expires_at = expires_at;
  row.taken_at = expires_at - 15;
  row.renewed_at = expires_at - 15;
  return row;
}

TEST(LeaderLease, NobodyEverLedSoTheFirstReplicaTakesEpochOne) {
  LeaseRow empty;
  empty.name = "manager";
  const auto d = decide_lease(empty, "a", "http://a", std::nullopt, 1000, kTiming);
  EXPECT_EQ(d.action, LeaseAction::Take);
  EXPECT_EQ(d.row.holder, "a");
  EXPECT_EQ(d.row.holder_url, "http://a");
  EXPECT_EQ(d.row.epoch, 1);
  EXPECT_DOUBLE_EQ(d.row.expires_at, 1015);
  EXPECT_DOUBLE_EQ(d.row.taken_at, 1000);
  EXPECT_NE(d.reason.find("nobody leads"), std::string::npos) << d.reason;
  // No row at all reads the same as the empty one.
  EXPECT_EQ(decide_lease(std::nullopt, "a", "", std::nullopt, 1000, kTiming).action,
            LeaseAction::Take);
}

TEST(LeaderLease, AFollowerFollowsAnUnexpiredLeaseOfAnother) {
  const auto d = decide_lease(held_by("b", 4, 1010), "a", "", std::nullopt, 1000, kTiming);
  EXPECT_EQ(d.action, LeaseAction::Follow);
  EXPECT_EQ(d.row.holder, "b");
  EXPECT_NE(d.reason.find("following b"), std::string::npos) << d.reason;
}

TEST(LeaderLease, AnExpiredLeaseIsTakenAndTheFencingCounterMovesOn) {
  const auto d = decide_lease(held_by("b", 4, 999), "a", "http://a", std::nullopt, 1000, kTiming);
  EXPECT_EQ(d.action, LeaseAction::Take);
  EXPECT_EQ(d.row.holder, "a");
  EXPECT_EQ(d.row.epoch, 5);
  EXPECT_NE(d.reason.find("expired"), std::string::npos) << d.reason;
  // Exactly at the expiry the lease counts as expired (now < expires_at is what holds it).
  EXPECT_EQ(decide_lease(held_by("b", 4, 1000), "a", "", std::nullopt, 1000, kTiming).action,
            LeaseAction::Take);
}

TEST(LeaderLease, TheHolderRenewsItsOwnTermWithoutChangingTheEpoch) {
  const auto d = decide_lease(held_by("a", 7, 1005), "a", "http://a2", 7, 1000, kTiming);
  EXPECT_EQ(d.action, LeaseAction::Renew);
  EXPECT_EQ(d.row.epoch, 7);
  EXPECT_EQ(d.row.holder_url, "http://a2");
  EXPECT_DOUBLE_EQ(d.row.expires_at, 1015);
  EXPECT_DOUBLE_EQ(d.row.renewed_at, 1000);
  EXPECT_DOUBLE_EQ(d.row.taken_at, 990);  // the term's start stays
}

TEST(LeaderLease, AHolderWhoseLeaseWasTakenStepsDown) {
  const auto d = decide_lease(held_by("b", 8, 1010), "a", "", 7, 1000, kTiming);
  EXPECT_EQ(d.action, LeaseAction::StepDown);
  EXPECT_NE(d.reason.find("held by b"), std::string::npos) << d.reason;
}

TEST(LeaderLease, AHolderWhoseTermLapsedStepsDownAndDoesNotRenewIt) {
  // Paused past its expiry: nobody took it, but actions of the old term may have been refused
  // meanwhile, so the term ends and the next try takes a new one.
  const auto d = decide_lease(held_by("a", 7, 995), "a", "", 7, 1000, kTiming);
  EXPECT_EQ(d.action, LeaseAction::StepDown);
  EXPECT_NE(d.reason.find("lapsed"), std::string::npos) << d.reason;
  const auto next = decide_lease(held_by("a", 7, 995), "a", "", std::nullopt, 1000, kTiming);
  EXPECT_EQ(next.action, LeaseAction::Take);
  EXPECT_EQ(next.row.epoch, 8);
}

TEST(LeaderLease, ARowNamingUsWithAnotherEpochIsNotOurs) {
  EXPECT_EQ(decide_lease(held_by("a", 9, 1010), "a", "", 7, 1000, kTiming).action,
            LeaseAction::StepDown);
  // Not holding any term, an unexpired row naming us is followed until it lapses.
  EXPECT_EQ(decide_lease(held_by("a", 9, 1010), "a", "", std::nullopt, 1000, kTiming).action,
            LeaseAction::Follow);
}

TEST(LeaderLease, AHolderWhoseProcessIsGoneIsReplacedAtOnce) {
  const auto d = decide_lease(held_by("b", 4, 1010), "a", "http://a", std::nullopt, 1000, kTiming,
                              "boot/ns/42", true);
  EXPECT_EQ(d.action, LeaseAction::Take);
  EXPECT_EQ(d.row.epoch, 5);
  EXPECT_EQ(d.row.holder_process, "boot/ns/42");
  EXPECT_NE(d.reason.find("is gone"), std::string::npos) << d.reason;
  // Our own row is never judged gone: a held term renews, an unheld one waits.
  EXPECT_EQ(decide_lease(held_by("a", 4, 1010), "a", "", 4, 1000, kTiming, "", true).action,
            LeaseAction::Renew);
  EXPECT_EQ(
      decide_lease(held_by("a", 4, 1010), "a", "", std::nullopt, 1000, kTiming, "", true).action,
      LeaseAction::Follow);
  // A holder that is gone is still a holder that lost its term when we held it.
  EXPECT_EQ(decide_lease(held_by("b", 5, 1010), "a", "", 4, 1000, kTiming, "", true).action,
            LeaseAction::StepDown);
}

TEST(LeaderLease, FailoverBoundIsTtlPlusOneRenewInterval) {
  EXPECT_DOUBLE_EQ(kTiming.renew_every_s(), 5);
  EXPECT_DOUBLE_EQ(kTiming.failover_bound_s(), 20);
  const LeaseTiming longest{.ttl_s = kMaxLeaseTtlS};
  EXPECT_LE(longest.failover_bound_s(), 30);
}

TEST(LeaderFence, TheHolderActsWhileMoreThanTheGuardIsLeft) {
  EXPECT_EQ(fence_refusal(held_by("a", 3, 1010), "a", 3, 1000, kTiming), std::nullopt);
}

TEST(LeaderFence, RefusesAnotherHolderANewerEpochAndALeaseAboutToLapse) {
  const auto other = fence_refusal(held_by("b", 4, 1010), "a", 3, 1000, kTiming);
  ASSERT_TRUE(other);
  EXPECT_NE(other->find("held by b"), std::string::npos) << *other;
  const auto newer = fence_refusal(held_by("a", 4, 1010), "a", 3, 1000, kTiming);
  ASSERT_TRUE(newer);
  EXPECT_NE(newer->find("ended"), std::string::npos) << *newer;
  const auto late = fence_refusal(held_by("a", 3, 1001.5), "a", 3, 1000, kTiming);
  ASSERT_TRUE(late);
  EXPECT_NE(late->find("guard"), std::string::npos) << *late;
  EXPECT_TRUE(fence_refusal(held_by("a", 3, 990), "a", 3, 1000, kTiming));
  EXPECT_TRUE(fence_refusal(std::nullopt, "a", 3, 1000, kTiming));
}

TEST(LeaderRoutes, AgentsJobsAndOperatorChangesGoToTheLeader) {
  EXPECT_TRUE(served_by_leader("POST", "/api/v1/agent/heartbeat"));
  EXPECT_TRUE(served_by_leader("GET", "/api/v1/agent/benchmark-input"));
  EXPECT_TRUE(served_by_leader("POST", "/api/v1/agent/jobs/lease"));
  EXPECT_TRUE(served_by_leader("GET", "/api/v1/jobs"));
  EXPECT_TRUE(served_by_leader("GET", "/api/v1/jobs/{key}"));
  EXPECT_TRUE(served_by_leader("POST", "/api/v1/instances"));
  EXPECT_TRUE(served_by_leader("DELETE", "/api/v1/instances/{id}"));
  EXPECT_TRUE(served_by_leader("POST", "/api/v1/autopilot"));
  EXPECT_FALSE(served_by_leader("GET", "/api/v1/instances"));
  EXPECT_FALSE(served_by_leader("GET", "/api/v1/fleet"));
  EXPECT_FALSE(served_by_leader("GET", "/api/v1/stream"));
  EXPECT_FALSE(served_by_leader("GET", "/metrics"));
  EXPECT_FALSE(served_by_leader("GET", "/healthz"));
  EXPECT_FALSE(served_by_leader("GET", "/"));
}

TEST(LeaderRoutes, HasLiveLeaderNeedsAHolderAndAnUnexpiredLease) {
  EXPECT_TRUE(has_live_leader(held_by("a", 1, 1010), 1000));
  EXPECT_FALSE(has_live_leader(held_by("a", 1, 1000), 1000));
  EXPECT_FALSE(has_live_leader(LeaseRow{}, 0));
  EXPECT_FALSE(has_live_leader(std::nullopt, 1000));
}

}  // namespace
}  // namespace pf::core
