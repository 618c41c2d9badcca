// The real `proverfleet` binary: `plan` output and errors, `agent --help` and argument errors,
// an agent killed with SIGKILL mid-download that resumes where it stopped, and SIGTERM.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "agent/params.h"
#include "support/param_server.h"
#include "support/scripted_manager.h"
#include "support/subprocess.h"

namespace pf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using test::Subprocess;

std::string fixture(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/probe/" + name;
}

struct Ran {
  int code;
  std::string out;
  std::string err;
};

Ran run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PF_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = Subprocess::spawn(argv);
  auto code = p.wait_exit(60s);
  std::string out;
  for (const auto& l : p.stdout_lines()) out += l + "\n";
  return {code.value_or(-1), out, p.stderr_text()};
}

TEST(AgentCli, PlanPrintsTheJsonObject) {
  const Ran r = run({"plan", "--ram", "256G", "--cores", "32", "--gpus", "1", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["partitions"], 12);
  EXPECT_EQ(j["total_budget_gib"], 238.0);
  EXPECT_EQ(j["gpu_workers_per_device"], 2);
  EXPECT_EQ(j["synthesis_threads"], 32);
  EXPECT_EQ(j["gpu_threads"], 32);
  ASSERT_TRUE(j["reasons"].is_array());
  EXPECT_FALSE(j["reasons"].empty());
  EXPECT_NE(j["cuzk_toml"].get<std::string>().find("total_budget = \"238GiB\""), std::string::npos);
}

TEST(AgentCli, PlanExplainsInText) {
  const Ran r = run({"plan", "--ram", "128GiB", "--cores", "96"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("partitions              3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("why:"), std::string::npos) << r.out;
  const Ran toml = run({"plan", "--ram", "128G", "--cores", "96", "--toml", "--no-pce"});
  ASSERT_EQ(toml.code, 0) << toml.err;
  // Warm-up at 2 partitions: 70 + 2·14 GiB peak + 14 GiB PCE extraction bound cuzk's syntheses.
  EXPECT_NE(toml.out.find("total_budget = \"112GiB\""), std::string::npos) << toml.out;
  EXPECT_EQ(toml.out.find("max_parallel_synthesis"), std::string::npos) << toml.out;
}

TEST(AgentCli, PlanErrorsNameTheProblem) {
  const Ran small = run({"plan", "--ram", "64G", "--cores", "32"});
  EXPECT_EQ(small.code, 1);
  EXPECT_NE(small.err.find("below the prover's minimum"), std::string::npos) << small.err;
  const Ran unit = run({"plan", "--ram", "256Q", "--cores", "32"});
  EXPECT_EQ(unit.code, 1);
  EXPECT_NE(unit.err.find("--ram: '256Q' has an unknown unit"), std::string::npos) << unit.err;
  const Ran missing = run({"plan", "--cores", "32"});
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("--ram"), std::string::npos) << missing.err;
}

// Issue 10: `plan --gpus 2147483647` allocated until it died; now every input is bounded first.
TEST(AgentCli, PlanInputsOutsideSaneRangesAreRefusedNamingTheFlag) {
  const Ran gpus = run({"plan", "--ram", "256G", "--cores", "32", "--gpus", "2147483647"});
  EXPECT_EQ(gpus.code, 1);
  EXPECT_NE(gpus.err.find("--gpus must be in [1, 64], got 2147483647"), std::string::npos)
      << gpus.err;
  const Ran ram = run({"plan", "--ram", "1e300G", "--cores", "32"});
  EXPECT_EQ(ram.code, 1);
  EXPECT_NE(ram.err.find("--ram must be in (0, 65536] GiB"), std::string::npos) << ram.err;
  const Ran cores = run({"plan", "--ram", "256G", "--cores", "nan"});
  EXPECT_NE(cores.code, 0);
  EXPECT_NE(cores.err.find("--cores"), std::string::npos) << cores.err;
  const Ran partitions = run({"plan", "--ram", "256G", "--cores", "32", "--partitions", "-5"});
  EXPECT_EQ(partitions.code, 1);
  EXPECT_NE(partitions.err.find("--partitions"), std::string::npos) << partitions.err;
}

TEST(AgentCli, AgentHelpAndMissingSettings) {
  const Ran help = run({"agent", "--help"});
  ASSERT_EQ(help.code, 0);
  for (const char* flag : {"--manager", "--deployment", "PROVERFLEET_SECRET", "--state-dir",
                           "--probe-root", "--prover", "--time-scale", "PROVERFLEET_MANAGER"}) {
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
  }
  test::SpawnOptions no_env;
  no_env.env = {{"PROVERFLEET_MANAGER", std::nullopt},
                {"PROVERFLEET_DEPLOYMENT", std::nullopt},
                {"PROVERFLEET_SECRET", std::nullopt}};
  auto p = Subprocess::spawn({PF_BINARY, "agent"}, no_env);
  EXPECT_EQ(p.wait_exit(30s), 1);
  EXPECT_NE(p.stderr_text().find("missing --manager (or PROVERFLEET_MANAGER)"), std::string::npos)
      << p.stderr_text();
  test::SpawnOptions with_secret;
  with_secret.env = {{"PROVERFLEET_SECRET", "s"}};
  auto bad = Subprocess::spawn({PF_BINARY, "agent", "--manager", "ftp://x", "--deployment", "d"},
                               with_secret);
  EXPECT_EQ(bad.wait_exit(30s), 1);
  EXPECT_NE(bad.stderr_text().find("http:// or https://"), std::string::npos) << bad.stderr_text();
}

// No secret on a command line, where every local user reads it (issue 10): the flags that would
// carry one are refused, naming the environment variable or file to use instead.
TEST(AgentCli, SecretsOnTheCommandLineAreRefused) {
  const Ran agent =
      run({"agent", "--manager", "http://127.0.0.1:1", "--deployment", "d", "--secret", "s3cret"});
  EXPECT_EQ(agent.code, 1);
  EXPECT_NE(agent.err.find("--secret is refused"), std::string::npos) << agent.err;
  EXPECT_NE(agent.err.find("PROVERFLEET_SECRET"), std::string::npos) << agent.err;
  const Ran status = run({"status", "--manager", "http://127.0.0.1:1", "--token", "t0k"});
  EXPECT_EQ(status.code, 1);
  EXPECT_NE(status.err.find("--token is refused"), std::string::npos) << status.err;
  EXPECT_NE(status.err.find("PROVERFLEET_TOKEN"), std::string::npos) << status.err;
  const Ran sim =
      run({"market-sim", "--scenario", std::string(PF_SOURCE_DIR) + "/scenarios/demo-small.json",
           "--api-key", "k3y"});
  EXPECT_EQ(sim.code, 1);
  EXPECT_NE(sim.err.find("--api-key is refused"), std::string::npos) << sim.err;
  EXPECT_NE(sim.err.find("PROVERFLEET_MARKET_SIM_API_KEY"), std::string::npos) << sim.err;
  EXPECT_NE(sim.err.find("--api-key-file"), std::string::npos) << sim.err;
}

// A database password on serve's command line is refused before anything is opened, and the
// message never repeats it.
TEST(AgentCli, ADatabasePasswordOnServesCommandLineIsRefusedAndNotRepeated) {
  const Ran serve = run(
      {"serve", "--listen", "127.0.0.1:0", "--db", "postgres://pf:s3cret-pw@127.0.0.1:1/fleet"});
  EXPECT_EQ(serve.code, 1);
  EXPECT_NE(serve.err.find("--db: a password in a database URL is refused"), std::string::npos)
      << serve.err;
  EXPECT_NE(serve.err.find("PGPASSFILE"), std::string::npos) << serve.err;
  EXPECT_EQ(serve.err.find("s3cret-pw"), std::string::npos) << serve.err;
}

class AgentProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pf_agent_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Subprocess spawn_agent() {
    const json truth = {{"rate_full", 720},
                        {"partitions_full", 10},
                        {"ram_visible_gib", 256},
                        {"proof_time_cv", 0.1},
                        {"warmup_min", 0.05}};
    test::SpawnOptions env;
    env.env = {{"PROVERFLEET_MANAGER", manager_.url()},
               {"PROVERFLEET_DEPLOYMENT", "dep-1"},
               {"PROVERFLEET_SECRET", "s3cret"}};
    return Subprocess::spawn(
        {PF_BINARY, "agent", "--state-dir", (dir_ / "state").string(), "--probe-root",
         fixture("cgroup-v2"), "--prover", "sim", "--sim-truth", truth.dump(), "--time-scale", "60",
         "--connections", "2", "--download-chunk-mib", "1", "--no-progress"},
        env);
  }

  fs::path dir_;
  test::ParamServer params_;
  test::ScriptedManager manager_;
};

TEST_F(AgentProcess, ResumesItsDownloadAfterSigkillAndStopsOnSigterm) {
  constexpr std::size_t kSize = 8u << 20;  // 8 chunks of 1 MiB
  const std::string content = test::ParamServer::random_bytes(kSize, 5);
  params_.put("v28-big.params", content);
  params_.bytes_per_s = 1u << 20;  // per connection: two connections, ~4 s for the file
  manager_.params = json::array({{{"name", "v28-big.params"},
                                  {"url", params_.url("v28-big.params")},
                                  {"bytes", kSize},
                                  {"digest", agent::param_digest_of(content)}}});

  {
    auto first = spawn_agent();
    ASSERT_TRUE(manager_.wait_for([&] { return params_.served.load() >= 3u << 20; }, 60s))
        << first.stderr_text();
    ::kill(first.pid(), SIGKILL);
    EXPECT_EQ(first.wait_exit(10s), 128 + SIGKILL);
  }
  const std::uint64_t before_restart = params_.served.load();
  EXPECT_LT(before_restart, kSize);
  EXPECT_TRUE(manager_.events_of("params_done").empty());

  params_.bytes_per_s = 0;
  auto second = spawn_agent();
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 2; }, 60s))
      << second.stderr_text();
  // Chunks recorded before the kill were not fetched again: only the chunks in flight at the
  // kill (at most one per connection) were paid twice.
  EXPECT_LT(params_.served.load(), kSize + (2u << 20));
  EXPECT_GE(params_.served.load(), kSize);
  EXPECT_NE(second.stderr_text().find("resuming v28-big.params"), std::string::npos)
      << second.stderr_text();
  EXPECT_EQ(manager_.events_of("params_done").size(), 1u);

  EXPECT_EQ(second.terminate(10s), 0) << second.stderr_text();
  ASSERT_TRUE(manager_.wait_for([&] { return !manager_.events_of("exiting").empty(); }, 5s));
  EXPECT_EQ(manager_.events_of("exiting").back()["message"], "SIGTERM");
  EXPECT_EQ(manager_.duplicates(), 0);
  EXPECT_EQ(manager_.registrations().size(), 2u);
}

}  // namespace
}  // namespace pf
