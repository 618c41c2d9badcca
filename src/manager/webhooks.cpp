#include "manager/webhooks.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "manager/tokens.h"
#include "market/http_client.h"
#include "market/http_outcome.h"
#include "util/bounded_json.h"
#include "util/hex.h"
#include "util/steady_clock.h"

namespace pf::manager {
namespace {

double steady_now() {
  return util::steady_seconds();
}

// A URL for messages: scheme and host only; paths and queries of webhook URLs often carry the
// receiver's own key (Slack, Discord).
std::string url_for_message(const std::string& url) {
  const auto scheme = url.find("://");
  const auto host_end = url.find_first_of("/?#", scheme == std::string::npos ? 0 : scheme + 3);
  return url.substr(0, host_end);
}

}  // namespace

std::string webhook_signature(std::string_view secret, std::int64_t timestamp,
                              std::string_view body) {
  const std::string signed_text = std::to_string(timestamp) + "." + std::string(body);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(signed_text.data()), signed_text.size(), md,
           &len) == nullptr) {
    throw std::runtime_error("HMAC-SHA256 failed");
  }
  return "t=" + std::to_string(timestamp) + ",v1=" + util::lower_hex(md, len);
}

WebhookPoster curl_webhook_poster() {
  return [](const std::string& url, const std::vector<std::string>& headers,
            const std::string& body, double timeout_s) {
    market::HttpOptions options;
    options.connect_timeout_s = std::min(timeout_s, 10.0);
    options.request_timeout_s = timeout_s;
    options.max_body_bytes = 64 * 1024;  // the receiver's reply is not read beyond its status
    market::HttpRequest request;
    request.method = "POST";
    request.url = url;
    request.headers = headers;
    request.body = body;
    const auto reply = market::http_perform(options, request);
    if (reply) return WebhookPostResult{reply->status, ""};
    // A reply too large (or cut short) still said its status: that settles the delivery.
    if (reply.error().status > 0) return WebhookPostResult{reply.error().status, ""};
    WebhookPostResult failed;
    failed.status = 0;
    failed.error = market::describe(reply.error());
    return failed;
  };
}

Webhooks::Webhooks(WebhookConfig config, Clock clock, WebhookPoster poster)
    : config_(std::move(config)), clock_(std::move(clock)), poster_(std::move(poster)) {
  if (enabled()) thread_ = std::thread([this] { run(); });
}

Webhooks::~Webhooks() {
  stop();
}

void Webhooks::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool Webhooks::notify(const std::string& event, nlohmann::json data) {
  if (!enabled()) return false;
  // One id for the event: each URL's delivery carries it, so receivers can de-duplicate.
  const std::string id = random_token().substr(0, 32);
  const nlohmann::json payload = {
      {"id", id}, {"event", event}, {"at", clock_()}, {"data", std::move(data)}};
  // A non-finite number would be dumped as null; replace() keeps a bad byte from throwing.
  const std::string body = util::dump_json_lossy(payload);
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() + config_.urls.size() > config_.queue_max) {
      stats_.dropped += static_cast<std::int64_t>(config_.urls.size());
      return false;
    }
    const double now = steady_now();
    for (const auto& url : config_.urls) {
      queue_.push_back(Delivery{id, url, event, body, 0, now});
      ++stats_.queued;
    }
  }
  cv_.notify_all();
  return true;
}

WebhookStats Webhooks::stats() {
  std::lock_guard lock(mu_);
  WebhookStats s = stats_;
  s.pending = queue_.size();
  return s;
}

void Webhooks::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      continue;
    }
    // The delivery due first; equal times keep their order (events in the order they came).
    auto next =
        std::min_element(queue_.begin(), queue_.end(),
                         [](const Delivery& a, const Delivery& b) { return a.due < b.due; });
    const double wait_s = next->due - steady_now();
    if (wait_s > 0) {
      cv_.wait_for(lock, std::chrono::duration<double>(wait_s));
      continue;  // re-pick: something newer may be due first, or we are stopping
    }
    Delivery d = std::move(*next);
    queue_.erase(next);
    lock.unlock();

    const auto timestamp = static_cast<std::int64_t>(std::floor(clock_()));
    const std::vector<std::string> headers = {
        "Content-Type: application/json",
        "X-Proverfleet-Event: " + d.event,
        "X-Proverfleet-Delivery: " + d.id,
        "X-Proverfleet-Signature: " + webhook_signature(config_.secret, timestamp, d.body),
    };
    WebhookPostResult result;
    try {
      result = poster_(d.url, headers, d.body, config_.timeout_s);
    } catch (const std::exception& e) {
      result = WebhookPostResult{0, e.what()};
    }
    ++d.attempts;

    lock.lock();
    if (core::webhook_delivered(result.status)) {
      ++stats_.delivered;
      continue;
    }
    stats_.last_error =
        d.event + " to " + url_for_message(d.url) + ": " +
        (result.status > 0 ? "HTTP " + std::to_string(result.status) : result.error);
    const auto delay = core::webhook_retry_delay(d.attempts, result.status, config_.retry);
    if (!delay || stopping_) {
      ++stats_.failed;
      continue;
    }
    ++stats_.retries;
    d.due = steady_now() + *delay;
    queue_.push_back(std::move(d));
  }
}

}  // namespace pf::manager
