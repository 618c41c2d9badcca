#include "cli/serve_ops.h"

#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "cli/secrets.h"

namespace pf::cli {

ServeOps make_serve_ops(manager::Manager& manager, const AppConfig& config,
                        const FleetSettings& fleet, const std::function<double()>& clock) {
  ServeOps ops;
  manager::WebhookConfig hooks;
  hooks.urls = config.webhooks.urls;
  hooks.retry.max_attempts = config.webhooks.max_attempts;
  hooks.retry.base_s = config.webhooks.retry_base_s;
  hooks.retry.max_delay_s = config.webhooks.retry_max_s;
  hooks.timeout_s = config.webhooks.timeout_s;
  hooks.queue_max = static_cast<std::size_t>(config.webhooks.queue_max);
  if (!hooks.urls.empty()) {
    if (auto secret = secret_from_env("PROVERFLEET_WEBHOOK_SECRET")) {
      hooks.secret = *secret;
    } else if (!config.webhooks.secret_file.empty()) {
      hooks.secret = read_secret_file(config.webhooks.secret_file, "the webhook secret");
    } else {
      throw CommandFailed(
          "webhooks.urls is set but there is no secret to sign with: set "
          "$PROVERFLEET_WEBHOOK_SECRET or webhooks.secret_file");
    }
    spdlog::info("webhooks: {} endpoint(s), signed (HMAC-SHA256), {} attempts at most",
                 hooks.urls.size(), hooks.retry.max_attempts);
  }
  ops.webhooks = std::make_unique<manager::Webhooks>(std::move(hooks), clock);
  if (ops.webhooks->enabled()) {
    manager::Webhooks* sink = ops.webhooks.get();
    manager.set_notifier([sink](const std::string& event, nlohmann::json data) {
      if (!sink->notify(event, std::move(data))) {
        spdlog::warn("webhooks: queue full, {} not sent", event);
      }
    });
  }

  manager::FleetWatchConfig watch;
  watch.alerts = config.alerts.alerts;
  watch.policy = fleet.policy;
  watch.heartbeat_s = config.deploy.heartbeat_s;
  watch.jobs.prices = config.prices;
  ops.watch = std::make_unique<manager::FleetWatch>(manager, watch, clock);
  spdlog::info(
      "alerts: every {:.0f} s; the manager acts on hand-deployed instances: {}, on the "
      "autopilot's: {}",
      config.alerts.interval_s, watch.alerts.act_on_hand_deployed ? "yes" : "no (alert only)",
      watch.alerts.act_on_autopilot_rented ? "yes" : "no");
  return ops;
}

}  // namespace pf::cli
