#include "manager/instance_webhooks.h"

#include "manager/webhooks.h"

namespace pf::manager {

using nlohmann::json;
using S = core::InstanceState;

json webhook_instance(const core::InstanceRecord& rec) {
  json out = {{"instance_id", rec.id},
              {"machine_id", rec.offer.machine_id},
              {"offer_id", rec.offer.id},
              {"gpu_name", rec.offer.gpu_name},
              {"num_gpus", rec.offer.num_gpus},
              {"dph_total", rec.offer.dph_total},
              {"state", core::to_string(rec.state)},
              {"origin", rec.origin},
              {"spend_usd", rec.spend_usd}};
  if (rec.market_id) out["market_id"] = *rec.market_id;
  if (rec.verdict) out["rate"] = rec.verdict->rate;
  return out;
}

std::optional<WebhookNotice> transition_notice(const core::InstanceRecord& rec, S to,
                                               const std::string& reason) {
  if (to != S::Proving && to != S::Destroyed) return std::nullopt;
  json data = webhook_instance(rec);
  data["reason"] = reason;
  if (rec.close_cause) data["cause"] = core::to_string(*rec.close_cause);
  return WebhookNotice{to == S::Proving ? kWebhookInstanceAccepted : kWebhookInstanceDestroyed,
                       std::move(data)};
}

std::optional<WebhookNotice> close_notice(const core::InstanceRecord& rec,
                                          const core::Closing& closing) {
  if (closing.cause != core::CloseCause::Rejected &&
      closing.cause != core::CloseCause::MarketExited) {
    return std::nullopt;
  }
  json data = webhook_instance(rec);
  data["reason"] = closing.reason;
  data["cause"] = core::to_string(closing.cause);
  return WebhookNotice{closing.cause == core::CloseCause::Rejected ? kWebhookInstanceRejected
                                                                   : kWebhookInstanceCrashed,
                       std::move(data)};
}

WebhookNotice prover_crashed_notice(const core::InstanceRecord& rec, const std::string& message) {
  json data = webhook_instance(rec);
  data["cause"] = "prover_crashed";
  data["reason"] = message;
  return WebhookNotice{kWebhookInstanceCrashed, std::move(data)};
}

}  // namespace pf::manager
