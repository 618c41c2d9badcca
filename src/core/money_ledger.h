// Money over time (issue 36, the dashboard's money page and `proverfleet money`): revenue from
// jobs delivered on time, spend by what vast.ai billed (compute, storage, bandwidth) and profit,
// per hour or day, per instance and per host (machine). Pure: the shell hands in the counts of
// delivered jobs (store::JobStore::delivery_counts, or count_deliveries over listed jobs) and the
// instance rows whose billing may reach into the range.
//
// One code path with the jobs report (core/job_economics.h jobs_money): a delivered job earns
// its kind's price when delivered by its deadline (core::job_timeliness) and nothing otherwise;
// spend is spend_in_window over the same rows. MoneyLedgerTest checks the two agree.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/fleet.h"
#include "core/job.h"
#include "core/job_economics.h"

namespace pf::core {

// Jobs delivered in one bucket of a range, by the instance that made the proof, kind and
// whether they were on time.
struct DeliveryCount {
  std::int64_t bucket = 0;                  // index from the range's start
  std::optional<std::int64_t> instance_id;  // the job's last holder (none: not recorded)
  JobKind kind = JobKind::PorepC2;
  bool on_time = true;
  std::int64_t jobs = 0;
};

// The counts `jobs` make for the range [since, until] cut in buckets of `bucket_s` (done jobs
// delivered in the range; on time as core::job_timeliness judges them).
std::vector<DeliveryCount> count_deliveries(const std::vector<Job>& jobs, double since,
                                            double until, double bucket_s);

// An instance's spend in [since, until] by what it paid for: storage and bandwidth in the
// proportion the row's totals hold them, compute the rest (spend_in_window's stretch).
struct SpendParts {
  double compute_usd = 0, storage_usd = 0, bandwidth_usd = 0;
  double total() const { return compute_usd + storage_usd + bandwidth_usd; }
  SpendParts& operator+=(const SpendParts& other);
};
SpendParts spend_parts_in_window(const InstanceRecord& instance, double since, double until);

// What a production proof cost over a rental's (or a machine's) whole life: its spend, setup,
// benchmarks and idle time included, over its production proofs; none before the first.
std::optional<double> spend_per_proof(double spend_usd, std::int64_t proofs_production);

struct MoneyLine {
  double revenue_usd = 0;
  SpendParts spend;
  std::int64_t delivered_on_time = 0;
  std::int64_t delivered_late = 0;      // earned nothing
  std::int64_t delivered_unpriced = 0;  // on time, but the kind has no price
  double profit_usd() const { return revenue_usd - spend.total(); }
  // Spend ÷ jobs delivered on time; none before the first.
  std::optional<double> cost_per_proof() const;
};

struct MoneyBucket {
  double from = 0, until = 0;
  MoneyLine money;
};
struct InstanceMoney {
  std::int64_t instance_id = 0;
  std::int64_t machine_id = 0;
  MoneyLine money;
};
struct HostMoney {
  std::int64_t machine_id = 0;
  int rentals = 0;  // of those with money in the range
  MoneyLine money;
};

struct MoneyLedger {
  double since = 0, until = 0, bucket_s = 0;
  MoneyLine total;
  std::vector<MoneyBucket> buckets;      // oldest first, the last one ending at `until`
  std::vector<InstanceMoney> instances;  // each with spend or deliveries in the range, by id
  std::vector<HostMoney> hosts;          // by machine id
};

// Buckets of `bucket_s` from `since` (the last may be shorter, ending at `until`). Deliveries
// by an instance not among `instances` count in the totals and buckets, not per instance.
MoneyLedger money_ledger(const std::vector<DeliveryCount>& deliveries,
                         const std::vector<InstanceRecord>& instances, const PriceConfig& prices,
                         double since, double until, double bucket_s);

}  // namespace pf::core
