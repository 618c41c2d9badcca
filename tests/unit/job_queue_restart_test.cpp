// What a manager restart must not forget (issue 12): each leased job's lease expiry, renewals
// included, and each instance's run of failed proofs. Real SQLite store, real input directory;
// a restart is a new store connection and a new JobQueue on the same files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "core/job_lease.h"
#include "jobs/job_queue.h"
#include "store/sql_store.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"

namespace pf::jobs {
namespace {

using namespace std::chrono_literals;

class JobQueueRestartTest : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  JobQueueRestartTest() {
    config_.data_dir = dir_.file("data");
    config_.lease_s = 60;
    open();
  }
  // Opens (or reopens: the restart) the store and the queue on the same files.
  void open() {
    queue_.reset();
    store_.reset();
    store_ = db_.open();
    JobQueueHooks hooks;
    hooks.workers = [this] {
      std::lock_guard lock(mu_);
      return workers_;
    };
    hooks.strike = [this](std::int64_t id, const core::Strike& s) {
      std::lock_guard lock(mu_);
      strikes_.emplace_back(id, s);
    };
    queue_ = std::make_unique<JobQueue>(*store_, config_, hooks, [this] { return now_.load(); });
  }
  void set_workers(const std::vector<std::int64_t>& ids, int slots) {
    std::lock_guard lock(mu_);
    workers_.clear();
    for (auto id : ids) workers_.push_back(core::WorkerView{id, 100, slots, 0, -1});
  }
  std::int64_t submit(const std::string& request_id) {
    SubmitRequest r;
    r.request_id = request_id;
    r.input = "input of " + request_id;
    auto s = queue_->submit(r);
    if (!s) throw std::runtime_error("submit failed: " + s.error().message);
    return s->job.id;
  }
  std::vector<Lease> lease(std::int64_t instance) {
    auto l = queue_->lease(instance, 8, 0ms);
    if (!l) throw std::runtime_error("lease failed: " + l.error().message);
    return *l;
  }
  void fail(std::int64_t instance, const Lease& l) {
    ProofReport r;
    r.job_id = l.job.id;
    r.attempt = l.job.attempts;
    r.message = "prover exited 1";
    auto ack = queue_->report(instance, r);
    if (!ack || !ack->applied) throw std::runtime_error("failure report not applied");
  }
  core::JobState state(std::int64_t id) { return queue_->job(id)->state; }
  std::size_t strikes() {
    std::lock_guard lock(mu_);
    return strikes_.size();
  }
  void advance(double s) { now_ = now_.load() + s; }

  pf::testing::TempDir dir_;
  pf::testing::TestDatabase db_{GetParam()};
  JobQueueConfig config_;
  std::mutex mu_;
  std::vector<core::WorkerView> workers_;
  std::vector<std::pair<std::int64_t, core::Strike>> strikes_;
  std::atomic<double> now_{1'000'000};
  std::unique_ptr<store::SqlStore> store_;
  std::unique_ptr<JobQueue> queue_;
};

INSTANTIATE_TEST_SUITE_P(Db, JobQueueRestartTest, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(JobQueueRestartTest, AQuickRestartKeepsEachLeaseExpiryRenewalsIncluded) {
  set_workers({7}, 2);
  submit("req-a");
  submit("req-b");
  const auto leased = lease(7);
  ASSERT_EQ(leased.size(), 2u);
  const std::int64_t renewed = leased[0].job.id, stale = leased[1].job.id;
  advance(50);
  EXPECT_TRUE(queue_->renew(7, {{renewed, 1}}).empty());  // expires at t=110; stale at t=60
  queue_->tick();                                         // records the queue alive at t=50
  // Only the holder's renewals are stored.
  EXPECT_EQ(store_->renew_job_leases(8, {renewed}, now_.load() + 1e6), 0);

  open();  // the manager restarts at once
  EXPECT_DOUBLE_EQ(queue_->job(renewed)->lease_expires_at, now_.load() + 60);
  advance(11);  // t=61
  queue_->tick();
  EXPECT_EQ(state(stale), core::JobState::Queued);  // its lease had 10 s left, not a fresh 60
  EXPECT_EQ(state(renewed), core::JobState::Assigned);
  advance(50);  // t=111
  queue_->tick();
  EXPECT_EQ(state(renewed), core::JobState::Queued);  // its renewal was known, and ran out
}

TEST_P(JobQueueRestartTest, TheManagersDowntimeIsNotHeldAgainstALease) {
  set_workers({7}, 2);
  submit("req-a");
  submit("req-b");
  const auto leased = lease(7);
  ASSERT_EQ(leased.size(), 2u);
  const std::int64_t renewed = leased[0].job.id, stale = leased[1].job.id;
  advance(50);
  EXPECT_TRUE(queue_->renew(7, {{renewed, 1}}).empty());
  queue_->tick();

  advance(1000);  // down for 1,000 s: no agent could renew meanwhile
  open();
  queue_->tick();
  EXPECT_EQ(state(renewed), core::JobState::Assigned);
  EXPECT_EQ(state(stale), core::JobState::Assigned);
  advance(11);  // 10 s left on the stale lease when the manager stopped
  queue_->tick();
  EXPECT_EQ(state(stale), core::JobState::Queued);
  EXPECT_EQ(state(renewed), core::JobState::Assigned);
  // The agent is back: its heartbeat renews what it holds, and the stored expiry follows.
  EXPECT_TRUE(queue_->renew(7, {{renewed, 1}}).empty());
  open();
  EXPECT_DOUBLE_EQ(queue_->job(renewed)->lease_expires_at, now_.load() + 60);
}

TEST_P(JobQueueRestartTest, AFailureStreakSurvivesARestartAndStillStrikes) {
  config_.strike_after_failures = 3;
  config_.max_attempts = 5;
  open();
  set_workers({7}, 3);
  submit("req-a");
  submit("req-b");
  submit("req-c");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 3u);
  fail(7, leased[0]);
  fail(7, leased[1]);
  EXPECT_EQ(strikes(), 0u);
  EXPECT_EQ(store_->job_failure_streaks(), (std::map<std::int64_t, int>{{7, 2}}));

  open();  // the third failure in a row comes after a restart
  fail(7, leased[2]);
  ASSERT_EQ(strikes(), 1u);
  EXPECT_EQ(strikes_[0].first, 7);
  EXPECT_EQ(strikes_[0].second.kind, core::StrikeKind::FailedProofs);
  EXPECT_TRUE(store_->job_failure_streaks().empty());  // a strike starts the count again
}

TEST_P(JobQueueRestartTest, AProofEndsTheStoredStreak) {
  config_.strike_after_failures = 2;
  open();
  set_workers({7}, 2);
  submit("req-a");
  submit("req-b");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 2u);
  fail(7, leased[0]);
  ProofReport ok;
  ok.job_id = leased[1].job.id;
  ok.attempt = leased[1].job.attempts;
  ok.ok = true;
  ok.proof = "proof";
  ASSERT_TRUE(queue_->report(7, ok)->applied);
  EXPECT_TRUE(store_->job_failure_streaks().empty());

  open();
  set_workers({7}, 2);
  auto again = lease(7);
  ASSERT_EQ(again.size(), 1u);  // the failed job, back for its second attempt
  fail(7, again[0]);
  EXPECT_EQ(strikes(), 0u);  // one failure since the proof, not two
}

TEST_P(JobQueueRestartTest, CancelledJobsAreCounted) {
  const auto a = submit("req-a");
  submit("req-b");
  ASSERT_TRUE(queue_->cancel(a).has_value());
  EXPECT_EQ(queue_->status().cancelled, 1);
  EXPECT_EQ(queue_->status().completed, 0);
}

TEST(RestoredLeaseExpiry, KeepsWhatWasLeftWhenTheManagerStopped) {
  // Stopped at t=100 (alive_at) with 30 s left; back at t=400.
  EXPECT_DOUBLE_EQ(core::restored_lease_expiry(130, 100.0, 400, 60), 430);
  // Run out before the stop: ends at once (at or before now).
  EXPECT_LE(core::restored_lease_expiry(90, 100.0, 400, 60), 400);
  // Never more than a fresh lease from now.
  EXPECT_DOUBLE_EQ(core::restored_lease_expiry(1000, 100.0, 400, 60), 460);
  // A clock that went backwards gives no downtime.
  EXPECT_DOUBLE_EQ(core::restored_lease_expiry(130, 500.0, 400, 60), 130);
  // A store from before the queue recorded itself alive: a fresh lease, as then.
  EXPECT_DOUBLE_EQ(core::restored_lease_expiry(130, std::nullopt, 400, 60), 460);
}

}  // namespace
}  // namespace pf::jobs
