#include "cli/fleet_client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <utility>

#include "cli/commands.h"
#include "core/text.h"

namespace pf::cli::fleet {

using nlohmann::json;

void add_client_flags(CLI::App* cmd, ClientFlags& flags) {
  cmd->add_option("--manager", flags.manager, "Manager base URL")
      ->envname("PROVERFLEET_MANAGER")
      ->capture_default_str();
  add_refused_secret_flag(cmd, flags.token_flag);
  cmd->add_option("--token-file", flags.token_file,
                  "File holding the operator token ('serve' writes operator.token next to its "
                  "database)")
      ->envname("PROVERFLEET_TOKEN_FILE")
      ->capture_default_str();
  cmd->add_flag("--json", flags.json, "Print the API's JSON instead of a table");
}

ManagerClient connect(const ClientFlags& flags) {
  check_refused_secret_flag(flags.token_flag);
  auto token = resolve_operator_token(secret_from_env("PROVERFLEET_TOKEN"), flags.token_file);
  if (!token) throw CommandFailed(token.error());
  auto client = ManagerClient::create(ManagerEndpoint{flags.manager, *token});
  if (!client) throw CommandFailed(client.error());
  return std::move(*client);
}

json ok_or_fail(tl::expected<json, std::string> reply) {
  if (!reply) throw CommandFailed(reply.error());
  return std::move(*reply);
}

void print_json(const json& value) {
  std::cout << value.dump(2) << "\n";
}

double num(const json& object, const char* key, double fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : fallback;
}
std::optional<double> opt_num(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
std::string str(const json& object, const char* key, const std::string& fallback) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get_ref<const std::string&>().empty()) {
    return fallback;
  }
  return it->get<std::string>();
}
std::string integer(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number()) return "-";
  return std::to_string(it->get<std::int64_t>());
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string duration(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  const auto s = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm", s / 60);
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s % 3600) / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, (s % 86400) / 3600);
  }
  return buf;
}

std::string ago(const json& object, const char* key) {
  auto at = opt_num(object, key);
  if (!at || *at <= 0) return "-";
  return duration(now_s() - *at) + " ago";
}

std::string money(double usd, int decimals) {
  return (usd < 0 ? "-$" : "$") + core::fixed(std::fabs(usd), decimals);
}

std::string gpu(const json& offer) {
  return str(offer, "gpu_name", "?") + " x" + integer(offer, "num_gpus");
}

}  // namespace pf::cli::fleet
