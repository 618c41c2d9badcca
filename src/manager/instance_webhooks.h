// What the operator's webhooks (manager/webhooks.h) hear about an instance, decided in one
// place: which of its changes is news (accepted, destroyed, rejected, crashed) and the data
// naming it. The Manager only hands the notice to its notifier, so the rule is testable
// without a Manager, a store or the delivery thread.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/close_cause.h"
#include "core/fleet.h"

namespace pf::manager {

struct WebhookNotice {
  std::string event;  // a kWebhook* name
  nlohmann::json data;
};

// The webhook data naming an instance: ids, offer, state, origin, spend and (when judged) rate.
nlohmann::json webhook_instance(const core::InstanceRecord& rec);

// A state change that is news: entering proving (accepted) or destroyed; nullopt otherwise.
std::optional<WebhookNotice> transition_notice(const core::InstanceRecord& rec,
                                               core::InstanceState to, const std::string& reason);
// A close that is news: rejected by its benchmark, or gone from the market (crashed).
std::optional<WebhookNotice> close_notice(const core::InstanceRecord& rec,
                                          const core::Closing& closing);
// The agent reported its prover crashed (`message` is the agent's own account).
WebhookNotice prover_crashed_notice(const core::InstanceRecord& rec, const std::string& message);

}  // namespace pf::manager
