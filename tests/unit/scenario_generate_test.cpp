// scenario/generate.h: new /2 scenarios drawn from the bundled ones' families (issue 27).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "scenario/generate.h"
#include "scenario/scenario.h"
#include "sim/des_engine.h"
#include "sim/des_policies.h"

namespace pf::scenario {
namespace {

using nlohmann::json;

json generated(DemandShape shape, std::uint64_t seed, double hours = 72, int machines = 60) {
  GenerateOptions o;
  o.seed = seed;
  o.shape = shape;
  o.hours = hours;
  o.machines = machines;
  auto doc = generate_scenario(o, bundled_family_texts());
  EXPECT_TRUE(doc) << (doc ? "" : doc.error());
  return doc ? *doc : json();
}

std::vector<double> demand_levels(const json& doc) {
  std::vector<double> out;
  for (const auto& a : doc.at("demand").at("arrivals")) {
    out.push_back(a.at("proofs_per_hour").get<double>());
  }
  return out;
}

double mean_of(const std::vector<double>& v, std::size_t from, std::size_t to) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from),
                         v.begin() + static_cast<std::ptrdiff_t>(to), 0.0) /
         static_cast<double>(to - from);
}

TEST(ScenarioGenerate, SameOptionsGiveTheSameDocumentAnotherSeedAnother) {
  const json a = generated(DemandShape::Diurnal, 7);
  EXPECT_EQ(a.dump(), generated(DemandShape::Diurnal, 7).dump());
  EXPECT_NE(a.dump(), generated(DemandShape::Diurnal, 8).dump());
  EXPECT_EQ(a.at("seed"), 7);
  EXPECT_EQ(a.at("name"), "generated-diurnal-7");
}

TEST(ScenarioGenerate, EveryShapeLoadsAndTheSimulatorRunsOnIt) {
  for (const auto shape : kDemandShapes) {
    const json doc = generated(shape, 11, 24, 12);
    auto scenario = parse_scenario_text(doc.dump());
    ASSERT_TRUE(scenario) << to_string(shape) << ": " << scenario.error();
    ASSERT_TRUE(scenario->demand);
    EXPECT_EQ(scenario->hours, 24);
    auto policy = sim::make_policy("default", *scenario);
    ASSERT_TRUE(policy);
    const sim::DesReport report = sim::run_des(*scenario, *policy);
    EXPECT_GT(report.jobs_arrived, 0) << to_string(shape);
  }
}

// Each generated machine is one of the families' machines: every offer of it carries that
// machine's memory and partitions, and its offers share one failure kind (failures belong to
// the machine).
TEST(ScenarioGenerate, MachinesKeepTheirFamilysTruth) {
  std::set<std::string> family_machines;
  for (const auto text : bundled_family_texts()) {
    const json family = json::parse(text);  // kept: a range-for over a temporary's member dangles
    for (const auto& o : family.at("offers")) {
      const auto& t = o.at("truth");
      family_machines.insert(o.at("gpu_name").get<std::string>() + "/" +
                             std::to_string(o.at("num_gpus").get<int>()) + "/" +
                             t.at("ram_visible_gib").dump() + "/" + t.at("partitions_full").dump());
    }
  }
  const json doc = generated(DemandShape::Steady, 3);
  std::map<std::int64_t, std::set<std::string>> failure_of;
  for (const auto& o : doc.at("offers")) {
    const auto& t = o.at("truth");
    EXPECT_TRUE(family_machines.count(
        o.at("gpu_name").get<std::string>() + "/" + std::to_string(o.at("num_gpus").get<int>()) +
        "/" + t.at("ram_visible_gib").dump() + "/" + t.at("partitions_full").dump()))
        << o.dump();
    failure_of[o.at("machine_id").get<std::int64_t>()].insert(
        t.at("failure").at("kind").get<std::string>());
    EXPECT_LE(o.at("listed_until_h").get<double>(), 72);
  }
  EXPECT_EQ(failure_of.size(), 60u);
  for (const auto& [machine, kinds] : failure_of) EXPECT_EQ(kinds.size(), 1u) << machine;
}

TEST(ScenarioGenerate, EachShapeHasItsForm) {
  // Steady: blocks stay near their mean.
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto v = demand_levels(generated(DemandShape::Steady, seed));
    const double m = mean_of(v, 0, v.size());
    double var = 0;
    for (double x : v) var += (x - m) * (x - m);
    EXPECT_LT(std::sqrt(var / static_cast<double>(v.size())) / m, 0.25) << seed;
  }
  // Diurnal (2 h blocks): a day apart alike, half a day apart not.
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto v = demand_levels(generated(DemandShape::Diurnal, seed));
    double day = 0, half = 0;
    for (std::size_t b = 0; b + 12 < v.size(); ++b) {
      day += std::abs(v[b + 12] - v[b]);
      half += std::abs(v[b + 6] - v[b]);
    }
    EXPECT_LT(day, 0.6 * half) << seed;
  }
  // Bursty: the bursts stand far above the base.
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto v = demand_levels(generated(DemandShape::Bursty, seed));
    EXPECT_GT(*std::max_element(v.begin(), v.end()), 3 * *std::min_element(v.begin(), v.end()))
        << seed;
  }
  // Trending: the last third differs from the first by half again or more, up or down.
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    const auto v = demand_levels(generated(DemandShape::Trending, seed));
    const double first = mean_of(v, 0, v.size() / 3);
    const double last = mean_of(v, v.size() - v.size() / 3, v.size());
    EXPECT_GT(std::max(first, last) / std::min(first, last), 1.5) << seed;
  }
}

// The families' share of listed capacity carries over: demand sized to what is listed.
TEST(ScenarioGenerate, DemandIsTheFamiliesShareOfTheListedCapacity) {
  double family_demand = 0, family_capacity = 0;
  for (const auto text : bundled_family_texts()) {
    const json f = json::parse(text);
    const double hours = f.at("hours").get<double>();
    for (const auto& a : f.at("demand").at("arrivals")) {
      family_demand += (a.at("to_h").get<double>() - a.at("from_h").get<double>()) *
                       a.at("proofs_per_hour").get<double>() / hours;
    }
    for (const auto& o : f.at("offers")) {
      family_capacity += o.at("truth").at("rate_full").get<double>() *
                         (std::min(hours, o.at("listed_until_h").get<double>()) -
                          o.at("listed_from_h").get<double>()) /
                         hours;
    }
  }
  const json doc = generated(DemandShape::Steady, 5);
  double capacity = 0;
  for (const auto& o : doc.at("offers")) {
    capacity += o.at("truth").at("rate_full").get<double>() *
                (o.at("listed_until_h").get<double>() - o.at("listed_from_h").get<double>()) / 72;
  }
  const auto v = demand_levels(doc);
  EXPECT_NEAR(mean_of(v, 0, v.size()) / capacity, family_demand / family_capacity,
              0.15 * family_demand / family_capacity);
}

TEST(ScenarioGenerate, BadOptionsAndFamiliesAreErrorsNamingThem) {
  GenerateOptions o;
  o.hours = 0;
  auto r = generate_scenario(o, bundled_family_texts());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("hours"), std::string::npos) << r.error();
  o = GenerateOptions{};
  o.machines = 0;
  r = generate_scenario(o, bundled_family_texts());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("machines"), std::string::npos) << r.error();
  o = GenerateOptions{};
  r = generate_scenario(o, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("no family"), std::string::npos) << r.error();
  const std::string broken = "{\"format\": ";
  const std::string_view broken_view[] = {broken};
  r = generate_scenario(o, broken_view);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().rfind("family 1: ", 0), 0u) << r.error();
  std::ifstream v1(std::string(PF_SOURCE_DIR) + "/scenarios/demo-small.json");
  std::stringstream text;
  text << v1.rdbuf();
  const std::string v1_text = text.str();
  const std::string_view v1_view[] = {v1_text};
  r = generate_scenario(o, v1_view);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("not a /2 scenario"), std::string::npos) << r.error();
  EXPECT_FALSE(parse_demand_shape("wavy"));
  EXPECT_EQ(parse_demand_shape("bursty"), DemandShape::Bursty);
}

}  // namespace
}  // namespace pf::scenario
