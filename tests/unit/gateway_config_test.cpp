// [gateway] and [jobs] in proverfleet.toml, and how `serve` turns them (with --grpc-listen and
// --grpc-allow-any) into the gateway's config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/commands.h"
#include "cli/config.h"
#include "cli/jobs_settings.h"
#include "cli/serve_gateway.h"

namespace pf::cli {
namespace {

using ::testing::HasSubstr;

TEST(GatewayConfig, ExampleConfigHoldsTheDefaults) {
  auto cfg = load_config(std::string(PF_SOURCE_DIR) + "/proverfleet.example.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  const GatewaySettings gateway_defaults;
  const JobsSettings jobs_defaults;
  EXPECT_EQ(cfg->gateway.listen, gateway_defaults.listen);
  EXPECT_EQ(cfg->gateway.listen, "127.0.0.1:9820");
  EXPECT_TRUE(cfg->gateway.allow.empty());
  EXPECT_EQ(cfg->gateway.max_pending_window, gateway_defaults.max_pending_window);
  EXPECT_EQ(cfg->jobs.max_input_mib, jobs_defaults.max_input_mib);
  EXPECT_EQ(cfg->jobs.default_deadline_min, jobs_defaults.default_deadline_min);
  EXPECT_EQ(cfg->jobs.max_attempts, jobs_defaults.max_attempts);
}

TEST(GatewayConfig, SectionsAreRead) {
  auto cfg = parse_config(R"(
[gateway]
listen = "[::]:9900"
allow = ["10.0.0.0/8", "fd00::1"]
max_pending_window = 200
[jobs]
max_input_mib = 128
)",
                          "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->gateway.listen, "[::]:9900");
  EXPECT_EQ(cfg->gateway.allow, (std::vector<std::string>{"10.0.0.0/8", "fd00::1"}));
  EXPECT_EQ(cfg->gateway.max_pending_window, 200);
  // The gateway and the queue refuse inputs at the same size.
  EXPECT_EQ(job_queue_config(cfg->jobs, "/var/lib/pf/pf.db").max_input_bytes,
            gateway_config(*cfg, std::string("127.0.0.1:0"), false)->max_input_bytes);
  EXPECT_EQ(gateway_config(*cfg, std::string("127.0.0.1:0"), false)->max_input_bytes, 128LL << 20);
}

TEST(GatewayConfig, BadValuesAreNamed) {
  const auto error = [](const std::string& text) {
    auto cfg = parse_config(text, "t.toml");
    EXPECT_FALSE(cfg) << text;
    return cfg ? std::string() : cfg.error();
  };
  EXPECT_THAT(error("[gateway]\nallow = [\"10.0.0.0/33\"]\n"), HasSubstr("gateway.allow"));
  EXPECT_THAT(error("[gateway]\nallow = [\"curio.lan\"]\n"), HasSubstr("'curio.lan'"));
  EXPECT_THAT(error("[gateway]\nallow = \"10.0.0.1\"\n"), HasSubstr("an array of strings"));
  EXPECT_THAT(error("[gateway]\nlisten = \"9820\"\n"), HasSubstr("gateway.listen"));
  EXPECT_THAT(error("[gateway]\ntls_cert = \"c.pem\"\n"), HasSubstr("both or neither"));
  EXPECT_THAT(error("[gateway]\nmax_pending_window = 0\n"),
              HasSubstr("gateway.max_pending_window"));
  EXPECT_THAT(error("[gateway]\nlisen = \"x\"\n"), HasSubstr("gateway.lisen"));
  EXPECT_THAT(error("[jobs]\nmax_input_mib = 5000\n"), HasSubstr("jobs.max_input_mib"));
  std::string many = "[gateway]\nallow = [";
  for (int i = 0; i < 1100; ++i) many += "\"10.0.0.1\",";
  many += "]\n";
  EXPECT_THAT(error(many), HasSubstr("at most 1024 entries"));
}

TEST(GatewayConfig, ListenOffAndEnvironmentAllowList) {
  auto cfg = parse_config("[gateway]\nlisten = \"off\"\n", "t.toml",
                          {{"PROVERFLEET_GATEWAY_ALLOW", "10.0.0.1, 192.168.0.0/16,"}});
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->gateway.allow, (std::vector<std::string>{"10.0.0.1", "192.168.0.0/16"}));
  EXPECT_FALSE(gateway_config(*cfg, std::nullopt, false));
  EXPECT_FALSE(gateway_config(*cfg, std::string(""), false));
  EXPECT_TRUE(gateway_config(*cfg, std::string("127.0.0.1:0"), false));
}

TEST(GatewayConfig, ServeRefusesAnExposedGatewayUnlessTold) {
  auto cfg = parse_config("[jobs]\nmax_input_mib = 64\n", "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  try {
    (void)gateway_config(*cfg, std::string("0.0.0.0:9820"), false);
    ADD_FAILURE() << "an exposed gateway was accepted";
  } catch (const CommandFailed& e) {
    EXPECT_THAT(e.what(), HasSubstr("no credentials"));
  }
  const auto told = gateway_config(*cfg, std::string("0.0.0.0:9820"), true);
  ASSERT_TRUE(told);
  EXPECT_TRUE(told->allow_any);
  EXPECT_EQ(told->max_input_bytes, 64LL << 20);
  cfg->gateway.allow = {"10.0.0.0/8"};
  EXPECT_TRUE(gateway_config(*cfg, std::string("0.0.0.0:9820"), false));
  EXPECT_THROW((void)gateway_config(*cfg, std::string("nonsense"), false), CommandFailed);
}

}  // namespace
}  // namespace pf::cli
