// The jobs' and the alerts' series on /metrics (manager/metrics.h): once-per-job counters and
// the text format.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "manager/metrics.h"

namespace pf::manager {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kStart = 1'000'000;

core::Job delivered(std::int64_t id, double submitted, double wait, double total,
                    double deadline_s = 1800) {
  core::Job j;
  j.id = id;
  j.request_id = "r" + std::to_string(id);
  j.state = core::JobState::Done;
  j.attempts = 1;
  j.instance_id = 1;
  j.submitted_at = submitted;
  j.deadline_at = submitted + deadline_s;
  j.assigned_at = submitted + wait;
  j.started_at = j.assigned_at;
  j.finished_at = submitted + total;
  j.delivered_at = j.finished_at;
  return j;
}

core::PriceConfig prices() {
  core::PriceConfig p;
  p.per_proof[core::JobKind::PorepC2] = 0.05;
  return p;
}

TEST(JobCounters, EachLeaseFinishAndDeliveryIsCountedOnceHoweverOftenItIsListed) {
  JobCounters counters(kStart);
  const std::vector<core::Job> jobs{delivered(1, kStart + 10, 5, 100),
                                    delivered(2, kStart + 20, 50, 700)};
  counters.observe(jobs, prices(), kStart + 800);
  counters.observe(jobs, prices(), kStart + 900);  // listed again: nothing new
  const auto s = counters.snapshot();
  EXPECT_EQ(s.queue_wait_s.count, 2u);
  EXPECT_DOUBLE_EQ(s.queue_wait_s.sum, 55);
  EXPECT_EQ(s.end_to_end_s.count, 2u);
  EXPECT_DOUBLE_EQ(s.end_to_end_s.sum, 800);
  EXPECT_EQ(s.delivered_on_time, 2u);
  EXPECT_NEAR(s.revenue_usd, 0.10, 1e-12);
}

TEST(JobCounters, ARequeuedJobsNewLeaseIsANewObservation) {
  JobCounters counters(kStart);
  core::Job job = delivered(1, kStart + 10, 5, 100);
  job.state = core::JobState::Proving;
  job.finished_at = job.delivered_at = 0;
  counters.observe({job}, prices(), kStart + 50);
  job.attempts = 2;  // its lease was lost; leased again later
  job.assigned_at = kStart + 200;
  counters.observe({job}, prices(), kStart + 250);
  const auto s = counters.snapshot();
  EXPECT_EQ(s.queue_wait_s.count, 2u);
  EXPECT_DOUBLE_EQ(s.queue_wait_s.sum, 5 + 190);
  EXPECT_EQ(s.end_to_end_s.count, 0u);
}

TEST(JobCounters, WhatHappenedBeforeTheProcessStartedIsNotCounted) {
  // After a restart the counters begin at 0: a job delivered before it is history, not news.
  JobCounters counters(kStart);
  counters.observe({delivered(1, kStart - 500, 5, 100)}, prices(), kStart + 10);
  const auto s = counters.snapshot();
  EXPECT_EQ(s.queue_wait_s.count, 0u);
  EXPECT_EQ(s.end_to_end_s.count, 0u);
  EXPECT_EQ(s.delivered_on_time, 0u);
}

TEST(JobCounters, LateDeliveriesEarnNothingButTheirLatencyCounts) {
  JobCounters counters(kStart);
  counters.observe({delivered(1, kStart + 10, 5, 2000)}, prices(), kStart + 2100);
  const auto s = counters.snapshot();
  EXPECT_EQ(s.end_to_end_s.count, 1u);
  EXPECT_EQ(s.delivered_on_time, 0u);
  EXPECT_DOUBLE_EQ(s.revenue_usd, 0);
}

TEST(JobMetricsText, HasTheJobSeriesWithCumulativeBuckets) {
  JobsReport report;
  report.open_by_state[core::JobState::Queued] = 3;
  report.open_by_state[core::JobState::Proving] = 2;
  report.queued_by_kind[core::JobKind::SnapUpdate] = 3;
  report.completed = 10;
  report.failed = 1;
  report.cancelled = 4;
  report.hedges_started = 3;
  report.hedges_won = 2;
  report.arrivals_last_hour = 12;
  report.money.idle_hours = 0.5;
  report.latency.on_time_share = 0.9;
  report.latency.at_risk = 2;
  JobCounters counters(kStart);
  counters.observe({delivered(1, kStart, 4, 100), delivered(2, kStart, 20, 1000)}, prices(),
                   kStart + 1100);
  const std::string text = render_jobs_prometheus(report, counters.snapshot());
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_jobs gauge\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs{state=\"queued\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs{state=\"assigned\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs{state=\"proving\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_queued{kind=\"snap-update\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_queued{kind=\"porep-c2\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_completed_total 10\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_failed_total 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_cancelled_total 4\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_job_hedges_started_total counter\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_hedges_started_total 3\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_hedges_won_total 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_arrivals_last_hour 12\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_idle_instance_hours 0.5\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_on_time_share 0.9\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_at_risk 2\n"));
  // Nothing delivered in the report's window: no realised cost rather than 0 or +Inf.
  EXPECT_THAT(text, Not(HasSubstr("proverfleet_jobs_realised_cost_per_proof_usd")));
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_job_queue_wait_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_bucket{le=\"1\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_bucket{le=\"5\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_bucket{le=\"30\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_bucket{le=\"+Inf\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_sum 24\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_count 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_bucket{le=\"120\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_bucket{le=\"900\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_bucket{le=\"1200\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_jobs_revenue_usd_total counter\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_revenue_usd_total 0.1\n"));
  EXPECT_THAT(text, Not(HasSubstr("proverfleet_jobs_revenue_per_proof_usd")));
}

TEST(JobMetricsText, RevenuePerProofIsTheWindowsRevenueOverItsOnTimeDeliveries) {
  JobsReport report;
  report.money.revenue_usd = 0.6;
  report.money.delivered_on_time = 4;
  report.money.realised_cost_per_proof = 0.2;
  const std::string text = render_jobs_prometheus(report, JobCounters(kStart).snapshot());
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_revenue_per_proof_usd 0.15\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_realised_cost_per_proof_usd 0.2\n"));
}

TEST(AlertMetricsText, EveryKindIsListedWithItsCountAndTheFleetAlertsAreOneOrZero) {
  core::AlertsView view;
  view.checked_at = kStart;
  core::Alert stall;
  stall.instance_id = 7;
  stall.kind = core::AlertKind::Stall;
  stall.drop_warranted = true;
  core::Alert drift = stall;
  drift.instance_id = 8;
  drift.kind = core::AlertKind::ProductionDrift;
  drift.drop_warranted = false;
  core::Alert drift2 = drift;
  drift2.instance_id = 9;
  view.instances = {stall, drift, drift2};
  view.fleet.push_back({core::kSpendAlert, "over the budget", kStart});
  const std::string text = render_alerts_prometheus(view, 42.5);
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_instance_alerts gauge\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instance_alerts{kind=\"stall\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instance_alerts{kind=\"production_drift\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instance_alerts{kind=\"slow_download\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instance_alerts_acting{kind=\"stall\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instance_alerts_acting{kind=\"production_drift\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_fleet_alert{kind=\"spend\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_fleet_alert{kind=\"jobs\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_market_list_age_seconds 42.5\n"));
  // No complete list read (yet, or by this replica): absent, not 0.
  EXPECT_THAT(render_alerts_prometheus({}, std::nullopt),
              Not(HasSubstr("proverfleet_market_list_age_seconds")));
}

TEST(JobMetricsText, ABucketBoundIsInclusive) {
  Histogram h({1, 5});
  h.observe(1);
  h.observe(5);
  h.observe(6);
  EXPECT_EQ(h.counts, (std::vector<std::uint64_t>{1, 1, 1}));
  EXPECT_EQ(h.count, 3u);
}

}  // namespace
}  // namespace pf::manager
