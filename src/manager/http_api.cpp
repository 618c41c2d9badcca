#include "manager/http_api.h"

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
#include "manager/views.h"
#include "market/query.h"
#include "util/base64.h"
#include "util/bounded_json.h"
#include "util/exception_message.h"

namespace pf::manager {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";
constexpr std::int64_t kMaxInt64 = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();

// Thrown inside a route handler: becomes {"error": message} with `status`. Handlers validate
// everything before they call the Manager, so a throw never leaves a change half-made.
struct RequestError {
  int status = 400;
  std::string message;
};

[[noreturn]] void fail(int status, std::string message) {
  throw RequestError{status, std::move(message)};
}

struct Reply {
  int status = 200;
  std::string body;
  std::string content_type = kJson;
  std::vector<std::pair<std::string, std::string>> headers = {};
};

// Agent log text and market strings may hold invalid UTF-8; replacing it beats failing a reply.
std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

Reply json_reply(int status, const json& body) {
  return Reply{status, dump(body), kJson};
}

Reply error_reply(int status, const std::string& message) {
  return json_reply(status, json{{"error", message}});
}

constexpr std::string_view kAgentLane = "agent";
constexpr std::string_view kLeaseLane = "agent-lease";
constexpr std::string_view kOperatorLane = "operator";

double system_clock_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string in_quotes(const std::string& text, std::size_t max_chars = 64) {
  if (text.size() <= max_chars) return "'" + text + "'";
  return "'" + text.substr(0, max_chars) + "...'";
}

std::string describe(const json& value) {
  if (value.is_number_integer()) return "integer " + value.dump();
  if (value.is_number()) return "number " + value.dump();
  if (value.is_string()) return "string " + in_quotes(value.get_ref<const std::string&>());
  return value.type_name();
}

// ---- body parsing ---------------------------------------------------------------------------

json parse_object_body(const net::HttpRequest& req) {
  // Checked first: httplib decodes a form-encoded body into the query parameters, which would
  // otherwise surface as a baffling "unknown query parameter".
  const std::string type = req.get_header_value("Content-Type");
  if (!type.empty() && type.rfind(kJson, 0) != 0) {
    fail(415, "request body must be JSON: send 'Content-Type: application/json' (got " +
                  in_quotes(type) + ")");
  }
  if (req.body.empty()) fail(400, "request body is empty: expected a JSON object");
  // Bounded: a deeply nested body must fail here, not crash the copies and dumps that follow;
  // a number that overflows a double is a client error, not a 500.
  auto body = util::parse_json(req.body);
  if (!body) fail(400, "malformed JSON body: " + body.error());
  if (!body->is_object()) fail(400, "request body must be a JSON object, got " + describe(*body));
  return std::move(*body);
}

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

void reject_unknown_params(const net::HttpRequest& req, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : req.params) {
    bool found = false;
    for (const char* k : known) found = found || key == k;
    if (!found) {
      std::string list;
      for (const char* k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      fail(400, "unknown query parameter " + in_quotes(key) +
                    (list.empty() ? " (this route takes none)" : " (expected: " + list + ")"));
    }
  }
}

std::optional<std::string> param(const net::HttpRequest& req, const char* key) {
  if (!req.has_param(key)) return std::nullopt;
  return req.get_param_value(key);
}

bool bool_param(const net::HttpRequest& req, const char* key) {
  auto value = param(req, key);
  if (!value) return false;
  if (*value == "1" || *value == "true" || value->empty()) return true;
  if (*value == "0" || *value == "false") return false;
  fail(400, std::string("query parameter '") + key + "' must be 1, true, 0 or false, got " +
                in_quotes(*value));
}

std::optional<std::int64_t> parse_positive_id(const std::string& text) {
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id <= 0) return std::nullopt;
  return id;
}

std::int64_t path_id(const net::HttpRequest& req, const char* what) {
  const std::string text = req.matches.size() >= 2 ? req.matches[1].str() : "";
  auto id = parse_positive_id(text);
  if (!id) fail(400, std::string(what) + " must be a positive integer, got " + in_quotes(text));
  return *id;
}

// ---- auth -----------------------------------------------------------------------------------

std::optional<std::string> bearer_token(const net::HttpRequest& req) {
  const std::string header = req.get_header_value("Authorization");
  constexpr std::string_view kScheme = "bearer ";
  if (header.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != kScheme[i]) return std::nullopt;
  }
  std::string token = header.substr(kScheme.size());
  const auto first = token.find_first_not_of(" \t");
  if (first == std::string::npos) return std::nullopt;
  const auto last = token.find_last_not_of(" \t");
  return token.substr(first, last - first + 1);
}

// ---- agent bodies ---------------------------------------------------------------------------

Heartbeat parse_heartbeat(const json& body, std::size_t max_gpus) {
  Fields f(body, "");
  Heartbeat hb;
  hb.phase = f.string("phase", 64, false);
  if (auto params = f.optional_object("params")) {
    hb.params_done = params->optional_number("done", 0, kHuge).value_or(0);
    hb.params_total = params->optional_number("total", 0, kHuge).value_or(0);
    hb.params_rate_bps = params->optional_number("bytes_per_s", 0, kHuge).value_or(0);
  }
  if (auto prover = f.optional_object("prover")) {
    hb.prover_in_flight =
        static_cast<int>(prover->optional_integer("in_flight", 0, kMaxInt).value_or(0));
    hb.prover_completed =
        static_cast<int>(prover->optional_integer("completed", 0, kMaxInt).value_or(0));
    hb.prover_failed = static_cast<int>(prover->optional_integer("failed", 0, kMaxInt).value_or(0));
    hb.peak_memory_gib = prover->optional_number("peak_memory_gib", 0, kHuge).value_or(0);
  }
  if (const json* gpus = f.find("gpus"); gpus && !gpus->is_null()) {
    if (!gpus->is_array()) fail(400, "field 'gpus' must be an array, got " + describe(*gpus));
    if (gpus->size() > max_gpus) {
      fail(400, "field 'gpus' has " + std::to_string(gpus->size()) + " entries (at most " +
                    std::to_string(max_gpus) + ")");
    }
    double util_sum = 0;
    int util_count = 0;
    for (std::size_t i = 0; i < gpus->size(); ++i) {
      const json& gpu = (*gpus)[i];
      const std::string prefix = "gpus[" + std::to_string(i) + "]";
      if (!gpu.is_object()) {
        fail(400, "field '" + prefix + "' must be an object, got " + describe(gpu));
      }
      Fields g(gpu, prefix + ".");
      if (auto util = g.optional_number("util", 0, 100)) {
        util_sum += *util;
        ++util_count;
      }
      g.optional_number("memory_used_mib", 0, kHuge);
      g.optional_number("temp_c", -100, 200);
      g.optional_number("sm_clock_mhz", 0, 1e6);
      if (const json* throttle = g.find("throttle"); throttle && !throttle->is_null()) {
        if (throttle->is_boolean()) {
          hb.gpu_throttled = hb.gpu_throttled || throttle->get<bool>();
        } else if (throttle->is_array()) {
          for (std::size_t k = 0; k < throttle->size(); ++k) {
            if (!(*throttle)[k].is_string()) {
              fail(400, "field '" + prefix + ".throttle[" + std::to_string(k) +
                            "]' must be a string, got " + describe((*throttle)[k]));
            }
          }
          hb.gpu_throttled = hb.gpu_throttled || !throttle->empty();
        } else {
          fail(400, "field '" + prefix +
                        ".throttle' must be a boolean or an array of reason strings, got " +
                        describe(*throttle));
        }
      }
    }
    if (util_count > 0) hb.gpu_util = util_sum / util_count;
  }
  hb.raw = body;
  return hb;
}

std::vector<AgentEvent> parse_events(const json& body, std::size_t max_events) {
  Fields f(body, "");
  const json& events = f.required("events");
  if (!events.is_array()) fail(400, "field 'events' must be an array, got " + describe(events));
  if (events.size() > max_events) {
    fail(413, "too many events in one batch: " + std::to_string(events.size()) + " (at most " +
                  std::to_string(max_events) + ")");
  }
  static const std::set<std::string> kKnown = {"seq",      "type",  "at",      "seconds", "gpu_ms",
                                               "queue_ms", "phase", "message", "data"};
  std::vector<AgentEvent> out;
  out.reserve(events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    const std::string prefix = "events[" + std::to_string(i) + "]";
    if (!e.is_object()) fail(400, "field '" + prefix + "' must be an object, got " + describe(e));
    Fields ef(e, prefix + ".");
    AgentEvent ev;
    ev.seq = ef.integer("seq", 0, kMaxInt64);
    ev.type = ef.string("type", 64, false);
    ev.at = ef.optional_number("at", 0, kHuge).value_or(0);
    ev.seconds = ef.optional_number("seconds", 0, kHuge).value_or(0);
    ev.gpu_ms = ef.optional_number("gpu_ms", 0, kHuge).value_or(0);
    ev.queue_ms = ef.optional_number("queue_ms", 0, kHuge).value_or(0);
    ev.phase = ef.optional_string("phase", 32).value_or("");
    ev.message = ef.optional_string("message", 4096).value_or("");
    if (ev.type == "proof_done") {
      if (!ef.find("seconds")) fail(400, "missing field '" + prefix + ".seconds' (proof_done)");
      // The manager counts anything but "warmup" as measured: a misspelt phase would put a
      // warm-up proof into the benchmark.
      if (!ef.find("phase")) fail(400, "missing field '" + prefix + ".phase' (proof_done)");
      if (ev.phase != "warmup" && ev.phase != "measured") {
        fail(400,
             "field '" + prefix + ".phase' must be warmup or measured, got " + in_quotes(ev.phase));
      }
      if (ev.seconds <= 0) {
        fail(400, "field '" + prefix + ".seconds' must be > 0 for proof_done, got " +
                      json(ev.seconds).dump());
      }
    }
    // Anything else the agent sent stays with the event, for the audit trail.
    json data = json::object();
    if (auto extra = ef.optional_object("data")) data = e.at("data");
    for (const auto& [key, value] : e.items()) {
      if (!kKnown.count(key)) data[key] = value;
    }
    ev.data = std::move(data);
    out.push_back(std::move(ev));
  }
  return out;
}

// ---- job queries --------------------------------------------------------------------------

constexpr std::size_t kMaxRequestIdBytes = 256;  // as the gateway accepts them

// ?state=queued,proving: known state names, comma-separated; absent or empty = every state.
std::vector<core::JobState> job_states_param(const net::HttpRequest& req) {
  std::vector<core::JobState> states;
  const auto text = param(req, "state");
  if (!text || text->empty()) return states;
  if (text->size() > 128) fail(400, "query parameter 'state' is too long (at most 128 bytes)");
  std::size_t from = 0;
  while (from <= text->size()) {
    const auto comma = text->find(',', from);
    const std::string name =
        text->substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    auto state = core::parse_job_state(name);
    if (!state) {
      fail(400,
           "query parameter 'state' must be a comma-separated list of queued, assigned, "
           "proving, done, failed, cancelled; got " +
               in_quotes(name));
    }
    if (std::find(states.begin(), states.end(), *state) == states.end()) states.push_back(*state);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return states;
}

// ?limit=N within [1, max]; `fallback` when absent.
int limit_param(const net::HttpRequest& req, int fallback, int max) {
  const auto text = param(req, "limit");
  if (!text) return fallback;
  auto n = parse_positive_id(*text);
  if (!n || *n > max) {
    fail(400, "query parameter 'limit' must be an integer in [1, " + std::to_string(max) +
                  "], got " + in_quotes(*text));
  }
  return static_cast<int>(*n);
}

// A job's path key: a job id or a request_id, printable ASCII, bounded.
bool is_job_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxRequestIdBytes) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

// ---- jobs (issue 12) ------------------------------------------------------------------------

// The heartbeat's "jobs": the (job, attempt) pairs the agent holds.
std::vector<std::pair<std::int64_t, int>> parse_held_jobs(const json& body, std::size_t max_jobs) {
  std::vector<std::pair<std::int64_t, int>> held;
  const json* jobs = Fields(body, "").find("jobs");
  if (!jobs || jobs->is_null()) return held;
  if (!jobs->is_array()) fail(400, "field 'jobs' must be an array, got " + describe(*jobs));
  if (jobs->size() > max_jobs) {
    fail(400, "field 'jobs' has " + std::to_string(jobs->size()) + " entries (at most " +
                  std::to_string(max_jobs) + ")");
  }
  for (std::size_t i = 0; i < jobs->size(); ++i) {
    const json& job = (*jobs)[i];
    const std::string prefix = "jobs[" + std::to_string(i) + "]";
    if (!job.is_object())
      fail(400, "field '" + prefix + "' must be an object, got " + describe(job));
    Fields f(job, prefix + ".");
    held.emplace_back(f.integer("id", 1, kMaxInt64),
                      static_cast<int>(f.integer("attempt", 1, kMaxInt)));
  }
  return held;
}

int status_of(const jobs::JobError& e) {
  switch (e.code) {
    case jobs::JobError::Code::InvalidArgument:
      return 400;
    case jobs::JobError::Code::ResourceExhausted:
      return 429;
    case jobs::JobError::Code::NotFound:
      return 404;
    case jobs::JobError::Code::FailedPrecondition:
      return 409;
    case jobs::JobError::Code::Unavailable:
      return 503;
  }
  return 500;
}

template <typename T>
T unwrap_job(jobs::JobResult<T> result) {
  if (!result) fail(status_of(result.error()), result.error().message);
  return std::move(*result);
}

json to_json(const jobs::Lease& lease) {
  return {{"id", lease.job.id},
          {"attempt", lease.job.attempts},
          {"kind", core::to_string(lease.job.kind)},
          {"input_digest", lease.job.input_digest},
          {"input_bytes", lease.job.input_bytes},
          {"deadline_at", lease.job.deadline_at},
          {"lease_s", lease.lease_s}};
}

json to_json(const jobs::ReportAck& ack) {
  return {{"applied", ack.applied}, {"reason", ack.reason}};
}

// "bytes=O-" or "bytes=O-E" (one range; what the agent sends). nullopt: no Range header.
struct ByteRange {
  std::int64_t first = 0;
  std::optional<std::int64_t> last;
};
std::optional<ByteRange> parse_range(const net::HttpRequest& req) {
  if (!req.has_header("Range")) return std::nullopt;
  const std::string text = req.get_header_value("Range");
  auto bad = [&]() -> ByteRange {
    fail(400,
         "header 'Range' must be 'bytes=FIRST-' or 'bytes=FIRST-LAST', got " + in_quotes(text));
  };
  constexpr std::string_view kUnit = "bytes=";
  if (text.rfind(kUnit, 0) != 0) bad();
  const std::string spec = text.substr(kUnit.size());
  const auto dash = spec.find('-');
  if (dash == std::string::npos || dash == 0) bad();
  auto number = [&](const std::string& digits) -> std::int64_t {
    std::int64_t n = -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
    if (ec != std::errc() || end != digits.data() + digits.size() || n < 0) bad();
    return n;
  };
  ByteRange range;
  range.first = number(spec.substr(0, dash));
  if (dash + 1 < spec.size()) {
    range.last = number(spec.substr(dash + 1));
    if (*range.last < range.first) bad();
  }
  return range;
}

// The value of a Manager call, or its ApiError as the reply.
template <typename T>
T unwrap(ApiResult<T> result) {
  if (!result) fail(result.error().status, result.error().message);
  return std::move(*result);
}

}  // namespace

// ---- HttpApi --------------------------------------------------------------------------------

struct HttpApi::Impl {
  enum class Access { Public, Operator, Agent };
  using RouteFn = std::function<Reply(const net::HttpRequest&, std::int64_t agent_instance)>;
  struct Route {
    std::string method;
    std::string label;  // "/api/v1/instances/{id}"
    std::string regex_text;
    std::regex regex;
    Access access = Access::Public;
    RouteFn fn;
  };

  Impl(Manager& m, ApiOptions o) : manager(m), options(std::move(o)) {
    if (!options.clock) options.clock = system_clock_now;
    build_routes();
  }

  Manager& manager;
  ApiOptions options;
  Metrics metrics;
  std::vector<Route> routes;
  // Built before the constructor's body defaults the clock: counts only what happens from now.
  JobCounters job_counters{options.clock ? options.clock() : system_clock_now()};
  Dashboard dashboard{manager, DashboardOptions{.clock = [this] { return options.clock(); },
                                                .autopilot = [this] { return autopilot_json(); },
                                                .summary = [this] { return fleet_json(); }}};

  json autopilot_json() const {
    if (!options.autopilot) return {{"enabled", false}, {"paused", false}, {"active", false}};
    return to_json(options.autopilot->status());
  }

  // The jobs figures (null without a gateway); every build also feeds /metrics' counters.
  std::optional<JobsReport> jobs_report() {
    jobs::JobQueue* queue = job_queue_or_null();
    if (!queue) return std::nullopt;
    const double now = options.clock();
    JobsReport report = build_jobs_report(manager, *queue, options.jobs_report, now);
    job_counters.observe(report.scanned, options.jobs_report.prices, now);
    return report;
  }

  // The fleet summary with its profit on the right basis, and the report it was based on.
  std::pair<FleetSummary, std::optional<JobsReport>> fleet_with_jobs() {
    FleetSummary summary = manager.summary();
    auto report = jobs_report();
    apply_profit_basis(summary, report ? &*report : nullptr,
                       manager.config().rank.economics.revenue_per_proof_usd);
    return {std::move(summary), std::move(report)};
  }

  // GET /api/v1/fleet without "autopilot": the summary and its "jobs" section.
  json fleet_json() {
    auto [summary, report] = fleet_with_jobs();
    json out = to_json(summary);
    out["jobs"] = report ? to_json(*report) : json(nullptr);
    return out;
  }

  void add(const char* method, std::string label, Access access, RouteFn fn) {
    // "{name}" segments match one path segment; the handler validates it.
    std::string regex_text = std::regex_replace(label, std::regex(R"(\{[a-z_]+\})"), "([^/]+)");
    std::regex regex(regex_text);
    routes.push_back(Route{method, std::move(label), std::move(regex_text), std::move(regex),
                           access, std::move(fn)});
  }

  // The agent instance for Agent routes; throws 401 otherwise.
  std::int64_t authorize(Access access, const net::HttpRequest& req) {
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

  net::Handler handler(const Route& route) {
    return [this, &route](const net::HttpRequest& req, net::HttpResponse& res) {
      Reply reply;
      try {
        const std::int64_t agent = authorize(route.access, req);
        reply = route.fn(req, agent);
      } catch (const RequestError& e) {
        reply = error_reply(e.status, e.message);
      } catch (const std::exception& e) {
        reply = error_reply(500, std::string("internal error: ") + e.what());
      }
      res.status = reply.status;
      if (reply.status == 401) res.set_header("WWW-Authenticate", "Bearer");
      for (const auto& [name, value] : reply.headers) res.set_header(name, value);
      res.set_content(std::move(reply.body), reply.content_type);
    };
  }

  // The queue agents lease from: the one given in the options, else the Manager's own.
  jobs::JobQueue* job_queue_or_null() const { return options.jobs ? options.jobs : manager.jobs(); }
  jobs::JobQueue& job_queue() const {
    jobs::JobQueue* queue = job_queue_or_null();
    if (!queue) fail(503, "this manager runs without a job queue: it has no jobs for agents");
    return *queue;
  }

  // The agent's side of the job protocol (issue 12 contract).
  void add_job_routes() {
    add("POST", "/api/v1/agent/jobs/lease", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          const json body = parse_object_body(req);
          Fields f(body, "");
          const int max_jobs =
              static_cast<int>(f.integer("max_jobs", 1, options.max_jobs_per_lease));
          const std::int64_t wait_ms =
              f.optional_integer("wait_ms", 0, options.max_lease_wait_ms).value_or(0);
          auto& queue = job_queue();
          const auto leases =
              unwrap_job(queue.lease(instance, max_jobs, std::chrono::milliseconds(wait_ms)));
          json out = json::array();
          for (const auto& lease : leases) out.push_back(to_json(lease));
          return json_reply(200, {{"jobs", std::move(out)}});
        });
    add("GET", "/api/v1/agent/jobs/{id}/input", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          reject_unknown_params(req, {"attempt"});
          const std::int64_t id = path_id(req, "job id");
          const auto attempt_text = param(req, "attempt");
          if (!attempt_text) fail(400, "missing query parameter 'attempt'");
          const auto attempt = parse_positive_id(*attempt_text);
          if (!attempt || *attempt > kMaxInt) {
            fail(400, "query parameter 'attempt' must be a positive integer, got " +
                          in_quotes(*attempt_text));
          }
          const auto range = parse_range(req);
          const std::int64_t offset = range ? range->first : 0;
          auto max_bytes = static_cast<std::int64_t>(options.max_input_chunk_bytes);
          if (range && range->last) max_bytes = std::min(max_bytes, *range->last - offset + 1);
          auto& queue = job_queue();
          const jobs::InputChunk chunk = unwrap_job(
              queue.read_input(instance, id, static_cast<int>(*attempt), offset, max_bytes));
          Reply reply;
          reply.content_type = "application/octet-stream";
          reply.headers.emplace_back("ETag", "\"" + chunk.digest + "\"");
          reply.headers.emplace_back("Accept-Ranges", "bytes");
          if (chunk.total > 0 && offset >= chunk.total) {
            reply.status = 416;
            reply.headers.emplace_back("Content-Range", "bytes */" + std::to_string(chunk.total));
            reply.content_type = kJson;
            reply.body =
                dump(json{{"error", "range starts at byte " + std::to_string(offset) + " of a " +
                                        std::to_string(chunk.total) + "-byte input"}});
            return reply;
          }
          const auto size = static_cast<std::int64_t>(chunk.bytes.size());
          // Without a Range the whole input comes back when it fits one reply (200); a longer
          // one comes a bounded chunk at a time (206), as do ranges.
          if (range || size < chunk.total) {
            reply.status = 206;
            const std::int64_t last = size > 0 ? chunk.offset + size - 1 : chunk.offset;
            reply.headers.emplace_back("Content-Range", "bytes " + std::to_string(chunk.offset) +
                                                            "-" + std::to_string(last) + "/" +
                                                            std::to_string(chunk.total));
          }
          reply.body = chunk.bytes;
          return reply;
        });
    add("POST", "/api/v1/agent/jobs/{id}/started", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          const std::int64_t id = path_id(req, "job id");
          const json body = parse_object_body(req);
          const int attempt = static_cast<int>(Fields(body, "").integer("attempt", 1, kMaxInt));
          auto& queue = job_queue();
          return json_reply(200, to_json(unwrap_job(queue.started(instance, id, attempt))));
        });
    add("POST", "/api/v1/agent/jobs/{id}/result", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          const std::int64_t id = path_id(req, "job id");
          const json body = parse_object_body(req);
          Fields f(body, "");
          jobs::ProofReport report;
          report.job_id = id;
          report.attempt = static_cast<int>(f.integer("attempt", 1, kMaxInt));
          const json& ok = f.required("ok");
          if (!ok.is_boolean()) fail(400, "field 'ok' must be true or false, got " + describe(ok));
          report.ok = ok.get<bool>();
          if (report.ok) {
            const std::string encoded =
                f.string("proof_b64", util::base64_encoded_size(options.max_proof_bytes), false);
            auto proof = util::base64_decode(encoded);
            if (!proof) fail(400, "field 'proof_b64' is not base64: " + proof.error());
            if (proof->size() > options.max_proof_bytes) {
              fail(400, "field 'proof_b64' holds " + std::to_string(proof->size()) +
                            " bytes (at most " + std::to_string(options.max_proof_bytes) + ")");
            }
            report.proof = std::move(*proof);
            report.prove_ms = f.optional_number("prove_ms", 0, kHuge).value_or(0);
            report.gpu_ms = f.optional_number("gpu_ms", 0, kHuge).value_or(0);
            report.queue_ms = f.optional_number("queue_ms", 0, kHuge).value_or(0);
          } else {
            report.message = f.string("message", 4096, true);
            if (const json* oom = f.find("oom"); oom && !oom->is_null()) {
              if (!oom->is_boolean()) {
                fail(400, "field 'oom' must be true or false, got " + describe(*oom));
              }
              report.oom = oom->get<bool>();
            }
          }
          auto& queue = job_queue();
          return json_reply(200, to_json(unwrap_job(queue.report(instance, report))));
        });
  }

  // The benchmark C1 file (manager/benchmark_input.h), by ranges, to agents only.
  void add_benchmark_input_route() {
    add("GET", kBenchmarkInputRoute, Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t) {
          reject_unknown_params(req, {});
          const auto& input = manager.config().benchmark_input;
          if (!input) fail(404, "this manager serves no benchmark input (deploy.benchmark_input)");
          std::optional<std::pair<std::int64_t, std::optional<std::int64_t>>> range;
          if (const auto r = parse_range(req)) range = std::pair{r->first, r->last};
          BenchmarkInputReply out = benchmark_input_reply(*input, range);
          Reply reply{out.status, std::move(out.body), "application/octet-stream",
                      std::move(out.headers)};
          if (out.status == 416) {
            reply.content_type = kJson;
            reply.body = dump(json{{"error", "range starts past the end of the " +
                                                 std::to_string(input->bytes->size()) +
                                                 "-byte benchmark input"}});
          }
          return reply;
        });
  }

  void build_routes() {
    add("GET", "/healthz", Access::Public, [](const net::HttpRequest&, std::int64_t) {
      return json_reply(200, {{"ok", true}});
    });
    add("GET", "/metrics", Access::Public, [this](const net::HttpRequest&, std::int64_t) {
      auto [summary, report] = fleet_with_jobs();
      std::string text = render_prometheus(summary, metrics.requests(), metrics.front_events());
      if (report) text += render_jobs_prometheus(*report, job_counters.snapshot());
      return Reply{200, std::move(text), kPrometheusContentType};
    });

    // --- agents (design §7) --------------------------------------------------------------
    add("POST", "/api/v1/agent/register", Access::Public,
        [this](const net::HttpRequest& req, std::int64_t) {
          const json body = parse_object_body(req);
          Fields f(body, "");
          RegisterRequest r;
          r.deployment = f.string("deployment", 128, false);
          r.secret = f.string("secret", 512, false);
          if (auto hw = f.optional_object("hardware")) r.hardware = body.at("hardware");
          r.agent_version = f.optional_string("agent_version", 64).value_or("");
          r.token = f.optional_string("token", 128).value_or("");
          return json_reply(200, unwrap(manager.agent_register(r)).body);
        });
    add("POST", "/api/v1/agent/heartbeat", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          const json body = parse_object_body(req);
          const Heartbeat hb = parse_heartbeat(body, options.max_gpus_per_heartbeat);
          const auto held = parse_held_jobs(body, options.max_jobs_per_heartbeat);
          const HeartbeatReply reply = unwrap(manager.agent_heartbeat(instance, hb));
          // Leases ride on heartbeats: naming a job renews it; the queue says what to drop.
          json drop = json::array();
          jobs::JobQueue* queue = job_queue_or_null();
          if (queue) {
            for (const std::int64_t id : queue->renew(instance, held)) drop.push_back(id);
          }
          return json_reply(200, {{"commands", reply.commands},
                                  {"work", reply.work && queue != nullptr},
                                  {"drop_jobs", std::move(drop)}});
        });
    add_job_routes();
    add("POST", "/api/v1/agent/events", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          const auto events = parse_events(parse_object_body(req), options.max_events_per_batch);
          const EventsReply r = unwrap(manager.agent_events(instance, events));
          return json_reply(200, {{"accepted", r.accepted}, {"duplicates", r.duplicates}});
        });
    add("POST", "/api/v1/agent/logs", Access::Agent,
        [this](const net::HttpRequest& req, std::int64_t instance) {
          std::string text;
          if (req.get_header_value("Content-Type").rfind(kJson, 0) == 0) {
            const json body = parse_object_body(req);
            text = Fields(body, "").string("text", options.max_body_bytes, true);
          } else {
            text = req.body;
          }
          if (text.size() > options.max_log_push_bytes) {
            fail(413, "log push too large: " + std::to_string(text.size()) + " bytes (at most " +
                          std::to_string(options.max_log_push_bytes) + " per request)");
          }
          if (!text.empty()) {
            auto r = manager.agent_logs(instance, text);
            if (!r) fail(r.error().status, r.error().message);
          }
          return json_reply(200, {{"accepted_bytes", text.size()}});
        });
    add_benchmark_input_route();

    // --- operator (design §8) ------------------------------------------------------------
    add("GET", "/api/v1/offers", Access::Operator,
        [this](const net::HttpRequest& req, std::int64_t) {
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
                            std::to_string(options.offers_max_limit) + "], got " +
                            in_quotes(*text));
            }
            limit = static_cast<int>(*n);
          }
          const auto ranked = unwrap(manager.rank_offers(
              parsed->filters, limit,
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
          return json_reply(200, {{"instance", to_json(*rec)},
                                  {"events", events},
                                  {"samples", samples},
                                  {"logs", logs}});
        });
    add("DELETE", "/api/v1/instances/{id}", Access::Operator,
        [this](const net::HttpRequest& req, std::int64_t) {
          reject_unknown_params(req, {});
          const std::int64_t id = path_id(req, "instance id");
          if (!manager.store().instance(id)) fail(404, "unknown instance " + std::to_string(id));
          return json_reply(202,
                            to_json(unwrap(manager.request_destroy(id, kOperatorDestroyReason))));
        });

    add("GET", "/api/v1/hosts", Access::Operator,
        [this](const net::HttpRequest& req, std::int64_t) {
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
            entry.evidence_json = dump(body.at("evidence"));
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

    add("GET", "/api/v1/fleet", Access::Operator,
        [this](const net::HttpRequest& req, std::int64_t) {
          reject_unknown_params(req, {});
          json out = fleet_json();
          out["autopilot"] = autopilot_json();
          return json_reply(200, out);
        });
    add_operator_job_routes();
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

  // --- gateway jobs (operator): list and look up -------------------------------------------
  jobs::JobQueue& operator_job_queue() const {
    jobs::JobQueue* queue = job_queue_or_null();
    if (!queue) fail(409, "this manager runs without a gateway (no job queue)");
    return *queue;
  }

  void add_operator_job_routes() {
    add("GET", "/api/v1/jobs", Access::Operator, [this](const net::HttpRequest& req, std::int64_t) {
      reject_unknown_params(req, {"state", "limit"});
      const auto states = job_states_param(req);
      const auto limit = limit_param(req, options.jobs_default_limit, options.jobs_max_limit);
      const double now = options.clock();
      json out = json::array();
      for (const auto& job : operator_job_queue().list(states, static_cast<std::size_t>(limit))) {
        out.push_back(to_json(job, now, options.jobs_report.prices));
      }
      return json_reply(200, out);
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
          if (!job)
            fail(404, "unknown job " + in_quotes(key) + " (neither a request_id nor an id)");
          return json_reply(200, to_json(*job, options.clock(), options.jobs_report.prices));
        });
  }

  std::string route_of(const std::string& method, const std::string& path) const {
    for (const auto& route : routes) {
      if (route.method == method && std::regex_match(path, route.regex)) return route.label;
    }
    if (auto label = Dashboard::route_of(method, path)) return *label;
    return "unmatched";
  }

  // The lane a route's requests are handled on: health checks on the IO thread (no manager
  // lock, so they answer while everything else is busy), agents apart from operators, so
  // neither can starve the other.
  static std::string_view lane_of(const Route& route) {
    if (route.label == "/healthz") return net::kInlineLane;
    if (route.label == "/api/v1/agent/jobs/lease") return kLeaseLane;
    if (route.label.rfind("/api/v1/agent/", 0) == 0) return kAgentLane;
    return kOperatorLane;
  }

  void mount(net::HttpServer& server) {
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
    server.set_error_handler(
        [max_body, limits](const net::HttpRequest& req, net::HttpResponse& res) {
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
          res.set_content(dump(json{{"error", message}}), kJson);
        });
    server.set_exception_handler(
        [](const net::HttpRequest&, net::HttpResponse& res, std::exception_ptr ep) {
          res.status = 500;
          res.set_content(dump(json{{"error", "internal error: " + util::exception_message(ep)}}),
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
};

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

bool ApiServer::serve() {
  return impl_->server->serve();
}

void ApiServer::stop() {
  impl_->server->stop();
}

}  // namespace pf::manager
