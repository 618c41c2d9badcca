#include "cli/manager_client.h"

#include <fstream>
#include <sstream>

#include "core/text.h"
#include "market/http_client.h"
#include "util/bounded_json.h"

namespace pf::cli {
namespace {

using nlohmann::json;

std::string excerpt(const std::string& text, std::size_t max_chars = 200) {
  std::string out = core::trim(text);
  if (out.size() > max_chars) out = out.substr(0, max_chars) + "...";
  return out.empty() ? "(empty)" : out;
}

}  // namespace

tl::expected<ManagerClient, std::string> ManagerClient::create(ManagerEndpoint endpoint) {
  std::string& url = endpoint.base_url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  const bool http = url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
  if (!http || url.find("://") + 3 >= url.size()) {
    return tl::unexpected("manager URL must be http://HOST:PORT or https://HOST:PORT, got '" + url +
                          "'");
  }
  return ManagerClient(std::move(endpoint));
}

tl::expected<json, std::string> ManagerClient::get(const std::string& path) const {
  return call("GET", path, std::nullopt);
}

tl::expected<json, std::string> ManagerClient::post(const std::string& path,
                                                    const json& body) const {
  return call("POST", path, body);
}

tl::expected<json, std::string> ManagerClient::del(const std::string& path) const {
  return call("DELETE", path, std::nullopt);
}

tl::expected<json, std::string> ManagerClient::call(const char* method, const std::string& path,
                                                    const std::optional<json>& body) const {
  market::HttpOptions options;
  options.request_timeout_s = endpoint_.timeout_s;
  options.max_body_bytes = 256u << 20;
  market::HttpRequest request;
  request.method = method;
  request.url = endpoint_.base_url + path;
  request.headers.push_back("Accept: application/json");
  if (!endpoint_.token.empty())
    request.headers.push_back("Authorization: Bearer " + endpoint_.token);
  if (body) {
    request.headers.push_back("Content-Type: application/json");
    request.body = body->dump();
  }
  auto reply = market::http_perform(options, request);
  if (!reply) {
    return tl::unexpected("cannot reach the manager at " + endpoint_.base_url + " (" +
                          market::to_string(reply.error().failure) + "): " + reply.error().message);
  }
  auto parsed = util::parse_json(reply->body);
  if (reply->status >= 200 && reply->status < 300) {
    if (!parsed) {
      return tl::unexpected("the manager sent HTTP " + std::to_string(reply->status) +
                            " with a body that is not JSON (" + parsed.error() +
                            "): " + excerpt(reply->body));
    }
    return std::move(*parsed);
  }
  std::string message;
  if (parsed && parsed->is_object() && parsed->contains("error") &&
      (*parsed)["error"].is_string()) {
    message = (*parsed)["error"].get<std::string>();
  } else {
    message =
        "the manager replied HTTP " + std::to_string(reply->status) + ": " + excerpt(reply->body);
  }
  if (reply->status == 401) {
    message += " (operator token from $PROVERFLEET_TOKEN or --token-file)";
  }
  return tl::unexpected(message);
}

tl::expected<std::string, std::string> resolve_operator_token(
    const std::optional<std::string>& token, const std::string& token_file) {
  if (token) {
    std::string t = core::trim(*token);
    if (t.empty()) return tl::unexpected(std::string("the operator token given is empty"));
    return t;
  }
  std::ifstream file(token_file);
  if (!file) {
    return tl::unexpected("no operator token: cannot read '" + token_file +
                          "' (pass --token-file, set $PROVERFLEET_TOKEN, or run where "
                          "'proverfleet serve' wrote operator.token)");
  }
  std::string line;
  std::getline(file, line);
  line = core::trim(line);
  if (line.empty()) return tl::unexpected("operator token file '" + token_file + "' is empty");
  return line;
}

}  // namespace pf::cli
