// The generated set (issue 27): policies scored on /2 markets drawn by scenario/generate.h that
// no setting was tuned on. The seeds were drawn once at random (2026-12-07, SystemRandom) and
// are recorded here; they are never chosen or changed to make a policy look better. The unit
// test (des_targets_test.cpp) runs them small (24 h, 20 machines) with floors; `make bench`
// (bench/generated_markets_bench.cpp) full size (72 h, 60 machines) and prints the figures.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "scenario/generate.h"
#include "scenario/scenario.h"
#include "sim/des_engine.h"
#include "sim/des_policies.h"
#include "sim/profit_bound.h"

namespace pf::test {

inline constexpr std::array<std::uint64_t, 3> kGeneratedSeeds{836746, 686736, 350026};

struct GeneratedScore {
  std::string name;  // generated-<shape>-<seed>
  double bound = 0;
  sim::DesReport default_report;
  sim::DesReport clairvoyant_report;
};

// Every seed × shape of the set at this size: default and clairvoyant against the bound.
// Throws std::runtime_error when a scenario cannot be generated or a policy made (a bug).
inline std::vector<GeneratedScore> score_generated_set(double hours, int machines) {
  std::vector<GeneratedScore> out;
  for (const auto seed : kGeneratedSeeds) {
    for (const auto shape : scenario::kDemandShapes) {
      scenario::GenerateOptions options;
      options.seed = seed;
      options.shape = shape;
      options.hours = hours;
      options.machines = machines;
      auto doc = scenario::generate_scenario(options, scenario::bundled_family_texts());
      if (!doc) throw std::runtime_error(doc.error());
      auto parsed = scenario::parse_scenario(*doc);
      if (!parsed) throw std::runtime_error(parsed.error());
      GeneratedScore score;
      score.name = parsed->name;
      score.bound = sim::profit_bound(*parsed).profit_usd;
      for (const char* name : {"default", "clairvoyant"}) {
        auto policy = sim::make_policy(name, *parsed);
        if (!policy) throw std::runtime_error(std::string("no policy ") + name);
        (std::string(name) == "default" ? score.default_report : score.clairvoyant_report) =
            sim::run_des(*parsed, *policy);
      }
      out.push_back(std::move(score));
    }
  }
  return out;
}

}  // namespace pf::test
