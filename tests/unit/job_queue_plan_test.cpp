// The queue's placement made once per state and carried out lease by lease (jobs/lease_plan.h):
// the plan is reused only while nothing but its own leases changed; a job submitted, requeued
// or failed, a worker gone silent or a plan grown old makes the next lease plan again, so
// deadlines-first order and avoid lists hold as if every lease planned afresh.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>

#include "jobs/job_queue.h"
#include "jobs/lease_plan.h"
#include "store/sql_store.h"
#include "support/temp_dir.h"

namespace pf::jobs {
namespace {

using namespace std::chrono_literals;

core::WorkerView worker(std::int64_t id, double seconds_per_proof, int slots = 1) {
  return core::WorkerView{id, seconds_per_proof, slots, 0, -1};
}

core::JobPlan plan_of(std::vector<std::pair<std::int64_t, std::int64_t>> job_on_instance) {
  core::JobPlan plan;
  for (const auto& [job, instance] : job_on_instance) {
    core::JobPlacement p;
    p.job_id = job;
    p.instance_id = instance;
    plan.placements.push_back(p);
  }
  return plan;
}

TEST(LeasePlan, IsCurrentOnlyForItsGenerationFleetAndAge) {
  LeasePlan plan(2);
  const std::vector<core::WorkerView> fleet{worker(1, 100), worker(2, 150)};
  EXPECT_FALSE(plan.current(0, fleet, 10));  // none made yet
  plan.remake(5, fleet, 10, plan_of({{100, 1}}));
  EXPECT_TRUE(plan.current(5, fleet, 11.9));
  EXPECT_FALSE(plan.current(6, fleet, 11));                                // the queue changed
  EXPECT_FALSE(plan.current(5, fleet, 12));                                // too old
  EXPECT_FALSE(plan.current(5, fleet, 9));                                 // the clock stepped back
  EXPECT_FALSE(plan.current(5, {worker(1, 100)}, 11));                     // one went silent
  EXPECT_FALSE(plan.current(5, {worker(1, 100), worker(2, 120)}, 11));     // a rate changed
  EXPECT_FALSE(plan.current(5, {worker(1, 100), worker(2, 150, 2)}, 11));  // a plan changed
  auto held = fleet;
  held[0].held = 3;  // the queue's own count, not the fleet's: the same fleet
  EXPECT_TRUE(plan.current(5, held, 11));
  EXPECT_TRUE(plan.fleet_changed({worker(1, 100)}));
  EXPECT_FALSE(plan.fleet_changed(fleet));
  plan.forget();
  EXPECT_FALSE(plan.current(5, fleet, 11));
  EXPECT_FALSE(plan.fleet_changed({}));  // nothing in hand: nothing changed
  EXPECT_EQ(plan.plans_made(), 1u);
}

TEST(LeasePlan, TakesAnInstancesPlacementsInOrderOnce) {
  LeasePlan plan(2);
  plan.remake(1, {worker(1, 100, 3), worker(2, 100)}, 10, plan_of({{10, 1}, {11, 2}, {12, 1}}));
  EXPECT_EQ(plan.pending(1), 2u);
  auto first = plan.take(1, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].job_id, 10);
  auto rest = plan.take(1, 8);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].job_id, 12);
  EXPECT_TRUE(plan.take(1, 8).empty());
  EXPECT_TRUE(plan.take(3, 8).empty());  // nothing planned there
  EXPECT_EQ(plan.pending(2), 1u);
}

// --- the queue -------------------------------------------------------------------------------

class JobQueuePlanTest : public ::testing::Test {
 protected:
  JobQueuePlanTest() {
    config_.data_dir = dir_.file("data");
    store_ = store::open_sql_store(dir_.file("fleet.db"));
    JobQueueHooks hooks;
    hooks.workers = [this] {
      std::lock_guard lock(mu_);
      return workers_;
    };
    hooks.strike = [](std::int64_t, const core::Strike&) {};
    hooks.event = [](std::int64_t, const std::string&) {};
    queue_ = std::make_unique<JobQueue>(*store_, config_, hooks, [this] { return now_.load(); });
  }
  void set_workers(std::vector<core::WorkerView> workers) {
    std::lock_guard lock(mu_);
    workers_ = std::move(workers);
  }
  std::int64_t submit(const std::string& id, std::optional<double> deadline_s = std::nullopt) {
    SubmitRequest r;
    r.request_id = id;
    r.input = "input of " + id;
    r.deadline_s = deadline_s;
    auto s = queue_->submit(r);
    if (!s) throw std::runtime_error("submit failed: " + s.error().message);
    return s->job.id;
  }
  // Request ids of the jobs `instance` leases now.
  std::vector<std::string> lease(std::int64_t instance, int max_jobs = 8) {
    auto l = queue_->lease(instance, max_jobs, 0ms);
    if (!l) throw std::runtime_error("lease failed: " + l.error().message);
    std::vector<std::string> out;
    for (const auto& one : *l) {
      out.push_back(one.job.request_id);
      leases_[one.job.request_id] = one;
    }
    return out;
  }
  void fail(std::int64_t instance, const std::string& request_id) {
    const Lease& l = leases_.at(request_id);
    ProofReport r;
    r.job_id = l.job.id;
    r.attempt = l.job.attempts;
    r.message = "prover exited 1";
    auto ack = queue_->report(instance, r);
    if (!ack || !ack->applied) throw std::runtime_error("failure report not applied");
  }

  pf::testing::TempDir dir_;
  JobQueueConfig config_;
  std::mutex mu_;
  std::vector<core::WorkerView> workers_;
  std::atomic<double> now_{1'000'000};
  std::unique_ptr<store::SqlStore> store_;
  std::unique_ptr<JobQueue> queue_;
  std::map<std::string, Lease> leases_;
};

using Ids = std::vector<std::string>;

TEST_F(JobQueuePlanTest, LeasesCarryOutOnePlanUntilTheQueueChanges) {
  set_workers({worker(1, 100, 2), worker(2, 100, 2)});
  submit("a");
  submit("b");
  submit("c");
  submit("d");
  // One plan: a, b on #1 and c, d on #2 (earliest finish, ties to the first instance).
  EXPECT_EQ(lease(1, 1), Ids{"a"});
  EXPECT_EQ(lease(2, 1), Ids{"c"});
  EXPECT_EQ(lease(1, 1), Ids{"b"});
  EXPECT_EQ(lease(2, 1), Ids{"d"});
  EXPECT_TRUE(lease(1).empty());
  EXPECT_EQ(queue_->plans_made(), 1u);
}

TEST_F(JobQueuePlanTest, AJobSubmittedAfterAPlanIsPlaced) {
  set_workers({worker(1, 100, 2)});
  submit("a");
  EXPECT_EQ(lease(1, 1), Ids{"a"});
  EXPECT_TRUE(lease(1).empty());  // the plan in hand has nothing more for #1
  EXPECT_EQ(queue_->plans_made(), 1u);
  submit("b");
  EXPECT_EQ(lease(1), Ids{"b"});
  EXPECT_EQ(queue_->plans_made(), 2u);
}

TEST_F(JobQueuePlanTest, AWorkerThatGoesSilentStopsReceivingWork) {
  // #1 is faster: the plan puts the job there; #2 has nothing in it.
  set_workers({worker(1, 100), worker(2, 150)});
  submit("a");
  EXPECT_TRUE(lease(2).empty());
  // #1 goes silent (the Manager stops reporting it) before it leases: the plan it was in is
  // not carried out; the job goes to #2 now.
  set_workers({worker(2, 150)});
  EXPECT_TRUE(lease(1).empty());
  EXPECT_EQ(lease(2), Ids{"a"});
}

TEST_F(JobQueuePlanTest, ARateChangeIsPlannedOn) {
  set_workers({worker(1, 100), worker(2, 150)});
  submit("a");
  EXPECT_TRUE(lease(2).empty());                  // planned on #1
  set_workers({worker(1, 400), worker(2, 150)});  // #1 measured slower since
  EXPECT_EQ(lease(2), Ids{"a"});
}

TEST_F(JobQueuePlanTest, DeadlinesFirstHoldsForAJobSubmittedAfterThePlan) {
  set_workers({worker(1, 100), worker(2, 1000)});
  submit("relaxed", 3000);
  EXPECT_TRUE(lease(2).empty());  // a plan is in hand: "relaxed" on #1
  submit("urgent", 150);          // only #1 finishes it in time
  EXPECT_EQ(lease(1), Ids{"urgent"});
  // "relaxed" waits for #1 (it still keeps its deadline there, ten times sooner than #2).
  EXPECT_TRUE(lease(1).empty());
  EXPECT_TRUE(lease(2).empty());
}

TEST_F(JobQueuePlanTest, AFailedJobAvoidsItsInstanceInTheNextPlan) {
  set_workers({worker(1, 100, 2), worker(2, 150, 1)});
  submit("a");
  submit("b");
  EXPECT_EQ(lease(1, 1), Ids{"a"});  // the plan: a and b on #1
  fail(1, "a");                      // requeued, avoiding #1
  // A new plan: "a" goes to #2 (free, not avoided); "b" stays on #1.
  EXPECT_EQ(lease(2), Ids{"a"});
  EXPECT_EQ(lease(1), Ids{"b"});
}

TEST_F(JobQueuePlanTest, AnOldPlanIsMadeAgain) {
  set_workers({worker(1, 100), worker(2, 150)});
  submit("a");
  EXPECT_TRUE(lease(2).empty());  // planned on #1, which does not come
  // The held work the plan assumed, deadlines: time moves them. A plan as old as the
  // long-poll's recheck is made again; here it places the same way.
  now_ = now_ + 1;
  EXPECT_TRUE(lease(2).empty());
  EXPECT_EQ(queue_->plans_made(), 1u);
  now_ = now_ + 1;
  EXPECT_TRUE(lease(2).empty());
  EXPECT_EQ(queue_->plans_made(), 2u);
  EXPECT_EQ(lease(1), Ids{"a"});
}

}  // namespace
}  // namespace pf::jobs
