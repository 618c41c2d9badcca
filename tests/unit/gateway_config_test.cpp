// [gateway] and [jobs] in proverfleet.toml, and how `serve` turns them (with --grpc-listen and
// --grpc-allow-any) into the gateway's config.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "cli/commands.h"
#include "cli/config.h"
#include "cli/jobs_settings.h"
#include "cli/serve_gateway.h"
#include "gateway/gateway_server.h"
#include "support/temp_dir.h"

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
max_connection_age_s = 5
[jobs]
max_input_mib = 128
)",
                          "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->gateway.listen, "[::]:9900");
  EXPECT_EQ(cfg->gateway.allow, (std::vector<std::string>{"10.0.0.0/8", "fd00::1"}));
  EXPECT_EQ(cfg->gateway.max_pending_window, 200);
  // A serve that hands over stays until every connection was told to go: 5 s × 1.1 + 2 s.
  const auto gateway = gateway_config(*cfg, std::string("127.0.0.1:0"), false);
  ASSERT_TRUE(gateway);
  EXPECT_EQ(gateway->max_connection_age_s, 5);
  EXPECT_EQ(gateway::all_connections_told_to_go(*gateway), std::chrono::milliseconds(7500));
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
  EXPECT_THAT(error("[gateway]\nmax_pending_window = -1\n"),
              HasSubstr("gateway.max_pending_window"));
  EXPECT_THAT(error("[gateway]\ncurio_nodes = 0\n"), HasSubstr("gateway.curio_nodes"));
  EXPECT_THAT(error("[gateway]\nmax_connection_age_s = 0.5\n"),
              HasSubstr("gateway.max_connection_age_s"));
  EXPECT_THAT(error("[gateway]\nlocal_cuzk = \"cuzk\"\n"), HasSubstr("gateway.local_cuzk"));
  EXPECT_THAT(error("[gateway]\nlocal_cuzk = \"unix:relative.sock\"\n"),
              HasSubstr("unix:///absolute/path"));
  EXPECT_THAT(error("[gateway]\nkeep_local = [\"porep\"]\n"), HasSubstr("not a proof kind"));
  EXPECT_THAT(error("[gateway]\nrequire_client_token = true\n"), HasSubstr("client_tokens_file"));
  EXPECT_THAT(error("[gateway]\nlisen = \"x\"\n"), HasSubstr("gateway.lisen"));
  EXPECT_THAT(error("[jobs]\nmax_input_mib = 5000\n"), HasSubstr("jobs.max_input_mib"));
  std::string many = "[gateway]\nallow = [";
  for (int i = 0; i < 1100; ++i) many += "\"10.0.0.1\",";
  many += "]\n";
  EXPECT_THAT(error(many), HasSubstr("at most 1024 entries"));
}

// Issue 25: the window is Curio's nodes × MaxPending; PoSt goes to the operator's own cuzk; client
// tokens come from a private file.
TEST(GatewayConfig, CurioSizingLocalCuzkAndClientTokens) {
  pf::testing::TempDir dir;
  const std::string tokens = dir.file("client-tokens");
  {
    std::ofstream out(tokens);
    out << "# clients of this gateway\nbench-rig 0123456789abcdef0123\n";
  }
  ::chmod(tokens.c_str(), 0600);
  auto cfg = parse_config(R"(
[gateway]
curio_nodes = 3
curio_max_pending = 12
local_cuzk = "127.0.0.1:9821"
keep_local = ["snap-update"]
client_tokens_file = ")" + tokens +
                              R"("
)",
                          "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  auto g = gateway_config(*cfg, std::string("127.0.0.1:0"), false);
  ASSERT_TRUE(g);
  EXPECT_EQ(gateway::open_call_window(*g), 36);
  EXPECT_EQ(gateway::max_gateway_threads(*g), 2 * 36 + gateway::kThreadHeadroom);
  EXPECT_EQ(g->local_cuzk, "127.0.0.1:9821");
  EXPECT_EQ(g->keep_local, std::vector<core::JobKind>{core::JobKind::SnapUpdate});
  ASSERT_EQ(g->client_auth.tokens.size(), 1u);
  EXPECT_EQ(g->client_auth.tokens[0].client, "bench-rig");
  // An explicit window wins over the product.
  cfg->gateway.max_pending_window = 50;
  EXPECT_EQ(gateway::open_call_window(*gateway_config(*cfg, std::string("127.0.0.1:0"), false)),
            50);
  // Secrets readable by others are refused, naming the file and the fix.
  ::chmod(tokens.c_str(), 0644);
  try {
    gateway_config(*cfg, std::string("127.0.0.1:0"), false);
    ADD_FAILURE() << "a world-readable tokens file was accepted";
  } catch (const CommandFailed& e) {
    EXPECT_THAT(e.what(), HasSubstr("chmod 600"));
  }
  // The gateway may not relay PoSt to itself.
  ::chmod(tokens.c_str(), 0600);
  cfg->gateway.local_cuzk = "127.0.0.1:9820";
  try {
    gateway_config(*cfg, std::string("127.0.0.1:9820"), false);
    ADD_FAILURE() << "local_cuzk equal to the listen address was accepted";
  } catch (const CommandFailed& e) {
    EXPECT_THAT(e.what(), HasSubstr("loop back"));
  }
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
