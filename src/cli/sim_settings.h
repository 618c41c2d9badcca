// What `proverfleet sim` runs the default policy with: the live configuration, mapped by the
// same cli::fleet_settings that `serve` uses, so the simulator measures what the manager does.
#pragma once

#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "cli/config.h"
#include "sim/des_policies.h"

namespace pf::cli {

// The default policy's settings from the fleet settings (the scenario's economics, parameter
// size, demand and horizon are applied later by sim::default_policy_config).
sim::DefaultPolicyConfig sim_policy_config(const FleetSettings& settings);

// From `path` (with serve's PROVERFLEET_<SECTION>_<KEY> overrides) when given; else serve's
// built-in defaults, ignoring the environment and ./proverfleet.toml so that a bare
// `sim` is reproducible.
tl::expected<sim::DefaultPolicyConfig, std::string> load_sim_policy_config(
    const std::optional<std::string>& path);

}  // namespace pf::cli
