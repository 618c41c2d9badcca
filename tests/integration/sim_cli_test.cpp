// `proverfleet sim` end to end: the real binary, its exit codes and its output formats.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
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
  EXPECT_EQ(policies, (std::vector<std::string>{"default", "classic", "clairvoyant"}));
  // Every policy as a share of the profit bound, which none exceeds.
  for (const auto& report : j.at("reports")) {
    ASSERT_TRUE(report.contains("bound_profit_usd")) << report.at("policy");
    EXPECT_LE(report.at("profit_usd").get<double>(), report.at("bound_profit_usd").get<double>());
    EXPECT_NEAR(report.at("profit_vs_bound").get<double>(),
                report.at("profit_usd").get<double>() / report.at("bound_profit_usd").get<double>(),
                1e-12);
    EXPECT_TRUE(report.contains("rejected_by_target"));
  }
}

TEST(SimCli, CompareTableShowsTheBoundAndRatiosAgainstClairvoyant) {
  const Result r = run({"sim", "--scenario", fixture("mixed.json"), "--compare"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("profit bound $"));
  EXPECT_THAT(r.out, HasSubstr("profit vs bound"));
  EXPECT_THAT(r.out, HasSubstr("profit vs clairvoyant"));
  EXPECT_THAT(r.out, HasSubstr("$/proof vs clairvoyant"));
  EXPECT_THAT(r.out, HasSubstr("rejected by own target"));
  EXPECT_THAT(r.out, HasSubstr("100%"));
}

TEST(SimCli, ConfigFileChangesWhatTheDefaultPolicyRuns) {
  const std::string config =
      ::testing::TempDir() + "sim-cli-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(config) << "[autopilot]\nmax_instances = 1\n";
  const Result base =
      run({"sim", "--scenario", fixture("mixed.json"), "--policy", "default", "--json"});
  const Result capped = run({"sim", "--scenario", fixture("mixed.json"), "--policy", "default",
                             "--json", "--config", config});
  ASSERT_EQ(base.code, 0) << base.err;
  ASSERT_EQ(capped.code, 0) << capped.err;
  EXPECT_NE(nlohmann::json::parse(base.out).at("profit_usd"),
            nlohmann::json::parse(capped.out).at("profit_usd"));
  std::remove(config.c_str());
  const Result missing = run({"sim", "--scenario", fixture("mixed.json"), "--config", config});
  EXPECT_NE(missing.code, 0);
  EXPECT_THAT(missing.err, HasSubstr(config));
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
  EXPECT_THAT(r.err, HasSubstr("unknown policy \"greedy\" (one of default, classic, clairvoyant)"));
}

TEST(SimCli, MissingScenarioNamesThePath) {
  const Result r = run({"sim", "--scenario", "/nonexistent/market.json"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/market.json"));
  EXPECT_TRUE(r.out.empty());
}

// A /3 market measured without its contract ends and preemptions would overstate every policy:
// sim says so instead of running it (market-sim serves /3).
// /3: the simulator plays the market's contract ends and bids (scenario/bid_market.h); the
// default policy rents bids only with [bids] enabled, as serve does.
TEST(SimCli, AV3ScenarioRunsAndItsBidsFollowTheBidsSettings) {
  const std::string path = std::string(PF_SOURCE_DIR) + "/scenarios/demo-small-v3.json";
  const Result off = run({"sim", "--scenario", path, "--policy", "default", "--json"});
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_EQ(nlohmann::json::parse(off.out).at("bid_rentals"), 0);
  EXPECT_EQ(nlohmann::json::parse(off.out).at("preemptions"), 0);
  const std::string config =
      ::testing::TempDir() + "sim-cli-bids-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(config) << "[bids]\nenabled = true\n";
  const Result on =
      run({"sim", "--scenario", path, "--policy", "default", "--json", "--config", config});
  std::remove(config.c_str());
  ASSERT_EQ(on.code, 0) << on.err;
  const auto report = nlohmann::json::parse(on.out);
  EXPECT_GT(report.at("bid_rentals").get<int>(), 0) << on.out;
  EXPECT_NE(report.at("profit_usd"), nlohmann::json::parse(off.out).at("profit_usd"));
}

// On a /3 market --compare shows what bids earn: default with [bids] off and on, the spend by
// what vast bills, the jobs on time, the bid rentals and their preemptions.
TEST(SimCli, CompareOnAV3ScenarioRunsTheDefaultPolicyOnDemandAndWithBids) {
  const std::string path = std::string(PF_SOURCE_DIR) + "/scenarios/demo-small-v3.json";
  const Result json_run = run({"sim", "--scenario", path, "--compare", "--json"});
  ASSERT_EQ(json_run.code, 0) << json_run.err;
  std::vector<std::string> policies;
  nlohmann::json by_policy;
  const auto parsed = nlohmann::json::parse(json_run.out);
  for (const auto& r : parsed.at("reports")) {
    policies.push_back(r.at("policy"));
    by_policy[r.at("policy").get<std::string>()] = r;
  }
  EXPECT_EQ(policies,
            (std::vector<std::string>{"default (on-demand)", "default (bids)",
                                      "default (bids, no hedging)", "classic", "clairvoyant"}));
  EXPECT_EQ(by_policy["default (on-demand)"].at("bid_rentals"), 0);
  EXPECT_GT(by_policy["default (bids)"].at("bid_rentals").get<int>(), 0);
  // serve hedges by default ([jobs] hedge): the third run is bids without it. Hedges are
  // counted where jobs arrive (none start on this market: no proof runs overdue while a prover
  // is spare; ScenarioV3Engine.AnOverdueProofIsHedged… shows one that does).
  EXPECT_GT(by_policy["default (bids, no hedging)"].at("bid_rentals").get<int>(), 0);
  for (const char* key : {"hedges", "hedges_won", "hedges_won_on_time", "hedge_usd"}) {
    EXPECT_TRUE(by_policy["default (bids)"].contains(key)) << key;
  }
  EXPECT_EQ(by_policy["default (bids, no hedging)"].at("hedges"), 0);
  // A config without hedging puts it back in the third run.
  const std::string no_hedge =
      ::testing::TempDir() + "sim-cli-no-hedge-" + std::to_string(::getpid()) + ".toml";
  std::ofstream(no_hedge, std::ios::binary) << "[jobs]\nhedge = false\n";
  const Result off = run({"sim", "--scenario", path, "--compare", "--json", "--config", no_hedge});
  ASSERT_EQ(off.code, 0) << off.err;
  std::vector<std::string> off_policies;
  const auto off_reports = nlohmann::json::parse(off.out);  // kept: the loop reads into it
  for (const auto& r : off_reports.at("reports")) off_policies.push_back(r.at("policy"));
  ASSERT_EQ(off_policies.size(), 5u);
  EXPECT_EQ(off_policies[2], "default (bids + hedging)");
  std::remove(no_hedge.c_str());
  // The on-demand run is the plain default run.
  const Result plain = run({"sim", "--scenario", path, "--policy", "default", "--json"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(by_policy["default (on-demand)"].at("profit_usd"),
            nlohmann::json::parse(plain.out).at("profit_usd"));

  const Result table = run({"sim", "--scenario", path, "--compare"});
  ASSERT_EQ(table.code, 0) << table.err;
  for (const char* row :
       {"default (on-demand)", "default (bids)", "  compute", "  storage", "  bandwidth",
        "jobs on time", "jobs unserved", "  as bids", "preemptions", "bids raised/lowered",
        "hedges (won on time)", "  hedge spend"}) {
    EXPECT_NE(table.out.find(row), std::string::npos) << row << "\n" << table.out;
  }
}

// ---- issue 10: nonsense input is refused quickly, never a crash or a run without end ---------

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string deep_scenario() {
  return "{\"format\": \"proverfleet-scenario/1\", \"offers\": " + std::string(300'000, '[') +
         std::string(300'000, ']') + "}";
}

TEST(SimCli, DeeplyNestedScenarioIsAnErrorNotACrash) {
  const std::string path = write_temp("sim_cli_deep.json", deep_scenario());
  const Result sim = run({"sim", "--scenario", path});
  EXPECT_EQ(sim.code, 1) << sim.err;
  EXPECT_THAT(sim.err, HasSubstr(path + ": invalid JSON: nesting deeper than 16"));
  const Result market = run({"market-sim", "--scenario", path, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(market.code, 1) << market.err;
  EXPECT_THAT(market.err, HasSubstr(path + ": invalid JSON: nesting deeper than 16"));
  std::remove(path.c_str());
}

TEST(SimCli, EndlessScenarioIsRefused) {
  std::ifstream in(fixture("mixed.json"));
  nlohmann::json doc = nlohmann::json::parse(in);
  doc["hours"] = 1e308;
  const std::string path = write_temp("sim_cli_endless.json", doc.dump());
  const Result r = run({"sim", "--scenario", path});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("hours: must be in (0, 8760]"));
  std::remove(path.c_str());
}

TEST(SimCli, ServeWithAConfigDirectoryOrMissingFileIsAnError) {
  const Result dir =
      run({"serve", "--config", PF_SOURCE_DIR, "--listen", "127.0.0.1:0", "--db", ":memory:"});
  EXPECT_EQ(dir.code, 1) << dir.err;
  EXPECT_THAT(dir.err, HasSubstr("is a directory"));
  const Result missing = run({"serve", "--config", "/nonexistent/proverfleet.toml", "--listen",
                              "127.0.0.1:0", "--db", ":memory:"});
  EXPECT_EQ(missing.code, 1) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr("'/nonexistent/proverfleet.toml': no such file"));
}

// [jobs] data_dir holds serve's takeover socket: serve makes it at start, and one it cannot make
// (here: below a plain file) stops it at once, naming the path.
TEST(SimCli, ServeWithADataDirItCannotMakeIsAnError) {
  const std::string file = write_temp("sim_cli_not_a_dir", "a file, not a directory");
  const std::string config =
      write_temp("sim_cli_data_dir.toml", "[jobs]\ndata_dir = \"" + file + "/data\"\n");
  const Result r =
      run({"serve", "--config", config, "--listen", "127.0.0.1:0", "--db", ":memory:"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("[jobs] data_dir '" + file + "/data' cannot be created"));
  std::remove(config.c_str());
  std::remove(file.c_str());
}

TEST(SimCli, NonFiniteFlagsAndEnvironmentAreRefusedNamingThem) {
  const Result revenue = run({"offers", "--revenue", "nan"});
  EXPECT_NE(revenue.code, 0);
  EXPECT_THAT(revenue.err, HasSubstr("--revenue"));
  EXPECT_THAT(revenue.err, HasSubstr("must be a finite number"));
  const Result scale = run({"market-sim", "--scenario", fixture("mixed.json"), "--time-scale",
                            "inf", "--listen", "127.0.0.1:0"});
  EXPECT_NE(scale.code, 0);
  EXPECT_THAT(scale.err, HasSubstr("--time-scale"));
  pf::test::SpawnOptions options;
  options.env["PROVERFLEET_ECONOMICS_REVENUE_PER_PROOF_USD"] = "nan";
  auto p = Subprocess::spawn({PF_BINARY, "serve", "--listen", "127.0.0.1:0", "--db", ":memory:"},
                             options);
  const auto code = p.wait_exit(60s);
  EXPECT_EQ(code.value_or(-1), 1);
  EXPECT_THAT(p.stderr_text(), HasSubstr("PROVERFLEET_ECONOMICS_REVENUE_PER_PROOF_USD"));
}

}  // namespace

namespace {

// `scenario generate` writes a scenario sim runs on; the same options print the same bytes;
// a wrong option is an error naming it that writes nothing.
TEST(ScenarioCli, AGeneratedScenarioIsWrittenAndSimulatedAndBadOptionsAreNamed) {
  const std::string path =
      ::testing::TempDir() + "generated-" + std::to_string(::getpid()) + ".json";
  const std::vector<std::string> generate{"scenario", "generate", "--seed", "3",          "--shape",
                                          "bursty",   "--hours",  "24",     "--machines", "10"};
  std::vector<std::string> to_file = generate;
  to_file.insert(to_file.end(), {"--out", path});
  const Result written = run(to_file);
  ASSERT_EQ(written.code, 0) << written.err;
  EXPECT_THAT(written.err, HasSubstr("wrote " + path));
  const Result printed = run(generate);
  ASSERT_EQ(printed.code, 0) << printed.err;
  std::ifstream file(path);
  const nlohmann::json from_file = nlohmann::json::parse(file);
  EXPECT_EQ(from_file, nlohmann::json::parse(printed.out));
  EXPECT_EQ(from_file.at("name"), "generated-bursty-3");

  const Result sim = run({"sim", "--scenario", path, "--json"});
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_GT(nlohmann::json::parse(sim.out).at("jobs_arrived").get<int>(), 0);

  const std::string never = path + ".never";
  const Result wrong = run({"scenario", "generate", "--shape", "wavy", "--out", never});
  EXPECT_EQ(wrong.code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("--shape: 'wavy' is not one of steady, diurnal"));
  EXPECT_FALSE(std::ifstream(never).good());
  const Result format = run({"scenario", "generate", "--format", "3"});
  EXPECT_EQ(format.code, 1);
  EXPECT_THAT(format.err, HasSubstr("--format: only 2"));
  std::remove(path.c_str());
}

}  // namespace
