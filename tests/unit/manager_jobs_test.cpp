// The Manager and the job queue together: which instances take jobs, a closed instance's jobs
// returning to the queue at once, the tick returning lost leases, strikes reaching the
// bad-host list.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "jobs/job_queue.h"
#include "core/fleet.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf::manager {
namespace {

using namespace std::chrono_literals;
using S = core::InstanceState;
namespace fs = std::filesystem;

class ManagerJobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "pf_manager_jobs_XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);
    market_.add_offer(102, 12, 0.20);
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
    jobs::JobQueueConfig jc;
    jc.data_dir = dir_.string();
    jc.lease_s = 60;
    queue_ = std::make_unique<jobs::JobQueue>(*store_, jc, manager_->job_hooks(),
                                              [this] { return now_; });
    manager_->attach_jobs(*queue_);
  }
  void TearDown() override {
    queue_.reset();
    manager_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A rented instance the acceptance test accepted at `rate` proofs/hour with `in_flight`
  // proofs in its plan.
  std::int64_t accepted(std::int64_t offer, double rate, int in_flight) {
    auto rec = manager_->deploy(offer, "test");
    EXPECT_TRUE(rec) << rec.error().message;
    auto row = *store_->instance(rec->id);
    row.state = S::Proving;
    core::Verdict v;
    v.decision = core::Verdict::Decision::Accept;
    v.rate = rate;
    row.verdict = v;
    row.plan_json = nlohmann::json{{"partitions", 12}, {"proofs_in_flight", in_flight}}.dump();
    row.last_heartbeat_at = now_;  // its agent is heard
    store_->update_instance(row);
    manager_->instances_written();  // written here, not by the Manager
    return rec->id;
  }
  std::int64_t submit(const std::string& id) {
    jobs::SubmitRequest r;
    r.request_id = id;
    r.input = "input of " + id;
    auto s = queue_->submit(r);
    EXPECT_TRUE(s) << s.error().message;
    return s->job.id;
  }
  bool has_event(std::int64_t id, const std::string& kind, const std::string& part) {
    for (const auto& e : store_->events(id, 0))
      if (e.kind == kind && e.message.find(part) != std::string::npos) return true;
    return false;
  }

  fs::path dir_;
  double now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
  std::unique_ptr<jobs::JobQueue> queue_;
};

TEST_F(ManagerJobsTest, OnlyAcceptedInstancesTakeJobsAtTheirMeasuredRate) {
  const auto proving = accepted(101, 90, 2);
  auto booting = manager_->deploy(102, "test");
  ASSERT_TRUE(booting);
  const auto workers = manager_->job_workers();
  ASSERT_EQ(workers.size(), 1u);
  EXPECT_EQ(workers[0].instance_id, proving);
  EXPECT_EQ(workers[0].slots, 2);
  EXPECT_DOUBLE_EQ(workers[0].seconds_per_proof, 2 * 3600.0 / 90);
  submit("a");
  auto none = queue_->lease(booting->id, 4, 0ms);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto some = queue_->lease(proving, 4, 0ms);
  ASSERT_TRUE(some);
  EXPECT_EQ(some->size(), 1u);
  EXPECT_TRUE(has_event(proving, "job", "leased"));
}

// Issue 25 item 5: the agent's plan names the kinds its prover has the parameters for; a plan
// without them (an agent from before) proves PoRep only. A SnapDeals job goes only to an
// instance with the SnapDeals parameters, PoRep to either.
TEST_F(ManagerJobsTest, AJobGoesOnlyToAnInstanceWhosePlanNamesItsKind) {
  const auto porep_only = accepted(101, 360, 1);  // faster, plan without proof_kinds
  const auto both = accepted(102, 36, 1);
  auto row = *store_->instance(both);
  row.plan_json =
      nlohmann::json{
          {"partitions", 12}, {"proofs_in_flight", 1}, {"proof_kinds", {"porep-c2", "snap-update"}}}
          .dump();
  store_->update_instance(row);
  manager_->instances_written();
  const auto workers = manager_->job_workers();
  ASSERT_EQ(workers.size(), 2u);
  for (const auto& w : workers) {
    EXPECT_EQ(w.kinds,
              w.instance_id == both ? core::kFleetKinds : core::kind_bit(core::JobKind::PorepC2));
  }
  jobs::SubmitRequest snap;
  snap.request_id = "snap-1000-3";
  snap.kind = core::JobKind::SnapUpdate;
  snap.input = "snap input";
  ASSERT_TRUE(queue_->submit(snap));
  auto none = queue_->lease(porep_only, 4, 0ms);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  auto leased = queue_->lease(both, 4, 0ms);
  ASSERT_TRUE(leased);
  ASSERT_EQ(leased->size(), 1u);
  EXPECT_EQ((*leased)[0].job.kind, core::JobKind::SnapUpdate);
}

TEST_F(ManagerJobsTest, ASilentAgentTakesNoNewWork) {
  const auto proving = accepted(101, 90, 2);
  now_ += 29;  // within three heartbeats (10 s): still a worker
  EXPECT_EQ(manager_->job_workers().size(), 1u);
  now_ += 2;
  EXPECT_TRUE(manager_->job_workers().empty());
  submit("a");
  auto none = queue_->lease(proving, 4, 0ms);
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
}

// The queue plans once and carries the plan out lease by lease (jobs/lease_plan.h): an agent
// that falls silent after a plan put a job on it does not get it; a heard one does, at once.
TEST_F(ManagerJobsTest, AnAgentSilentSinceThePlanGetsNoWorkAndTheHeardOneDoes) {
  const auto fast = accepted(101, 360, 1);  // 10 s a proof
  const auto slow = accepted(102, 36, 1);   // 100 s a proof
  now_ += 29.5;
  ASSERT_TRUE(manager_->agent_heartbeat(slow, Heartbeat{}));  // only the slow one is heard again
  submit("a");
  auto none = queue_->lease(slow, 1, 0ms);  // the plan: "a" on the fast one
  ASSERT_TRUE(none);
  EXPECT_TRUE(none->empty());
  now_ += 1;  // the fast one has not been heard for three heartbeats
  ASSERT_EQ(manager_->job_workers().size(), 1u);
  EXPECT_TRUE(queue_->lease(fast, 1, 0ms)->empty());
  auto got = queue_->lease(slow, 1, 0ms);
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].job.request_id, "a");
}

TEST_F(ManagerJobsTest, AClosedInstanceLeavesTheWorkersAtOnce) {
  const auto a = accepted(101, 90, 2);
  ASSERT_EQ(manager_->job_workers().size(), 1u);
  ASSERT_TRUE(manager_->request_destroy(a, "operator request"));  // the Manager's own write
  EXPECT_TRUE(manager_->job_workers().empty());
}

TEST_F(ManagerJobsTest, AClosedInstancesJobsReturnToTheQueueAtOnce) {
  const auto a = accepted(101, 90, 2);
  const auto j1 = submit("j1");
  const auto j2 = submit("j2");
  auto leased = queue_->lease(a, 4, 0ms);
  ASSERT_TRUE(leased);
  ASSERT_EQ(leased->size(), 2u);

  ASSERT_TRUE(manager_->request_destroy(a, "operator request"));
  EXPECT_NE(store_->instance(a)->state, S::Proving);
  EXPECT_EQ(queue_->job(j1)->state, core::JobState::Queued);
  EXPECT_EQ(queue_->job(j2)->state, core::JobState::Queued);
  EXPECT_TRUE(has_event(a, "job", "returned to the queue"));
  EXPECT_TRUE(manager_->job_workers().empty());

  // Another accepted instance takes them, as new attempts; the closed one's results are late.
  const auto b = accepted(102, 60, 2);
  auto again = queue_->lease(b, 4, 0ms);
  ASSERT_TRUE(again);
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[0].job.attempts, 2);
  jobs::ProofReport late;
  late.job_id = (*leased)[0].job.id;
  late.attempt = 1;
  late.ok = true;
  late.proof = "p";
  EXPECT_FALSE(queue_->report(a, late)->applied);
}

// The market stopping an instance (credit run out, outbid, its host holding it) is not the end
// of it, but its agent proves nothing meanwhile: its jobs go back to the queue at the reconcile
// that sees the stop, not minutes later when the lifecycle gives up on it, and nothing is
// placed on it until it runs again.
TEST_F(ManagerJobsTest, AMarketStoppedInstancesJobsReturnToTheQueueAtOnce) {
  const auto a = accepted(101, 90, 2);
  const auto j1 = submit("j1");
  ASSERT_EQ(queue_->lease(a, 4, 0ms)->size(), 1u);
  const std::int64_t mid = *store_->instance(a)->market_id;
  market_.edit_instance(mid, [](market::Instance& i) {
    i.actual_status = "stopped";
    i.intended_status = "stopped";
  });
  manager_->reconcile();
  EXPECT_EQ(queue_->job(j1)->state, core::JobState::Queued);
  EXPECT_TRUE(has_event(a, "job", "returned to the queue"));
  EXPECT_TRUE(has_event(a, "market", "the account stopped it"));
  EXPECT_TRUE(manager_->job_workers().empty());
  EXPECT_EQ(store_->instance(a)->state, S::Proving);  // not closed: it may resume
  EXPECT_TRUE(store_->bad_hosts().empty());

  market_.edit_instance(mid, [](market::Instance& i) {
    i.actual_status = "running";
    i.intended_status = "running";
  });
  manager_->reconcile();
  EXPECT_EQ(manager_->job_workers().size(), 1u);
}

// A stop it cannot come back from (the host's contract ended: vast stops the instance and it
// cannot restart) closes it at once, striking nobody.
TEST_F(ManagerJobsTest, AnEndedContractClosesTheInstanceAtOnceWithoutAStrike) {
  const auto a = accepted(101, 90, 2);
  const auto j1 = submit("j1");
  ASSERT_EQ(queue_->lease(a, 4, 0ms)->size(), 1u);
  const std::int64_t mid = *store_->instance(a)->market_id;
  market_.edit_instance(mid, [&](market::Instance& i) {
    i.actual_status = "stopped";
    i.intended_status = "running";
    i.end_date = now_ - 60;
  });
  manager_->reconcile();
  const auto row = store_->instance(a);
  EXPECT_TRUE(row->state == S::Destroying || row->state == S::Destroyed) << to_string(row->state);
  EXPECT_EQ(row->close_cause, core::CloseCause::MarketStopped);
  EXPECT_NE(row->destroy_reason.find("contract ended"), std::string::npos) << row->destroy_reason;
  EXPECT_EQ(queue_->job(j1)->state, core::JobState::Queued);
  EXPECT_TRUE(store_->bad_hosts().empty());
}

TEST_F(ManagerJobsTest, TheManagersTickReturnsLostLeases) {
  const auto a = accepted(101, 90, 1);
  const auto j = submit("j");
  ASSERT_EQ(queue_->lease(a, 1, 0ms)->size(), 1u);
  now_ += 61;  // no heartbeat named it
  manager_->tick();
  EXPECT_EQ(queue_->job(j)->state, core::JobState::Queued);
  EXPECT_TRUE(has_event(a, "job", "lease was not renewed"));
}

TEST_F(ManagerJobsTest, FailedProofsStrikeTheMachine) {
  const auto a = accepted(101, 90, 2);
  submit("j1");
  submit("j2");
  auto leased = queue_->lease(a, 4, 0ms);
  ASSERT_TRUE(leased);
  ASSERT_EQ(leased->size(), 2u);
  for (const auto& l : *leased) {
    jobs::ProofReport r;
    r.job_id = l.job.id;
    r.attempt = l.job.attempts;
    r.message = "prover exited 1";
    ASSERT_TRUE(queue_->report(a, r));
  }
  const auto bad = store_->bad_hosts();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].machine_id, 11);
  EXPECT_THAT(bad[0].reason, ::testing::HasSubstr("failed_proofs"));
  EXPECT_TRUE(has_event(a, "blame", "failed_proofs"));
}

}  // namespace
}  // namespace pf::manager
