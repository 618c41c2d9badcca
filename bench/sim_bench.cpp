// sim_72h_seconds: wall time of `proverfleet sim` (default policy) over the 72-hour, 160-offer
// scenario (scenarios/market-72h.json; target ≤ 10 s). sim_speedup: simulated seconds per wall
// second. bound_seconds: wall time of the scenario's profit bound (sim/profit_bound.h; target:
// seconds). Best of three runs, so a busy machine disturbs the figures less.
// Usage: sim_bench [SCENARIO]  (default: the repository's scenarios/market-72h.json)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "scenario/scenario.h"
#include "sim/des_engine.h"
#include "sim/des_policies.h"
#include "sim/profit_bound.h"

namespace {

std::string default_scenario() {
  const char* candidates[] = {"scenarios/market-72h.json", "../scenarios/market-72h.json"};
  for (const char* c : candidates)
    if (std::filesystem::exists(c)) return c;
  // The source tree this benchmark was built from.
  return (std::filesystem::path(__FILE__).parent_path().parent_path() / "scenarios" /
          "market-72h.json")
      .string();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : default_scenario();
  auto scenario = pf::scenario::load_scenario(path);
  if (!scenario) {
    std::fprintf(stderr, "sim_bench: %s\n", scenario.error().c_str());
    return 1;
  }
  double best = 1e300;
  long proofs = 0;
  for (int run = 0; run < 3; ++run) {
    auto policy = pf::sim::make_policy("default", *scenario);
    const auto start = std::chrono::steady_clock::now();
    const pf::sim::DesReport report = pf::sim::run_des(*scenario, *policy);
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    best = std::min(best, wall.count());
    proofs = report.proofs;
  }
  double bound_best = 1e300;
  double bound = 0;
  for (int run = 0; run < 3; ++run) {
    const auto start = std::chrono::steady_clock::now();
    bound = pf::sim::profit_bound(*scenario).profit_usd;
    const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
    bound_best = std::min(bound_best, wall.count());
  }
  std::printf("sim_72h_seconds: %.3f\n", best);
  std::printf("sim_speedup: %.0f\n", scenario->hours * 3600 / best);
  std::printf("bound_seconds: %.3f\n", bound_best);
  std::fprintf(stderr, "(%s: %zu offers, %.0f h, default policy, %ld proofs; bound $%.2f)\n",
               path.c_str(), scenario->offers.size(), scenario->hours, proofs, bound);
  return 0;
}
