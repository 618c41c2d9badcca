// [alerts], [webhooks] and deploy.log_kib_per_instance: defaults from the example, bounds, the
// environment, and no place for the webhook secret itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/config.h"

namespace pf::cli {
namespace {

using ::testing::HasSubstr;

TEST(OpsConfig, TheExampleGivesTheDefaults) {
  auto cfg = load_config(std::string(PF_SOURCE_DIR) + "/proverfleet.example.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  const AppConfig defaults;
  EXPECT_EQ(cfg->alerts.interval_s, defaults.alerts.interval_s);
  EXPECT_FALSE(cfg->alerts.alerts.act_on_hand_deployed);
  EXPECT_TRUE(cfg->alerts.alerts.act_on_autopilot_rented);
  EXPECT_EQ(cfg->alerts.alerts.stall.min_s, defaults.alerts.alerts.stall.min_s);
  EXPECT_EQ(cfg->alerts.alerts.stall.factor, defaults.alerts.alerts.stall.factor);
  EXPECT_TRUE(cfg->webhooks.urls.empty());
  EXPECT_EQ(cfg->webhooks.max_attempts, defaults.webhooks.max_attempts);
  EXPECT_EQ(cfg->deploy.log_kib_per_instance, 256);
  EXPECT_EQ(cfg->deploy.log_retention_days, 30);
  EXPECT_EQ(cfg->deploy.event_retention_days, 365);
}

TEST(OpsConfig, SettingsFromTheFileAndTheEnvironment) {
  auto cfg = parse_config(
      R"(
[alerts]
act_on_hand_deployed = true
stall_min_minutes = 45
budget_dollars_per_hour = 12.5
[webhooks]
urls = ["https://hooks.example/a", "http://127.0.0.1:9000/b"]
secret_file = "/etc/proverfleet/webhook.secret"
max_attempts = 3
)",
      "t.toml",
      {{"PROVERFLEET_ALERTS_STALL_FACTOR", "6"}, {"PROVERFLEET_WEBHOOKS_TIMEOUT_S", "20"}});
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_TRUE(cfg->alerts.alerts.act_on_hand_deployed);
  EXPECT_EQ(cfg->alerts.alerts.stall.min_s, 45 * 60);
  EXPECT_EQ(cfg->alerts.alerts.stall.factor, 6);
  EXPECT_EQ(cfg->alerts.alerts.budget_dollars_per_hour, 12.5);
  ASSERT_EQ(cfg->webhooks.urls.size(), 2u);
  EXPECT_EQ(cfg->webhooks.secret_file, "/etc/proverfleet/webhook.secret");
  EXPECT_EQ(cfg->webhooks.max_attempts, 3);
  EXPECT_EQ(cfg->webhooks.timeout_s, 20);
}

TEST(OpsConfig, BadValuesAreRefusedNamingTheKey) {
  auto bad = [](const std::string& text) {
    auto cfg = parse_config(text, "t.toml");
    return cfg ? std::string() : cfg.error();
  };
  EXPECT_THAT(bad("[webhooks]\nurls = [\"ftp://x\"]\n"), HasSubstr("webhooks.urls"));
  EXPECT_THAT(bad("[webhooks]\nsecret = \"hunter2\"\n"),
              HasSubstr("unknown key 'webhooks.secret'"));
  EXPECT_THAT(bad("[webhooks]\nmax_attempts = 0\n"), HasSubstr("webhooks.max_attempts"));
  EXPECT_THAT(bad("[alerts]\nstall_factor = nan\n"), HasSubstr("alerts.stall_factor"));
  EXPECT_THAT(bad("[alerts]\nbudget_usd = -1\n"), HasSubstr("alerts.budget_usd"));
  EXPECT_THAT(bad("[alerts]\ninterval_s = 0\n"), HasSubstr("alerts.interval_s"));
  EXPECT_THAT(bad("[deploy]\nlog_kib_per_instance = 0\n"),
              HasSubstr("deploy.log_kib_per_instance"));
  EXPECT_THAT(bad("[deploy]\nlog_retention_days = -1\n"), HasSubstr("deploy.log_retention_days"));
  EXPECT_THAT(bad("[deploy]\nevent_retention_days = inf\n"),
              HasSubstr("deploy.event_retention_days"));
}

}  // namespace
}  // namespace pf::cli
