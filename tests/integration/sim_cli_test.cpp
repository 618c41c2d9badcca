// `proverfleet sim` end to end: the real binary, its exit codes and its output formats.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace {

using namespace std::chrono_literals;
using pf::test::Subprocess;
using ::testing::HasSubstr;

std::string fixture(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/des/" + name;
}

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

Result run(const std::vector<std::string>& args) {
  std::vector<std::string> argv{PF_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = Subprocess::spawn(argv);
  Result r;
  auto code = p.wait_exit(120s);
  if (code) r.code = *code;
  for (const auto& line : p.stdout_lines()) r.out += line + "\n";
  r.err = p.stderr_text();
  return r;
}

TEST(SimCli, JsonReportCarriesTheSpecKeys) {
  const Result r =
      run({"sim", "--scenario", fixture("mixed.json"), "--policy", "default", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("policy"), "default");
  EXPECT_EQ(j.at("scenario"), "mixed");
  for (const char* key :
       {"hours", "proofs", "revenue_usd", "spend_usd", "profit_usd", "cost_per_proof_usd",
        "benchmark_spend_usd", "instances_rented", "instances_accepted", "accepted_unprofitable",
        "rejected_profitable", "ooms", "mean_proofs_per_hour"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

TEST(SimCli, CompareJsonHasOneReportPerPolicy) {
  const Result r = run({"sim", "--scenario", fixture("mixed.json"), "--compare", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.at("reports").size(), 3u);
  std::vector<std::string> policies;
  for (const auto& report : j.at("reports")) policies.push_back(report.at("policy"));
  EXPECT_EQ(policies, (std::vector<std::string>{"default", "classic", "oracle"}));
}

TEST(SimCli, CompareTableShowsRatiosAgainstTheOracle) {
  const Result r = run({"sim", "--scenario", fixture("mixed.json"), "--compare"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("profit vs oracle"));
  EXPECT_THAT(r.out, HasSubstr("$/proof vs oracle"));
  EXPECT_THAT(r.out, HasSubstr("100%"));
}

TEST(SimCli, SameScenarioTwiceGivesTheSameReport) {
  const Result a = run({"sim", "--scenario", fixture("mixed.json"), "--json", "--details"});
  const Result b = run({"sim", "--scenario", fixture("mixed.json"), "--json", "--details"});
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(SimCli, UnknownPolicyIsAClearError) {
  const Result r = run({"sim", "--scenario", fixture("mixed.json"), "--policy", "greedy"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("unknown policy \"greedy\" (one of default, classic, oracle)"));
}

TEST(SimCli, MissingScenarioNamesThePath) {
  const Result r = run({"sim", "--scenario", "/nonexistent/market.json"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/market.json"));
  EXPECT_TRUE(r.out.empty());
}

}  // namespace
