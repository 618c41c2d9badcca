// Hedged proving (core/job_hedge.h): which held jobs are at risk and where a second prover
// starts them, on hand-made fleets whose answers are known; and the simulator's queue holding a
// job on two provers (sim/des_dispatch.h). The engine's run: ScenarioV3Engine.AnOverdueProof….
#include "core/job_hedge.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/des_dispatch.h"

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kHedgeNow = 10'000;

HedgeConfig on() {
  HedgeConfig c;
  c.enabled = true;
  return c;
}

// Job 1 on instance 10 (300 s a proof), heard just now, begun `ran_s` ago, due in 30 min.
HeldJob held_job(double ran_s) {
  HeldJob j;
  j.job_id = 1;
  j.holder = 10;
  j.started_at = kHedgeNow - ran_s;
  j.deadline_at = kHedgeNow + 1800;
  j.holder_seconds_per_proof = 300;
  j.holder_heard_at = kHedgeNow - 5;
  return j;
}

WorkerView spare_worker(std::int64_t id, double spp, int held = 0, int slots = 1) {
  WorkerView w;
  w.instance_id = id;
  w.seconds_per_proof = spp;
  w.held = held;
  w.slots = slots;
  return w;
}

TEST(JobHedge, AProofIsAtRiskWhenOverdueOrItsProverSilent) {
  const HedgeConfig c = on();
  // Overdue at max(1.5 × 300, 300 + 120) = 450 s.
  EXPECT_FALSE(proof_at_risk(kHedgeNow, held_job(449), c));
  EXPECT_EQ(proof_at_risk(kHedgeNow, held_job(450), c), Hedge::Cause::Overdue);
  // A fast prover: 60 s a proof is overdue only after 60 + 120 s.
  HeldJob fast = held_job(170);
  fast.holder_seconds_per_proof = 60;
  EXPECT_FALSE(proof_at_risk(kHedgeNow, fast, c));
  fast.started_at = kHedgeNow - 180;
  EXPECT_EQ(proof_at_risk(kHedgeNow, fast, c), Hedge::Cause::Overdue);
  // Not heard for 30 s: silent, however young its proof.
  HeldJob silent = held_job(10);
  silent.holder_heard_at = kHedgeNow - 30;
  EXPECT_EQ(proof_at_risk(kHedgeNow, silent, c), Hedge::Cause::Silent);
  // No measured rate: never overdue.
  HeldJob unrated = held_job(5000);
  unrated.holder_seconds_per_proof = 0;
  EXPECT_FALSE(proof_at_risk(kHedgeNow, unrated, c));
}

TEST(JobHedge, AnOverdueProofStartsOnTheSpareSlotThatFinishesItFirst) {
  const std::vector<HeldJob> held = {held_job(600)};
  const std::vector<WorkerView> workers = {spare_worker(10, 300, 1), spare_worker(11, 400),
                                           spare_worker(12, 250),
                                           spare_worker(13, 200, 1)};  // 13 is busy
  const auto hedges = plan_hedges(kHedgeNow, held, workers, on());
  ASSERT_EQ(hedges.size(), 1u);
  EXPECT_EQ(hedges[0].job_id, 1);
  EXPECT_EQ(hedges[0].holder, 10);
  EXPECT_EQ(hedges[0].instance_id, 12);
  EXPECT_DOUBLE_EQ(hedges[0].expected_finish_at, kHedgeNow + 250);
  EXPECT_EQ(hedges[0].cause, Hedge::Cause::Overdue);
  EXPECT_THAT(hedges[0].reason, HasSubstr("has run 600 s against 300 s expected"));
  EXPECT_THAT(hedges[0].reason,
              HasSubstr("instance 12 would finish it 1550 s before its deadline"));
  // Off ([jobs] hedge = false): nothing.
  EXPECT_TRUE(plan_hedges(kHedgeNow, held, workers, kHedgingOff).empty());
}

TEST(JobHedge, NothingIsHedgedWhereNoSpareSlotCanStillBeOnTime) {
  HeldJob job = held_job(600);
  job.deadline_at = kHedgeNow + 200;  // every spare prover needs longer
  EXPECT_TRUE(
      plan_hedges(kHedgeNow, {job}, {spare_worker(11, 250), spare_worker(12, 300)}, on()).empty());
  job.deadline_at = kHedgeNow - 1;  // already late: a hedge saves nothing
  EXPECT_TRUE(plan_hedges(kHedgeNow, {job}, {spare_worker(11, 100)}, on()).empty());
  // Every slot taken (a queued job was placed there first): no hedge.
  EXPECT_TRUE(plan_hedges(kHedgeNow, {held_job(600)}, {spare_worker(11, 100, 2, 2)}, on()).empty());
  // A job without a deadline may go anywhere.
  job.deadline_at = 0;
  EXPECT_EQ(plan_hedges(kHedgeNow, {job}, {spare_worker(11, 5000)}, on()).size(), 1u);
}

TEST(JobHedge, OneHedgePerJobAndNeverOnItsHolderOrAnInstanceItAvoids) {
  HeldJob hedged = held_job(600);
  hedged.hedged = true;
  EXPECT_TRUE(plan_hedges(kHedgeNow, {hedged}, {spare_worker(11, 100)}, on()).empty());
  // Its holder has a spare slot (two slots, one job): not a second copy there.
  EXPECT_TRUE(plan_hedges(kHedgeNow, {held_job(600)}, {spare_worker(10, 300, 1, 2)}, on()).empty());
  HeldJob avoiding = held_job(600);
  avoiding.avoid_instances = {11};
  const auto hedges =
      plan_hedges(kHedgeNow, {avoiding}, {spare_worker(11, 100), spare_worker(12, 500)}, on());
  ASSERT_EQ(hedges.size(), 1u);
  EXPECT_EQ(hedges[0].instance_id, 12);
  // A spare prover without the job's parameters cannot take it.
  WorkerView porep_only = spare_worker(11, 100);
  porep_only.kinds = kind_bit(JobKind::PorepC2);
  HeldJob snap = held_job(600);
  snap.kind = JobKind::SnapUpdate;
  EXPECT_TRUE(plan_hedges(kHedgeNow, {snap}, {porep_only}, on()).empty());
}

// Two jobs at risk, one spare slot: the one due first gets it; two slots on one worker take both.
TEST(JobHedge, TheJobDueFirstIsHedgedFirst) {
  HeldJob later = held_job(600);
  later.job_id = 1;
  later.deadline_at = kHedgeNow + 1500;
  HeldJob sooner = held_job(30);
  sooner.job_id = 2;
  sooner.holder = 20;
  sooner.holder_heard_at = kHedgeNow - 60;  // silent
  sooner.deadline_at = kHedgeNow + 900;
  auto hedges = plan_hedges(kHedgeNow, {later, sooner}, {spare_worker(11, 300)}, on());
  ASSERT_EQ(hedges.size(), 1u);
  EXPECT_EQ(hedges[0].job_id, 2);
  EXPECT_EQ(hedges[0].cause, Hedge::Cause::Silent);
  EXPECT_THAT(hedges[0].reason, HasSubstr("instance 20 not heard for 60 s"));
  hedges = plan_hedges(kHedgeNow, {later, sooner}, {spare_worker(11, 300, 0, 2)}, on());
  ASSERT_EQ(hedges.size(), 2u);
  EXPECT_EQ(hedges[1].job_id, 1);
}

// The simulator's queue (as jobs::JobQueue::lease): an agent the plan gives nothing may get a
// copy of a job at risk; a hedged job is held by both provers until one finishes it (the other
// is named, to be stopped) or stops (the other keeps it: it is not queued again).
TEST(JobHedge, TheSimulatorsQueueHedgesWhenAnAgentAsksAndHoldsTheJobOnBothProvers) {
  sim::JobDispatch q;
  const std::vector<WorkerView> workers = {spare_worker(10, 300), spare_worker(11, 300)};
  const double t = kHedgeNow;
  q.arrive(1, t, t + 1800);
  q.arrive(2, t, t + 1800);
  ASSERT_EQ(q.lease(10, 1, t, workers, on()), std::vector<std::int64_t>{1});
  ASSERT_EQ(q.lease(11, 1, t, workers, on()), std::vector<std::int64_t>{2});
  EXPECT_EQ(q.done(11, 2), std::nullopt);  // not hedged: nobody else to stop
  q.renew(10, t + 440);
  EXPECT_TRUE(q.lease(11, 1, t + 440, workers, on()).empty());  // not overdue until 450 s
  EXPECT_TRUE(q.lease(11, 1, t + 460, workers, kHedgingOff).empty());
  ASSERT_EQ(q.lease(11, 1, t + 460, workers, on()), std::vector<std::int64_t>{1});
  EXPECT_TRUE(q.hedged(1));
  EXPECT_EQ(q.hedger(1), 11);
  EXPECT_EQ(q.in_flight(), 2);  // one job, two copies
  const auto held = q.with_held(workers);
  EXPECT_EQ(held[0].held, 1);
  EXPECT_EQ(held[1].held, 1);
  EXPECT_EQ(q.done(11, 1), std::optional<std::int64_t>(10));  // the hedge won: stop 10's copy
  EXPECT_FALSE(q.hedged(1));
  EXPECT_EQ(q.in_flight(), 0);
  EXPECT_EQ(q.queued(), 0);

  // The holder stops (a crash): the hedge keeps the job; nothing goes back to the queue.
  q.arrive(3, t + 500, t + 2300);
  ASSERT_EQ(q.lease(10, 1, t + 500, workers, on()), std::vector<std::int64_t>{3});
  ASSERT_EQ(q.lease(11, 1, t + 1000, workers, on()), std::vector<std::int64_t>{3});  // silent
  q.release(10);
  EXPECT_EQ(q.queued(), 0);
  EXPECT_FALSE(q.hedged(3));
  EXPECT_EQ(q.in_flight(), 1);
  EXPECT_EQ(q.done(11, 3), std::nullopt);
  // A job held alone goes back to the queue when its prover stops.
  q.arrive(4, t + 1000, t + 2800);
  ASSERT_EQ(q.lease(10, 1, t + 1000, workers, on()), std::vector<std::int64_t>{4});
  q.release(10);
  EXPECT_EQ(q.queued(), 1);
}

}  // namespace
}  // namespace pf::core
