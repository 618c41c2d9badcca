#include "scenario/scenario.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "support/hostile_json.h"

namespace pf::scenario {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string scenario_path(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/scenarios/" + name;
}

std::string fixture_path(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/" + name;
}

json tiny_doc() {
  std::ifstream in(fixture_path("tiny.json"));
  return json::parse(in);
}

// The error of parsing `doc`; fails the test if it parses.
std::string error_of(const json& doc) {
  auto parsed = parse_scenario(doc);
  EXPECT_FALSE(parsed.has_value()) << "expected a parse error";
  return parsed ? std::string() : parsed.error();
}

TEST(ScenarioTest, DemoSmallLoads) {
  auto s = load_scenario(scenario_path("demo-small.json"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->name, "demo-small");
  EXPECT_EQ(s->seed, 11u);
  EXPECT_DOUBLE_EQ(s->hours, 24.0);
  EXPECT_DOUBLE_EQ(s->economics.revenue_per_proof_usd, 0.012);
  EXPECT_DOUBLE_EQ(s->economics.target_cost_per_proof_usd, 0.008);
  ASSERT_TRUE(s->economics.demand_proofs_per_hour);
  EXPECT_DOUBLE_EQ(*s->economics.demand_proofs_per_hour, 600);
  EXPECT_DOUBLE_EQ(s->params_bytes, 47e9);
  ASSERT_EQ(s->offers.size(), 40u);

  const ScenarioOffer& first = s->offers[0];
  EXPECT_EQ(first.offer.id, 27812311);
  EXPECT_EQ(first.offer.machine_id, 69294);
  EXPECT_EQ(first.offer.gpu_name, "RTX 5060 Ti");
  EXPECT_EQ(first.offer.num_gpus, 8);
  EXPECT_DOUBLE_EQ(first.offer.gpu_ram_gib, 16.0);   // 16384 MiB
  EXPECT_DOUBLE_EQ(first.offer.cpu_ram_gib, 256.0);  // 262144 MiB
  EXPECT_DOUBLE_EQ(first.offer.dph_total, 0.8273);
  EXPECT_DOUBLE_EQ(first.listed_from_h, 0.0);
  EXPECT_DOUBLE_EQ(first.listed_until_h, 24.0);
  EXPECT_DOUBLE_EQ(first.truth.rate_full, 77.34);
  EXPECT_EQ(first.truth.partitions_full, 48);
  EXPECT_DOUBLE_EQ(first.truth.boot_min, 5.33);
  ASSERT_TRUE(first.truth.throttle);
  EXPECT_DOUBLE_EQ(first.truth.throttle->after_h, 1.82);
  EXPECT_DOUBLE_EQ(first.truth.throttle->factor, 0.615);
  EXPECT_EQ(first.truth.failure.kind, FailureKind::None);

  // The served JSON keeps the visible fields in vast's units and nothing hidden.
  EXPECT_EQ(first.vast_json.at("gpu_ram"), 16384);
  EXPECT_FALSE(first.vast_json.contains("truth"));
  EXPECT_FALSE(first.vast_json.contains("listed_from_h"));
  EXPECT_FALSE(first.vast_json.contains("listed_until_h"));
  EXPECT_EQ(first.vast_json.size(), 25u);

  int crash = 0, never_boots = 0, offline = 0;
  for (const auto& o : s->offers) {
    crash += o.truth.failure.kind == FailureKind::Crash;
    never_boots += o.truth.failure.kind == FailureKind::NeverBoots;
    offline += o.truth.failure.kind == FailureKind::Offline;
  }
  EXPECT_EQ(crash, 3);
  EXPECT_EQ(never_boots, 2);
  EXPECT_EQ(offline, 2);
}

TEST(ScenarioTest, Market72hLoads) {
  auto s = load_scenario(scenario_path("market-72h.json"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->name, "market-72h");
  EXPECT_EQ(s->seed, 21u);
  EXPECT_DOUBLE_EQ(s->hours, 72.0);
  ASSERT_EQ(s->offers.size(), 160u);
  EXPECT_EQ(s->offers[0].offer.id, 27013380);
  EXPECT_DOUBLE_EQ(s->offers[0].listed_from_h, 44.39);
  EXPECT_FALSE(s->offers[0].truth.throttle);
  EXPECT_DOUBLE_EQ(s->offers[0].truth.download_mbps, 38.3);
}

TEST(ScenarioTest, TightMarginsLoads) {
  auto s = load_scenario(scenario_path("tight-margins.json"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ(s->name, "tight-margins");
  ASSERT_EQ(s->offers.size(), 120u);
  EXPECT_DOUBLE_EQ(s->economics.revenue_per_proof_usd, 0.009);
  ASSERT_TRUE(s->economics.demand_proofs_per_hour);
  EXPECT_DOUBLE_EQ(*s->economics.demand_proofs_per_hour, 300.0);
  EXPECT_EQ(s->offers[0].truth.failure.kind, FailureKind::NeverBoots);
  EXPECT_EQ(s->offers[0].offer.gpu_name, "RTX PRO 4000");
}

TEST(ScenarioTest, TinyFixtureLoadsWithNullDemandAndEveryFailureKind) {
  auto s = load_scenario(fixture_path("tiny.json"));
  ASSERT_TRUE(s) << s.error();
  EXPECT_FALSE(s->economics.demand_proofs_per_hour);
  ASSERT_EQ(s->offers.size(), 4u);
  EXPECT_EQ(s->offers[0].truth.failure.kind, FailureKind::None);
  EXPECT_EQ(s->offers[1].truth.failure.kind, FailureKind::Crash);
  EXPECT_DOUBLE_EQ(s->offers[1].truth.failure.after_h, 1.0);
  EXPECT_EQ(s->offers[2].truth.failure.kind, FailureKind::NeverBoots);
  EXPECT_EQ(s->offers[3].truth.failure.kind, FailureKind::Offline);
  EXPECT_DOUBLE_EQ(s->offers[1].offer.cpu_ram_gib, 256.0);
  EXPECT_DOUBLE_EQ(s->offers[1].offer.usable_cores, 32.0);
}

TEST(ScenarioTest, FailureKindSpelling) {
  EXPECT_STREQ(to_string(FailureKind::None), "none");
  EXPECT_STREQ(to_string(FailureKind::NeverBoots), "never_boots");
  EXPECT_STREQ(to_string(FailureKind::Crash), "crash");
  EXPECT_STREQ(to_string(FailureKind::Offline), "offline");
}

TEST(ScenarioErrorTest, MissingTopLevelKey) {
  json doc = tiny_doc();
  doc.erase("hours");
  EXPECT_EQ(error_of(doc), "missing top-level key \"hours\"");
}

TEST(ScenarioErrorTest, UnknownTopLevelKeySuggestsTheNearOne) {
  json doc = tiny_doc();
  doc["hourz"] = 3;
  EXPECT_EQ(error_of(doc), "unknown top-level key \"hourz\" (did you mean \"hours\"?)");
}

TEST(ScenarioErrorTest, UnknownOfferKeyNamesTheOffer) {
  json doc = tiny_doc();
  doc["offers"][2]["gpu_nam"] = doc["offers"][2]["gpu_name"];
  doc["offers"][2].erase("gpu_name");
  std::string error = error_of(doc);
  EXPECT_THAT(error, HasSubstr("offers[2]: unknown key \"gpu_nam\" (did you mean \"gpu_name\"?)"));
  EXPECT_THAT(error, HasSubstr("offers[2]: missing key \"gpu_name\""));
}

TEST(ScenarioErrorTest, MissingKeysOfOneObjectShareALine) {
  json doc = tiny_doc();
  doc["offers"][0].erase("cpu_ram");
  doc["offers"][0].erase("dlperf");
  doc["offers"][0].erase("truth");
  EXPECT_EQ(error_of(doc), "offers[0]: missing keys \"cpu_ram\", \"dlperf\", \"truth\"");
}

TEST(ScenarioErrorTest, MissingTruthKey) {
  json doc = tiny_doc();
  doc["offers"][1]["truth"].erase("boot_min");
  EXPECT_EQ(error_of(doc), "offers[1].truth: missing key \"boot_min\"");
}

TEST(ScenarioErrorTest, MissingOptionalLookingKeysAreStillRequired) {
  json doc = tiny_doc();
  doc["offers"][0]["truth"].erase("throttle");  // may be null, but must be there
  doc["economics"].erase("demand_proofs_per_hour");
  std::string error = error_of(doc);
  EXPECT_THAT(error, HasSubstr("offers[0].truth: missing key \"throttle\""));
  EXPECT_THAT(error, HasSubstr("economics: missing key \"demand_proofs_per_hour\""));
}

TEST(ScenarioErrorTest, WrongTypes) {
  json doc = tiny_doc();
  doc["hours"] = "10";
  doc["offers"][0]["num_gpus"] = "1";
  doc["offers"][0]["verified"] = 1;
  doc["offers"][3]["truth"]["throttle"] = 0.5;
  doc["economics"]["demand_proofs_per_hour"] = "lots";
  std::string error = error_of(doc);
  EXPECT_THAT(error, HasSubstr("hours: expected a number, got string \"10\""));
  EXPECT_THAT(error, HasSubstr("offers[0].num_gpus: expected an integer, got string \"1\""));
  EXPECT_THAT(error, HasSubstr("offers[0].verified: expected true or false, got 1"));
  EXPECT_THAT(error, HasSubstr("offers[3].truth.throttle: expected a JSON object, got 0.5"));
  EXPECT_THAT(
      error, HasSubstr("economics.demand_proofs_per_hour: expected a number, got string \"lots\""));
}

TEST(ScenarioErrorTest, FractionalIntegerIsRejected) {
  json doc = tiny_doc();
  doc["offers"][0]["truth"]["partitions_full"] = 2.5;
  EXPECT_EQ(error_of(doc), "offers[0].truth.partitions_full: expected an integer, got 2.5");
}

TEST(ScenarioErrorTest, BadFailureKind) {
  json doc = tiny_doc();
  doc["offers"][3]["truth"]["failure"]["kind"] = "boom";
  EXPECT_EQ(error_of(doc),
            "offers[3].truth.failure.kind: expected one of none, never_boots, crash, offline, "
            "got \"boom\"");
}

TEST(ScenarioErrorTest, BadFormatStopsThere) {
  json doc = tiny_doc();
  doc["format"] = "proverfleet-scenario/9";
  doc["hours"] = -1;  // not reported: another format's keys mean other things
  EXPECT_EQ(error_of(doc),
            "format: expected \"proverfleet-scenario/1\", \"proverfleet-scenario/2\" or "
            "\"proverfleet-scenario/3\", got \"proverfleet-scenario/9\"");
}

TEST(ScenarioErrorTest, DuplicateOfferId) {
  json doc = tiny_doc();
  doc["offers"][3]["id"] = 1001;
  EXPECT_EQ(error_of(doc), "offers[3].id: duplicate offer id 1001 (also offers[0])");
}

TEST(ScenarioErrorTest, EmptyOrInvertedListingWindow) {
  json doc = tiny_doc();
  doc["offers"][0]["listed_from_h"] = 5;
  doc["offers"][0]["listed_until_h"] = 5;
  doc["offers"][1]["listed_from_h"] = 4;
  doc["offers"][1]["listed_until_h"] = 1.5;
  std::string error = error_of(doc);
  EXPECT_THAT(error, HasSubstr("offers[0]: listed_from_h (5) must be < listed_until_h (5)"));
  EXPECT_THAT(error, HasSubstr("offers[1]: listed_from_h (4) must be < listed_until_h (1.5)"));
}

TEST(ScenarioErrorTest, OutOfRangeValues) {
  json doc = tiny_doc();
  doc["hours"] = 0;
  doc["seed"] = -3;
  doc["offers"][0]["num_gpus"] = 0;
  doc["offers"][0]["reliability2"] = 1.2;
  doc["offers"][1]["truth"]["contention"] = 0;
  doc["offers"][3]["truth"]["throttle"]["factor"] = 1.5;
  doc["offers"][2]["truth"]["failure"]["after_h"] = -1;
  std::string error = error_of(doc);
  EXPECT_THAT(error, HasSubstr("hours: must be in (0, 8760], got 0"));
  EXPECT_THAT(error, HasSubstr("seed: must be >= 0, got -3"));
  EXPECT_THAT(error, HasSubstr("offers[0].num_gpus: must be in [1, 64], got 0"));
  EXPECT_THAT(error, HasSubstr("offers[0].reliability2: must be in [0, 1], got 1.2"));
  EXPECT_THAT(error, HasSubstr("offers[1].truth.contention: must be in (0, 1], got 0"));
  EXPECT_THAT(error, HasSubstr("offers[3].truth.throttle.factor: must be in (0, 1], got 1.5"));
  EXPECT_THAT(error, HasSubstr("offers[2].truth.failure.after_h: must be in [0, 1e+06], got -1"));
}

TEST(ScenarioErrorTest, ZeroThrottleFactorIsRejected) {
  json doc = tiny_doc();
  doc["offers"][3]["truth"]["throttle"]["factor"] = 0;
  EXPECT_EQ(error_of(doc), "offers[3].truth.throttle.factor: must be in (0, 1], got 0");
}

TEST(ScenarioErrorTest, WrongShapes) {
  EXPECT_EQ(error_of(json::array()), "scenario: expected a JSON object, got an array");
  json doc = tiny_doc();
  doc["offers"] = json::object();
  EXPECT_EQ(error_of(doc), "offers: expected an array, got an object");
  doc = tiny_doc();
  doc["offers"][1] = "offer";
  EXPECT_EQ(error_of(doc), "offers[1]: expected a JSON object, got string \"offer\"");
}

TEST(ScenarioErrorTest, ManyProblemsAreCappedWithACount) {
  json doc = tiny_doc();
  json offer = doc["offers"][0];
  offer["extra"] = 1;
  doc["offers"] = json::array();
  for (int i = 0; i < 30; ++i) {
    offer["id"] = 2000 + i;
    doc["offers"].push_back(offer);
  }
  std::string error = error_of(doc);
  EXPECT_THAT(error, HasSubstr("offers[0]: unknown key \"extra\""));
  EXPECT_THAT(error, HasSubstr("offers[19]: unknown key \"extra\""));
  EXPECT_THAT(error, Not(HasSubstr("offers[20]")));
  EXPECT_THAT(error, HasSubstr("... and 10 more problems"));
}

TEST(ScenarioLoadTest, MissingFile) {
  const std::string path = fixture_path("does-not-exist.json");
  auto s = load_scenario(path);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), path + ": cannot read scenario file: no such file");
}

TEST(ScenarioLoadTest, DirectoryIsNotAFile) {
  auto s = load_scenario(std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios");
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error(), HasSubstr("is a directory"));
}

TEST(ScenarioLoadTest, InvalidJsonReportsLineAndColumn) {
  const std::string path = fixture_path("invalid-json.json");
  auto s = load_scenario(path);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error(), HasSubstr(path + ": invalid JSON: parse error at line 4, column 13"));
}

TEST(ScenarioLoadTest, InvalidScenarioIsPrefixedWithThePath) {
  const std::string path = fixture_path("wrong-format.json");
  auto s = load_scenario(path);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error(), path +
                           ": format: expected \"proverfleet-scenario/1\", "
                           "\"proverfleet-scenario/2\" or \"proverfleet-scenario/3\", got "
                           "\"proverfleet-scenario/9\"");
}

// ---- issue 10: scenario input is bounded ----------------------------------------------------

using pf::test::nested_arrays;

TEST(ScenarioBoundsTest, DeeplyNestedTextIsInvalidJsonNotACrash) {
  auto deep = parse_scenario_text(nested_arrays(100'000));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error(), "invalid JSON: nesting deeper than 16 at byte 17");
  // Deep inside an otherwise valid scenario: refused the same way.
  json doc = tiny_doc();
  std::string text = doc.dump();
  text.insert(text.size() - 1, R"(, "x": )" + nested_arrays(100'000));
  auto inside = parse_scenario_text(text);
  ASSERT_FALSE(inside);
  EXPECT_THAT(inside.error(), HasSubstr("invalid JSON: nesting deeper than 16"));
}

TEST(ScenarioBoundsTest, DeeplyNestedFileIsRefusedWithThePath) {
  const std::string path = ::testing::TempDir() + "scenario_test_deep.json";
  std::ofstream(path) << "{\"format\": \"proverfleet-scenario/1\", \"offers\": "
                      << nested_arrays(300'000) << "}";
  auto s = load_scenario(path);
  std::remove(path.c_str());
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error(), HasSubstr(path + ": invalid JSON: nesting deeper than 16"));
}

TEST(ScenarioBoundsTest, NumbersThatOverflowAreInvalidJson) {
  json doc = tiny_doc();
  std::string text = doc.dump();
  const auto at = text.find("\"hours\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"x\": 1e400, ");
  auto s = parse_scenario_text(text);
  ASSERT_FALSE(s);
  EXPECT_THAT(s.error(), HasSubstr("invalid JSON: number out of range at byte"));
}

TEST(ScenarioBoundsTest, HoursRatesAndTimesAreBounded) {
  json doc = tiny_doc();
  doc["hours"] = 1e308;  // used to run forever
  EXPECT_THAT(error_of(doc), HasSubstr("hours: must be in (0, 8760], got 1e+308"));
  doc = tiny_doc();
  doc["hours"] = 8760;
  for (auto& offer : doc["offers"]) offer["listed_until_h"] = 8760;
  EXPECT_TRUE(parse_scenario(doc)) << "a year is the longest horizon";

  doc = tiny_doc();
  doc["offers"][0]["truth"]["rate_full"] = 1e300;
  EXPECT_THAT(error_of(doc), HasSubstr("offers[0].truth.rate_full: must be in [0, 10000]"));
  doc = tiny_doc();
  doc["offers"][0]["truth"]["boot_min"] = 1e300;
  EXPECT_THAT(error_of(doc), HasSubstr("offers[0].truth.boot_min"));
  doc = tiny_doc();
  doc["offers"][0]["listed_until_h"] = 1e300;
  EXPECT_THAT(error_of(doc), HasSubstr("offers[0].listed_until_h"));
  doc = tiny_doc();
  doc["offers"][0]["num_gpus"] = 2147483647;
  EXPECT_THAT(error_of(doc), HasSubstr("offers[0].num_gpus: must be in [1, 64]"));
  doc = tiny_doc();
  doc["economics"]["demand_proofs_per_hour"] = 1e300;
  EXPECT_THAT(error_of(doc), HasSubstr("economics.demand_proofs_per_hour"));
  doc = tiny_doc();
  doc["economics"]["revenue_per_proof_usd"] = 1e300;
  EXPECT_THAT(error_of(doc), HasSubstr("economics.revenue_per_proof_usd"));
  doc = tiny_doc();
  doc["params"]["bytes"] = 9'000'000'000'000'000'000u;
  EXPECT_THAT(error_of(doc), HasSubstr("params.bytes"));
}

TEST(ScenarioBoundsTest, NonFiniteNumbersBuiltInCodeAreRefused) {
  json doc = tiny_doc();
  doc["hours"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THAT(error_of(doc), HasSubstr("hours: must be in (0, 8760]"));
  doc = tiny_doc();
  doc["economics"]["revenue_per_proof_usd"] = std::numeric_limits<double>::infinity();
  EXPECT_THAT(error_of(doc), HasSubstr("economics.revenue_per_proof_usd"));
}

}  // namespace
}  // namespace pf::scenario
