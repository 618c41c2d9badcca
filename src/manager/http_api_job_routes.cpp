// The operator's view of the gateway's jobs: list and look up.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "core/host_stats.h"
#include "core/money_ledger.h"
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

namespace {

// The timeline's most recent steps a job's page shows: a job requeued many times (an instance
// that keeps losing its lease) still answers in bounded size.
constexpr std::size_t kMaxTimelineSteps = 500;

json to_json(const core::JobEvent& e, const std::map<std::int64_t, std::int64_t>& machines) {
  json out = {{"at", e.at},
              {"kind", core::to_string(e.kind)},
              {"attempt", e.attempt},
              {"instance_id", e.instance_id ? json(*e.instance_id) : json(nullptr)},
              {"machine_id", nullptr},
              {"detail", e.detail}};
  if (e.instance_id) {
    if (const auto it = machines.find(*e.instance_id); it != machines.end() && it->second > 0) {
      out["machine_id"] = it->second;
    }
  }
  return out;
}

}  // namespace

// GET /api/v1/jobs' filters, each checked and named when wrong (store::JobFilter).
store::JobFilter HttpApi::Impl::job_filter_params(const net::HttpRequest& req) {
  store::JobFilter filter;
  filter.states = job_states_param(req);
  filter.kinds = job_kinds_param(req);
  filter.now = options.clock();
  if (const auto client = param(req, "client")) {
    if (client->empty() || client->size() > kMaxRequestIdBytes) {
      fail(400, "query parameter 'client' must be 1 to " + std::to_string(kMaxRequestIdBytes) +
                    " bytes (a client as the jobs list shows it), got " + in_quotes(*client));
    }
    filter.client = *client;
  }
  for (const auto& [key, field] : {std::pair{"instance", &store::JobFilter::instance_id},
                                   std::pair{"machine", &store::JobFilter::machine_id}}) {
    if (const auto text = param(req, key)) {
      const auto id = parse_positive_id(*text);
      if (!id) {
        fail(400, std::string("query parameter '") + key + "' must be a positive integer, got " +
                      in_quotes(*text));
      }
      filter.*field = *id;
    }
  }
  if (const auto prefix = param(req, "request")) {
    if (!prefix->empty() && !is_job_key(*prefix)) {
      fail(400,
           "query parameter 'request' must be the start of a request_id (printable ASCII, "
           "at most " +
               std::to_string(kMaxRequestIdBytes) + " bytes), got " + in_quotes(*prefix));
    }
    filter.request_id_prefix = *prefix;
  }
  filter.submitted_since = epoch_param(req, "since");
  filter.submitted_until = epoch_param(req, "until");
  if (filter.submitted_since && filter.submitted_until &&
      *filter.submitted_until <= *filter.submitted_since) {
    fail(400, "query parameter 'until' must be later than 'since'");
  }
  filter.late = bool_param(req, "late");
  if (bool_param(req, "at_risk")) {
    // The same judgement as /metrics' proverfleet_jobs_at_risk: against the window's median
    // submission-to-proof time; none without a finished job to compare with.
    const auto report = jobs_report(manager.store().instances(false));
    const auto typical = report ? report->latency.end_to_end_s.p50 : std::nullopt;
    filter.at_risk_typical_s = typical.value_or(0);
  }
  return filter;
}

void HttpApi::Impl::add_operator_job_routes() {
  add("GET", "/api/v1/jobs", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {"state", "kind", "client", "instance", "machine", "request",
                                "since", "until", "late", "at_risk", "limit", "cursor"});
    const auto filter = job_filter_params(req);
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
    const double now = filter.now;
    const auto page = operator_job_queue().list(filter, static_cast<std::size_t>(limit), cursor);
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
        json out = to_json(*job, options.clock(), options.jobs_report.prices);
        // Where each try went: the timeline, each instance with the machine it rented (the
        // host page's key).
        const auto steps = queue.timeline(job->id, kMaxTimelineSteps);
        std::map<std::int64_t, std::int64_t> machines;
        if (job->instance_id) machines.emplace(*job->instance_id, 0);
        for (const auto& e : steps) {
          if (e.instance_id) machines.emplace(*e.instance_id, 0);
        }
        // What a proof cost on the instance that made it: its spend over its production
        // proofs (setup, benchmarks and idle time included), once it has any.
        json cost_per_proof = nullptr;
        for (auto& [instance_id, machine] : machines) {
          if (const auto rec = manager.store().instance(instance_id)) {
            machine = rec->offer.machine_id;
            const auto per_proof = core::spend_per_proof(rec->spend_usd, rec->proofs_production);
            if (instance_id == job->instance_id && per_proof) cost_per_proof = *per_proof;
          }
        }
        out["instance_cost_per_proof_usd"] = cost_per_proof;
        json timeline = json::array();
        for (const auto& e : steps) timeline.push_back(to_json(e, machines));
        out["timeline"] = std::move(timeline);
        out["timeline_truncated"] = steps.size() >= kMaxTimelineSteps;
        const auto holder = job->instance_id ? machines.find(*job->instance_id) : machines.end();
        out["machine_id"] =
            holder != machines.end() && holder->second > 0 ? json(holder->second) : json(nullptr);
        return json_reply(200, out);
      });
}

}  // namespace pf::manager
