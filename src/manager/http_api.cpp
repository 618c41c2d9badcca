// HttpApi: authorization, dispatch to the route groups, the front's lanes and error shapes.
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
#include "store/store.h"
#include "util/base64.h"
#include "util/bounded_json.h"
#include "util/exception_message.h"

namespace pf::manager {

using namespace api_detail;  // this file is part of the API's implementation

HttpApi::Impl::Impl(Manager& m, ApiOptions o) : manager(m), options(std::move(o)) {
  if (!options.clock) options.clock = system_clock_now;
  build_routes();
}

json HttpApi::Impl::autopilot_json() const {
  if (!options.autopilot) return {{"enabled", false}, {"paused", false}, {"active", false}};
  return to_json(options.autopilot->status());
}

// The jobs figures (null without a gateway); every build also feeds /metrics' counters.
std::optional<JobsReport> HttpApi::Impl::jobs_report(
    const std::vector<core::InstanceRecord>& live) {
  jobs::JobQueue* queue = job_queue_or_null();
  if (!queue) return std::nullopt;
  const double now = options.clock();
  JobsReport report = build_jobs_report(manager, *queue, options.jobs_report, now, live);
  job_counters.observe(report.scanned, options.jobs_report.prices, now);
  return report;
}

// The fleet summary with its profit on the right basis, and the report it was based on.
std::pair<FleetSummary, std::optional<JobsReport>> HttpApi::Impl::fleet_with_jobs() {
  return fleet_with_jobs(manager.store().instances(false));
}

// The live rows are read once per request: the summary and the jobs report both need them.
std::pair<FleetSummary, std::optional<JobsReport>> HttpApi::Impl::fleet_with_jobs(
    const std::vector<core::InstanceRecord>& live) {
  FleetSummary summary = manager.summary(live);
  auto report = jobs_report(live);
  apply_profit_basis(summary, report ? &*report : nullptr,
                     manager.config().rank.economics.revenue_per_proof_usd);
  return {std::move(summary), std::move(report)};
}

// GET /api/v1/fleet without "autopilot": the summary and its "jobs" section.
json HttpApi::Impl::fleet_json() {
  return fleet_json(manager.store().instances(false));
}

json HttpApi::Impl::fleet_json(const std::vector<core::InstanceRecord>& live) {
  auto [summary, report] = fleet_with_jobs(live);
  json out = to_json(summary);
  out["jobs"] = report ? to_json(*report) : json(nullptr);
  // Replicas: who leads (stable fields only, so the dashboard's stream is not re-sent for a
  // renewal; GET /api/v1/fleet adds the ages).
  if (options.leader) out["replica"] = leader_json(options.leader(), false);
  return out;
}

void HttpApi::Impl::add(const char* method, std::string label, Access access, RouteFn fn) {
  // "{name}" segments match one path segment; the handler validates it.
  std::string regex_text = std::regex_replace(label, std::regex(R"(\{[a-z_]+\})"), "([^/]+)");
  std::regex regex(regex_text);
  routes.push_back(Route{method, std::move(label), std::move(regex_text), std::move(regex), access,
                         std::move(fn)});
}

// The agent instance for Agent routes; throws 401 otherwise.
std::int64_t HttpApi::Impl::authorize(Access access, const net::HttpRequest& req) {
  if (access == Access::Public) return 0;
  auto token = bearer_token(req);
  if (!token) {
    fail(401, std::string("missing bearer token: send 'Authorization: Bearer <") +
                  (access == Access::Operator ? "operator token" : "agent token") + ">'");
  }
  if (access == Access::Operator) {
    if (options.operator_token_hash.empty() ||
        !tokens_equal(hash_token(*token), options.operator_token_hash)) {
      fail(401, "invalid operator token");
    }
    return 0;
  }
  auto instance = manager.authenticate_agent(*token);
  if (!instance) fail(401, "invalid agent token");
  return *instance;
}

net::Handler HttpApi::Impl::handler(const Route& route) {
  return [this, &route](const net::HttpRequest& req, net::HttpResponse& res) {
    Reply reply;
    try {
      if (options.forward) {
        if (auto forwarded = options.forward(req, route.label)) {
          res.status = forwarded->status;
          for (const auto& [name, value] : forwarded->headers) res.set_header(name, value);
          res.set_content(std::move(forwarded->body), forwarded->content_type);
          return;
        }
      }
      const std::int64_t agent = authorize(route.access, req);
      reply = route.fn(req, agent);
    } catch (const RequestError& e) {
      reply = error_reply(e.status, e.message);
    } catch (const std::exception& e) {
      reply = error_reply(500, std::string("internal error: ") + e.what());
    }
    const store::Confirm committed = std::move(reply.committed);
    set_reply(res, std::move(reply));
    if (committed.pending()) {
      const net::Resume resume = res.defer();
      try {
        committed.then([resume](const std::string& error) {
          if (error.empty()) return resume(nullptr);
          resume([error](net::HttpResponse& r) {
            r = net::HttpResponse{};
            set_reply(r, error_reply(500, "internal error: " + error));
          });
        });
      } catch (const std::exception& e) {
        res = net::HttpResponse{};  // the Resume's last copy goes uncalled: nothing to finish
        set_reply(res, error_reply(500, std::string("internal error: ") + e.what()));
      }
    }
  };
}

// The queue agents lease from: the one given in the options, else the Manager's own.
jobs::JobQueue* HttpApi::Impl::job_queue_or_null() const {
  return options.jobs ? options.jobs : manager.jobs();
}

jobs::JobQueue& HttpApi::Impl::job_queue() const {
  jobs::JobQueue* queue = job_queue_or_null();
  if (!queue) fail(503, "this manager runs without a job queue: it has no jobs for agents");
  return *queue;
}

void HttpApi::Impl::build_routes() {
  add("GET", "/healthz", Access::Public, [](const net::HttpRequest&, std::int64_t) {
    return json_reply(200, {{"ok", true}});
  });
  add("GET", "/metrics", Access::Public, [this](const net::HttpRequest&, std::int64_t) {
    auto [summary, report] = fleet_with_jobs();
    std::string text = render_prometheus(summary, metrics.requests(), metrics.front_events());
    if (report) text += render_jobs_prometheus(*report, job_counters.snapshot());
    // The market list's age is the leader's: a replica that does not lead reads no list.
    const std::optional<LeaderView> leader =
        options.leader ? std::optional(options.leader()) : std::nullopt;
    std::optional<double> list_age;
    if (const auto at = manager.last_complete_market_list_at(); at && (!leader || leader->leading))
      list_age = std::max(0.0, options.clock() - *at);
    text += render_alerts_prometheus(manager.alerts(), list_age);
    if (leader) text += leader_prometheus(*leader);
    return Reply{200, std::move(text), kPrometheusContentType};
  });

  add("GET", "/healthz/leader", Access::Public, [this](const net::HttpRequest&, std::int64_t) {
    if (!options.leader) return json_reply(200, {{"leading", true}});
    const LeaderView view = options.leader();
    return json_reply(view.leading ? 200 : 503, leader_json(view, true));
  });

  add_agent_routes();
  add_operator_routes();
}

std::string HttpApi::Impl::route_of(const std::string& method, const std::string& path) const {
  for (const auto& route : routes) {
    if (route.method == method && std::regex_match(path, route.regex)) return route.label;
  }
  if (auto label = Dashboard::route_of(method, path)) return *label;
  return "unmatched";
}

// The lane a route's requests are handled on: health checks on the IO thread (no manager
// lock, so they answer while everything else is busy), agents apart from operators, so
// neither can starve the other.
std::string_view HttpApi::Impl::lane_of(const Route& route) {
  if (route.label == "/healthz") return net::kInlineLane;
  if (route.label == "/healthz/leader") return kOperatorLane;  // reads the store
  if (route.label == "/api/v1/agent/jobs/lease") return kLeaseLane;
  if (route.label.rfind("/api/v1/agent/", 0) == 0) return kAgentLane;
  return kOperatorLane;
}

void HttpApi::Impl::mount(net::HttpServer& server) {
  net::ServerOptions front = server.options();
  front.limits = options.http;
  front.limits.max_body_bytes = options.max_body_bytes;
  front.io_threads = options.io_threads;
  front.stream_threads = options.stream_threads;
  server.set_options(front);
  server.add_lane(std::string(kAgentLane), options.agent_lane_threads, options.agent_lane_queue);
  server.add_lane(std::string(kLeaseLane), options.lease_lane_threads, options.lease_lane_queue);
  server.add_lane(std::string(kOperatorLane), options.operator_lane_threads,
                  options.operator_lane_queue);

  for (const auto& route : routes) {
    server.route(route.method, route.regex_text, handler(route), lane_of(route));
  }
  dashboard.mount(
      server,
      [this](const net::HttpRequest& req) -> std::optional<std::string> {
        try {
          authorize(Access::Operator, req);
          return std::nullopt;
        } catch (const RequestError& e) {
          return e.message;
        }
      },
      kOperatorLane);

  // A chunked body, or a POST without a length (read until the peer closes), is refused
  // before any of it is read: only a declared length can be checked against the limit.
  server.set_head_filter([](const net::HttpRequest& req, net::HttpResponse& res) {
    const bool chunked = req.has_header("Transfer-Encoding");
    const bool needs_length =
        (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") &&
        !req.has_header("Content-Length");
    if (!chunked && !needs_length) return false;
    res.status = 411;
    return true;
  });

  // Statuses the server produces itself (no route, body too large, malformed HTTP, deadline
  // missed, lane full) get the same JSON error shape; replies a route already wrote are left
  // alone.
  const std::size_t max_body = options.max_body_bytes;
  const core::HttpLimits limits = front.limits;
  server.set_error_handler([max_body, limits](const net::HttpRequest& req, net::HttpResponse& res) {
    if (!res.body.empty()) return;
    std::string message;
    switch (res.status) {
      case 404:
        message = "no such route: " + req.method + " " + req.path;
        break;
      case 413:
        message = "request body too large (at most " + std::to_string(max_body) + " bytes)";
        break;
      case 411:
        message =
            "send the request body with a Content-Length header (chunked or unsized bodies "
            "are not accepted)";
        break;
      case 431:
        message = "request head too large (at most " + std::to_string(limits.max_head_bytes) +
                  " bytes and " + std::to_string(limits.max_header_count) + " headers)";
        break;
      case 408:
        message = "request not received in time";
        break;
      case 503:
        message = "server busy: retry later";
        break;
      case 400:
        message = "malformed HTTP request";
        break;
      default:
        message = "HTTP " + std::to_string(res.status);
    }
    res.set_content(util::dump_json_lossy(json{{"error", message}}), kJson);
  });
  server.set_exception_handler([](const net::HttpRequest&, net::HttpResponse& res,
                                  std::exception_ptr ep) {
    res.status = 500;
    res.set_content(
        util::dump_json_lossy(json{{"error", "internal error: " + util::exception_message(ep)}}),
        kJson);
  });
  // Counted before the reply is sent, so a client that has its reply already sees its
  // request in /metrics.
  server.set_post_routing_handler([this](const net::HttpRequest& req, net::HttpResponse& res) {
    metrics.count_request(req.method, route_of(req.method, req.path), res.status);
  });
  server.set_logger([this](const net::HttpRequest& req, const net::HttpResponse& res) {
    if (options.log) {
      options.log(req.method + " " + req.path + " -> " + std::to_string(res.status), res.status);
    }
  });
  server.set_event_hook([this](net::FrontEvent event, std::string_view) {
    metrics.count_front_event(net::to_string(event));
  });
}

HttpApi::HttpApi(Manager& manager, ApiOptions options)
    : impl_(std::make_unique<Impl>(manager, std::move(options))) {}

HttpApi::~HttpApi() = default;

void HttpApi::mount(net::HttpServer& server) {
  impl_->mount(server);
}

Metrics& HttpApi::metrics() {
  return impl_->metrics;
}

const ApiOptions& HttpApi::options() const {
  return impl_->options;
}

std::string HttpApi::route_of(const std::string& method, const std::string& path) const {
  return impl_->route_of(method, path);
}

// ---- ApiServer ------------------------------------------------------------------------------

struct ApiServer::Impl {
  std::unique_ptr<net::HttpServer> server;
};

ApiServer::ApiServer() : impl_(std::make_unique<Impl>()) {}

ApiServer::~ApiServer() = default;

tl::expected<std::unique_ptr<ApiServer>, std::string> ApiServer::create(
    const std::optional<TlsFiles>& tls) {
  std::unique_ptr<net::HttpServer> server;
  if (tls) {
    auto tls_server = net::HttpServer::with_tls(*tls);
    if (!tls_server) return tl::unexpected(tls_server.error());
    server = std::move(*tls_server);
  } else {
    server = std::make_unique<net::HttpServer>();
  }
  std::unique_ptr<ApiServer> out(new ApiServer());
  out->impl_->server = std::move(server);
  return out;
}

void ApiServer::mount(HttpApi& api) {
  api.mount(*impl_->server);
}

tl::expected<int, std::string> ApiServer::bind(const std::string& host, int port) {
  return impl_->server->bind(host, port);
}

tl::expected<int, std::string> ApiServer::adopt(int listening_fd) {
  return impl_->server->adopt(listening_fd);
}

bool ApiServer::serve() {
  return impl_->server->serve();
}

void ApiServer::stop() {
  impl_->server->stop();
}

tl::expected<util::UniqueFd, std::string> ApiServer::duplicate_listening_socket() {
  return impl_->server->duplicate_listening_socket();
}

void ApiServer::stop_accepting() {
  impl_->server->stop_accepting();
}

}  // namespace pf::manager
