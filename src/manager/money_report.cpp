#include "manager/money_report.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <vector>

namespace pf::manager {

using nlohmann::json;

namespace {

json optional_number(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

json spend_json(const core::SpendParts& s) {
  return {{"compute_usd", s.compute_usd},
          {"storage_usd", s.storage_usd},
          {"bandwidth_usd", s.bandwidth_usd},
          {"total_usd", s.total()}};
}

json line_json(const core::MoneyLine& m) {
  return {{"revenue_usd", m.revenue_usd},
          {"spend", spend_json(m.spend)},
          {"profit_usd", m.profit_usd()},
          {"delivered_on_time", m.delivered_on_time},
          {"delivered_late", m.delivered_late},
          {"delivered_unpriced", m.delivered_unpriced},
          {"cost_per_proof_usd", optional_number(m.cost_per_proof())}};
}

}  // namespace

std::optional<MoneyRange> parse_money_range(std::string_view name) {
  static const std::array<MoneyRange, 4> kRanges{{{"hour", 3600, 300},
                                                  {"day", 86400, 3600},
                                                  {"week", 7 * 86400, 86400},
                                                  {"month", 30 * 86400, 86400}}};
  for (const auto& r : kRanges) {
    if (r.name == name) return r;
  }
  return std::nullopt;
}

std::optional<double> parse_money_bucket(std::string_view name) {
  if (name == "5m") return 300;
  if (name == "hour") return 3600;
  if (name == "day") return 86400;
  return std::nullopt;
}

core::MoneyLedger build_money_ledger(store::Store& store, const core::PriceConfig& prices,
                                     double since, double until, double bucket_s) {
  // The live rows and those destroyed since the range began: every other row adds exactly 0
  // (as the jobs report reads them, manager/jobs_report.cpp).
  const auto live = store.instances(false);
  const auto closed = store.destroyed_instances_since(since);
  std::vector<core::InstanceRecord> rows;
  rows.reserve(live.size() + closed.size());
  std::merge(live.begin(), live.end(), closed.begin(), closed.end(), std::back_inserter(rows),
             [](const auto& a, const auto& b) { return a.id < b.id; });
  return core::money_ledger(store.delivery_counts(since, until, bucket_s), rows, prices, since,
                            until, bucket_s);
}

json to_json(const core::MoneyLedger& ledger, const core::EconomicsConfig& economics,
             const core::PriceConfig& prices) {
  json buckets = json::array();
  for (const auto& b : ledger.buckets) {
    json row = line_json(b.money);
    row["from"] = b.from;
    row["until"] = b.until;
    buckets.push_back(std::move(row));
  }
  json instances = json::array();
  for (const auto& i : ledger.instances) {
    json row = line_json(i.money);
    row["instance_id"] = i.instance_id;
    row["machine_id"] = i.machine_id;
    instances.push_back(std::move(row));
  }
  json hosts = json::array();
  for (const auto& h : ledger.hosts) {
    json row = line_json(h.money);
    row["machine_id"] = h.machine_id;
    row["rentals"] = h.rentals;
    hosts.push_back(std::move(row));
  }
  json priced = json::object();
  for (auto kind : core::kAllJobKinds) {
    priced[core::to_string(kind)] = optional_number(core::price_usd(prices, kind));
  }
  return {{"since", ledger.since},
          {"until", ledger.until},
          {"bucket_s", ledger.bucket_s},
          {"total", line_json(ledger.total)},
          {"buckets", std::move(buckets)},
          {"instances", std::move(instances)},
          {"hosts", std::move(hosts)},
          {"target_cost_per_proof_usd", economics.target_cost_per_proof_usd},
          {"revenue_per_proof_usd", economics.revenue_per_proof_usd},
          {"usd_per_proof", std::move(priced)}};
}

}  // namespace pf::manager
