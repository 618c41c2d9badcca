// The decision engine's targets (issue 5, docs/decision-engine.md) on every bundled scenario:
// default earns more than classic and at least 75% of the oracle, makes no more acceptance
// mistakes than classic and fewer rejections of profitable hosts, and never OOMs twice on a host.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sim/des_engine.h"
#include "sim/des_policies.h"

namespace pf::sim {
namespace {

class DesTargets : public ::testing::TestWithParam<std::string> {};

TEST_P(DesTargets, DefaultBeatsClassicAndNearsTheOracle) {
  const std::string path = std::string(PF_SOURCE_DIR) + "/scenarios/" + GetParam();
  auto scenario = scenario::load_scenario(path);
  ASSERT_TRUE(scenario) << scenario.error();
  std::map<std::string, DesReport> r;
  for (const auto& name : policy_names()) {
    auto policy = make_policy(name, *scenario);
    ASSERT_TRUE(policy);
    r[name] = run_des(*scenario, *policy);
  }
  const DesReport& def = r["default"];
  const DesReport& classic = r["classic"];
  const DesReport& oracle = r["oracle"];
  SCOPED_TRACE(compare_text({def, classic, oracle}, "oracle"));
  EXPECT_GT(def.profit_usd, classic.profit_usd);
  EXPECT_GE(def.profit_usd, 0.75 * oracle.profit_usd);
  EXPECT_LE(def.accepted_unprofitable, classic.accepted_unprofitable);
  EXPECT_LT(def.rejected_profitable, classic.rejected_profitable);
  EXPECT_EQ(def.ooms_after_first_on_host, 0);
}

INSTANTIATE_TEST_SUITE_P(BundledScenarios, DesTargets,
                         ::testing::Values("demo-small.json", "market-72h.json",
                                           "tight-margins.json"),
                         [](const auto& param_info) {
                           std::string n = param_info.param.substr(0, param_info.param.find('.'));
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pf::sim
