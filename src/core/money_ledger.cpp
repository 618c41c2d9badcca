#include "core/money_ledger.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "core/job_latency.h"

namespace pf::core {
namespace {

std::int64_t bucket_of(double at, double since, double bucket_s) {
  return static_cast<std::int64_t>(std::floor((at - since) / bucket_s));
}

void add_delivery(MoneyLine& line, const DeliveryCount& d, const PriceConfig& prices) {
  if (!d.on_time) {
    line.delivered_late += d.jobs;
    return;
  }
  line.delivered_on_time += d.jobs;
  if (const auto price = price_usd(prices, d.kind)) {
    line.revenue_usd += *price * static_cast<double>(d.jobs);
  } else {
    line.delivered_unpriced += d.jobs;
  }
}

}  // namespace

std::vector<DeliveryCount> count_deliveries(const std::vector<Job>& jobs, double since,
                                            double until, double bucket_s) {
  std::map<std::tuple<std::int64_t, std::int64_t, JobKind, bool>, std::int64_t> counts;
  for (const auto& job : jobs) {
    if (job.state != JobState::Done || job.delivered_at <= 0 || job.delivered_at < since ||
        job.delivered_at > until) {
      continue;
    }
    const bool on_time = job_timeliness(job, job.delivered_at).timeliness == Timeliness::OnTime;
    // -1: no instance recorded (a key std::map can order; mapped back below).
    ++counts[{bucket_of(job.delivered_at, since, bucket_s), job.instance_id.value_or(-1), job.kind,
              on_time}];
  }
  std::vector<DeliveryCount> out;
  for (const auto& [key, n] : counts) {
    const auto& [bucket, instance, kind, on_time] = key;
    DeliveryCount d;
    d.bucket = bucket;
    if (instance >= 0) d.instance_id = instance;
    d.kind = kind;
    d.on_time = on_time;
    d.jobs = n;
    out.push_back(d);
  }
  return out;
}

SpendParts& SpendParts::operator+=(const SpendParts& other) {
  compute_usd += other.compute_usd;
  storage_usd += other.storage_usd;
  bandwidth_usd += other.bandwidth_usd;
  return *this;
}

SpendParts spend_parts_in_window(const InstanceRecord& instance, double since, double until) {
  SpendParts parts;
  const double in_window = spend_in_window(instance, since, until);
  if (in_window <= 0 || instance.spend_usd <= 0) return parts;
  const double share = in_window / instance.spend_usd;
  parts.storage_usd = std::max(0.0, instance.storage_spend_usd) * share;
  parts.bandwidth_usd = std::max(0.0, instance.bandwidth_spend_usd) * share;
  parts.compute_usd = std::max(0.0, in_window - parts.storage_usd - parts.bandwidth_usd);
  return parts;
}

std::optional<double> spend_per_proof(double spend_usd, std::int64_t proofs_production) {
  if (proofs_production <= 0) return std::nullopt;
  return spend_usd / static_cast<double>(proofs_production);
}

std::optional<double> MoneyLine::cost_per_proof() const {
  if (delivered_on_time <= 0) return std::nullopt;
  return spend.total() / static_cast<double>(delivered_on_time);
}

MoneyLedger money_ledger(const std::vector<DeliveryCount>& deliveries,
                         const std::vector<InstanceRecord>& instances, const PriceConfig& prices,
                         double since, double until, double bucket_s) {
  MoneyLedger ledger;
  ledger.since = since;
  ledger.until = std::max(until, since);
  ledger.bucket_s = bucket_s > 0 ? bucket_s : std::max(ledger.until - since, 1.0);
  for (double from = since; from < ledger.until; from += ledger.bucket_s) {
    ledger.buckets.push_back({from, std::min(from + ledger.bucket_s, ledger.until), {}});
  }
  std::map<std::int64_t, InstanceMoney> by_instance;
  for (const auto& rec : instances) {
    InstanceMoney row{rec.id, rec.offer.machine_id, {}};
    for (auto& bucket : ledger.buckets) {
      const auto parts = spend_parts_in_window(rec, bucket.from, bucket.until);
      bucket.money.spend += parts;
      row.money.spend += parts;
    }
    ledger.total.spend += row.money.spend;
    by_instance.emplace(rec.id, row);
  }
  for (const auto& d : deliveries) {
    add_delivery(ledger.total, d, prices);
    // The range is closed: a delivery at `until` itself counts in the last bucket.
    const auto last = static_cast<std::int64_t>(ledger.buckets.size()) - 1;
    if (d.bucket >= 0 && last >= 0) {
      add_delivery(ledger.buckets[static_cast<std::size_t>(std::min(d.bucket, last))].money, d,
                   prices);
    }
    if (d.instance_id) {
      if (auto it = by_instance.find(*d.instance_id); it != by_instance.end()) {
        add_delivery(it->second.money, d, prices);
      }
    }
  }
  std::map<std::int64_t, HostMoney> by_host;
  for (auto& [id, row] : by_instance) {
    const auto& m = row.money;
    if (m.spend.total() <= 0 && m.delivered_on_time == 0 && m.delivered_late == 0) continue;
    auto& host = by_host[row.machine_id];
    host.machine_id = row.machine_id;
    ++host.rentals;
    host.money.revenue_usd += m.revenue_usd;
    host.money.spend += m.spend;
    host.money.delivered_on_time += m.delivered_on_time;
    host.money.delivered_late += m.delivered_late;
    host.money.delivered_unpriced += m.delivered_unpriced;
    ledger.instances.push_back(std::move(row));
  }
  for (auto& [machine, host] : by_host) ledger.hosts.push_back(std::move(host));
  return ledger;
}

}  // namespace pf::core
