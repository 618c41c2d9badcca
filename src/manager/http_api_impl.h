// Internal to src/manager: HttpApi's implementation shared by its files (http_api.cpp, the route
// groups http_api_*_routes.cpp) and the request parsing helpers (http_api_parsing.cpp). Every
// input is validated here before the Manager is called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "jobs/job_queue.h"
#include "manager/dashboard.h"
#include "manager/http_api.h"
#include "manager/jobs_report.h"
#include "manager/manager.h"
#include "manager/metrics.h"
#include "net/http_server.h"

namespace pf::manager::api_detail {

using json = nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

// Thrown inside a route handler: becomes {"error": message} with `status`. Handlers validate
// everything before they call the Manager, so a throw never leaves a change half-made.
struct RequestError {
  int status = 400;
  std::string message;
};

[[noreturn]] void fail(int status, std::string message);

struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = kJson;
  std::vector<std::pair<std::string, std::string>> headers = {};
  // The writes the reply reports: it is sent once they are applied (else it is a 500 saying
  // why), without holding the lane's thread meanwhile (net::HttpResponse::defer).
  store::Confirm committed = {};
};

Reply json_reply(int status, const json& body);

Reply error_reply(int status, const std::string& message);

// Fills `res` from `reply` (all but its `committed`).
void set_reply(net::HttpResponse& res, Reply reply);

constexpr std::string_view kAgentLane = "agent";
constexpr std::string_view kLeaseLane = "agent-lease";
constexpr std::string_view kOperatorLane = "operator";

double system_clock_now();

std::string in_quotes(const std::string& text, std::size_t max_chars = 64);

std::string describe(const json& value);

// ---- body parsing ---------------------------------------------------------------------------

json parse_object_body(const net::HttpRequest& req);

// Typed access to one JSON object's fields; errors name the field with its path
// ("params.done").
class Fields {
 public:
  Fields(const json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {}

  std::string name(const std::string& key) const { return prefix_ + key; }

  const json* find(const std::string& key) const {
    auto it = object_.find(key);
    if (it == object_.end()) return nullptr;
    return &*it;
  }

  const json& required(const std::string& key) const {
    const json* value = find(key);
    if (!value) fail(400, "missing field '" + name(key) + "'");
    return *value;
  }

  std::string string(const std::string& key, std::size_t max_chars, bool allow_empty) const {
    return as_string(key, required(key), max_chars, allow_empty);
  }
  std::optional<std::string> optional_string(const std::string& key, std::size_t max_chars) const {
    const json* value = find(key);
    if (!value || value->is_null()) return std::nullopt;
    return as_string(key, *value, max_chars, true);
  }

  std::int64_t integer(const std::string& key, std::int64_t min, std::int64_t max) const {
    return as_integer(key, required(key), min, max);
  }
  std::optional<std::int64_t> optional_integer(const std::string& key, std::int64_t min,
                                               std::int64_t max) const {
    const json* value = find(key);
    if (!value || value->is_null()) return std::nullopt;
    return as_integer(key, *value, min, max);
  }

  std::optional<double> optional_number(const std::string& key, double min, double max) const {
    const json* value = find(key);
    if (!value || value->is_null()) return std::nullopt;
    return as_number(key, *value, min, max);
  }

  // The named member, which must be an object when present.
  std::optional<Fields> optional_object(const std::string& key) const {
    const json* value = find(key);
    if (!value || value->is_null()) return std::nullopt;
    if (!value->is_object()) {
      fail(400, "field '" + name(key) + "' must be an object, got " + describe(*value));
    }
    return Fields(*value, name(key) + ".");
  }

  // Operator bodies are small and hand-written: a misspelt key must not be silently ignored.
  void reject_unknown(std::initializer_list<const char*> known) const {
    for (const auto& [key, value] : object_.items()) {
      bool found = false;
      for (const char* k : known) found = found || key == k;
      if (!found) {
        std::string list;
        for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        fail(400, "unknown field '" + name(key) + "' (expected: " + list + ")");
      }
    }
  }

  std::string as_string(const std::string& key, const json& value, std::size_t max_chars,
                        bool allow_empty) const {
    if (!value.is_string()) {
      fail(400, "field '" + name(key) + "' must be a string, got " + describe(value));
    }
    const auto& text = value.get_ref<const std::string&>();
    if (!allow_empty && text.empty()) fail(400, "field '" + name(key) + "' must not be empty");
    if (text.size() > max_chars) {
      fail(400, "field '" + name(key) + "' is too long (" + std::to_string(text.size()) +
                    " bytes, at most " + std::to_string(max_chars) + ")");
    }
    return text;
  }

  std::int64_t as_integer(const std::string& key, const json& value, std::int64_t min,
                          std::int64_t max) const {
    const std::string range = " in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    if (!value.is_number_integer()) {
      fail(400,
           "field '" + name(key) + "' must be an integer" + range + ", got " + describe(value));
    }
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
      fail(400, "field '" + name(key) + "' must be an integer" + range + ", got " + value.dump());
    }
    const auto n = value.get<std::int64_t>();
    if (n < min || n > max) {
      fail(400, "field '" + name(key) + "' must be an integer" + range + ", got " + value.dump());
    }
    return n;
  }

  double as_number(const std::string& key, const json& value, double min, double max) const {
    if (!value.is_number()) {
      fail(400, "field '" + name(key) + "' must be a number, got " + describe(value));
    }
    const double x = value.get<double>();
    if (!std::isfinite(x) || x < min || x > max) {
      fail(400, "field '" + name(key) + "' must be a number in [" + json(min).dump() + ", " +
                    json(max).dump() + "], got " + value.dump());
    }
    return x;
  }

 private:
  const json& object_;
  std::string prefix_;
};

constexpr double kHuge = 1e18;  // bounds "any non-negative quantity" without admitting inf

// ---- query strings and paths ----------------------------------------------------------------

void reject_unknown_params(const net::HttpRequest& req, std::initializer_list<const char*> known);

std::optional<std::string> param(const net::HttpRequest& req, const char* key);

bool bool_param(const net::HttpRequest& req, const char* key);

std::optional<std::int64_t> parse_positive_id(const std::string& text);

std::int64_t path_id(const net::HttpRequest& req, const char* what);

// ---- auth -----------------------------------------------------------------------------------

std::optional<std::string> bearer_token(const net::HttpRequest& req);

// ---- agent bodies ---------------------------------------------------------------------------

Heartbeat parse_heartbeat(const json& body, std::size_t max_gpus);

std::vector<AgentEvent> parse_events(const json& body, std::size_t max_events);

// ---- job queries --------------------------------------------------------------------------

constexpr std::size_t kMaxRequestIdBytes = 256;  // as the gateway accepts them

// ?state=queued,proving: known state names, comma-separated; absent or empty = every state.
std::vector<core::JobState> job_states_param(const net::HttpRequest& req);
// ?kind=porep-c2,snap-update: known kind names, the same way.
std::vector<core::JobKind> job_kinds_param(const net::HttpRequest& req);
// ?since=EPOCH_S: a finite time in seconds since 1970 (from 0 to year 5138); nullopt if absent.
std::optional<double> epoch_param(const net::HttpRequest& req, const char* key);

// ?limit=N within [1, max]; `fallback` when absent.
int limit_param(const net::HttpRequest& req, int fallback, int max);

// A job's path key: a job id or a request_id, printable ASCII, bounded.
bool is_job_key(const std::string& key);

// ---- jobs (issue 12) ------------------------------------------------------------------------

// The heartbeat's "jobs": the (job, attempt) pairs the agent holds.
std::vector<std::pair<std::int64_t, int>> parse_held_jobs(const json& body, std::size_t max_jobs);

int status_of(const jobs::JobError& e);

template <typename T>
T unwrap_job(jobs::JobResult<T> result) {
  if (!result) fail(status_of(result.error()), result.error().message);
  return std::move(*result);
}

json to_json(const jobs::Lease& lease);

json to_json(const jobs::ReportAck& ack);

// "bytes=O-" or "bytes=O-E" (one range; what the agent sends). nullopt: no Range header.
struct ByteRange {
  std::int64_t first = 0;
  std::optional<std::int64_t> last;
};
std::optional<ByteRange> parse_range(const net::HttpRequest& req);

// The value of a Manager call, or its ApiError as the reply.
template <typename T>
T unwrap(ApiResult<T> result) {
  if (!result) fail(result.error().status, result.error().message);
  return std::move(*result);
}

}  // namespace pf::manager::api_detail

namespace pf::manager {

struct HttpApi::Impl {
  enum class Access { Public, Operator, Agent };
  using RouteFn =
      std::function<api_detail::Reply(const net::HttpRequest&, std::int64_t agent_instance)>;
  struct Route {
    std::string method;
    std::string label;  // "/api/v1/instances/{id}"
    std::string regex_text;
    std::regex regex;
    Access access = Access::Public;
    RouteFn fn;
  };

  Impl(Manager& m, ApiOptions o);

  Manager& manager;
  ApiOptions options;
  Metrics metrics;
  std::vector<Route> routes;
  // Built before the constructor's body defaults the clock: counts only what happens from now.
  JobCounters job_counters{options.clock ? options.clock() : api_detail::system_clock_now()};
  Dashboard dashboard{
      manager, DashboardOptions{.clock = [this] { return options.clock(); },
                                .autopilot = [this] { return autopilot_json(); },
                                .summary = [this](const auto& live) { return fleet_json(live); }}};

  api_detail::json autopilot_json() const;

  // The jobs figures (null without a gateway); every build also feeds /metrics' counters.
  std::optional<JobsReport> jobs_report(const std::vector<core::InstanceRecord>& live);

  // The fleet summary with its profit on the right basis, and the report it was based on.
  // `live`: the live rows (store().instances(false)) when the caller has read them.
  std::pair<FleetSummary, std::optional<JobsReport>> fleet_with_jobs();
  std::pair<FleetSummary, std::optional<JobsReport>> fleet_with_jobs(
      const std::vector<core::InstanceRecord>& live);

  // GET /api/v1/fleet without "autopilot": the summary and its "jobs" section.
  api_detail::json fleet_json();
  api_detail::json fleet_json(const std::vector<core::InstanceRecord>& live);

  void add(const char* method, std::string label, Access access, RouteFn fn);

  // The agent instance for Agent routes; throws 401 otherwise.
  std::int64_t authorize(Access access, const net::HttpRequest& req);

  net::Handler handler(const Route& route);

  // The queue agents lease from: the one given in the options, else the Manager's own.
  jobs::JobQueue* job_queue_or_null() const;
  store::JobFilter job_filter_params(const net::HttpRequest& req);
  jobs::JobQueue& job_queue() const;

  // The routes, by group: each group's file adds its own.
  void build_routes();
  // Agents (design §7): http_api_agent_routes.cpp, with the agent's side of the job protocol
  // (issue 12 contract).
  void add_agent_routes();
  void add_job_routes();
  // Operators (design §8): http_api_operator_routes.cpp; the gateway's jobs, listed and looked
  // up: http_api_job_routes.cpp.
  void add_operator_routes();
  void add_operator_job_routes();
  void add_operator_money_routes();
  // The operator's hands-on routes (http_api_ops_routes.cpp): alerts, remote tuning.
  void add_ops_routes();
  jobs::JobQueue& operator_job_queue() const;

  std::string route_of(const std::string& method, const std::string& path) const;

  // The lane a route's requests are handled on: health checks on the IO thread (no manager
  // lock, so they answer while everything else is busy), agents apart from operators, so
  // neither can starve the other.
  static std::string_view lane_of(const Route& route);

  void mount(net::HttpServer& server);
};

}  // namespace pf::manager
