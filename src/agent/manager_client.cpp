#include "agent/manager_client.h"

#include "util/bounded_json.h"

namespace pf::agent {

using nlohmann::json;

ManagerClient::ManagerClient(std::string base_url, market::HttpOptions http)
    : base_url_(std::move(base_url)), http_(std::move(http)) {
  while (!base_url_.empty() && base_url_.back() == '/') base_url_.pop_back();
}

void ManagerClient::set_token(const std::string& token) {
  std::lock_guard lock(mu_);
  token_ = token;
}

bool ManagerClient::has_token() const {
  std::lock_guard lock(mu_);
  return !token_.empty();
}

CallResult<json> ManagerClient::post(const std::string& path, const std::string& body,
                                     const std::string& content_type, bool authorized) {
  market::HttpRequest req;
  req.method = "POST";
  req.url = base_url_ + path;
  req.headers.push_back("Content-Type: " + content_type);
  req.headers.push_back("Accept: application/json");
  if (authorized) {
    std::lock_guard lock(mu_);
    req.headers.push_back("Authorization: Bearer " + token_);
  }
  req.body = body;
  auto res = market::http_perform(http_, req);
  if (!res) {
    return tl::unexpected(CallError{
        CallError::Kind::Unreachable, res.error().status,
        std::string(market::to_string(res.error().failure)) + ": " + res.error().message});
  }
  const int status = res->status;
  auto parsed = util::parse_json(res->body);
  if (status < 200 || status >= 300) {
    std::string message = "HTTP " + std::to_string(status) + " from " + path;
    if (parsed && parsed->is_object() && parsed->contains("error") &&
        (*parsed)["error"].is_string()) {
      message += ": " + (*parsed)["error"].get<std::string>();
    } else if (!res->body.empty()) {
      message += ": " + res->body.substr(0, 200);
    }
    CallError::Kind kind = CallError::Kind::Rejected;
    if (status == 401) kind = CallError::Kind::Unauthorized;
    if (status == 410) kind = CallError::Kind::Gone;
    if (status >= 500 || status == 429 || status == 408) kind = CallError::Kind::ServerError;
    return tl::unexpected(CallError{kind, status, message});
  }
  if (!parsed) {
    return tl::unexpected(CallError{CallError::Kind::BadReply, status,
                                    "reply to " + path + " is not JSON: " + parsed.error()});
  }
  return std::move(*parsed);
}

CallResult<json> ManagerClient::register_agent(const json& body) {
  auto r = post("/api/v1/agent/register", body.dump(), "application/json", false);
  if (!r) return r;
  if (!r->is_object() || !r->contains("token") || !(*r)["token"].is_string()) {
    return tl::unexpected(CallError{CallError::Kind::BadReply, 200,
                                    "register reply has no token: " + r->dump().substr(0, 200)});
  }
  return r;
}

CallResult<json> ManagerClient::heartbeat(const json& body) {
  auto r =
      post("/api/v1/agent/heartbeat", body.dump(-1, ' ', false, json::error_handler_t::replace),
           "application/json", true);
  if (!r) return r;
  if (!r->is_object()) {
    return tl::unexpected(
        CallError{CallError::Kind::BadReply, 200, "heartbeat reply is not an object"});
  }
  auto it = r->find("commands");
  if (it == r->end() || it->is_null()) return json::array();
  if (!it->is_array()) {
    return tl::unexpected(
        CallError{CallError::Kind::BadReply, 200, "heartbeat commands is not an array"});
  }
  return *it;
}

CallResult<json> ManagerClient::send_events(const json& events) {
  return post("/api/v1/agent/events",
              json{{"events", events}}.dump(-1, ' ', false, json::error_handler_t::replace),
              "application/json", true);
}

CallResult<void> ManagerClient::send_logs(const std::string& text) {
  auto r = post("/api/v1/agent/logs", text, "text/plain; charset=utf-8", true);
  if (!r) return tl::unexpected(r.error());
  return {};
}

}  // namespace pf::agent
