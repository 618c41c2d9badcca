// The agent's side of the manager protocol (design §7): JSON over HTTP(S) through
// market::http_perform. Every call reports precisely enough for the caller to choose between
// retrying (unreachable, 5xx, 429), re-registering (401) and giving up (other 4xx, 410).
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "market/http_client.h"

namespace pf::agent {

struct CallError {
  enum class Kind {
    Unreachable,   // no reply (refused, timeout, reset)
    Unauthorized,  // 401: the token (or the secret) is not valid
    Gone,          // 410: the instance is being destroyed
    Rejected,      // any other 4xx: the request itself is wrong; retrying will not help
    ServerError,   // 5xx or 429: try again later
    BadReply,      // 2xx whose body is not the JSON expected
  };
  Kind kind = Kind::Unreachable;
  int status = 0;
  std::string message;
  bool retryable() const { return kind == Kind::Unreachable || kind == Kind::ServerError; }
};

template <typename T>
using CallResult = tl::expected<T, CallError>;

// What a heartbeat reply tells the agent (design §7, issue 12).
struct HeartbeatReply {
  nlohmann::json commands = nlohmann::json::array();
  bool work = false;                    // take jobs now: the instance is accepted and proving
  std::vector<std::int64_t> drop_jobs;  // jobs to stop and forget
};

// At most this many drop_jobs entries are read from one reply (an agent holds ≤ 64 jobs).
inline constexpr std::size_t kMaxDropJobsRead = 1024;

class ManagerClient {
 public:
  // `base_url`: "http(s)://host:port" (a trailing '/' is ignored).
  explicit ManagerClient(std::string base_url, market::HttpOptions http = {});

  const std::string& base_url() const { return base_url_; }
  void set_token(const std::string& token);
  bool has_token() const;

  // POST /api/v1/agent/register: the whole reply object.
  CallResult<nlohmann::json> register_agent(const nlohmann::json& body);
  // POST /api/v1/agent/heartbeat: the reply's "commands" (an array; [] when absent), "work"
  // (false when absent: a manager without a job queue) and "drop_jobs".
  CallResult<HeartbeatReply> heartbeat(const nlohmann::json& body);
  // POST /api/v1/agent/events {events}: the reply ({accepted, duplicates}).
  CallResult<nlohmann::json> send_events(const nlohmann::json& events);
  // POST /api/v1/agent/logs, text/plain.
  CallResult<void> send_logs(const std::string& text);

  // An authorized JSON POST to `path`; its reply body as JSON. `timeout_s` replaces the
  // client's request timeout (long-polls).
  CallResult<nlohmann::json> post_json(const std::string& path, const nlohmann::json& body,
                                       std::optional<double> timeout_s = std::nullopt);
  // "Authorization: Bearer <token>", for calls made outside this client (streamed downloads).
  std::string authorization_header() const;
  const market::HttpOptions& http_options() const { return http_; }

 private:
  CallResult<nlohmann::json> post(const std::string& path, const std::string& body,
                                  const std::string& content_type, bool authorized,
                                  std::optional<double> timeout_s = std::nullopt);

  std::string base_url_;
  market::HttpOptions http_;
  mutable std::mutex mu_;
  std::string token_;
};

}  // namespace pf::agent
