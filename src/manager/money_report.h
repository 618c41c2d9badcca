// The money page's ledger (issue 36): revenue, spend by kind and profit per hour or day, per
// instance and per host, over a range — GET /api/v1/money, the dashboard's #/money and
// `proverfleet money`. A shell: the store counts the deliveries (store::JobStore::
// delivery_counts) and lists the rows billed into the range; core/money_ledger.h decides every
// figure with the same rules as the jobs report's window.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/economics.h"
#include "core/job_economics.h"
#include "core/money_ledger.h"
#include "store/store.h"

namespace pf::manager {

// The ranges the money page offers, each with its default bucket.
struct MoneyRange {
  std::string name;  // "hour" | "day" | "week" | "month"
  double seconds = 0;
  double default_bucket_s = 0;
};
std::optional<MoneyRange> parse_money_range(std::string_view name);
// "hour" | "day" → seconds.
std::optional<double> parse_money_bucket(std::string_view name);

// [until − range, until] cut in `bucket_s` buckets, from `store`.
core::MoneyLedger build_money_ledger(store::Store& store, const core::PriceConfig& prices,
                                     double since, double until, double bucket_s);

nlohmann::json to_json(const core::MoneyLedger& ledger, const core::EconomicsConfig& economics,
                       const core::PriceConfig& prices);

}  // namespace pf::manager
