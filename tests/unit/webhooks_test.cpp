// Webhooks against a local HTTP server: the body and headers, the HMAC signature a receiver
// checks, retries with backoff after failures (bounded), no retry after a refusal, the bounded
// queue, and that notify() never waits for a slow receiver. Also the retry rule itself, and
// which instance changes are news (manager/instance_webhooks.h).
#include "manager/webhooks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/webhook_retry.h"
#include "manager/instance_webhooks.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/eventually.h"
#include "support/fake_market.h"
#include "support/loopback_server.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using pf::test::eventually;
using pf::test::holds_for;
using ::testing::HasSubstr;

struct Received {
  std::string event, delivery, signature, body, content_type;
};

// A receiver that answers each request with the next status of `script` (then 200).
class Receiver {
 public:
  explicit Receiver(std::vector<int> script = {}) : script_(std::move(script)) {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      int status = 200;
      {
        std::lock_guard lock(mu_);
        got_.push_back({req.get_header_value("X-Proverfleet-Event"),
                        req.get_header_value("X-Proverfleet-Delivery"),
                        req.get_header_value("X-Proverfleet-Signature"), req.body,
                        req.get_header_value("Content-Type")});
        if (next_ < script_.size()) status = script_[next_++];
      }
      if (hold_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms_.load()));
      res.status = status;
      res.set_content("{}", "application/json");
    });
    serving_ = std::make_unique<test::LoopbackServing>(server_);
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(serving_->port()) + "/hook";
  }
  std::vector<Received> got() {
    std::lock_guard lock(mu_);
    return got_;
  }
  std::atomic<int> hold_ms_{0};

 private:
  httplib::Server server_;
  std::unique_ptr<test::LoopbackServing> serving_;
  std::mutex mu_;
  std::vector<int> script_;
  std::size_t next_ = 0;
  std::vector<Received> got_;
};

// What a receiver does: recompute the HMAC over "<t>.<body>" with the shared secret.
bool signature_valid(const std::string& header, const std::string& secret,
                     const std::string& body) {
  const auto comma = header.find(",v1=");
  if (header.rfind("t=", 0) != 0 || comma == std::string::npos) return false;
  const std::string t = header.substr(2, comma - 2);
  const std::string given = header.substr(comma + 4);
  const std::string text = t + "." + body;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), md, &len);
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned i = 0; i < len; ++i) {
    hex.push_back(digits[md[i] >> 4]);
    hex.push_back(digits[md[i] & 15]);
  }
  return hex == given;
}

WebhookConfig config_for(const std::string& url) {
  WebhookConfig cfg;
  cfg.urls = {url};
  cfg.secret = "s3cret-shared";
  cfg.retry.base_s = 0.05;
  cfg.retry.max_delay_s = 0.2;
  cfg.retry.max_attempts = 4;
  cfg.timeout_s = 10;
  return cfg;
}

TEST(WebhookSignature, IsHmacSha256OverTimestampDotBody) {
  // RFC 4231-style check against OpenSSL directly, and the header's shape.
  const std::string sig = webhook_signature("key", 1700000000, R"({"a":1})");
  EXPECT_EQ(sig.substr(0, 13), "t=1700000000,");
  EXPECT_TRUE(signature_valid(sig, "key", R"({"a":1})"));
  EXPECT_FALSE(signature_valid(sig, "other key", R"({"a":1})"));
  EXPECT_FALSE(signature_valid(sig, "key", R"({"a":2})"));
}

TEST(Webhooks, PostsSignedJsonWithEventAndDeliveryHeaders) {
  Receiver receiver;
  Webhooks hooks(config_for(receiver.url()), [] { return 1'700'000'000.0; });
  ASSERT_TRUE(hooks.notify(kWebhookInstanceAccepted, {{"instance_id", 7}, {"rate", 61.4}}));
  ASSERT_TRUE(eventually([&] { return hooks.stats().delivered == 1; }));
  const auto got = receiver.got();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event, "instance.accepted");
  EXPECT_EQ(got[0].content_type, "application/json");
  EXPECT_TRUE(signature_valid(got[0].signature, "s3cret-shared", got[0].body));
  const json body = json::parse(got[0].body);
  EXPECT_EQ(body["event"], "instance.accepted");
  EXPECT_EQ(body["id"], got[0].delivery);
  EXPECT_EQ(body["data"]["instance_id"], 7);
  EXPECT_EQ(body["at"], 1'700'000'000.0);
  // The secret is in no header and no body.
  EXPECT_EQ(got[0].body.find("s3cret"), std::string::npos);
  EXPECT_EQ(got[0].signature.find("s3cret"), std::string::npos);
}

TEST(Webhooks, RetriesFailuresWithBackoffUntilDeliveredUnderOneDeliveryId) {
  Receiver receiver({500, 503, 429});
  Webhooks hooks(config_for(receiver.url()), [] { return 1'700'000'000.0; });
  ASSERT_TRUE(hooks.notify(kWebhookInstanceCrashed, {{"instance_id", 3}}));
  ASSERT_TRUE(eventually([&] { return hooks.stats().delivered == 1; }));
  const auto got = receiver.got();
  ASSERT_EQ(got.size(), 4u);
  for (const auto& r : got) {
    EXPECT_EQ(r.delivery, got[0].delivery);  // receivers de-duplicate by it
    EXPECT_TRUE(signature_valid(r.signature, "s3cret-shared", r.body));
  }
  const auto stats = hooks.stats();
  EXPECT_EQ(stats.retries, 3);
  EXPECT_EQ(stats.failed, 0);
  EXPECT_EQ(stats.pending, 0u);
}

TEST(Webhooks, GivesUpAfterMaxAttemptsAndNeverRetriesARefusal) {
  Receiver failing({500, 500, 500, 500, 500, 500});
  Webhooks hooks(config_for(failing.url()), [] { return 0.0; });
  ASSERT_TRUE(hooks.notify(kWebhookAlertRaised, {{"instance_id", 1}}));
  ASSERT_TRUE(eventually([&] { return hooks.stats().failed == 1; }));
  EXPECT_EQ(failing.got().size(), 4u);  // max_attempts
  EXPECT_THAT(hooks.stats().last_error, HasSubstr("HTTP 500"));

  Receiver refusing({401});
  Webhooks refused(config_for(refusing.url()), [] { return 0.0; });
  ASSERT_TRUE(refused.notify(kWebhookAlertRaised, {{"instance_id", 1}}));
  ASSERT_TRUE(eventually([&] { return refused.stats().failed == 1; }));
  EXPECT_TRUE(
      holds_for([&] { return refusing.got().size() == 1u; }, std::chrono::milliseconds(300)))
      << "a refused delivery was retried";
}

TEST(Webhooks, NotifyNeverWaitsForASlowReceiverAndTheQueueIsBounded) {
  Receiver slow;
  slow.hold_ms_ = 1500;
  WebhookConfig cfg = config_for(slow.url());
  cfg.queue_max = 5;
  Webhooks hooks(cfg, [] { return 0.0; });
  const auto start = std::chrono::steady_clock::now();
  int accepted = 0;
  for (int i = 0; i < 20; ++i) accepted += hooks.notify(kWebhookAlertRaised, {{"i", i}}) ? 1 : 0;
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 1.0);  // 20 notifies while the receiver holds the first POST 1.5 s
  EXPECT_GE(accepted, 5);
  EXPECT_LE(accepted, 6);  // the queue (5) and perhaps one already taken by the thread
  EXPECT_EQ(hooks.stats().dropped, 20 - accepted);
  hooks.stop();  // drops the rest; returns once the POST under way ends
}

TEST(Webhooks, UnreachableReceiverIsRetriedThenFailed) {
  WebhookConfig cfg = config_for("http://127.0.0.1:1/hook");  // nothing listens on port 1
  cfg.retry.max_attempts = 2;
  Webhooks hooks(cfg, [] { return 0.0; });
  ASSERT_TRUE(hooks.notify(kWebhookAutopilotPaused, {{"by", "x"}}));
  ASSERT_TRUE(eventually([&] { return hooks.stats().failed == 1; }));
  EXPECT_EQ(hooks.stats().retries, 1);
}

TEST(Webhooks, TheManagersLifecycleEventsArriveSignedAtTheReceiver) {
  Receiver receiver;
  Webhooks hooks(config_for(receiver.url()), [] { return 1'700'000'000.0; });
  auto store = store::open_store(":memory:");
  pf::testing::FakeMarket market;
  market.add_offer(101, 11, 0.40);
  ManagerConfig cfg;
  cfg.lifecycle.destroy_retry_s = 0;
  Manager manager(*store, market, cfg, [] { return 1'000'000.0; });
  manager.set_notifier([&](const std::string& event, json data) { hooks.notify(event, data); });
  auto rec = manager.deploy(101, "deploy");
  ASSERT_TRUE(rec);
  ASSERT_TRUE(manager.request_destroy(rec->id, "operator request"));  // destroyed at once
  ASSERT_TRUE(eventually([&] { return hooks.stats().delivered >= 1; }));
  const auto got = receiver.got();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event, "instance.destroyed");
  EXPECT_TRUE(signature_valid(got[0].signature, "s3cret-shared", got[0].body));
  const json body = json::parse(got[0].body);
  EXPECT_EQ(body["data"]["instance_id"], rec->id);
  EXPECT_EQ(body["data"]["cause"], "operator");
}

TEST(InstanceWebhooks, OnlyAcceptanceAndDestructionOfAllStateChangesAreNews) {
  core::InstanceRecord rec;
  rec.id = 7;
  rec.offer.machine_id = 11;
  rec.close_cause = core::CloseCause::Operator;
  EXPECT_FALSE(transition_notice(rec, core::InstanceState::Booting, "market instance 5"));
  EXPECT_FALSE(transition_notice(rec, core::InstanceState::Destroying, "operator request"));
  const auto accepted = transition_notice(rec, core::InstanceState::Proving, "fast enough");
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->event, kWebhookInstanceAccepted);
  EXPECT_EQ(accepted->data["instance_id"], 7);
  EXPECT_EQ(accepted->data["machine_id"], 11);
  EXPECT_EQ(accepted->data["reason"], "fast enough");
  const auto destroyed = transition_notice(rec, core::InstanceState::Destroyed, "confirmed");
  ASSERT_TRUE(destroyed);
  EXPECT_EQ(destroyed->event, kWebhookInstanceDestroyed);
  EXPECT_EQ(destroyed->data["cause"], "operator");
}

TEST(InstanceWebhooks, ARejectedOrVanishedCloseIsNewsAndAnyOtherIsNot) {
  core::InstanceRecord rec;
  rec.id = 3;
  const auto rejected = close_notice(rec, {core::CloseCause::Rejected, "too slow"});
  ASSERT_TRUE(rejected);
  EXPECT_EQ(rejected->event, kWebhookInstanceRejected);
  EXPECT_EQ(rejected->data["cause"], "rejected");
  const auto exited = close_notice(rec, {core::CloseCause::MarketExited, "exited"});
  ASSERT_TRUE(exited);
  EXPECT_EQ(exited->event, kWebhookInstanceCrashed);
  EXPECT_FALSE(close_notice(rec, {core::CloseCause::Operator, "operator request"}));
  const auto crashed = prover_crashed_notice(rec, "signal 9");
  EXPECT_EQ(crashed.event, kWebhookInstanceCrashed);
  EXPECT_EQ(crashed.data["cause"], "prover_crashed");
  EXPECT_EQ(crashed.data["reason"], "signal 9");
}

TEST(WebhookRetry, RetriesTransientFailuresWithDoublingCappedDelays) {
  core::WebhookRetryConfig cfg;  // 6 attempts, 2 s doubling, 300 s cap
  EXPECT_EQ(core::webhook_retry_delay(1, 500, cfg), 2.0);
  EXPECT_EQ(core::webhook_retry_delay(2, 0, cfg), 4.0);
  EXPECT_EQ(core::webhook_retry_delay(3, 429, cfg), 8.0);
  EXPECT_EQ(core::webhook_retry_delay(5, 408, cfg), 32.0);
  EXPECT_FALSE(core::webhook_retry_delay(6, 500, cfg));  // out of attempts
  EXPECT_FALSE(core::webhook_retry_delay(1, 200, cfg));  // delivered
  EXPECT_FALSE(core::webhook_retry_delay(1, 400, cfg));  // refused for good
  EXPECT_FALSE(core::webhook_retry_delay(1, 404, cfg));
  cfg.max_attempts = 100;
  EXPECT_EQ(core::webhook_retry_delay(40, 503, cfg), 300.0);
}

}  // namespace
}  // namespace pf::manager
