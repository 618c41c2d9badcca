// When a webhook delivery is tried again (manager/webhooks.h). Pure: the attempt count and
// what the receiver answered in, a delay or "give up" out.
#pragma once

#include <optional>

namespace pf::core {

struct WebhookRetryConfig {
  int max_attempts = 6;      // the first try included
  double base_s = 2;         // delay after the first failure; doubled after each next one
  double max_delay_s = 300;  // no wait longer than this
};

// Whether the reply (`status`: the HTTP status, 0 when no reply came: refused, timed out,
// reset) settles the delivery: any 2xx.
bool webhook_delivered(int status);

// After `attempts` tries (>= 1) that ended with `status`: the delay before the next one, or
// nullopt to give up. Retried: no reply, 408, 425, 429 and 5xx (the receiver may recover);
// any other 4xx is the receiver refusing this delivery for good (a bad signature, an unknown
// endpoint), so it is not repeated. Bounded by max_attempts.
std::optional<double> webhook_retry_delay(int attempts, int status,
                                          const WebhookRetryConfig& config);

}  // namespace pf::core
