// The decision engine's targets (issue 11) on every bundled scenario, against honest
// yardsticks: default earns more than classic (the earlier tool as it really ran); the profit
// bound (profit_bound.h: no policy can expect more) is above every policy, clairvoyant
// included; default makes no more acceptance mistakes than classic and never OOMs twice on a
// host. The figures are printed (`sim --compare` prints the same).
//
// The target is default ≥ 90% of the bound. market-72h (91.2% with serve's settings;
// 90.4-91.3% on seeds 101/202/303) and tight-margins (90.7%; 90.4-90.7% on seeds 101/202/303)
// meet it and assert it.
// demo-small (88.8%; 87.3-88.3% on seeds 101/202/303) does NOT yet: demand never binds there and
// the gap is the cost of finding out ($2.78 on 7 rentals closed before a verdict, ~$1.25 of
// unpaid benchmark proofs; docs/decision-engine.md): benchmark rejections of offers whose wide
// priors left an upside (a 1x 4090 with 28 cores, 4x 4090, 2x RTX A6000, a 1x RTX 6000Ada; ~$2.5
// where clairvoyant rents none). Default accepts the same 10 offers clairvoyant rents (the 2x RTX
// 3090 with 32 cores included, rented to find out). A gentler core prior (rate = min(GPU rate,
// cores x 1.8/hr) instead of the proportional cut) was tried in round 3 and lost on every scenario
// (demo-small 86.6%, tight-margins 88.2%): it rents the 2x 3090 but also core-starved hosts that
// are as slow as the proportional rule says (a 28-core 4090 at 22-24/hr, a 2x 5080 with 32 cores at
// 27/hr). The floor is the measured share rounded down, so a regression fails; the gap to the
// target is printed on every run. /2 (demo-small-v2, market-72h-v2): default sizes the fleet from
// the job queue it observes (core/scale_to_demand.h, the backlog valued as transient), its jobs
// placed by core::place_jobs as serve's queue places them (sim/des_dispatch.h: jobs that can no
// longer be on time wait behind those that can), production measured at the busy rate (idle
// between jobs is not slowness), and reaches 67.7% and 82.8% of the bound on the own seeds
// (62-71% and 83-84% on seeds 101/202/303; every proved job pays its input's download since
// issue 26), short of the target and held to measured floors, on the own seed and on seeds
// 101/202/303; clairvoyant reaches 66% and 83%. The /2 bound is the
// per-bucket dual (profit_bound.h); session 15 measured what separates a policy from it
// (docs/decision-engine.md, "The /2 gap, decomposed"): the relaxation itself is worth under 3%
// (a whole-instance plan earns 97.7% of it in the same fluid model), but that plan, fixed in
// advance with the truth, earns only 85-89% in the engine (Poisson jobs against a 45-minute
// deadline: ~5% of the jobs are lost), and the policies lose 5-17 points more to their own
// waste (idle capacity, dearer offers, throttled instances kept). On every scenario
// clairvoyant beats classic.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>

#include "sim/des_engine.h"
#include "sim/des_policies.h"
#include "sim/profit_bound.h"
#include "support/generated_markets.h"
namespace pf::sim {
namespace {

constexpr double kTargetShareOfBound = 0.90;

// What default earns of the bound today where the target is not met (rounded down): the
// floor a change may not go below. Raise these as the default improves; every other
// scenario is held to kTargetShareOfBound.
double measured_floor(const std::string& scenario) {
  if (scenario == "demo-small.json") return 0.88;
  // /2 (jobs arriving with deadlines, demand estimated from the queue): default is short of
  // the target; its shares today are 67.7% (demo-small-v2) and 82.8% (market-72h-v2), with
  // clairvoyant itself at 66% and 83% (see the header). Re-based 2026-12-07 when every proved
  // job started paying its input's download (issue 26; 71.4% before): the bound and the policy
  // lose the same dollars per proof, which takes more off the smaller share.
  if (scenario == "demo-small-v2.json") return 0.67;
  if (scenario == "market-72h-v2.json") return 0.82;
  return kTargetShareOfBound;
}

// What default earns of the bound on every one of seeds 101/202/303 (rounded down), so that a
// change tuned to the own seed cannot pass while it loses on the others.
double seed_floor(const std::string& scenario) {
  if (scenario == "demo-small.json") return 0.87;     // 87.3 / 87.6 / 88.3%
  if (scenario == "market-72h.json") return 0.90;     // 91.2 / 90.3 / 91.1%
  if (scenario == "tight-margins.json") return 0.90;  // 90.4 / 90.5 / 90.7%
  if (scenario == "demo-small-v2.json") return 0.62;  // 71.0 / 67.6 / 62.2% (jobs' transfer)
  if (scenario == "market-72h-v2.json") return 0.82;  // 83.9 / 83.8 / 83.4%
  return kTargetShareOfBound;
}

class DesTargets : public ::testing::TestWithParam<std::string> {};

TEST_P(DesTargets, DefaultNearsTheBoundAndBeatsClassic) {
  const std::string path = std::string(PF_SOURCE_DIR) + "/scenarios/" + GetParam();
  auto scenario = scenario::load_scenario(path);
  ASSERT_TRUE(scenario) << scenario.error();
  const ProfitBound bound = profit_bound(*scenario);
  std::map<std::string, DesReport> r;
  std::vector<DesReport> all;
  for (const auto& name : policy_names()) {
    auto policy = make_policy(name, *scenario);
    ASSERT_TRUE(policy);
    r[name] = run_des(*scenario, *policy);
    r[name].bound_profit_usd = bound.profit_usd;
    all.push_back(r[name]);
  }
  const std::string table = compare_text(all, "clairvoyant");
  std::cout << table;
  SCOPED_TRACE(table);
  const DesReport& def = r["default"];
  const DesReport& classic = r["classic"];
  for (const auto& [name, report] : r) EXPECT_LE(report.profit_usd, bound.profit_usd) << name;
  EXPECT_GT(def.profit_usd, classic.profit_usd);
  EXPECT_GT(r["clairvoyant"].profit_usd, classic.profit_usd);
  const double share = def.profit_usd / bound.profit_usd;
  std::cout << "default earns " << share * 100 << "% of the bound on " << GetParam()
            << (share >= kTargetShareOfBound ? " (target 90% met)\n" : " (target 90% NOT met)\n");
  EXPECT_GE(share, std::min(kTargetShareOfBound, measured_floor(GetParam())));
  // A machine's OOM informs its next rental's plan (core/oom_memory.h), /2's memory truth included.
  EXPECT_EQ(def.ooms_after_first_on_host, 0);
  // On /2 classic's fixed filter passes few offers, so it accepts a handful (2 and 6) and none
  // loses; default on market-72h-v2 accepts 3 that idle below break-even as demand falls.
  // Printed there, asserted on /1.
  if (scenario->format_version >= 2) {
    std::cout << "default on /2: " << def.accepted_unprofitable
              << " accepted unprofitable (classic " << classic.accepted_unprofitable << ")\n";
    return;
  }
  EXPECT_LE(def.accepted_unprofitable, classic.accepted_unprofitable);
}

// The bound is a bound on every run, not just the scenario's own seed: no policy earns more
// than it on any of several seeds (the bound does not depend on the seed; the runs do).
TEST_P(DesTargets, NoPolicyEarnsMoreThanTheBoundOnAnySeed) {
  const std::string path = std::string(PF_SOURCE_DIR) + "/scenarios/" + GetParam();
  auto scenario = scenario::load_scenario(path);
  ASSERT_TRUE(scenario) << scenario.error();
  const double bound = profit_bound(*scenario).profit_usd;
  for (const std::uint64_t seed : {101u, 202u, 303u}) {
    scenario->seed = seed;
    for (const auto& name : policy_names()) {
      auto policy = make_policy(name, *scenario);
      ASSERT_TRUE(policy);
      const DesReport report = run_des(*scenario, *policy);
      EXPECT_LE(report.profit_usd, bound) << name << " on seed " << seed;
      if (name == "default") {
        EXPECT_GE(report.profit_usd / bound, seed_floor(GetParam())) << "seed " << seed;
      }
      std::cout << GetParam() << " seed " << seed << " " << name << ": $" << report.profit_usd
                << " of the bound's $" << bound << " (" << report.profit_usd / bound * 100
                << "%)\n";
    }
  }
}

// Markets no setting was tuned on (issue 27: tests/support/generated_markets.h, seeds recorded
// there), small (24 h, 30 machines: about 3 CPU-s for the twelve). No policy earns more than the
// bound on any of them; default's median share of the bound is held to its measured floor (60.0 %
// measured 2026-12-07 once every proved job pays its input's download, 60.9 % before; floor
// 59 %). The targets are not met and are printed, not
// asserted: default ≥ clairvoyant − 2 % on every scenario (it falls far behind on thin markets:
// seed 686736 offers few machines that pay, and default's profit there is −25 % to 17 % of the
// bound where clairvoyant's is 40-76 %; bursty demand costs it most everywhere).
TEST(GeneratedMarkets, NoPolicyBeatsTheBoundAndDefaultHoldsItsMedianFloor) {
  const auto scores = pf::test::score_generated_set(24, 30);
  ASSERT_EQ(scores.size(), 12u);
  std::vector<double> shares;
  int behind_clairvoyant = 0;
  for (const auto& s : scores) {
    ASSERT_GT(s.bound, 0) << s.name;
    EXPECT_LE(s.default_report.profit_usd, s.bound) << s.name;
    EXPECT_LE(s.clairvoyant_report.profit_usd, s.bound) << s.name;
    shares.push_back(s.default_report.profit_usd / s.bound);
    if (s.default_report.profit_usd < s.clairvoyant_report.profit_usd - 0.02 * s.bound) {
      ++behind_clairvoyant;
    }
    std::cout << s.name << ": default " << s.default_report.profit_usd / s.bound * 100
              << "% of the bound $" << s.bound << ", clairvoyant "
              << s.clairvoyant_report.profit_usd / s.bound * 100 << "%, short rentals "
              << s.default_report.short_rentals << " of " << s.default_report.instances_rented
              << "\n";
  }
  std::sort(shares.begin(), shares.end());
  const double median = (shares[5] + shares[6]) / 2;
  EXPECT_GE(median, 0.59);
  std::cout << "generated set: default median " << median * 100 << "% of the bound, worst "
            << shares.front() * 100 << "%; more than 2 % of the bound behind clairvoyant on "
            << behind_clairvoyant << " of 12 (target: none)\n";
}

INSTANTIATE_TEST_SUITE_P(BundledScenarios, DesTargets,
                         ::testing::Values("demo-small.json", "market-72h.json",
                                           "tight-margins.json", "demo-small-v2.json",
                                           "market-72h-v2.json"),
                         [](const auto& param_info) {
                           std::string n = param_info.param.substr(0, param_info.param.find('.'));
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace pf::sim
