// What `serve` adds for an operator working by hand: the webhooks (signed POSTs of the
// fleet's news) and the fleet watch (alerts for every instance, acted on when allowed), built
// from the config. The webhook secret comes from $PROVERFLEET_WEBHOOK_SECRET or
// `[webhooks] secret_file`, never from argv or the TOML itself.
#pragma once

#include <functional>
#include <memory>

#include "cli/config.h"
#include "manager/fleet_watch.h"
#include "manager/manager.h"
#include "manager/webhooks.h"

namespace pf::cli {

struct ServeOps {
  std::unique_ptr<manager::Webhooks> webhooks;  // always set (disabled without URLs)
  std::unique_ptr<manager::FleetWatch> watch;
};

// Builds both and routes the Manager's notifications to the webhooks. Throws CommandFailed when
// webhook URLs are configured without a secret, or the secret file cannot be used.
ServeOps make_serve_ops(manager::Manager& manager, const AppConfig& config,
                        const FleetSettings& fleet, const std::function<double()>& clock);

}  // namespace pf::cli
