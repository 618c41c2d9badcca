// What a failed proof and a returning request_id mean (core/job_outcome.h), and which
// instances take jobs (core/job_worker.h): pure rules, so the queue and the simulator agree.
#include "core/job_outcome.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/job_worker.h"

namespace pf::core {
namespace {

TEST(JobFailureOutcome, AnOomRequeuesWithoutBlame) {
  JobFailure f;
  f.oom = true;
  f.failures_before = 2;
  f.max_attempts = 3;
  f.host_failures_in_a_row = 1;
  const auto out = job_failure_outcome(f);
  EXPECT_FALSE(out.fail_job);
  EXPECT_FALSE(out.count_failure);
  EXPECT_FALSE(out.avoid_instance);
  EXPECT_FALSE(out.strike_host);
  EXPECT_EQ(out.host_failures_in_a_row, 1);  // neither grown nor forgiven
}

TEST(JobFailureOutcome, RetriedElsewhereUntilMaxAttemptsThenFailed) {
  JobFailure f;
  f.max_attempts = 3;
  f.strike_after_failures = 10;
  f.failures_before = 1;
  auto out = job_failure_outcome(f);
  EXPECT_FALSE(out.fail_job);
  EXPECT_TRUE(out.count_failure);
  EXPECT_TRUE(out.avoid_instance);
  f.failures_before = 2;
  out = job_failure_outcome(f);
  EXPECT_TRUE(out.fail_job);
  EXPECT_NE(out.reason.find("3"), std::string::npos);
}

TEST(JobFailureOutcome, AStreakOfFailuresStrikesTheHostAndRestarts) {
  JobFailure f;
  f.strike_after_failures = 2;
  f.host_failures_in_a_row = 0;
  auto out = job_failure_outcome(f);
  EXPECT_FALSE(out.strike_host);
  EXPECT_EQ(out.host_failures_in_a_row, 1);
  f.host_failures_in_a_row = 1;
  out = job_failure_outcome(f);
  EXPECT_TRUE(out.strike_host);
  EXPECT_EQ(out.host_failures_in_a_row, 0);
}

TEST(Resubmission, DependsOnStateAndDelivery) {
  Job job;
  for (auto s : {JobState::Queued, JobState::Assigned, JobState::Proving}) {
    job.state = s;
    EXPECT_EQ(resubmission_outcome(job, true).action, Resubmission::Join);
  }
  job.state = JobState::Done;
  EXPECT_EQ(resubmission_outcome(job, true).action, Resubmission::Join);
  EXPECT_EQ(resubmission_outcome(job, false).action, Resubmission::Reopen);
  job.delivered_at = 5;
  EXPECT_EQ(resubmission_outcome(job, true).action, Resubmission::Redo);
  EXPECT_EQ(resubmission_outcome(job, false).action, Resubmission::Redo);
  job.state = JobState::Failed;
  EXPECT_EQ(resubmission_outcome(job, true).action, Resubmission::Reopen);
  job.state = JobState::Cancelled;
  EXPECT_EQ(resubmission_outcome(job, true).action, Resubmission::Reopen);
}

// Another input under a known request_id (issue 25): refused while the job is open or its proof
// waits, a fresh run without blame once the old request is over.
TEST(Resubmission, AnotherInputUnderAKnownRequestId) {
  Job job;
  job.id = 12;
  job.request_id = "porep-1000-7";
  job.input_digest = std::string(64, 'a');
  for (auto s : {JobState::Queued, JobState::Assigned, JobState::Proving}) {
    job.state = s;
    const auto out = resubmission_outcome(job, true, false);
    EXPECT_EQ(out.action, Resubmission::Conflict);
    EXPECT_THAT(out.reason, ::testing::HasSubstr("porep-1000-7"));
    EXPECT_THAT(out.reason, ::testing::HasSubstr("nothing was changed"));
  }
  job.state = JobState::Done;
  EXPECT_EQ(resubmission_outcome(job, true, false).action, Resubmission::Conflict);
  EXPECT_EQ(resubmission_outcome(job, false, false).action, Resubmission::Reopen);
  job.delivered_at = 5;
  // Not a rejection of the delivered proof (that would strike its host): a new request.
  EXPECT_EQ(resubmission_outcome(job, true, false).action, Resubmission::Reopen);
  job.state = JobState::Failed;
  EXPECT_EQ(resubmission_outcome(job, true, false).action, Resubmission::Reopen);
  job.state = JobState::Cancelled;
  EXPECT_EQ(resubmission_outcome(job, true, false).action, Resubmission::Reopen);
}

TEST(JobWorker, OnlyProvingInstancesWithAMeasuredRate) {
  InstanceRecord rec;
  rec.id = 4;
  rec.state = InstanceState::Proving;
  rec.last_heartbeat_at = 1000;
  EXPECT_FALSE(job_worker(rec, 2, 1000, 30));  // no verdict: no rate to place by
  Verdict v;
  v.rate = 120;
  rec.verdict = v;
  const auto w = job_worker(rec, 3, 1000, 30);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->instance_id, 4);
  EXPECT_EQ(w->slots, 3);
  EXPECT_DOUBLE_EQ(w->seconds_per_proof, 3 * 30.0);  // 120/h throughput, 3 in flight
  EXPECT_EQ(job_worker(rec, 0, 1000, 30)->slots, 1);
  // A silent agent takes no new work: a job placed there would wait, unleased.
  EXPECT_TRUE(job_worker(rec, 3, 1030, 30));
  EXPECT_FALSE(job_worker(rec, 3, 1031, 30));
  for (auto s : {InstanceState::Benchmarking, InstanceState::Destroying}) {
    rec.state = s;
    EXPECT_FALSE(job_worker(rec, 1, 1000, 30));
  }
}

}  // namespace
}  // namespace pf::core
