// What the fleet commands (fleet_cmds.cpp, jobs_cmd.cpp, money_cmd.cpp) share: the flags that
// reach a running manager's operator API and the client they make, and the tolerant field
// access their tables print with (a missing or null field prints as "-" rather than aborting the
// whole table).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "cli/manager_client.h"
#include "cli/secrets.h"

namespace pf::cli::fleet {

struct ClientFlags {
  std::string manager = kDefaultManagerUrl;
  RefusedSecretFlag token_flag{"--token", "$PROVERFLEET_TOKEN or --token-file PATH", std::nullopt};
  std::string token_file = "operator.token";
  bool json = false;
};

// --manager, the refused --token, --token-file and --json.
void add_client_flags(CLI::App* cmd, ClientFlags& flags);
// The operator API's client, with the token from $PROVERFLEET_TOKEN or the token file.
ManagerClient connect(const ClientFlags& flags);
// The reply, or CommandFailed with the API's error.
nlohmann::json ok_or_fail(tl::expected<nlohmann::json, std::string> reply);
void print_json(const nlohmann::json& value);

double num(const nlohmann::json& object, const char* key, double fallback = 0);
std::optional<double> opt_num(const nlohmann::json& object, const char* key);
std::string str(const nlohmann::json& object, const char* key, const std::string& fallback = "-");
std::string integer(const nlohmann::json& object, const char* key);
double now_s();
// 45s, 12m, 3h05m, 2d04h.
std::string duration(double seconds);
// "<duration> ago" since the epoch seconds at `key`, "-" when unset.
std::string ago(const nlohmann::json& object, const char* key);
std::string money(double usd, int decimals);
// "RTX 4090 x2".
std::string gpu(const nlohmann::json& offer);

// `jobs` (jobs_cmd.cpp) and `money` (money_cmd.cpp).
void register_jobs(CLI::App& app);
void register_money(CLI::App& app);

}  // namespace pf::cli::fleet
