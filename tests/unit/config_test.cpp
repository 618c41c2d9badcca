#include "cli/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli/jobs_settings.h"

namespace pf::cli {
namespace {

using ::testing::HasSubstr;

TEST(Config, ExampleConfigParsesToDefaults) {
  auto cfg = load_config(std::string(PF_SOURCE_DIR) + "/proverfleet.example.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  core::RankConfig defaults;
  EXPECT_EQ(cfg->rank.economics.revenue_per_proof_usd, defaults.economics.revenue_per_proof_usd);
  EXPECT_EQ(cfg->rank.setup.expected_lifetime_h, defaults.setup.expected_lifetime_h);
  EXPECT_EQ(cfg->rank.predictor.priors.size(), core::default_predictor_config().priors.size());
  EXPECT_EQ(cfg->market.rate_limits.describe(), market::vast_documented_rate_limits().describe());
}

TEST(Config, MarketRateLimitsAreReadAndBadOnesNamed) {
  auto own = parse_config("[market]\nrate_limits = \"search=5/60,create=10\"\n", "m.toml");
  ASSERT_TRUE(own) << own.error();
  EXPECT_EQ(own->market.rate_limits.describe(), "search=5/60s,create=10s");
  auto off = parse_config("[market]\nrate_limits = \"off\"\n", "m.toml");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->market.rate_limits.any());
  auto bad = parse_config("[market]\nrate_limits = \"create=fast\"\n", "m.toml");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error(), HasSubstr("market.rate_limits"));
  EXPECT_THAT(bad.error(), HasSubstr("create=fast"));
}

TEST(Config, PriorOverridesReplaceAndExtend) {
  auto cfg = parse_config(R"(
[economics]
revenue_per_proof_usd = 0.02
[[predictor.prior]]
gpu_name = "rtx 4090"
rate_per_gpu = 70
[[predictor.prior]]
gpu_name = "Future GPU"
rate_per_gpu = 99
band = 0.2
)",
                          "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_DOUBLE_EQ(cfg->rank.economics.revenue_per_proof_usd, 0.02);
  const auto* p = core::find_prior(cfg->rank.predictor, "RTX 4090");
  ASSERT_NE(p, nullptr);
  EXPECT_DOUBLE_EQ(p->rate_per_gpu, 70);
  EXPECT_EQ(cfg->rank.predictor.priors.size(), core::default_predictor_config().priors.size() + 1);
}

TEST(Config, LifecycleAcceptanceAndDeploySections) {
  auto cfg = parse_config(R"(
[lifecycle]
heartbeat_timeout_s = 20
max_prover_crashes = 2
[acceptance]
min_samples = 4
max_samples = 9
[deploy]
image = "me/agent:1"
)",
                          "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->lifecycle.heartbeat_timeout_s, 20);
  EXPECT_EQ(cfg->lifecycle.max_prover_crashes, 2);
  EXPECT_EQ(cfg->acceptance.min_samples, 4);
  EXPECT_EQ(cfg->lifecycle.bench_max_samples, 9);  // deadline sized for the sample cap
  EXPECT_EQ(cfg->deploy.image, "me/agent:1");
  auto inverted = parse_config("[acceptance]\nmin_samples = 10\nmax_samples = 5\n", "u.toml");
  ASSERT_FALSE(inverted);
  EXPECT_THAT(inverted.error(), HasSubstr("acceptance.min_samples"));
  auto empty_image = parse_config("[deploy]\nimage = \"\"\n", "v.toml");
  ASSERT_FALSE(empty_image);
  EXPECT_THAT(empty_image.error(), HasSubstr("deploy.image"));
}

TEST(Config, ErrorsNameTheKey) {
  auto unknown = parse_config("[economics]\nrevenue_per_prof_usd = 1\n", "a.toml");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error(), HasSubstr("economics.revenue_per_prof_usd"));
  auto type = parse_config("[setup]\nwarmup_h = \"long\"\n", "b.toml");
  ASSERT_FALSE(type);
  EXPECT_THAT(type.error(), HasSubstr("setup.warmup_h"));
  auto range = parse_config("[setup]\ndownload_speed_fraction = 2\n", "c.toml");
  ASSERT_FALSE(range);
  EXPECT_THAT(range.error(), HasSubstr("between 0 and 1"));
  auto top = parse_config("[econmics]\n", "d.toml");
  ASSERT_FALSE(top);
  EXPECT_THAT(top.error(), HasSubstr("econmics"));
  auto syntax = parse_config("[economics\n", "e.toml");
  ASSERT_FALSE(syntax);
  EXPECT_THAT(syntax.error(), HasSubstr("e.toml:1"));
  auto prior = parse_config("[[predictor.prior]]\nrate_per_gpu = 3\n", "f.toml");
  ASSERT_FALSE(prior);
  EXPECT_THAT(prior.error(), HasSubstr("predictor.prior[0].gpu_name"));
  auto missing = load_config(std::string("/nonexistent/x.toml"));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("/nonexistent/x.toml"));
}

TEST(Config, EnvironmentOverridesEveryKindOfKey) {
  Environment env = {{"PROVERFLEET_ACCEPTANCE_MIN_SAMPLES", "8"},
                     {"PROVERFLEET_DEPLOY_IMAGE", "me/agent:2"},
                     {"PROVERFLEET_AUTOPILOT_ENABLED", "true"},
                     {"PROVERFLEET_AUTOPILOT_DEMAND_PROOFS_PER_HOUR", "300"},
                     {"PROVERFLEET_MARKET_VAST_URL", "http://127.0.0.1:1"},
                     {"PROVERFLEET_MANAGER", "not a config key: other commands read it"}};
  auto cfg =
      parse_config("[acceptance]\nmin_samples = 4\n[autopilot]\nenabled = false\n", "t.toml", env);
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->acceptance.min_samples, 8);  // the environment wins over the file
  EXPECT_EQ(cfg->deploy.image, "me/agent:2");
  EXPECT_TRUE(cfg->autopilot.enabled);
  ASSERT_TRUE(cfg->autopilot.policy.demand_proofs_per_hour.has_value());
  EXPECT_EQ(*cfg->autopilot.policy.demand_proofs_per_hour, 300);
  EXPECT_EQ(cfg->market.vast_url, std::optional<std::string>("http://127.0.0.1:1"));
}

TEST(Config, BadEnvironmentOverridesNameTheVariable) {
  auto typo = parse_config("", "t.toml", {{"PROVERFLEET_ACCEPTANCE_MIN_SAMPLE", "8"}});
  ASSERT_FALSE(typo);
  EXPECT_THAT(typo.error(), HasSubstr("PROVERFLEET_ACCEPTANCE_MIN_SAMPLE"));
  auto number = parse_config("", "t.toml", {{"PROVERFLEET_ECONOMICS_REVENUE_PER_PROOF_USD", "1x"}});
  ASSERT_FALSE(number);
  EXPECT_THAT(number.error(), HasSubstr("economics.revenue_per_proof_usd"));
  EXPECT_THAT(number.error(), HasSubstr("'1x'"));
  auto boolean = parse_config("", "t.toml", {{"PROVERFLEET_AUTOPILOT_ENABLED", "maybe"}});
  ASSERT_FALSE(boolean);
  EXPECT_THAT(boolean.error(), HasSubstr("true or false"));
  auto negative = parse_config("", "t.toml", {{"PROVERFLEET_AUTOPILOT_MAX_INSTANCES", "-1"}});
  ASSERT_FALSE(negative);
  EXPECT_THAT(negative.error(), HasSubstr("autopilot.max_instances"));
}

TEST(Config, AutopilotSectionFeedsThePolicy) {
  auto cfg = parse_config(R"(
[economics]
revenue_per_proof_usd = 0.02
[autopilot]
enabled = true
query = "gpu_name=RTX_4090"
max_instances = 3
max_concurrent_benchmarks = 2
exploration_window_h = 12
allow_shared_machines = false
)",
                          "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_TRUE(cfg->autopilot.enabled);
  EXPECT_EQ(cfg->autopilot.query, "gpu_name=RTX_4090");
  EXPECT_EQ(cfg->autopilot.policy.max_instances, 3);
  EXPECT_EQ(cfg->autopilot.policy.max_concurrent_benchmarks, 2);
  EXPECT_DOUBLE_EQ(cfg->autopilot.policy.exploration_window_s, 12 * 3600);
  EXPECT_FALSE(cfg->autopilot.policy.allow_shared_machines);
  // Money comes from [economics]: the policy scores with the figures the ranking shows.
  EXPECT_DOUBLE_EQ(cfg->autopilot.policy.scoring.economics.revenue_per_proof_usd, 0.02);
  auto unknown = parse_config("[autopilot]\nmax_instance = 3\n", "u.toml");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error(), HasSubstr("autopilot.max_instance"));
}

TEST(Config, AcceptanceSectionTunesTheSequentialTest) {
  auto cfg = parse_config(
      "[acceptance]\nalpha = 0.02\nbeta = 0.2\naccept_margin = 0.2\n"
      "stall_factor = 6\n",
      "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_DOUBLE_EQ(cfg->sprt.alpha, 0.02);
  EXPECT_DOUBLE_EQ(cfg->sprt.beta, 0.2);
  EXPECT_DOUBLE_EQ(cfg->sprt.accept_margin, 0.2);
  EXPECT_DOUBLE_EQ(cfg->sprt.stall_factor, 6);
  // The caps of the test are the [acceptance] caps.
  const auto sprt = core::with_caps(cfg->sprt, cfg->acceptance);
  EXPECT_EQ(sprt.min_samples, cfg->acceptance.min_samples);
  EXPECT_EQ(sprt.max_samples, cfg->acceptance.max_samples);
  auto bad = parse_config("[acceptance]\nalpha = 0.7\n", "u.toml");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error(), HasSubstr("acceptance.alpha"));
}

// ---- issue 10: every numeric key is finite and in range, from any source --------------------

std::string error_of(const std::string& toml, const Environment& env = {}) {
  auto cfg = parse_config(toml, "t.toml", env);
  EXPECT_FALSE(cfg.has_value()) << toml.substr(0, 200);
  return cfg ? std::string() : cfg.error();
}

TEST(ConfigRanges, NanAndInfinityAreRefusedFromTomlNamingTheKey) {
  EXPECT_THAT(error_of("[economics]\nrevenue_per_proof_usd = nan\n"),
              HasSubstr("'economics.revenue_per_proof_usd' must be a finite number > 0 and <= "
                        "1e+06, got nan"));
  EXPECT_THAT(error_of("[economics]\ntarget_cost_per_proof_usd = inf\n"),
              HasSubstr("'economics.target_cost_per_proof_usd' must be a finite number"));
  EXPECT_THAT(error_of("[autopilot]\nmax_dollars_per_hour = -inf\n"),
              HasSubstr("autopilot.max_dollars_per_hour"));
  EXPECT_THAT(error_of("[setup]\nwarmup_h = nan\n"), HasSubstr("'setup.warmup_h'"));
  EXPECT_THAT(error_of("[predictor]\npcie_slow_factor = nan\n"),
              HasSubstr("'predictor.pcie_slow_factor' must be a finite number between 0 and 1"));
  EXPECT_THAT(error_of("[[predictor.prior]]\ngpu_name = \"x\"\nrate_per_gpu = inf\n"),
              HasSubstr("'predictor.prior[0].rate_per_gpu'"));
  EXPECT_THAT(error_of("[autopilot]\ndemand_proofs_per_hour = nan\n"),
              HasSubstr("autopilot.demand_proofs_per_hour"));
}

TEST(ConfigRanges, NanAndInfinityAreRefusedFromTheEnvironmentNamingTheVariable) {
  EXPECT_THAT(error_of("", {{"PROVERFLEET_ECONOMICS_REVENUE_PER_PROOF_USD", "nan"}}),
              HasSubstr("PROVERFLEET_ECONOMICS_REVENUE_PER_PROOF_USD "
                        "('economics.revenue_per_proof_usd') must be a finite number > 0 and <= "
                        "1e+06, got nan"));
  EXPECT_THAT(error_of("", {{"PROVERFLEET_ECONOMICS_TARGET_COST_PER_PROOF_USD", "inf"}}),
              HasSubstr("got inf"));
  EXPECT_THAT(error_of("", {{"PROVERFLEET_AUTOPILOT_EXPLORATION_BUDGET_USD", "1e400"}}),
              HasSubstr("autopilot.exploration_budget_usd"));
  EXPECT_THAT(error_of("", {{"PROVERFLEET_LIFECYCLE_DESTROY_RETRY_S", "-nan"}}),
              HasSubstr("lifecycle.destroy_retry_s"));
}

TEST(ConfigRanges, ZeroWhereZeroMakesNoSenseIsRefused) {
  EXPECT_THAT(error_of("[lifecycle]\ndestroy_retry_s = 0\n"),
              HasSubstr("'lifecycle.destroy_retry_s' must be a finite number > 0"));
  EXPECT_THAT(
      error_of("[setup]\nbenchmark_proofs = 0\n"),
      HasSubstr("'setup.benchmark_proofs' must be a finite number >= 1 and <= 10000, got 0"));
  EXPECT_THAT(error_of("[setup]\nbenchmark_proofs = 2.5\n"),
              HasSubstr("'setup.benchmark_proofs' must be a whole number, got 2.5"));
  EXPECT_THAT(error_of("[autopilot]\ninterval_s = 0\n"), HasSubstr("autopilot.interval_s"));
  EXPECT_THAT(error_of("[deploy]\nheartbeat_s = 0\n"), HasSubstr("deploy.heartbeat_s"));
  EXPECT_THAT(error_of("[lifecycle]\nmax_prover_crashes = 0\n"),
              HasSubstr("lifecycle.max_prover_crashes"));
  EXPECT_THAT(error_of("", {{"PROVERFLEET_LIFECYCLE_DESTROY_RETRY_S", "0"}}),
              HasSubstr("PROVERFLEET_LIFECYCLE_DESTROY_RETRY_S"));
  // Zero stays allowed where it means something: no warm-up, no exploration budget.
  auto cfg =
      parse_config("[setup]\nwarmup_h = 0\n[autopilot]\nexploration_budget_usd = 0\n", "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
}

TEST(ConfigRanges, CountsAndHugeValuesAreBounded) {
  EXPECT_THAT(error_of("[autopilot]\nmax_instances = 2147483648\n"),
              HasSubstr("'autopilot.max_instances' must be a finite number >= 1 and <= 10000"));
  EXPECT_THAT(error_of("[acceptance]\nmax_samples = 1e300\n"), HasSubstr("acceptance.max_samples"));
  EXPECT_THAT(error_of("[lifecycle]\nheartbeat_timeout_s = 1e300\n"),
              HasSubstr("lifecycle.heartbeat_timeout_s"));
  EXPECT_THAT(error_of("[acceptance]\nmax_warmup_discard = -1\n"),
              HasSubstr("acceptance.max_warmup_discard"));
  EXPECT_THAT(error_of("[setup]\nparams_bytes = 1e300\n"), HasSubstr("setup.params_bytes"));
}

TEST(ConfigRanges, SmallButSaneValuesStayAccepted) {
  auto small =
      parse_config("[lifecycle]\ndestroy_retry_s = 0.5\n[deploy]\nheartbeat_s = 2\n", "t.toml");
  ASSERT_TRUE(small) << small.error();
  EXPECT_DOUBLE_EQ(small->lifecycle.destroy_retry_s, 0.5);
  EXPECT_DOUBLE_EQ(small->deploy.heartbeat_s, 2);
}

TEST(ConfigFile, ADirectoryOrMissingFileGivenExplicitlyIsAnError) {
  // `serve --config DIR` used to run on the defaults: a directory reads as empty text.
  auto directory = load_config(std::string(PF_SOURCE_DIR));
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.error(), HasSubstr("cannot read config file"));
  EXPECT_THAT(directory.error(), HasSubstr("is a directory"));
  auto missing = load_config(std::string("/nonexistent/x.toml"));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("'/nonexistent/x.toml': no such file"));
}

std::string repeated(const std::string& part, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += part;
  return out;
}

TEST(ConfigToml, DeeplyNestedTomlIsAnErrorNotACrash) {
  // Values: toml++ caps them itself.
  EXPECT_THAT(error_of("x = " + std::string(100'000, '[') + std::string(100'000, ']') + "\n"),
              HasSubstr("nested"));
  EXPECT_THAT(error_of("x = " + repeated("{a=", 100'000) + "1" + std::string(100'000, '}') + "\n"),
              HasSubstr("nested"));
  // Keys: toml++ would build (and crash destroying) 100,000 nested tables.
  EXPECT_THAT(error_of("a" + repeated(".b", 100'000) + " = 1\n"),
              HasSubstr("t.toml:1: key nested deeper than 32 levels"));
  EXPECT_THAT(error_of("# comment\n[a" + repeated(".b", 100'000) + "]\nx = 1\n"),
              HasSubstr("t.toml:2: key nested deeper than 32 levels"));
  EXPECT_THAT(error_of("[[a" + repeated(".b", 100'000) + "]]\n"),
              HasSubstr("key nested deeper than 32 levels"));
  EXPECT_THAT(error_of("x = {y = 1, a" + repeated(".b", 100'000) + " = 1}\n"),
              HasSubstr("key nested deeper than 32 levels"));
}

TEST(ConfigToml, DotsInValuesStringsAndCommentsAreNotKeyDepth) {
  const std::string dots(100, '.');
  const std::string text = "# " + dots + "\n[deploy]\nimage = \"" + dots + "\"\nonstart = '''\n" +
                           dots + "\n'''\n[predictor]\nmulti_gpu_exponent = 0.75\n";
  auto cfg = parse_config(text, "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->deploy.image, dots);
  // A quoted key with dots is one key: parsed (and here unknown), not refused for depth.
  EXPECT_THAT(error_of("[predictor]\n\"" + dots + "\" = 1\n"), HasSubstr("unknown key"));
}

TEST(Config, HttpFrontAndHearingAreTunableWithinRange) {
  auto cfg = parse_config(
      "[http]\nmax_connections_per_address = 8\nhead_timeout_s = 2.5\nagent_lane_threads = 2\n"
      "[lifecycle]\nsilent_fleet_fraction = 0.8\nsilent_fleet_min_agents = 5\n",
      "t.toml", {{"PROVERFLEET_HTTP_MIN_TRANSFER_KIB_S", "16"}});
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_EQ(cfg->http.limits.max_connections_per_address, 8u);
  EXPECT_EQ(cfg->http.limits.head_timeout, std::chrono::milliseconds(2500));
  EXPECT_EQ(cfg->http.limits.min_transfer_bytes_per_s, 16u * 1024);
  EXPECT_EQ(cfg->http.agent_lane_threads, 2);
  EXPECT_DOUBLE_EQ(cfg->hearing.silent_fleet_fraction, 0.8);
  EXPECT_EQ(cfg->hearing.silent_fleet_min_agents, 5);

  EXPECT_THAT(error_of("[http]\nhead_timeout_s = 0\n"), HasSubstr("http.head_timeout_s"));
  EXPECT_THAT(error_of("[http]\nmax_connections_per_address = 0\n"),
              HasSubstr("http.max_connections_per_address"));
  EXPECT_THAT(error_of("[http]\nmax_connections = 4\nmax_connections_per_address = 8\n"),
              HasSubstr("must not exceed 'http.max_connections'"));
  EXPECT_THAT(error_of("[lifecycle]\nsilent_fleet_fraction = nan\n"),
              HasSubstr("lifecycle.silent_fleet_fraction"));
}

TEST(ConfigPrices, UsdPricesPerKindWithPorepDefaultingToTheEconomicsRevenue) {
  auto defaults = parse_config("[economics]\nrevenue_per_proof_usd = 0.02\n", "t.toml");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_EQ(defaults->prices.currency, core::PriceCurrency::Usd);
  EXPECT_DOUBLE_EQ(*core::price_usd(defaults->prices, core::JobKind::PorepC2), 0.02);
  EXPECT_FALSE(core::price_usd(defaults->prices, core::JobKind::SnapUpdate));

  auto cfg = parse_config("[prices]\nporep-c2 = 0.05\nsnap-update = 0.01\n", "t.toml",
                          {{"PROVERFLEET_PRICES_WINDOW_POST", "0.5"}});
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_DOUBLE_EQ(*core::price_usd(cfg->prices, core::JobKind::PorepC2), 0.05);
  EXPECT_DOUBLE_EQ(*core::price_usd(cfg->prices, core::JobKind::SnapUpdate), 0.01);
  EXPECT_DOUBLE_EQ(*core::price_usd(cfg->prices, core::JobKind::WindowPost), 0.5);
}

TEST(ConfigPrices, FilPricesNeedARateAndAreConverted) {
  auto cfg = parse_config("[prices]\ncurrency = \"fil\"\nfil_usd = 4\nporep-c2 = 0.01\n", "t.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  EXPECT_DOUBLE_EQ(*core::price_usd(cfg->prices, core::JobKind::PorepC2), 0.04);
  // In FIL, no USD default leaks in for a kind left out.
  auto bare = parse_config("[prices]\ncurrency = \"fil\"\nfil_usd = 4\n", "t.toml");
  ASSERT_TRUE(bare) << bare.error();
  EXPECT_FALSE(core::price_usd(bare->prices, core::JobKind::PorepC2));
}

TEST(ConfigPrices, BadPricesAreRefusedNamingTheKey) {
  EXPECT_THAT(error_of("[prices]\ncurrency = \"fil\"\nporep-c2 = 0.01\n"),
              HasSubstr("prices.fil_usd"));
  EXPECT_THAT(error_of("[prices]\ncurrency = \"eur\"\n"), HasSubstr("prices.currency"));
  EXPECT_THAT(error_of("[prices]\nporep-c2 = -1\n"), HasSubstr("prices.porep-c2"));
  EXPECT_THAT(error_of("[prices]\nporep-c2 = nan\n"), HasSubstr("prices.porep-c2"));
  EXPECT_THAT(error_of("[prices]\nporep-c2 = 1e9\n"), HasSubstr("prices.porep-c2"));
  EXPECT_THAT(error_of("[prices]\nporep_c2 = 0.1\n"), HasSubstr("unknown key 'prices.porep_c2'"));
  EXPECT_THAT(error_of("[prices]\nfil_usd = 0\n"), HasSubstr("prices.fil_usd"));
}

TEST(Config, JobsSectionFeedsTheJobQueue) {
  auto cfg = parse_config(
      "[jobs]\nmax_input_mib = 8\ndefault_deadline_min = 20\nlease_s = 30\nmax_attempts = 2\n"
      "retention_h = 1\n",
      "test.toml");
  ASSERT_TRUE(cfg) << cfg.error();
  const auto q = job_queue_config(cfg->jobs, "sqlite:/var/lib/pf/fleet.db");
  EXPECT_EQ(q.data_dir, "/var/lib/pf");
  EXPECT_EQ(q.max_input_bytes, 8 * 1024 * 1024);
  EXPECT_EQ(q.default_deadline_s, 1200);
  EXPECT_EQ(q.lease_s, 30);
  EXPECT_EQ(q.max_attempts, 2);
  EXPECT_EQ(q.retention_s, 3600);
  EXPECT_EQ(job_queue_config(cfg->jobs, "fleet.db").data_dir, ".");
  // A server database has no directory of its own: the working directory (not "postgres:").
  EXPECT_EQ(job_queue_config(cfg->jobs, "postgres://pf@db1/fleet").data_dir, ".");
  auto bad = parse_config("[jobs]\nlease_s = 0\n", "test.toml");
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error(), HasSubstr("jobs.lease_s"));
  auto unknown = parse_config("[jobs]\nleases = 3\n", "test.toml");
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error(), HasSubstr("leases"));
}

}  // namespace
}  // namespace pf::cli
