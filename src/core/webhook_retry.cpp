#include "core/webhook_retry.h"

#include <algorithm>
#include <cmath>

namespace pf::core {

bool webhook_delivered(int status) {
  return status >= 200 && status < 300;
}

std::optional<double> webhook_retry_delay(int attempts, int status, const WebhookRetryConfig& cfg) {
  if (webhook_delivered(status)) return std::nullopt;
  const bool transient =
      status == 0 || status == 408 || status == 425 || status == 429 || status >= 500;
  if (!transient || attempts >= cfg.max_attempts) return std::nullopt;
  const int doublings = std::clamp(attempts - 1, 0, 30);
  return std::min(cfg.max_delay_s, cfg.base_s * std::ldexp(1.0, doublings));
}

}  // namespace pf::core
