// Webhooks: the fleet's news as signed JSON POSTs to the operator's endpoints (a chat bridge,
// a pager), so an operator working by hand hears of an accepted, rejected, destroyed or
// crashed instance, spend over budget, jobs missing deadlines, a paused autopilot and the
// watch's alerts without watching the dashboard.
//
// Delivery never blocks the caller: notify() only queues (bounded; a full queue drops the new
// delivery and counts it), one thread of its own posts, and a failed delivery waits for its
// retry (core/webhook_retry.h: bounded attempts, doubling delays) without holding up the
// others. Each POST carries
//   Content-Type: application/json
//   X-Proverfleet-Event: <event>
//   X-Proverfleet-Delivery: <delivery id, the same on every attempt>
//   X-Proverfleet-Signature: t=<unix seconds of this attempt>,v1=<hex HMAC-SHA256>
// where the HMAC is keyed with the shared secret over "<t>.<body>" (the timestamp inside the
// signed text lets a receiver refuse stale replays). The body is
//   {"id": <delivery id>, "event": <event>, "at": <epoch seconds queued>, "data": {...}}.
// The secret is never logged or put in a message.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/webhook_retry.h"

namespace pf::manager {

// Event names (the "event" field and header).
inline constexpr const char* kWebhookInstanceAccepted = "instance.accepted";
inline constexpr const char* kWebhookInstanceRejected = "instance.rejected";
inline constexpr const char* kWebhookInstanceDestroyed = "instance.destroyed";
inline constexpr const char* kWebhookInstanceCrashed = "instance.crashed";
inline constexpr const char* kWebhookSpendOverBudget = "spend.over_budget";
inline constexpr const char* kWebhookJobsMissedDeadline = "jobs.missed_deadline";
inline constexpr const char* kWebhookAutopilotPaused = "autopilot.paused";
inline constexpr const char* kWebhookAlertRaised = "alert.raised";
inline constexpr const char* kWebhookAlertCleared = "alert.cleared";

struct WebhookConfig {
  std::vector<std::string> urls;  // every event goes to each
  std::string secret;             // HMAC key (from a file or the environment, never argv)
  core::WebhookRetryConfig retry;
  double timeout_s = 10;         // one POST, connect included
  std::size_t queue_max = 1000;  // deliveries waiting (all URLs); beyond, new ones are dropped
};

struct WebhookStats {
  std::int64_t queued = 0;     // deliveries accepted by notify()
  std::int64_t delivered = 0;  // answered 2xx
  std::int64_t retries = 0;    // attempts after a failed one
  std::int64_t failed = 0;     // given up (refused for good, or out of attempts)
  std::int64_t dropped = 0;    // not queued: the queue was full
  std::size_t pending = 0;     // waiting now (first try or retry)
  std::string last_error;      // of the last failed attempt (URL, status or transport error)
};

// One POST: the HTTP status, or 0 when no reply came (and `error` says why).
struct WebhookPostResult {
  int status = 0;
  std::string error;
};
using WebhookPoster =
    std::function<WebhookPostResult(const std::string& url, const std::vector<std::string>& headers,
                                    const std::string& body, double timeout_s)>;
// libcurl (market::http_perform).
WebhookPoster curl_webhook_poster();

// "t=<timestamp>,v1=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>".
std::string webhook_signature(std::string_view secret, std::int64_t timestamp,
                              std::string_view body);

class Webhooks {
 public:
  using Clock = std::function<double()>;  // epoch seconds: "at" and the signature's timestamp
  // Starts the delivery thread when `config.urls` is non-empty.
  explicit Webhooks(WebhookConfig config, Clock clock,
                    WebhookPoster poster = curl_webhook_poster());
  ~Webhooks();
  Webhooks(const Webhooks&) = delete;
  Webhooks& operator=(const Webhooks&) = delete;

  bool enabled() const { return !config_.urls.empty(); }
  // Queues `event` with `data` for every URL and returns at once; false (and counted as
  // dropped) when the queue is full or webhooks are off.
  bool notify(const std::string& event, nlohmann::json data);
  WebhookStats stats();
  // Stops the thread; what is still waiting is dropped (a POST under way ends within
  // timeout_s). Idempotent; the destructor calls it.
  void stop();

 private:
  struct Delivery {
    std::string id;
    std::string url;
    std::string event;
    std::string body;
    int attempts = 0;
    double due = 0;  // steady seconds
  };
  void run();

  WebhookConfig config_;
  Clock clock_;
  WebhookPoster poster_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Delivery> queue_;  // guarded by mu_
  WebhookStats stats_;          // guarded by mu_ (pending computed)
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace pf::manager
