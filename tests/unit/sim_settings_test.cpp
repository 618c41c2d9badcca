// `sim` runs the live configuration: the default policy's settings come from proverfleet.toml
// through the same mapping `serve` uses (cli::fleet_settings), and without a file they are
// serve's built-in defaults.
#include "cli/sim_settings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "sim/des_engine.h"

namespace pf::cli {
namespace {

sim::DefaultPolicyConfig from_toml(const std::string& text) {
  auto cfg = parse_config(text, "test.toml", {});
  if (!cfg) throw std::runtime_error(cfg.error());
  return sim_policy_config(fleet_settings(*cfg));
}

TEST(SimSettings, WithoutAConfigSimRunsServesDefaults) {
  const sim::DefaultPolicyConfig serve = from_toml("");
  const sim::DefaultPolicyConfig sim_default = sim::serve_defaults();
  // [acceptance]: the caps serve runs (6 / 20 samples, 4 h), not SprtConfig's own 3 / 24 / 2 h.
  EXPECT_EQ(serve.sprt.min_samples, 6);
  EXPECT_EQ(serve.sprt.max_samples, 20);
  EXPECT_EQ(serve.sprt.max_seconds, 4 * 3600);
  EXPECT_EQ(sim_default.sprt.min_samples, serve.sprt.min_samples);
  EXPECT_EQ(sim_default.sprt.max_samples, serve.sprt.max_samples);
  EXPECT_EQ(sim_default.sprt.max_seconds, serve.sprt.max_seconds);
  EXPECT_EQ(sim_default.sprt.z, serve.sprt.z);
  EXPECT_EQ(sim_default.sprt.alpha, serve.sprt.alpha);
  EXPECT_EQ(sim_default.sprt.accept_margin, serve.sprt.accept_margin);
  // [lifecycle]
  EXPECT_EQ(sim_default.lifecycle.bench_max_samples, serve.lifecycle.bench_max_samples);
  EXPECT_EQ(sim_default.lifecycle.bench_max_s, serve.lifecycle.bench_max_s);
  EXPECT_EQ(sim_default.lifecycle.params_max_s, serve.lifecycle.params_max_s);
  EXPECT_EQ(sim_default.lifecycle.warmup_max_s, serve.lifecycle.warmup_max_s);
  EXPECT_EQ(sim_default.lifecycle.boot_loading_max_s, serve.lifecycle.boot_loading_max_s);
  // [autopilot] caps and the profit objective.
  EXPECT_EQ(sim_default.policy.max_dollars_per_hour, serve.policy.max_dollars_per_hour);
  EXPECT_EQ(sim_default.policy.max_instances, serve.policy.max_instances);
  EXPECT_EQ(sim_default.policy.max_concurrent_benchmarks, serve.policy.max_concurrent_benchmarks);
  EXPECT_EQ(sim_default.policy.exploration_budget_usd, serve.policy.exploration_budget_usd);
  EXPECT_EQ(sim_default.policy.min_value_usd, serve.policy.min_value_usd);
  EXPECT_EQ(sim_default.policy.scoring.profit_objective, serve.policy.scoring.profit_objective);
  EXPECT_EQ(sim_default.policy.blocklist.base_ttl_s, serve.policy.blocklist.base_ttl_s);
  EXPECT_EQ(sim_default.policy.predictor.base.priors.size(),
            serve.policy.predictor.base.priors.size());
  // And a bare `sim` loads exactly these.
  auto loaded = load_sim_policy_config(std::nullopt);
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_EQ(loaded->sprt.min_samples, 6);
  EXPECT_EQ(loaded->policy.max_instances, serve.policy.max_instances);
}

TEST(SimSettings, AConfigValueChangesWhatSimMeasures) {
  auto scenario =
      scenario::load_scenario(std::string(PF_SOURCE_DIR) + "/scenarios/demo-small.json");
  ASSERT_TRUE(scenario) << scenario.error();
  auto run = [&](const sim::DefaultPolicyConfig& live) {
    auto policy = sim::make_policy("default", *scenario, live);
    return sim::run_des(*scenario, *policy);
  };
  const sim::DesReport base = run(from_toml(""));
  const sim::DesReport capped = run(from_toml("[autopilot]\nmax_instances = 2\n"));
  EXPECT_NE(capped.profit_usd, base.profit_usd);
  EXPECT_LT(capped.instances_rented, base.instances_rented);

  // The break-even follows [economics] profit_objective, as the manager's verdicts do.
  const sim::DefaultPolicyConfig target = from_toml("[economics]\nprofit_objective = false\n");
  EXPECT_FALSE(target.policy.scoring.profit_objective);
  const sim::DesReport by_target = run(target);
  EXPECT_NE(by_target.profit_usd, base.profit_usd);
}

TEST(SimSettings, ReadsTheFileItIsGiven) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("sim-settings-" + std::to_string(::getpid()) + ".toml");
  {
    std::ofstream out(path);
    out << "[acceptance]\nmin_samples = 4\nmax_samples = 9\n";
  }
  auto loaded = load_sim_policy_config(path.string());
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded) << loaded.error();
  EXPECT_EQ(loaded->sprt.min_samples, 4);
  EXPECT_EQ(loaded->sprt.max_samples, 9);
  EXPECT_EQ(loaded->lifecycle.bench_max_samples, 9);
  auto missing = load_sim_policy_config(path.string());
  EXPECT_FALSE(missing);
}

}  // namespace
}  // namespace pf::cli
