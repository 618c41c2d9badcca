// Request parsing for the HTTP API: bounded, every error naming its field.
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

#include "manager/http_api_impl.h"
#include "util/bounded_json.h"

namespace pf::manager::api_detail {

[[noreturn]] void fail(int status, std::string message) {
  throw RequestError{status, std::move(message)};
}

Reply json_reply(int status, const json& body) {
  return Reply{status, util::dump_json_lossy(body), kJson};
}

Reply error_reply(int status, const std::string& message) {
  Reply reply = json_reply(status, json{{"error", message}});
  // Every 503 is "temporarily unavailable" (the market busy or unreachable): say when to retry.
  if (status == 503) reply.headers.emplace_back("Retry-After", "10");
  return reply;
}

void set_reply(net::HttpResponse& res, Reply reply) {
  res.status = reply.status;
  if (reply.status == 401) res.set_header("WWW-Authenticate", "Bearer");
  for (const auto& [name, value] : reply.headers) res.set_header(name, value);
  res.set_content(std::move(reply.body), reply.content_type);
}

double system_clock_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string in_quotes(const std::string& text, std::size_t max_chars) {
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

namespace {

// ?key=a,b: names `parse` knows, comma-separated, each once; absent or empty = none.
template <typename Value, typename Parse>
std::vector<Value> name_list_param(const net::HttpRequest& req, const char* key, Parse parse,
                                   const char* known) {
  std::vector<Value> values;
  const auto text = param(req, key);
  if (!text || text->empty()) return values;
  if (text->size() > 128) {
    fail(400, std::string("query parameter '") + key + "' is too long (at most 128 bytes)");
  }
  std::size_t from = 0;
  while (from <= text->size()) {
    const auto comma = text->find(',', from);
    const std::string name =
        text->substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    auto value = parse(name);
    if (!value) {
      fail(400, std::string("query parameter '") + key + "' must be a comma-separated list of " +
                    known + "; got " + in_quotes(name));
    }
    if (std::find(values.begin(), values.end(), *value) == values.end()) values.push_back(*value);
    if (comma == std::string::npos) break;
    from = comma + 1;
  }
  return values;
}

}  // namespace

std::vector<core::JobState> job_states_param(const net::HttpRequest& req) {
  return name_list_param<core::JobState>(req, "state", core::parse_job_state,
                                         "queued, assigned, proving, done, failed, cancelled");
}

std::vector<core::JobKind> job_kinds_param(const net::HttpRequest& req) {
  return name_list_param<core::JobKind>(req, "kind", core::parse_job_kind,
                                        "porep-c2, snap-update, window-post, winning-post");
}

std::optional<double> epoch_param(const net::HttpRequest& req, const char* key) {
  const auto text = param(req, key);
  if (!text) return std::nullopt;
  // Seconds since 1970, as every time in the API: no later than the year 5138 (1e11 s).
  constexpr double kMaxEpochS = 1e11;
  double value = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (text->empty() || text->size() > 32 || ec != std::errc() ||
      end != text->data() + text->size() || !std::isfinite(value) || value < 0 ||
      value > kMaxEpochS) {
    fail(400, std::string("query parameter '") + key +
                  "' must be a time in seconds since 1970 (a number from 0 to 1e11), got " +
                  in_quotes(*text));
  }
  return value;
}

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

bool is_job_key(const std::string& key) {
  if (key.empty() || key.size() > kMaxRequestIdBytes) return false;
  return std::all_of(key.begin(), key.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
}

// ---- jobs (issue 12) ------------------------------------------------------------------------

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
    case jobs::JobError::Code::AlreadyExists:
      return 409;
    case jobs::JobError::Code::Unavailable:
      return 503;
  }
  return 500;
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

}  // namespace pf::manager::api_detail
