// Money and latency of gateway jobs (issue 12 item 6): core/job_economics.h, core/job_latency.h.
#include <gtest/gtest.h>

#include "core/job_economics.h"
#include "core/job_latency.h"

namespace pf::core {
namespace {

constexpr double kT0 = 1'700'000'000;  // an epoch second

// A job submitted at t0 + submitted, due `deadline_s` later, in `state`.
Job job(std::int64_t id, JobState state, double submitted, double deadline_s = 1800) {
  Job j;
  j.id = id;
  j.request_id = "r" + std::to_string(id);
  j.state = state;
  j.submitted_at = kT0 + submitted;
  j.deadline_at = j.submitted_at + deadline_s;
  return j;
}

// Done: leased at +assigned, finished at +finished, handed to the client at +delivered (0: not).
Job done(std::int64_t id, double submitted, double assigned, double finished, double delivered,
         std::int64_t instance = 1, double deadline_s = 1800) {
  Job j = job(id, JobState::Done, submitted, deadline_s);
  j.instance_id = instance;
  j.attempts = 1;
  j.assigned_at = kT0 + assigned;
  j.started_at = kT0 + assigned;
  j.finished_at = kT0 + finished;
  j.delivered_at = delivered > 0 ? kT0 + delivered : 0;
  return j;
}

PriceConfig usd_prices() {
  PriceConfig p;
  p.per_proof[JobKind::PorepC2] = 0.05;
  p.per_proof[JobKind::SnapUpdate] = 0.02;
  return p;
}

// ---- prices -----------------------------------------------------------------------------------

TEST(JobPrices, UsdPricePerKindAndUnpricedKindsEarnNothing) {
  const auto prices = usd_prices();
  EXPECT_DOUBLE_EQ(*price_usd(prices, JobKind::PorepC2), 0.05);
  EXPECT_DOUBLE_EQ(*price_usd(prices, JobKind::SnapUpdate), 0.02);
  EXPECT_FALSE(price_usd(prices, JobKind::WindowPost));
}

TEST(JobPrices, FilPriceIsConvertedAtTheConfiguredRate) {
  PriceConfig prices;
  prices.currency = PriceCurrency::Fil;
  prices.fil_usd = 4.0;
  prices.per_proof[JobKind::PorepC2] = 0.01;
  EXPECT_DOUBLE_EQ(*price_usd(prices, JobKind::PorepC2), 0.04);
  prices.fil_usd = 0;  // no rate: no USD figure rather than a silent 0
  EXPECT_FALSE(price_usd(prices, JobKind::PorepC2));
}

TEST(JobPrices, CurrencyNamesRoundTrip) {
  EXPECT_EQ(parse_price_currency("usd"), PriceCurrency::Usd);
  EXPECT_EQ(parse_price_currency("fil"), PriceCurrency::Fil);
  EXPECT_FALSE(parse_price_currency("FIL "));
  EXPECT_STREQ(to_string(PriceCurrency::Fil), "fil");
}

// ---- revenue ----------------------------------------------------------------------------------

TEST(JobRevenue, DeliveredOnTimeEarnsItsKindsPrice) {
  EXPECT_DOUBLE_EQ(job_revenue_usd(done(1, 0, 10, 600, 601), usd_prices()), 0.05);
}

TEST(JobRevenue, DeliveredAfterItsDeadlineEarnsNothing) {
  // Proved in time, but the client got it after the deadline: the rule is delivery.
  EXPECT_DOUBLE_EQ(job_revenue_usd(done(1, 0, 10, 1700, 1801), usd_prices()), 0);
}

TEST(JobRevenue, UndeliveredFailedAndCancelledJobsEarnNothing) {
  const auto prices = usd_prices();
  EXPECT_DOUBLE_EQ(job_revenue_usd(done(1, 0, 10, 600, 0), prices), 0);
  EXPECT_DOUBLE_EQ(job_revenue_usd(job(2, JobState::Failed, 0), prices), 0);
  EXPECT_DOUBLE_EQ(job_revenue_usd(job(3, JobState::Cancelled, 0), prices), 0);
}

// ---- timeliness and latency -------------------------------------------------------------------

TEST(JobTimeliness, EachStateSettlesAsTheRuleSays) {
  const double now = kT0 + 5000;
  EXPECT_EQ(job_timeliness(done(1, 0, 1, 100, 101), now).timeliness, Timeliness::OnTime);
  EXPECT_EQ(job_timeliness(done(1, 0, 1, 100, 1801), now).timeliness, Timeliness::Late);
  // Done but never picked up, deadline passed: late, settled at the deadline.
  const auto undelivered = job_timeliness(done(1, 0, 1, 100, 0), now);
  EXPECT_EQ(undelivered.timeliness, Timeliness::Late);
  EXPECT_DOUBLE_EQ(undelivered.settled_at, kT0 + 1800);
  EXPECT_EQ(job_timeliness(done(1, 4000, 4001, 4100, 0), now).timeliness, Timeliness::Pending);
  Job failed = job(2, JobState::Failed, 0);
  failed.finished_at = kT0 + 50;
  EXPECT_EQ(job_timeliness(failed, now).timeliness, Timeliness::Missed);
  EXPECT_EQ(job_timeliness(job(3, JobState::Cancelled, 0), now).timeliness, Timeliness::Withdrawn);
  EXPECT_EQ(job_timeliness(job(4, JobState::Queued, 0), now).timeliness, Timeliness::Late);
  EXPECT_EQ(job_timeliness(job(5, JobState::Proving, 4500), now).timeliness, Timeliness::Pending);
}

TEST(JobLatency, PercentileIsNearestRankOfWhatOccurred) {
  EXPECT_FALSE(percentile({}, 0.5));
  EXPECT_DOUBLE_EQ(*percentile({7}, 0.95), 7);
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // unsorted on purpose
  EXPECT_DOUBLE_EQ(*percentile(v, 0.50), 50);
  EXPECT_DOUBLE_EQ(*percentile(v, 0.95), 95);
  EXPECT_DOUBLE_EQ(*percentile(v, 1.0), 100);
  EXPECT_DOUBLE_EQ(*percentile(v, 0.0), 1);
}

TEST(JobLatency, WaitAndEndToEndOverTheWindowOnly) {
  const double now = kT0 + 10'000;
  const double since = now - 3600;
  std::vector<Job> jobs;
  // Inside the window: waits 10, 20, ..., 200 s; end-to-end 100 + wait.
  for (int i = 1; i <= 20; ++i) {
    const double sub = 7000 + i * 50;
    jobs.push_back(done(i, sub, sub + i * 10, sub + i * 10 + 100, sub + i * 10 + 101));
  }
  // Long before the window: a huge wait that must not count.
  jobs.push_back(done(99, 0, 3000, 3100, 3101));
  const auto stats = latency_stats(jobs, since, now);
  EXPECT_EQ(stats.queue_wait_s.count, 20);
  EXPECT_DOUBLE_EQ(*stats.queue_wait_s.p50, 100);
  EXPECT_DOUBLE_EQ(*stats.queue_wait_s.p95, 190);
  EXPECT_EQ(stats.end_to_end_s.count, 20);
  EXPECT_DOUBLE_EQ(*stats.end_to_end_s.p50, 200);
  EXPECT_DOUBLE_EQ(*stats.end_to_end_s.p95, 290);
  EXPECT_EQ(stats.on_time, 20);
  EXPECT_DOUBLE_EQ(*stats.on_time_share, 1.0);
}

TEST(JobLatency, OnTimeShareCountsLateMissedAndOverdueOpenJobs) {
  const double now = kT0 + 4000;
  std::vector<Job> jobs{
      done(1, 3000, 3001, 3100, 3101),  // on time
      done(2, 3000, 3001, 3100, 3102),  // on time
      done(3, 1000, 1001, 2900, 2901),  // delivered at +2901, due +2800: late
  };
  Job failed = job(4, JobState::Failed, 3000);
  failed.finished_at = kT0 + 3500;
  jobs.push_back(failed);                             // missed
  jobs.push_back(job(5, JobState::Queued, 1500));     // due +3300, still queued: late
  jobs.push_back(job(6, JobState::Cancelled, 3000));  // withdrawn: not counted
  jobs.push_back(job(7, JobState::Proving, 3900));    // pending
  const auto stats = latency_stats(jobs, now - 3600, now);
  EXPECT_EQ(stats.on_time, 2);
  EXPECT_EQ(stats.late, 2);
  EXPECT_EQ(stats.missed, 1);
  EXPECT_DOUBLE_EQ(*stats.on_time_share, 2.0 / 5);
  // Job 5 has waited 2500 s in the queue; it is in no percentile (its wait is not over).
  EXPECT_DOUBLE_EQ(stats.oldest_queued_s, 2500);
  EXPECT_EQ(stats.queue_wait_s.count, 3);
}

TEST(JobLatency, AQueuedJobWithLessTimeLeftThanTheMedianEndToEndIsAtRisk) {
  const double now = kT0 + 4000;
  std::vector<Job> jobs{
      done(1, 3000, 3001, 3600, 3601),  // 600 s from submission to proof
      done(2, 3100, 3101, 3700, 3701),  // 600 s
      job(3, JobState::Queued, 2500),   // due +4300: 300 s left, queued: at risk
      job(4, JobState::Queued, 3900),   // due +5700: 1,700 s left
      job(5, JobState::Queued, 1000),   // due +2800: already late, not "at risk"
      job(6, JobState::Proving, 2500),  // 300 s left but proving: not waiting any more
  };
  EXPECT_EQ(latency_stats(jobs, now - 3600, now).at_risk, 1);
  // Nothing finished in the window: no median to compare with, nothing called at risk.
  EXPECT_EQ(latency_stats({job(3, JobState::Queued, 2500)}, now - 3600, now).at_risk, 0);
}

TEST(JobLatency, NothingSettledMeansNoShareRatherThanZero) {
  const auto stats = latency_stats({job(1, JobState::Queued, 0)}, kT0, kT0 + 10);
  EXPECT_FALSE(stats.on_time_share);
  EXPECT_FALSE(stats.queue_wait_s.p50);
}

// ---- spend, idle hours, realised $/proof ------------------------------------------------------

InstanceRecord instance(std::int64_t id, double dph, double spend, double billed_until) {
  InstanceRecord r;
  r.id = id;
  r.offer.dph_total = dph;
  r.spend_usd = spend;
  r.billed_until = billed_until;
  r.state = InstanceState::Proving;
  return r;
}

TEST(JobSpend, OnlyTheBilledStretchInsideTheWindowCounts) {
  // $0.50/hr, $2 spent: billed for the 4 hours before billed_until.
  const auto rec = instance(1, 0.5, 2.0, kT0 + 4 * 3600);
  EXPECT_NEAR(spend_in_window(rec, kT0, kT0 + 4 * 3600), 2.0, 1e-9);
  EXPECT_NEAR(spend_in_window(rec, kT0 + 3 * 3600, kT0 + 4 * 3600), 0.5, 1e-9);
  EXPECT_NEAR(spend_in_window(rec, kT0 - 3600, kT0), 0, 1e-9);
  EXPECT_NEAR(spend_in_window(rec, kT0 - 3600, kT0 + 99 * 3600), 2.0, 1e-9);
}

TEST(JobIdle, AcceptedHoursWithoutAJobAreIdle) {
  const double now = kT0 + 4 * 3600;
  // Accepted for the whole 4 h; busy 1 h with two overlapping jobs and 30 min with a third.
  std::vector<AcceptedSpan> spans{{1, kT0, now}};
  std::vector<Job> jobs{
      done(1, 0, 0, 3600, 3601),           // busy [0, 1h]
      done(2, 0, 1800, 2700, 2701),        // inside the first: no double count
      done(3, 7200, 7200, 9000, 9001),     // busy [2h, 2.5h]
      done(4, 7200, 7200, 9000, 9001, 2),  // another instance's job
  };
  Job requeued = job(5, JobState::Queued, 10000);
  requeued.instance_id = 1;
  requeued.assigned_at = kT0 + 10000;  // its lost lease is not on the row: not busy
  jobs.push_back(requeued);
  EXPECT_NEAR(idle_hours(spans, jobs, kT0, now), 4 - 1.5, 1e-9);
  // The window cuts the span: only the last hour, in which it held nothing.
  EXPECT_NEAR(idle_hours(spans, jobs, now - 3600, now), 1.0, 1e-9);
  // A job still proving holds the instance until now.
  Job proving = job(6, JobState::Proving, 3 * 3600);
  proving.instance_id = 1;
  proving.assigned_at = kT0 + 3 * 3600;
  jobs.push_back(proving);
  EXPECT_NEAR(idle_hours(spans, jobs, now - 3600, now), 0.0, 1e-9);
}

TEST(JobMoney, RealisedCostIsSpendOverJobsDeliveredOnTime) {
  const double now = kT0 + 3600;
  std::vector<Job> jobs{
      done(1, 0, 10, 300, 301),
      done(2, 0, 10, 400, 401),
      done(3, 0, 10, 500, 501),
      done(4, 0, 10, 600, 0),              // not delivered yet: neither earns nor counts
      done(5, -3000, -2900, 0, 0 + 3000),  // delivered late (due -1200)
  };
  jobs[3].kind = JobKind::SnapUpdate;
  jobs.push_back(done(6, 0, 10, 700, 701));
  jobs.back().kind = JobKind::WindowPost;  // unpriced: counted, earns nothing
  std::vector<InstanceRecord> fleet{instance(1, 1.2, 1.2, now)};  // $1.20 in the hour
  const auto money = jobs_money(jobs, fleet, {{1, kT0, now}}, usd_prices(), kT0, now);
  EXPECT_EQ(money.delivered_on_time, 4);
  EXPECT_EQ(money.delivered_unpriced, 1);
  EXPECT_EQ(money.delivered_late, 1);
  EXPECT_NEAR(money.revenue_usd, 0.15, 1e-12);
  EXPECT_NEAR(money.revenue_per_hour, 0.15, 1e-12);
  EXPECT_NEAR(money.spend_usd, 1.2, 1e-9);
  EXPECT_NEAR(*money.realised_cost_per_proof, 0.3, 1e-9);
}

TEST(JobMoney, NoDeliveriesMeansNoRealisedCost) {
  const auto money =
      jobs_money({}, {instance(1, 1, 1, kT0 + 3600)}, {}, usd_prices(), kT0, kT0 + 3600);
  EXPECT_FALSE(money.realised_cost_per_proof);
  EXPECT_NEAR(money.spend_usd, 1, 1e-9);
}

// ---- the fleet's profit basis -----------------------------------------------------------------

TEST(FleetProfitBasis, WithoutGatewayJobsTheMeasuredEstimateStaysAndSaysSo) {
  const auto p = fleet_profit(false, 100, 0.012, 0.5, 0);
  EXPECT_EQ(p.basis, ProfitBasis::ProofsMeasured);
  EXPECT_NEAR(p.profit_per_hour, 100 * 0.012 - 0.5, 1e-12);
  EXPECT_STREQ(to_string(p.basis), "proofs_measured");
}

TEST(FleetProfitBasis, WithGatewayJobsOnlyDeliveredRevenueCounts) {
  // 100 measured proofs/hour re-proving the benchmark input earn nothing once jobs exist.
  const auto p = fleet_profit(true, 100, 0.012, 0.5, 0.2);
  EXPECT_EQ(p.basis, ProfitBasis::JobsDelivered);
  EXPECT_NEAR(p.revenue_per_hour, 0.2, 1e-12);
  EXPECT_NEAR(p.profit_per_hour, 0.2 - 0.5, 1e-12);
  EXPECT_STREQ(to_string(p.basis), "jobs_delivered");
}

}  // namespace
}  // namespace pf::core
