// The whole agent, in-process, against a scripted manager (tests/support/scripted_manager.h):
// register → parameters → plan → warm-up → measured proofs → stop, with the sim prover in
// scaled time; OOM → re-plan smaller (remembered across restarts) and the clear failure at the
// floor; events buffered while the manager is down and delivered exactly once, also across an
// agent restart; registration retried until the manager is up; a revoked token re-registers
// with the same token, one refused for good stops the agent; the token is kept 0600.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/agent.h"
#include "support/eventually.h"
#include "support/param_server.h"
#include "support/scripted_manager.h"

namespace pf::agent {
namespace {

using pf::test::eventually;

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

std::string fixture(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/probe/" + name;
}

json fast_truth(double ram_visible_gib) {
  // 720 proofs/h at full partitions: one every 5 simulated seconds, 83 ms at scale 60.
  return {{"rate_full", 720},     {"partitions_full", 10}, {"ram_visible_gib", ram_visible_gib},
          {"proof_time_cv", 0.1}, {"warmup_min", 0.05},    {"seed", 3}};
}

class AgentFlow : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pf_agent_flow_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    params_.put("v28-sim.params", test::ParamServer::random_bytes(256 * 1024, 11));
    manager_.params = json::array({{{"name", "v28-sim.params"},
                                    {"url", params_.url("v28-sim.params")},
                                    {"bytes", 256 * 1024},
                                    {"digest", nullptr}}});
  }
  void TearDown() override { fs::remove_all(dir_); }

  AgentOptions options(const std::string& probe_root, const json& truth) {
    AgentOptions o;
    o.manager_url = manager_.url();
    o.deployment = "dep-1";
    o.secret = "s3cret";
    o.state_dir = (dir_ / "state").string();
    o.probe_root = probe_root;
    o.prover = "sim";
    o.sim_truth = truth.dump();
    o.time_scale = 60;
    o.exit_on_failure = true;
    o.drain_s = 2;
    o.free_gib = [](const std::string&) { return std::optional<double>(500.0); };
    o.log_sink = [this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_.push_back(line);
    };
    return o;
  }

  bool logged(const std::string& text) {
    std::lock_guard lock(log_mu_);
    for (const auto& l : log_) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }

  std::string log_text() {
    std::lock_guard lock(log_mu_);
    std::string out;
    for (const auto& l : log_) out += l + "\n";
    return out;
  }

  // Runs the agent on a thread; join() returns its exit code.
  struct Running {
    std::unique_ptr<Agent> agent;
    std::thread thread;
    int code = -1;
    int join() {
      if (thread.joinable()) thread.join();
      return code;
    }
    ~Running() {
      if (thread.joinable()) {
        agent->request_stop("test teardown");
        thread.join();
      }
    }
  };
  std::unique_ptr<Running> start(AgentOptions o) {
    auto r = std::make_unique<Running>();
    r->agent = std::make_unique<Agent>(std::move(o));
    r->thread = std::thread([raw = r.get()] { raw->code = raw->agent->run(); });
    return r;
  }

  int last_completed() {
    const auto hbs = manager_.heartbeats();
    int n = 0;
    for (const auto& hb : hbs) n = std::max(n, hb["prover"].value("completed", 0));
    return n;
  }

  static std::vector<std::string> types(const std::vector<json>& events) {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.value("type", ""));
    return out;
  }

  static void expect_unique_increasing(const std::vector<json>& events) {
    for (std::size_t i = 1; i < events.size(); ++i) {
      EXPECT_LT(events[i - 1]["seq"].get<std::int64_t>(), events[i]["seq"].get<std::int64_t>())
          << "at " << i;
    }
  }

  static inline int counter_ = 0;
  fs::path dir_;
  test::ParamServer params_;
  test::ScriptedManager manager_;
  std::mutex log_mu_;
  std::vector<std::string> log_;
};

TEST_F(AgentFlow, ReplanWithAValueCapsThePartitionsTheOperatorAskedFor) {
  auto run = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 2; })) << log_text();
  manager_.push_command("replan:5");  // the manager's `tune --partitions 5`
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.events_of("prover_started").size() >= 2; }))
      << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped) << log_text();
  const auto replans = manager_.events_of("replan");
  ASSERT_EQ(replans.size(), 1u);
  EXPECT_EQ(replans[0]["message"], "5 partitions");
  EXPECT_EQ(manager_.events_of("prover_started").front()["data"]["partitions"], 12);
  EXPECT_EQ(manager_.events_of("prover_started")[1]["data"]["partitions"], 5);
}

TEST_F(AgentFlow, RegistersFetchesWarmsUpProvesAndStopsOnCommand) {
  auto run = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 4; })) << log_text();
  manager_.push_command("set_concurrency:2");
  manager_.push_command("replan");
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.events_of("prover_started").size() >= 2; }))
      << log_text();
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 7; })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped) << log_text();

  const auto events = manager_.events();
  const auto t = types(events);
  ASSERT_GE(t.size(), 6u);
  EXPECT_EQ(t.front(), "params_done");
  EXPECT_EQ(t[1], "prover_started");
  EXPECT_EQ(t[2], "proof_done");
  EXPECT_EQ(events[2]["phase"], "warmup");
  EXPECT_EQ(t[3], "memory_check");
  EXPECT_EQ(t.back(), "exiting");
  EXPECT_EQ(events.back()["message"], "the manager sent stop");
  EXPECT_EQ(manager_.events_of("replan").size(), 1u);
  EXPECT_EQ(manager_.duplicates(), 0);
  expect_unique_increasing(events);

  const json started = manager_.events_of("prover_started").front();
  EXPECT_EQ(started["data"]["partitions"], 12);  // 256 GiB cgroup limit, 32 cores, 1 GPU
  EXPECT_EQ(started["data"]["plan"]["total_budget_gib"], 238.0);
  for (const auto& e : manager_.events_of("proof_done")) {
    EXPECT_GT(e["seconds"].get<double>(), 0);
    EXPECT_GT(e["at"].get<double>(), 1e9);
    EXPECT_TRUE(e["phase"] == "warmup" || e["phase"] == "measured");
  }
  // After the warm-up of each start, 5 s apart on average (720/h), CV 0.1.
  const auto measured = manager_.events_of("proof_done");
  EXPECT_EQ(measured[0]["phase"], "warmup");
  const json check = manager_.events_of("memory_check").front();
  EXPECT_EQ(check["data"]["model_peak_gib"], 238.0);
  EXPECT_EQ(check["data"]["observed_peak_gib"], 238.0);

  const auto regs = manager_.registrations();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0]["hardware"]["memory"]["usable_gib"], 256.0);
  EXPECT_EQ(regs[0]["hardware"]["gpus"][0]["name"], "NVIDIA GeForce RTX 4090");
  EXPECT_EQ(regs[0]["agent_version"], kAgentVersion);

  bool saw_benchmarking = false, saw_params = false, saw_gpus = false;
  for (const auto& hb : manager_.heartbeats()) {
    saw_benchmarking = saw_benchmarking || hb["phase"] == "benchmarking";
    if (hb.contains("params") && hb["params"]["total"] == 256 * 1024) saw_params = true;
    if (hb.contains("gpus") && !hb["gpus"].empty() && hb["gpus"][0].contains("util"))
      saw_gpus = true;
  }
  EXPECT_TRUE(saw_benchmarking);
  EXPECT_TRUE(saw_params);
  EXPECT_TRUE(saw_gpus);
  EXPECT_TRUE(logged("set proofs in flight to 2"));
  EXPECT_NE(manager_.logs().find("registered as instance 42"), std::string::npos);
  EXPECT_NE(manager_.logs().find("plan: memory"), std::string::npos);
}

TEST_F(AgentFlow, OomReplansSmallerAndRemembersItAcrossRestarts) {
  // The probe says 256 GiB but the prover really gets 200: 12 partitions (238 GiB) are killed.
  auto run = start(options(fixture("cgroup-v2"), fast_truth(200)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 2; })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped) << log_text();

  const auto ooms = manager_.events_of("oom");
  ASSERT_EQ(ooms.size(), 1u);
  EXPECT_EQ(ooms[0]["data"]["partitions"], 12);
  EXPECT_EQ(ooms[0]["data"]["next_partitions"], 9);
  const auto started = manager_.events_of("prover_started");
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0]["data"]["partitions"], 12);
  EXPECT_EQ(started[1]["data"]["partitions"], 9);
  EXPECT_LT(ooms[0]["seq"].get<std::int64_t>(), started[1]["seq"].get<std::int64_t>());
  std::ifstream state(dir_ / "state" / "agent.json");
  EXPECT_EQ(json::parse(state)["partition_cap"], 9);

  // A restarted agent starts at the smaller plan and is not killed again.
  // The first agent may have measured more than two proofs before it saw "stop": count the
  // restarted agent's own proofs, not a total the first one may already have reached.
  const std::size_t before = manager_.events().size();
  const int measured_before = manager_.measured_proofs();
  auto again = start(options(fixture("cgroup-v2"), fast_truth(200)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= measured_before + 2; }))
      << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(again->join(), kAgentStopped);
  const auto after = manager_.events();
  std::vector<json> new_starts;
  for (std::size_t i = before; i < after.size(); ++i) {
    EXPECT_NE(after[i]["type"], "oom");
    if (after[i]["type"] == "prover_started") new_starts.push_back(after[i]);
  }
  ASSERT_EQ(new_starts.size(), 1u);
  EXPECT_EQ(new_starts[0]["data"]["partitions"], 9);
  EXPECT_EQ(manager_.duplicates(), 0);
}

// The manager says an earlier rental of this machine was killed for memory at 12 partitions: a
// fresh agent (no state of its own) starts below it and is never killed.
TEST_F(AgentFlow, AMachinesOomLessonFromTheManagerStartsTheFirstPlanBelowIt) {
  manager_.machine = {{"oom_partitions", 12}};
  auto run = start(options(fixture("cgroup-v2"), fast_truth(200)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 2; })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped) << log_text();
  EXPECT_TRUE(manager_.events_of("oom").empty());
  const auto started = manager_.events_of("prover_started");
  ASSERT_FALSE(started.empty());
  EXPECT_EQ(started.front()["data"]["partitions"], 9);
  EXPECT_TRUE(logged("killed for memory there")) << log_text();
}

TEST_F(AgentFlow, OomAtTheFloorIsAClearFailure) {
  const fs::path root = dir_ / "probe";
  fs::create_directories(root / "proc");
  std::ofstream(root / "proc" / "meminfo") << "MemTotal:       104857600 kB\n";  // 100 GiB
  fs::copy_file(fixture("cgroup-v2") + "/nvidia-smi.csv", root / "nvidia-smi.csv");
  auto run = start(options(root.string(), fast_truth(80)));
  EXPECT_EQ(run->join(), kAgentFailed) << log_text();
  const auto t = types(manager_.events());
  ASSERT_GE(t.size(), 4u) << log_text();
  EXPECT_EQ(t[t.size() - 3], "oom");
  EXPECT_EQ(t[t.size() - 2], "error");
  EXPECT_EQ(t.back(), "exiting");
  const json error = manager_.events_of("error").back();
  EXPECT_NE(error["message"].get<std::string>().find("floor"), std::string::npos) << error;
  EXPECT_FALSE(manager_.events_of("oom").back()["data"].contains("next_partitions"));
}

TEST_F(AgentFlow, AMachineTooSmallForAnyPlanFailsClearly) {
  auto run = start(options(fixture("unlimited"), fast_truth(62)));  // 62.8 GiB
  EXPECT_EQ(run->join(), kAgentFailed);
  const auto errors = manager_.events_of("error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0]["message"].get<std::string>().find("no prover plan fits this machine"),
            std::string::npos)
      << errors[0];
  EXPECT_TRUE(manager_.events_of("prover_started").empty());
}

TEST_F(AgentFlow, EventsAreBufferedWhileTheManagerRefusesThemAndDeliveredOnce) {
  manager_.events_down = true;
  auto run = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return last_completed() >= 4; })) << log_text();
  EXPECT_TRUE(manager_.events().empty());
  manager_.events_down = false;
  ASSERT_TRUE(manager_.wait_for([&] {
    return static_cast<int>(manager_.events_of("proof_done").size()) >= 4;
  })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped);
  const auto events = manager_.events();
  EXPECT_EQ(manager_.duplicates(), 0);
  for (std::size_t i = 1; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["seq"].get<std::int64_t>(), events[i - 1]["seq"].get<std::int64_t>() + 1);
  }
  EXPECT_EQ(types(events).front(), "params_done");
  EXPECT_GE(static_cast<int>(manager_.events_of("proof_done").size()), last_completed());
}

TEST_F(AgentFlow, UndeliveredEventsSurviveAnAgentRestart) {
  manager_.events_down = true;
  auto first = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return last_completed() >= 3; })) << log_text();
  first->agent->request_stop("operator restart");
  EXPECT_EQ(first->join(), kAgentStopped);
  EXPECT_TRUE(manager_.events().empty());
  const int first_completed = last_completed();

  manager_.events_down = false;
  auto second = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] {
    return manager_.events_of("exiting").size() >= 1 &&
           manager_.events_of("prover_started").size() >= 2 && manager_.measured_proofs() >= 3;
  })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(second->join(), kAgentStopped);

  const auto events = manager_.events();
  EXPECT_EQ(manager_.duplicates(), 0);
  expect_unique_increasing(events);
  const auto exits = manager_.events_of("exiting");
  ASSERT_EQ(exits.size(), 2u);
  EXPECT_EQ(exits[0]["message"], "operator restart");
  const auto starts = manager_.events_of("prover_started");
  EXPECT_LT(exits[0]["seq"].get<std::int64_t>(), starts[1]["seq"].get<std::int64_t>());
  // Every proof of the first run reached the manager, exactly once.
  int before_restart = 0;
  for (const auto& e : manager_.events_of("proof_done")) {
    if (e["seq"].get<std::int64_t>() < exits[0]["seq"].get<std::int64_t>()) ++before_restart;
  }
  EXPECT_GE(before_restart, first_completed);
  EXPECT_EQ(manager_.registrations().size(), 2u);
}

TEST_F(AgentFlow, RegistrationIsRetriedUntilTheManagerIsUp) {
  manager_.stop();
  auto run = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(eventually([&] { return logged("cannot register yet"); })) << log_text();
  EXPECT_TRUE(manager_.registrations().empty());
  manager_.start();
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 1; })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped);
  EXPECT_TRUE(logged("cannot register yet"));
}

TEST_F(AgentFlow, AWrongSecretIsRefused) {
  manager_.secret = "other";
  auto run = start(options(fixture("cgroup-v2"), fast_truth(256)));
  EXPECT_EQ(run->join(), kAgentFailed);
  EXPECT_TRUE(logged("registration refused"));
  EXPECT_TRUE(logged("wrong secret"));
}

TEST_F(AgentFlow, ARevokedTokenRegistersAgainWithTheSameToken) {
  auto run = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 1; })) << log_text();
  manager_.revoke_token();
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.registrations().size() >= 2; }))
      << log_text();
  const int before = manager_.measured_proofs();
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() > before + 1; }));
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped);
  EXPECT_EQ(manager_.duplicates(), 0);
  const auto regs = manager_.registrations();
  ASSERT_GE(regs.size(), 2u);
  EXPECT_EQ(regs[0]["token"], regs[1]["token"]);
}

TEST_F(AgentFlow, ATokenRefusedForGoodStopsTheAgentAfterOneRegistration) {
  AgentOptions o = options(fixture("cgroup-v2"), fast_truth(256));
  o.exit_on_failure = false;  // the refusal alone must end it
  auto run = start(std::move(o));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 1; })) << log_text();
  manager_.hijack_registration();
  EXPECT_EQ(run->join(), kAgentFailed);
  // One registration attempt after the refusal, not a loop.
  EXPECT_EQ(manager_.registrations().size(), 2u);
  EXPECT_TRUE(logged("the manager refused our token and our registration")) << log_text();
}

TEST_F(AgentFlow, TheTokenIsKeptPrivatelyAndARestartRegistersWithIt) {
  auto first = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.registrations().size() >= 1; }))
      << log_text();
  first->agent->request_stop("operator restart");
  EXPECT_EQ(first->join(), kAgentStopped);

  const fs::path token_file = dir_ / "state" / "agent-token";
  ASSERT_TRUE(fs::is_regular_file(token_file));
  EXPECT_EQ(fs::status(token_file).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(fs::status(dir_ / "state").permissions() & fs::perms::all, fs::perms::owner_all);
  std::string stored;
  std::ifstream token_in(token_file);
  std::getline(token_in, stored);
  EXPECT_EQ(manager_.registrations()[0]["token"], stored);

  // The restarted agent presents the stored token, which the single-use secret still takes.
  auto second = start(options(fixture("cgroup-v2"), fast_truth(256)));
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 1; })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(second->join(), kAgentStopped);
  ASSERT_EQ(manager_.registrations().size(), 2u);
  EXPECT_EQ(manager_.registrations()[1]["token"], stored);

  // Without its state dir an agent cannot take the instance over: the secret is spent.
  fs::remove_all(dir_ / "state");
  auto third = start(options(fixture("cgroup-v2"), fast_truth(256)));
  EXPECT_EQ(third->join(), kAgentFailed);
  EXPECT_TRUE(logged("registration refused")) << log_text();
}

TEST_F(AgentFlow, TheCommandProverRunsOneProcessPerProof) {
  AgentOptions o = options(fixture("cgroup-v2"), json::object());
  o.prover = "command";
  o.time_scale = 1;
  // The registration secret (in the agent's environment) must not reach the prover command.
  ::setenv("PROVERFLEET_SECRET", "s3cret", 1);
  o.prover_command =
      "test \"$PF_PARTITIONS\" = 12 || exit 9; test -z \"$PROVERFLEET_SECRET\" || exit 8; "
      "echo '{\"gpu_ms\": 1234, \"queue_ms\": 5}'";
  auto run = start(o);
  ASSERT_TRUE(manager_.wait_for([&] { return manager_.measured_proofs() >= 3; })) << log_text();
  manager_.push_command("stop");
  EXPECT_EQ(run->join(), kAgentStopped);
  for (const auto& e : manager_.events_of("proof_done")) {
    EXPECT_EQ(e["gpu_ms"], 1234.0);
    EXPECT_EQ(e["queue_ms"], 5.0);
  }
  EXPECT_TRUE(manager_.events_of("error").empty());
  ::unsetenv("PROVERFLEET_SECRET");
}

TEST_F(AgentFlow, AProverThatKeepsFailingEndsInAClearError) {
  AgentOptions o = options(fixture("cgroup-v2"), json::object());
  o.prover = "command";
  o.time_scale = 30;  // restart back-off in scaled time
  o.max_restarts = 1;
  o.prover_command = "echo 'no GPU found' >&2; exit 3";
  auto run = start(o);
  EXPECT_EQ(run->join(), kAgentFailed);
  const auto errors = manager_.events_of("error");
  ASSERT_GE(errors.size(), 2u);
  EXPECT_NE(errors.front()["message"].get<std::string>().find("exit code 3: no GPU found"),
            std::string::npos)
      << errors.front();
  EXPECT_NE(errors.back()["message"].get<std::string>().find("warm-up proof failed 2 times"),
            std::string::npos)
      << errors.back();
}

}  // namespace
}  // namespace pf::agent
