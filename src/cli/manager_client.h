// A small client for the manager's operator API (proverfleet serve), used by the fleet CLI
// commands. It speaks JSON over market::http_perform and turns the API's {"error": ...} replies
// into one readable message. The operator token travels only in the Authorization header and is
// never part of a message.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>

namespace pf::cli {

inline constexpr const char* kDefaultManagerUrl = "http://127.0.0.1:8470";

struct ManagerEndpoint {
  std::string base_url = kDefaultManagerUrl;  // http(s)://host:port, no trailing path
  std::string token;                          // operator token
  double timeout_s = 60;  // deploy waits for the market's create, which may retry
};

class ManagerClient {
 public:
  // Fails when base_url is not an http(s) URL.
  static tl::expected<ManagerClient, std::string> create(ManagerEndpoint endpoint);

  // Parsed JSON of a 2xx reply; otherwise the API's "error" text (or what went wrong on the
  // way). `path` starts with "/api/v1/".
  tl::expected<nlohmann::json, std::string> get(const std::string& path) const;
  tl::expected<nlohmann::json, std::string> post(const std::string& path,
                                                 const nlohmann::json& body) const;
  tl::expected<nlohmann::json, std::string> del(const std::string& path) const;

  const std::string& base_url() const { return endpoint_.base_url; }

 private:
  explicit ManagerClient(ManagerEndpoint endpoint) : endpoint_(std::move(endpoint)) {}
  tl::expected<nlohmann::json, std::string> call(const char* method, const std::string& path,
                                                 const std::optional<nlohmann::json>& body) const;

  ManagerEndpoint endpoint_;
};

// The operator token: `token` when given (flag or $PROVERFLEET_TOKEN), else the first line of
// `token_file` (serve writes it next to its database). Errors name the file, never a token.
tl::expected<std::string, std::string> resolve_operator_token(
    const std::optional<std::string>& token, const std::string& token_file);

}  // namespace pf::cli
