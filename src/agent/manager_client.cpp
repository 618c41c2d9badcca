#include "agent/manager_client.h"

#include "market/http_outcome.h"
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

std::string ManagerClient::authorization_header() const {
  std::lock_guard lock(mu_);
  return "Authorization: Bearer " + token_;
}

CallResult<json> ManagerClient::post(const std::string& path, const std::string& body,
                                     const std::string& content_type, bool authorized,
                                     std::optional<double> timeout_s) {
  market::HttpRequest req;
  req.method = "POST";
  req.url = base_url_ + path;
  req.headers.push_back("Content-Type: " + content_type);
  req.headers.push_back("Accept: application/json");
  if (authorized) req.headers.push_back(authorization_header());
  req.body = body;
  market::HttpOptions http = http_;
  if (timeout_s) http.request_timeout_s = *timeout_s;
  auto res = market::http_perform(http, req);
  if (!res) {
    return tl::unexpected(
        CallError{CallError::Kind::Unreachable, res.error().status, market::describe(res.error())});
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

CallResult<HeartbeatReply> ManagerClient::heartbeat(const json& body) {
  auto r = post("/api/v1/agent/heartbeat", util::dump_json_lossy(body), "application/json", true);
  if (!r) return tl::unexpected(r.error());
  auto bad = [](const std::string& why) {
    return tl::unexpected(CallError{CallError::Kind::BadReply, 200, "heartbeat reply: " + why});
  };
  if (!r->is_object()) return bad("not an object");
  HeartbeatReply reply;
  if (auto it = r->find("commands"); it != r->end() && !it->is_null()) {
    if (!it->is_array()) return bad("'commands' is not an array");
    reply.commands = *it;
  }
  if (auto it = r->find("work"); it != r->end() && !it->is_null()) {
    if (!it->is_boolean()) return bad("'work' is not a boolean");
    reply.work = it->get<bool>();
  }
  if (auto it = r->find("drop_jobs"); it != r->end() && !it->is_null()) {
    if (!it->is_array()) return bad("'drop_jobs' is not an array");
    for (const auto& id : *it) {
      if (reply.drop_jobs.size() >= kMaxDropJobsRead) break;
      if (!id.is_number_integer()) return bad("'drop_jobs' holds a non-integer");
      reply.drop_jobs.push_back(id.get<std::int64_t>());
    }
  }
  return reply;
}

CallResult<json> ManagerClient::send_events(const json& events) {
  return post("/api/v1/agent/events", util::dump_json_lossy(json{{"events", events}}),
              "application/json", true);
}

CallResult<json> ManagerClient::post_json(const std::string& path, const json& body,
                                          std::optional<double> timeout_s) {
  return post(path, util::dump_json_lossy(body), "application/json", true, timeout_s);
}

CallResult<void> ManagerClient::send_logs(const std::string& text) {
  auto r = post("/api/v1/agent/logs", text, "text/plain; charset=utf-8", true);
  if (!r) return tl::unexpected(r.error());
  return {};
}

}  // namespace pf::agent
