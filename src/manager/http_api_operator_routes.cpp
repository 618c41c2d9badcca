// The operator API (design §8): offers, instances, hosts, bad hosts, fleet, autopilot.
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
#include "core/money_ledger.h"
#include "jobs/job_queue.h"
#include "manager/autopilot.h"
#include "manager/dashboard.h"
#include "manager/dashboard_snapshot.h"
#include "manager/http_api_impl.h"
#include "manager/views.h"
#include "market/query.h"
#include "store/store.h"
#include "util/base64.h"
#include "util/bounded_json.h"
#include "util/exception_message.h"

namespace pf::manager {
namespace {

// The host page reads each rental's newest audit events for its strikes and block changes: a
// machine rented many times still answers in bounded time.
constexpr std::size_t kMaxHostEventsPerRental = 500;

}  // namespace

using namespace api_detail;  // this file is part of the API's implementation

// The operator API (design §8).
void HttpApi::Impl::add_operator_routes() {
  add("GET", "/api/v1/offers", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {"q", "sort", "limit"});
    auto parsed = market::parse_query(param(req, "q").value_or(""));
    if (!parsed) fail(400, "q: " + parsed.error());
    const std::string sort = param(req, "sort").value_or("cost");
    if (sort != "cost" && sort != "profit") {
      fail(400, "query parameter 'sort' must be cost or profit, got " + in_quotes(sort));
    }
    int limit = options.offers_default_limit;
    if (auto text = param(req, "limit")) {
      auto n = parse_positive_id(*text);
      if (!n || *n > options.offers_max_limit) {
        fail(400, "query parameter 'limit' must be an integer in [1, " +
                      std::to_string(options.offers_max_limit) + "], got " + in_quotes(*text));
      }
      limit = static_cast<int>(*n);
    }
    const auto ranked = unwrap(
        manager.rank_offers(parsed->filters, limit,
                            sort == "profit" ? core::RankOrder::Profit : core::RankOrder::Cost));
    json out = json::array();
    for (const auto& r : ranked) out.push_back(to_json(r));
    return json_reply(200, out);
  });

  add("POST", "/api/v1/instances", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        const json body = parse_object_body(req);
        reject_unknown_params(req, {});
        Fields f(body, "");
        f.reject_unknown({"offer_id"});
        const std::int64_t offer_id = f.integer("offer_id", 1, kMaxInt64);
        return json_reply(201, to_json(unwrap(manager.deploy(offer_id, "deploy"))));
      });
  add("GET", "/api/v1/instances", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {"all"});
        const bool all = bool_param(req, "all");
        json out = json::array();
        for (const auto& rec : manager.store().instances(all)) out.push_back(to_json(rec));
        return json_reply(200, out);
      });
  add("GET", "/api/v1/instances/{id}", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        const std::int64_t id = path_id(req, "instance id");
        auto& store = manager.store();
        auto rec = store.instance(id);
        if (!rec) fail(404, "unknown instance " + std::to_string(id));
        json events = json::array();
        for (const auto& e : store.events(id, options.instance_events_shown)) {
          events.push_back(to_json(e));
        }
        json samples = json::array();
        for (const auto& s : store.proof_samples(id)) samples.push_back(to_json(s));
        std::string logs = manager.logs(id);
        if (logs.size() > options.instance_logs_tail_bytes) {
          logs = logs.substr(logs.size() - options.instance_logs_tail_bytes);
        }
        json detail = {
            {"instance", to_json(*rec)}, {"events", events}, {"samples", samples}, {"logs", logs}};
        add_hands_on(detail, manager, id);  // live report, SSH, alerts, queued tuning
        return json_reply(200, detail);
      });
  add("DELETE", "/api/v1/instances/{id}", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        const std::int64_t id = path_id(req, "instance id");
        if (!manager.store().instance(id)) fail(404, "unknown instance " + std::to_string(id));
        return json_reply(202,
                          to_json(unwrap(manager.request_destroy(id, kOperatorDestroyReason))));
      });

  add("GET", "/api/v1/hosts", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {});
    const auto runs = manager.store().all_bench_runs();
    json out = json::array();
    for (const auto& summary : core::summarize_hosts(runs)) {
      json row = to_json(summary);
      json host_runs = json::array();
      for (const auto& run : runs) {
        if (run.host == summary.host) host_runs.push_back(to_json(run));
      }
      row["history"] = std::move(host_runs);
      out.push_back(std::move(row));
    }
    return json_reply(200, out);
  });

  // One machine (vast.ai's machine_id) as the host page shows it: every rental of it, its
  // measured runs over time with their summary, the strikes and block changes the rentals'
  // audit trails hold, and its entries on the bad-host list.
  add("GET", "/api/v1/hosts/{machine_id}", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        const std::int64_t machine = path_id(req, "machine id");
        auto& store = manager.store();
        const double now = options.clock();
        const auto rentals = store.instances_on_machine(machine);
        json out = {{"machine_id", machine}};
        json rental_rows = json::array();
        json history = json::array();  // strikes ("blame") and block changes ("bad_host")
        std::vector<core::BenchRun> runs;
        double spend = 0;
        std::int64_t proofs = 0;
        for (const auto& rec : rentals) {
          rental_rows.push_back(dashboard_row(rec));
          spend += rec.spend_usd;
          proofs += rec.proofs_production;
          for (auto& run : store.instance_bench_runs(rec.id)) runs.push_back(std::move(run));
          for (const auto& e : store.events(rec.id, kMaxHostEventsPerRental)) {
            if (e.kind == "blame" || e.kind == "bad_host") history.push_back(to_json(e));
          }
        }
        std::sort(runs.begin(), runs.end(),
                  [](const auto& a, const auto& b) { return a.at < b.at; });
        json entries = json::array();
        for (const auto& entry : store.bad_hosts()) {
          if (entry.machine_id != machine) continue;
          json row = to_json(entry);
          row["active"] = core::is_active(entry, now);
          entries.push_back(std::move(row));
        }
        if (rentals.empty() && runs.empty() && entries.empty()) {
          fail(404, "machine " + std::to_string(machine) +
                        " was never rented, measured or blocked by this fleet");
        }
        json run_rows = json::array();
        for (const auto& run : runs) run_rows.push_back(to_json(run));
        json summaries = json::array();
        for (const auto& summary : core::summarize_hosts(runs))
          summaries.push_back(to_json(summary));
        std::sort(history.begin(), history.end(), [](const json& a, const json& b) {
          return a.value("at", 0.0) < b.value("at", 0.0);
        });
        out["rentals"] = std::move(rental_rows);
        out["runs"] = std::move(run_rows);
        out["summaries"] = std::move(summaries);
        out["history"] = std::move(history);
        out["bad_host_entries"] = std::move(entries);
        out["blocked"] = std::any_of(out["bad_host_entries"].begin(), out["bad_host_entries"].end(),
                                     [](const json& e) { return e.value("active", false); });
        // A machine's $/proof over every rental, by the rule a job's page uses for one.
        const auto per_proof = core::spend_per_proof(spend, proofs);
        out["totals"] = {{"rentals", rentals.size()},
                         {"spend_usd", spend},
                         {"proofs_production", proofs},
                         {"cost_per_proof_usd", per_proof ? json(*per_proof) : json(nullptr)}};
        return json_reply(200, out);
      });

  add("GET", "/api/v1/bad-hosts", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        const double now = options.clock();
        json out = json::array();
        for (const auto& entry : manager.store().bad_hosts()) {
          json row = to_json(entry);
          row["active"] = core::is_active(entry, now);
          out.push_back(std::move(row));
        }
        return json_reply(200, out);
      });
  add("POST", "/api/v1/bad-hosts", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        const json body = parse_object_body(req);
        reject_unknown_params(req, {});
        Fields f(body, "");
        f.reject_unknown({"machine_id", "reason", "ttl_hours", "evidence"});
        core::BadHost entry;
        entry.machine_id = f.integer("machine_id", 1, kMaxInt64);
        entry.reason = f.string("reason", 1000, false);
        const auto ttl_hours = f.optional_number("ttl_hours", 0, 24.0 * 365 * 100);
        if (ttl_hours && *ttl_hours <= 0) {
          fail(400, "field 'ttl_hours' must be > 0 (omit it for no expiry), got " +
                        json(*ttl_hours).dump());
        }
        if (auto evidence = f.optional_object("evidence")) {
          entry.evidence_json = util::dump_json_lossy(body.at("evidence"));
        }
        entry.source = "operator";
        entry.added_at = options.clock();
        if (ttl_hours) entry.expires_at = entry.added_at + *ttl_hours * 3600;
        manager.put_bad_host(entry, "the operator");
        json row = to_json(entry);
        row["active"] = core::is_active(entry, entry.added_at);
        return json_reply(201, row);
      });
  add("DELETE", "/api/v1/bad-hosts/{machine_id}", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        const std::int64_t machine = path_id(req, "machine id");
        // The operator vouches for the machine: automatic entries go too.
        const int removed = manager.remove_bad_host(machine, "the operator");
        if (removed == 0) {
          fail(404, "machine " + std::to_string(machine) + " is not on the bad-host list");
        }
        return json_reply(200, {{"machine_id", machine}, {"removed", removed}});
      });

  add("GET", "/api/v1/fleet", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
    reject_unknown_params(req, {});
    json out = fleet_json();
    if (options.leader) out["replica"] = leader_json(options.leader(), true);
    out["autopilot"] = autopilot_json();
    out["alerts"] = to_json(manager.alerts());
    return json_reply(200, out);
  });
  add_operator_job_routes();
  add_operator_money_routes();
  add_ops_routes();
  add("GET", "/api/v1/autopilot", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        reject_unknown_params(req, {});
        return json_reply(200, autopilot_json());
      });
  add("POST", "/api/v1/autopilot", Access::Operator,
      [this](const net::HttpRequest& req, std::int64_t) {
        const json body = parse_object_body(req);
        reject_unknown_params(req, {});
        Fields f(body, "");
        f.reject_unknown({"paused"});
        if (!body.contains("paused") || !body["paused"].is_boolean()) {
          fail(400, "'paused' must be true or false");
        }
        if (!options.autopilot) fail(409, "this manager runs without an autopilot");
        options.autopilot->set_paused(body["paused"].get<bool>(), "operator via API");
        return json_reply(200, autopilot_json());
      });
}

}  // namespace pf::manager
