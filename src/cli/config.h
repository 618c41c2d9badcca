// proverfleet.toml: one file for every tunable; see proverfleet.example.toml.
// Strict: an unknown key or a wrong type is an error naming the key, so a typo never
// silently leaves a default in place.
#pragma once

#include <optional>
#include <string>

#include <tl/expected.hpp>

#include "core/acceptance.h"
#include "core/lifecycle.h"
#include "core/ranking.h"

namespace pf::cli {

struct MarketSettings {
  std::optional<std::string> vast_url;
  std::optional<std::string> key_file;
};

// What the manager puts into every rental and tells every agent.
struct DeploySettings {
  std::string image = "proverfleet/agent:latest";
  double disk_gb = 200;
  std::string onstart = "proverfleet agent";
  double heartbeat_s = 10;
};

struct AppConfig {
  core::RankConfig rank;  // predictor priors, economics, setup assumptions
  core::LifecycleConfig lifecycle;
  core::AcceptanceConfig acceptance;
  DeploySettings deploy;
  MarketSettings market;
  std::string source = "built-in defaults";  // which file was read, for messages
};

// Reads `path` when given (must exist), else $PROVERFLEET_CONFIG, else ./proverfleet.toml if
// present, else built-in defaults.
tl::expected<AppConfig, std::string> load_config(const std::optional<std::string>& path);

// Parses TOML text (name is used in error messages).
tl::expected<AppConfig, std::string> parse_config(const std::string& text, const std::string& name);

}  // namespace pf::cli
