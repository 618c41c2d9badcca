// The money ledger (core/money_ledger.h): deliveries counted by bucket, holder, kind and
// timeliness; spend split by what vast.ai billed; per-bucket, per-instance and per-host lines;
// and the same totals as the jobs report's window (one code path).
#include "core/money_ledger.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace pf::core {
namespace {

constexpr double kLedgerStart = 1'000'000;

Job delivered(std::int64_t id, JobKind kind, std::int64_t instance, double at, double deadline) {
  Job j;
  j.id = id;
  j.kind = kind;
  j.state = JobState::Done;
  j.instance_id = instance;
  j.submitted_at = at - 600;
  j.deadline_at = deadline;
  j.finished_at = at - 5;
  j.delivered_at = at;
  return j;
}

InstanceRecord rented(std::int64_t id, std::int64_t machine, double dph, double from, double to,
                      double storage_share, double bandwidth_usd) {
  InstanceRecord r;
  r.id = id;
  r.offer.machine_id = machine;
  r.offer.dph_total = dph;
  r.created_at = from;
  r.billed_until = to;
  r.spend_usd = dph * (to - from) / 3600;
  r.storage_spend_usd = r.spend_usd * storage_share;
  r.bandwidth_spend_usd = bandwidth_usd;
  return r;
}

PriceConfig prices() {
  PriceConfig p;
  p.per_proof[JobKind::PorepC2] = 0.05;  // SnapDeals unpriced
  return p;
}

TEST(MoneyLedger, CountsDeliveriesByBucketHolderKindAndTimeliness) {
  const double t0 = kLedgerStart;
  const std::vector<Job> jobs = {
      delivered(1, JobKind::PorepC2, 7, t0 + 100, t0 + 200),    // bucket 0, on time
      delivered(2, JobKind::PorepC2, 7, t0 + 150, t0 + 120),    // bucket 0, late
      delivered(3, JobKind::PorepC2, 7, t0 + 3700, t0 + 4000),  // bucket 1
      delivered(4, JobKind::SnapUpdate, 8, t0 + 3800, 0),       // no deadline: on time
      delivered(5, JobKind::PorepC2, 8, t0 - 1, t0 + 50),       // before the range
      delivered(6, JobKind::PorepC2, 8, t0 + 7201, t0 + 8000),  // after it
  };
  const auto counts = count_deliveries(jobs, t0, t0 + 7200, 3600);
  ASSERT_EQ(counts.size(), 4u);
  std::int64_t total = 0;
  for (const auto& d : counts) total += d.jobs;
  EXPECT_EQ(total, 4);
  EXPECT_EQ(counts[0].bucket, 0);
  EXPECT_FALSE(counts[0].on_time);  // (bucket, instance, kind, on_time) order: late first
  EXPECT_EQ(counts[1].bucket, 0);
  EXPECT_TRUE(counts[1].on_time);
  EXPECT_EQ(counts[3].instance_id, 8);
  EXPECT_EQ(counts[3].kind, JobKind::SnapUpdate);
  EXPECT_TRUE(counts[3].on_time);
}

TEST(MoneyLedger, SpendPartsAddUpToTheWindowsSpend) {
  const auto r = rented(1, 55, 0.6, kLedgerStart, kLedgerStart + 7200, 0.1, 0.02);
  for (const auto& [from, to] : {std::pair{kLedgerStart, kLedgerStart + 3600},
                                 std::pair{kLedgerStart + 1800, kLedgerStart + 9000},
                                 std::pair{kLedgerStart - 500, kLedgerStart + 100}}) {
    const auto parts = spend_parts_in_window(r, from, to);
    EXPECT_NEAR(parts.total(), spend_in_window(r, from, to), 1e-12);
    EXPECT_NEAR(parts.storage_usd, spend_in_window(r, from, to) / r.spend_usd * r.storage_spend_usd,
                1e-12);
  }
  EXPECT_EQ(spend_parts_in_window(r, kLedgerStart + 8000, kLedgerStart + 9000).total(), 0);
}

TEST(MoneyLedger, LinesPerBucketInstanceAndHostAgreeWithTheTotals) {
  const double t0 = kLedgerStart;
  const std::vector<InstanceRecord> rentals = {
      rented(7, 100, 0.5, t0 - 3600, t0 + 7200, 0.2, 0.01),  // two hours in the range
      rented(8, 100, 0.3, t0 + 3600, t0 + 7200, 0.0, 0.0),   // the second hour
      rented(9, 200, 0.4, t0 - 7200, t0 - 3600, 0.0, 0.0),   // over before the range
  };
  const std::vector<Job> jobs = {
      delivered(1, JobKind::PorepC2, 7, t0 + 100, t0 + 200),
      delivered(2, JobKind::PorepC2, 7, t0 + 150, t0 + 120),  // late: nothing
      delivered(3, JobKind::PorepC2, 8, t0 + 3700, t0 + 4000),
      delivered(4, JobKind::SnapUpdate, 8, t0 + 3800, t0 + 4000),  // unpriced
      delivered(5, JobKind::PorepC2, 8, t0 + 7200, t0 + 7200),     // at the range's end
  };
  const auto ledger = money_ledger(count_deliveries(jobs, t0, t0 + 7200, 3600), rentals, prices(),
                                   t0, t0 + 7200, 3600);
  ASSERT_EQ(ledger.buckets.size(), 2u);
  EXPECT_NEAR(ledger.buckets[0].money.revenue_usd, 0.05, 1e-12);
  EXPECT_NEAR(ledger.buckets[0].money.spend.total(), 0.5, 1e-9);
  EXPECT_NEAR(ledger.buckets[1].money.spend.total(), 0.8, 1e-9);
  EXPECT_EQ(ledger.buckets[1].money.delivered_unpriced, 1);
  EXPECT_NEAR(ledger.buckets[1].money.revenue_usd, 0.10, 1e-12);  // the end is in the last
  EXPECT_NEAR(ledger.total.revenue_usd, 0.15, 1e-12);
  EXPECT_EQ(ledger.total.delivered_on_time, 4);
  EXPECT_EQ(ledger.total.delivered_late, 1);
  EXPECT_NEAR(ledger.total.profit_usd(), 0.15 - 1.3, 1e-9);
  ASSERT_EQ(ledger.instances.size(), 2u);  // 9 had nothing in the range
  EXPECT_EQ(ledger.instances[0].instance_id, 7);
  EXPECT_NEAR(ledger.instances[0].money.spend.total(), 1.0, 1e-9);
  EXPECT_GT(ledger.instances[0].money.spend.storage_usd, 0);
  ASSERT_EQ(ledger.hosts.size(), 1u);
  EXPECT_EQ(ledger.hosts[0].machine_id, 100);
  EXPECT_EQ(ledger.hosts[0].rentals, 2);
  EXPECT_NEAR(ledger.hosts[0].money.revenue_usd, 0.15, 1e-12);
  ASSERT_TRUE(ledger.total.cost_per_proof());
  EXPECT_NEAR(*ledger.total.cost_per_proof(), 1.3 / 4, 1e-9);

  // The jobs report's window gives the same money (core/job_economics.h: one code path).
  const auto report = jobs_money(jobs, rentals, {}, prices(), t0, t0 + 7200);
  EXPECT_DOUBLE_EQ(report.revenue_usd, ledger.total.revenue_usd);
  EXPECT_NEAR(report.spend_usd, ledger.total.spend.total(), 1e-12);  // 1 bucket vs 2
  EXPECT_EQ(report.delivered_on_time, ledger.total.delivered_on_time);
  EXPECT_EQ(report.delivered_late, ledger.total.delivered_late);
  EXPECT_EQ(report.delivered_unpriced, ledger.total.delivered_unpriced);
}

}  // namespace
}  // namespace pf::core
