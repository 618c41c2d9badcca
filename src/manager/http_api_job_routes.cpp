// The operator's view of the gateway's jobs: list and look up.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/host_stats.h"
#include "jobs/job_queue.h"
#include "manager/autopilot.h"
#include "manager/dashboard.h"
#include "manager/http_api_impl.h"
#include "manager/views.h"
#include "market/query.h"
#include "util/base64.h"
#include "util/bounded_json.h"
#include "util/exception_message.h"

namespace pf::manager {

using namespace api_detail;  // this file is part of the API's implementation

// --- gateway jobs (operator): list and look up -------------------------------------------
jobs::JobQueue& HttpApi::Impl::operator_job_queue() const {
  jobs::JobQueue* queue = job_queue_or_null();
  if (!queue) fail(409, "this manager runs without a gateway (no job queue)");
  return *queue;
}

void HttpApi::Impl::add_operator_job_routes() {
  add("GET", "/api/v1/jobs", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {"state", "limit", "cursor"});
    const auto states = job_states_param(req);
    const auto limit = limit_param(req, options.jobs_default_limit, options.jobs_max_limit);
    // Pages, newest first: `cursor` is the X-Next-Cursor of the page before (the id its last
    // job had); the next page holds the older jobs.
    std::int64_t cursor = 0;
    if (const auto text = param(req, "cursor")) {
      const auto id = parse_positive_id(*text);
      if (!id) {
        fail(400,
             "query parameter 'cursor' must be the X-Next-Cursor of an earlier page (a "
             "positive job id), got " +
                 in_quotes(*text));
      }
      cursor = *id;
    }
    const double now = options.clock();
    const auto page = operator_job_queue().list(states, static_cast<std::size_t>(limit), cursor);
    json out = json::array();
    for (const auto& job : page) out.push_back(to_json(job, now, options.jobs_report.prices));
    Reply reply = json_reply(200, out);
    // A full page may have older jobs behind it; a short one is the last.
    if (static_cast<int>(page.size()) == limit && page.back().id > 1) {
      reply.headers.emplace_back(kNextCursorHeader, std::to_string(page.back().id));
    }
    return reply;
  });
  add("GET", "/api/v1/jobs/{id}", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        const std::string key = req.matches.size() >= 2 ? req.matches[1].str() : "";
        if (!is_job_key(key)) {
          fail(400, "job id must be a job id or a request_id (1 to " +
                        std::to_string(kMaxRequestIdBytes) + " printable bytes), got " +
                        in_quotes(key));
        }
        auto& queue = operator_job_queue();
        // The gateway's handle is the request_id; a number no request_id holds is a job id.
        auto job = queue.job_by_request(key);
        if (!job) {
          if (auto id = parse_positive_id(key)) job = queue.job(*id);
        }
        if (!job) fail(404, "unknown job " + in_quotes(key) + " (neither a request_id nor an id)");
        return json_reply(200, to_json(*job, options.clock(), options.jobs_report.prices));
      });
}

}  // namespace pf::manager
