// Job timelines and the operator's job filters (issue 36): the store's filters judge "late" and
// "at risk" exactly as core does (core::job_timeliness, core::is_at_risk), on both databases;
// the queue writes every step of a job's life with the job's row.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/job_latency.h"
#include "core/money_ledger.h"
#include "jobs/job_queue.h"
#include "store/sql_store.h"
#include "support/store_backends.h"
#include "util/sha256.h"

namespace pf {
namespace {

using core::JobEventKind;
using core::JobState;

constexpr double kTimelineNow = 100000;

class JobTimelineTest : public ::testing::TestWithParam<testing::Backend> {
 protected:
  std::int64_t insert(core::Job job) {
    if (job.input_digest.empty()) job.input_digest = util::sha256_hex(job.request_id);
    if (job.client.empty()) job.client = "10.0.0.1";
    return store_->insert_job(job);
  }

  std::set<std::int64_t> listed(const store::JobFilter& filter) {
    std::set<std::int64_t> out;
    for (const auto& job : store_->jobs(filter, 0)) out.insert(job.id);
    return out;
  }

  std::int64_t rent(const std::string& deployment, std::int64_t machine) {
    core::InstanceRecord r;
    r.deployment_id = deployment;
    r.offer.machine_id = machine;
    r.offer.gpu_name = "RTX 4090";
    r.offer.num_gpus = 1;
    r.state = core::InstanceState::Proving;
    return store_->insert_instance(r);
  }

  testing::TestDatabase db_{GetParam()};
  std::unique_ptr<store::SqlStore> store_ = db_.open();
};

INSTANTIATE_TEST_SUITE_P(Db, JobTimelineTest, testing::kStoreBackends, testing::backend_name);

// Every state, deadline (none, passed, now, near, at the typical time, far) and delivery (none,
// before, after its deadline): the SQL filters pick exactly the jobs core calls late / at risk.
TEST_P(JobTimelineTest, LateAndAtRiskFiltersJudgeAsCoreDoes) {
  const double now = kTimelineNow, typical = 300;
  std::set<std::int64_t> late, at_risk;
  int n = 0;
  for (auto state : {JobState::Queued, JobState::Assigned, JobState::Proving, JobState::Done,
                     JobState::Failed, JobState::Cancelled}) {
    for (double deadline :
         {0.0, now - 500, now, now + 1, now + typical - 0.5, now + typical, now + 5000}) {
      for (double delivered : {0.0, now - 1000, now + 100}) {
        if (delivered > 0 && state != JobState::Done) continue;
        core::Job j;
        j.request_id = "grid-" + std::to_string(n++);
        j.state = state;
        j.submitted_at = now - 2000;
        j.deadline_at = deadline;
        j.delivered_at = delivered;
        if (core::is_terminal(state)) j.finished_at = now - 1000;
        const auto id = insert(j);
        if (core::job_timeliness(j, now).timeliness == core::Timeliness::Late) late.insert(id);
        if (core::is_at_risk(j, now, typical)) at_risk.insert(id);
      }
    }
  }
  ASSERT_FALSE(late.empty());
  ASSERT_FALSE(at_risk.empty());
  store::JobFilter f;
  f.now = now;
  f.late = true;
  EXPECT_EQ(listed(f), late);
  f.late = false;
  f.at_risk_typical_s = typical;
  EXPECT_EQ(listed(f), at_risk);
  f.at_risk_typical_s = 0;  // no finished job to compare with: nothing is at risk
  EXPECT_TRUE(listed(f).empty());
}

// The money page's counts come from the database: the same as core::count_deliveries over the
// jobs themselves, on every bucket edge, timeliness and holder.
TEST_P(JobTimelineTest, DeliveryCountsAreCoreCountsMadeByTheDatabase) {
  const double since = kTimelineNow, until = kTimelineNow + 7200, bucket = 1800;
  std::vector<core::Job> jobs;
  int n = 0;
  for (double delivered :
       {0.0, since - 1, since, since + 1799.5, since + 1800, since + 5000, until, until + 1}) {
    for (double deadline : {0.0, since + 1000, since + 1800}) {
      for (auto state : {JobState::Done, JobState::Failed}) {
        core::Job j;
        j.request_id = "count-" + std::to_string(n++);
        j.kind = n % 3 ? core::JobKind::PorepC2 : core::JobKind::SnapUpdate;
        j.state = state;
        j.submitted_at = since - 100;
        j.deadline_at = deadline;
        j.delivered_at = delivered;
        if (n % 4) j.instance_id = 1 + n % 3;
        j.id = insert(j);
        jobs.push_back(j);
      }
    }
  }
  const auto key = [](const core::DeliveryCount& d) {
    return std::to_string(d.bucket) + "/" + (d.instance_id ? std::to_string(*d.instance_id) : "-") +
           "/" + core::to_string(d.kind) + "/" + (d.on_time ? "on" : "late") + "=" +
           std::to_string(d.jobs);
  };
  std::multiset<std::string> want, got;
  for (const auto& d : core::count_deliveries(jobs, since, until, bucket)) want.insert(key(d));
  for (const auto& d : store_->delivery_counts(since, until, bucket)) got.insert(key(d));
  EXPECT_FALSE(want.empty());
  EXPECT_EQ(got, want);
}

TEST_P(JobTimelineTest, FiltersByKindClientRequestTimeInstanceAndMachine) {
  const auto rig_a = rent("dep-a", 555), rig_b = rent("dep-b", 555), rig_c = rent("dep-c", 777);
  const auto make = [&](const std::string& rid, core::JobKind kind, const std::string& client,
                        double submitted, std::optional<std::int64_t> holder) {
    core::Job j;
    j.request_id = rid;
    j.kind = kind;
    j.client = client;
    j.submitted_at = submitted;
    j.deadline_at = submitted + 1800;
    j.instance_id = holder;
    j.state = holder ? JobState::Proving : JobState::Queued;
    return insert(j);
  };
  const auto a = make("sector-1-c2", core::JobKind::PorepC2, "10.0.0.1", 1000, rig_a);
  const auto b = make("sector-2-c2", core::JobKind::PorepC2, "10.0.0.2", 2000, rig_c);
  const auto c = make("snap-9", core::JobKind::SnapUpdate, "10.0.0.1", 3000, std::nullopt);
  // b's first try was on rig_b (machine 555) before it moved to rig_c: its timeline says so.
  store_->add_job_events({{b, 2001, JobEventKind::Leased, 1, rig_b, "first try"},
                          {b, 2100, JobEventKind::Requeued, 1, rig_b, "lease not renewed"},
                          {b, 2101, JobEventKind::Leased, 2, rig_c, "second try"}});

  store::JobFilter f;
  f.kinds = {core::JobKind::SnapUpdate};
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{c}));
  f = {};
  f.client = "10.0.0.1";
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{a, c}));
  f = {};
  f.request_id_prefix = "sector-";
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{a, b}));
  f.request_id_prefix = "sector-2";
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{b}));
  f = {};
  f.submitted_since = 2000;
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{b, c}));
  f.submitted_until = 3000;  // half-open: [2000, 3000)
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{b}));
  f = {};
  f.instance_id = rig_b;  // held b on its first try only
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{b}));
  f.instance_id = rig_a;
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{a}));
  f = {};
  f.machine_id = 555;  // rig_a's job, and b's first try on rig_b
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{a, b}));
  f.machine_id = 777;
  EXPECT_EQ(listed(f), (std::set<std::int64_t>{b}));
  f.machine_id = 999;
  EXPECT_TRUE(listed(f).empty());
  // Filters combine, and page by id like the unfiltered list.
  f = {};
  f.client = "10.0.0.1";
  f.kinds = {core::JobKind::PorepC2, core::JobKind::SnapUpdate};
  const auto page = store_->jobs(f, 1);
  ASSERT_EQ(page.size(), 1u);
  EXPECT_EQ(page[0].id, c);
  const auto next = store_->jobs(f, 1, page[0].id);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].id, a);
}

TEST_P(JobTimelineTest, EventsKeepTheirOrderTheNewestWithALimitAndCutLongDetailsOnACharacter) {
  core::Job j;
  j.request_id = "r";
  const auto id = insert(j);
  // 1,999 ASCII bytes and a two-byte 'é' straddling the 2,000-byte bound: the cut drops the 'é'.
  const std::string long_detail = std::string(core::kMaxJobEventDetailBytes - 1, 'a') + "\xc3\xa9";
  store_->add_job_events({{id, 10, JobEventKind::Recorded, 0, std::nullopt, "in"},
                          {id, 11, JobEventKind::Leased, 1, 42, "placed"},
                          {id, 11, JobEventKind::ProverFailed, 1, 42, long_detail}});
  const auto all = store_->job_events(id, 0);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].kind, JobEventKind::Recorded);
  EXPECT_FALSE(all[0].instance_id);
  EXPECT_EQ(all[1].instance_id, 42);
  EXPECT_EQ(all[1].attempt, 1);
  EXPECT_EQ(all[2].detail, std::string(core::kMaxJobEventDetailBytes - 1, 'a'));
  const auto newest = store_->job_events(id, 2);
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0].kind, JobEventKind::Leased);
  EXPECT_EQ(newest[1].kind, JobEventKind::ProverFailed);
  EXPECT_TRUE(store_->job_events(id + 1, 0).empty());
}

// The retention sweep (issue 29): steps older than the retention go, newer ones stay; the
// queue's tick runs it with [jobs] timeline_retention_days.
TEST_P(JobTimelineTest, OldTimelinesAreSweptByAge) {
  core::Job j;
  j.request_id = "old";
  const auto id = insert(j);
  store_->add_job_events({{id, 100, JobEventKind::Recorded, 0, std::nullopt, ""},
                          {id, 200, JobEventKind::Leased, 1, 4, ""},
                          {id, 300, JobEventKind::Proved, 1, 4, ""}});
  EXPECT_EQ(store_->drop_job_events(200), 1);
  EXPECT_EQ(store_->job_events(id, 0).size(), 2u);
  EXPECT_EQ(store_->drop_job_events(200), 0);

  double now = kTimelineNow;
  jobs::JobQueueConfig config;
  config.data_dir = db_.dir().file("sweep-inputs");
  config.timeline_retention_s = 3600;
  jobs::JobQueue queue(*store_, config, {}, [&] { return now; });
  jobs::SubmitRequest request;
  request.request_id = "fresh";
  request.input = "x";
  const auto fresh = queue.submit(request);
  ASSERT_TRUE(fresh);
  queue.tick();  // the old job's steps (at 200, 300) are far older than an hour
  EXPECT_TRUE(store_->job_events(id, 0).empty());
  EXPECT_EQ(queue.timeline(fresh->job.id, 0).size(), 1u);
  now += 2 * 3600;  // and the fresh one's, two hours on (the sweep runs once a minute)
  queue.tick();
  EXPECT_TRUE(queue.timeline(fresh->job.id, 0).empty());
  queue.shutdown();
}

// One job's whole life through the queue: a failed proof on instance 1, a lease instance 2 let
// lapse, a proof on instance 2, the delivery. And a cancelled one.
TEST_P(JobTimelineTest, TheQueueWritesEveryTryOfAJob) {
  double now = kTimelineNow;
  jobs::JobQueueConfig config;
  config.data_dir = db_.dir().file("inputs");
  config.lease_s = 60;
  jobs::JobQueueHooks hooks;
  hooks.workers = [] {
    return std::vector<core::WorkerView>{{1, 60, 1, 0, -1}, {2, 60, 1, 0, -1}};
  };
  jobs::JobQueue queue(*store_, config, hooks, [&] { return now; });
  jobs::SubmitRequest request;
  request.request_id = "sector-7";
  request.input = "the input";
  request.client = "10.0.0.9";
  const auto submitted = queue.submit(request);
  ASSERT_TRUE(submitted) << submitted.error().message;
  const auto id = submitted->job.id;
  const auto take = [&](std::int64_t instance) {
    auto leases = queue.lease(instance, 1, std::chrono::milliseconds(0));
    EXPECT_TRUE(leases && leases->size() == 1u) << "instance " << instance << " got no lease";
    return leases && !leases->empty() ? leases->front().job.attempts : 0;
  };

  const int first = take(1);
  const auto input = queue.read_input(1, id, first, 0, 1 << 20);
  ASSERT_TRUE(input) << input.error().message;
  ASSERT_TRUE(queue.started(1, id, first));
  jobs::ProofReport failed;
  failed.job_id = id;
  failed.attempt = first;
  failed.message = "synthesis crashed";
  ASSERT_TRUE(queue.report(1, failed));

  const int second = take(2);  // instance 1 failed it: avoided while 2 can take it
  now += config.lease_s + 1;   // instance 2 goes silent
  queue.tick();
  const int third = take(2);
  ASSERT_TRUE(queue.started(2, id, third));
  now += 90;
  jobs::ProofReport proved;
  proved.job_id = id;
  proved.attempt = third;
  proved.ok = true;
  proved.proof = "proof bytes";
  proved.prove_ms = 85000;
  ASSERT_TRUE(queue.report(2, proved));
  const auto finished = queue.await(id, std::chrono::milliseconds(0));
  ASSERT_TRUE(finished && *finished);

  const auto steps = queue.timeline(id, 0);
  std::vector<std::string> got;
  for (const auto& e : steps) {
    got.push_back(std::string(core::to_string(e.kind)) + "#" + std::to_string(e.attempt) + "@" +
                  (e.instance_id ? std::to_string(*e.instance_id) : "-"));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"recorded#0@-", "leased#1@1", "input_fetched#1@1",
                                           "proving#1@1", "prover_failed#1@1", "leased#2@2",
                                           "requeued#2@2", "leased#3@2", "proving#3@2",
                                           "proved#3@2", "delivered#3@2"}));
  EXPECT_EQ(second, 2);
  EXPECT_NE(steps[4].detail.find("synthesis crashed"), std::string::npos) << steps[4].detail;
  EXPECT_NE(steps[6].detail.find("not renewed"), std::string::npos) << steps[6].detail;
  EXPECT_NE(steps[9].detail.find(util::sha256_hex("proof bytes")), std::string::npos);
  EXPECT_NE(steps[10].detail.find("before its deadline"), std::string::npos) << steps[10].detail;
  for (std::size_t i = 1; i < steps.size(); ++i) EXPECT_GE(steps[i].at, steps[i - 1].at);

  // The operator's filter finds it through either instance's timeline.
  store::JobFilter f;
  f.instance_id = 1;
  EXPECT_EQ(queue.list(f, 10).size(), 1u);

  request.request_id = "sector-8";
  const auto other = queue.submit(request);
  ASSERT_TRUE(other);
  ASSERT_TRUE(queue.cancel(other->job.id));
  const auto cancelled = queue.timeline(other->job.id, 0);
  ASSERT_EQ(cancelled.size(), 2u);
  EXPECT_EQ(cancelled[1].kind, JobEventKind::Cancelled);
  EXPECT_NE(cancelled[1].detail.find("while queued"), std::string::npos);
  queue.shutdown();
}

}  // namespace
}  // namespace pf
