#include "cli/sim_settings.h"

namespace pf::cli {

sim::DefaultPolicyConfig sim_policy_config(const FleetSettings& settings) {
  sim::DefaultPolicyConfig c;
  c.disk_gb = settings.disk_gb;
  c.policy = settings.policy;
  c.sprt = settings.sprt;
  c.lifecycle = settings.lifecycle;
  c.bids = settings.bids;
  c.hedging = settings.hedging;
  return c;
}

tl::expected<sim::DefaultPolicyConfig, std::string> load_sim_policy_config(
    const std::optional<std::string>& path) {
  auto config = path ? load_config(path) : parse_config("", "built-in defaults", {});
  if (!config) return tl::unexpected(config.error());
  return sim_policy_config(fleet_settings(*config));
}

}  // namespace pf::cli
