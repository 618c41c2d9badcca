// The operator's money view: GET /api/v1/money (manager/money_report.h).
#include <cmath>
#include <string>

#include "manager/http_api_impl.h"
#include "manager/money_report.h"

namespace pf::manager {

using namespace api_detail;  // this file is part of the API's implementation

namespace {

// A range cut finer than this many buckets is refused: a month by the hour is 720.
constexpr double kMaxMoneyBuckets = 744;

}  // namespace

void HttpApi::Impl::add_operator_money_routes() {
  add("GET", "/api/v1/money", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {"range", "bucket"});
    const std::string range_name = param(req, "range").value_or("day");
    const auto range = parse_money_range(range_name);
    if (!range) {
      fail(400, "query parameter 'range' must be hour, day, week or month, got " +
                    in_quotes(range_name));
    }
    double bucket_s = range->default_bucket_s;
    if (const auto text = param(req, "bucket")) {
      const auto bucket = parse_money_bucket(*text);
      if (!bucket)
        fail(400, "query parameter 'bucket' must be 5m, hour or day, got " + in_quotes(*text));
      if (*bucket > range->seconds || range->seconds / *bucket > kMaxMoneyBuckets) {
        fail(400, "query parameter 'bucket': " + *text + " buckets do not fit a " + range->name +
                      " (at most " + std::to_string(static_cast<int>(kMaxMoneyBuckets)) +
                      " buckets, none longer than the range)");
      }
      bucket_s = *bucket;
    }
    const double until = options.clock();
    const auto ledger = build_money_ledger(manager.store(), options.jobs_report.prices,
                                           until - range->seconds, until, bucket_s);
    json out = to_json(ledger, manager.config().rank.economics, options.jobs_report.prices);
    out["range"] = range->name;
    return json_reply(200, out);
  });
}

}  // namespace pf::manager
