// Secrets never ride on a command line: every local user can read command lines (ps,
// /proc/PID/cmdline). Keys and tokens come from the environment (readable only by the same
// user, /proc/PID/environ) or from a file; a flag that would carry one is kept only to refuse
// it with a pointer to those two.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace pf::cli {

// Adds `flag` (e.g. "--api-key") as a refused option: given a value, the command fails naming
// `instead` (e.g. "$PROVERFLEET_MARKET_SIM_API_KEY or --api-key-file PATH"). Call
// check_refused_secret_flags() first thing in the command's callback.
struct RefusedSecretFlag {
  std::string flag;
  std::string instead;
  std::optional<std::string> value;
};
void add_refused_secret_flag(CLI::App* cmd, RefusedSecretFlag& refused);
// Throws CommandFailed when the refused flag was given.
void check_refused_secret_flag(const RefusedSecretFlag& refused);

// The variable's value without surrounding whitespace; nullopt when unset or blank.
std::optional<std::string> secret_from_env(const char* name);

// The first line of `path`, trimmed. Throws CommandFailed when it cannot be read, is empty,
// or other users may read it (`what` names the secret in the message).
std::string read_secret_file(const std::string& path, const std::string& what);

}  // namespace pf::cli
