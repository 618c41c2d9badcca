// The agent's side of the manager protocol (design §7): JSON over HTTP(S) through
// market::http_perform. Every call reports precisely enough for the caller to choose between
// retrying (unreachable, 5xx, 429), re-registering (401) and giving up (other 4xx, 410).
#pragma once

#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>

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

class ManagerClient {
 public:
  // `base_url`: "http(s)://host:port" (a trailing '/' is ignored).
  explicit ManagerClient(std::string base_url, market::HttpOptions http = {});

  const std::string& base_url() const { return base_url_; }
  void set_token(const std::string& token);
  bool has_token() const;

  // POST /api/v1/agent/register: the whole reply object.
  CallResult<nlohmann::json> register_agent(const nlohmann::json& body);
  // POST /api/v1/agent/heartbeat: the reply's "commands" (an array; [] when absent).
  CallResult<nlohmann::json> heartbeat(const nlohmann::json& body);
  // POST /api/v1/agent/events {events}: the reply ({accepted, duplicates}).
  CallResult<nlohmann::json> send_events(const nlohmann::json& events);
  // POST /api/v1/agent/logs, text/plain.
  CallResult<void> send_logs(const std::string& text);

 private:
  CallResult<nlohmann::json> post(const std::string& path, const std::string& body,
                                  const std::string& content_type, bool authorized);

  std::string base_url_;
  market::HttpOptions http_;
  mutable std::mutex mu_;
  std::string token_;
};

}  // namespace pf::agent
