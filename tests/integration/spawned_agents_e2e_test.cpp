// market-sim --spawn-agents: the spawner on its own (with shell onstarts and a clock the test
// moves), market-sim's parameter stand-ins over HTTP, and the whole loop with real processes:
// market-sim spawning `proverfleet agent` for what `proverfleet serve` rents, the agents
// fetching the stand-ins, proving with the sim prover and the manager judging them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "agent/params.h"
#include "agent/prover_sim.h"
#include "market_sim/agent_spawner.h"
#include "scenario/scenario.h"
#include "support/eventually.h"
#include "support/pg_server.h"
#include "support/proverfleet_cli.h"
#include "support/store_backends.h"
#include "support/subprocess.h"

namespace {

using nlohmann::json;
using pf::market_sim::AgentSpawner;
using pf::market_sim::InstanceLaunch;
using pf::market_sim::SpawnedInstance;
using pf::market_sim::SpawnState;
using pf::test::CliRun;
using pf::test::eventually;
using pf::test::operator_api;
using pf::test::parse_url;
using pf::test::run_cli;
using pf::test::Subprocess;
using pf::test::Url;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kBinary = PF_BINARY;
constexpr double kNever = std::numeric_limits<double>::infinity();

fs::path fresh_dir(const std::string& what) {
  fs::path dir =
      fs::temp_directory_path() / ("pf-" + what + "-" + std::to_string(::getpid()) + "-" +
                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// True once no process is left in the group (the leader reaped, nothing else in it).
bool group_gone(int pgid) {
  return ::kill(-pgid, 0) != 0 && errno == ESRCH;
}

pf::scenario::Scenario tiny() {
  std::ifstream in(std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/tiny.json");
  auto s = pf::scenario::parse_scenario(json::parse(in));
  if (!s) throw std::runtime_error(s.error());
  return *s;
}

// --- the spawner, in process, on a clock the test moves ---------------------------------------

class SpawnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("spawner");
    scenario_ = tiny();
  }
  void TearDown() override {
    spawner_.reset();
    fs::remove_all(dir_);
  }

  void start(std::chrono::milliseconds grace = 10s) {
    pf::market_sim::AgentSpawnerOptions o;
    o.work_dir = dir_.string();
    o.bin_dir = "/opt/pf-test-bin";
    o.time_scale = 60;
    o.seed = 7;
    o.term_grace = grace;
    o.clock_h = [this] { return now_h_.load(); };
    o.container_stopped = [this](std::int64_t id) { return id == stopped_id_.load(); };
    o.log = [this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_ += line + "\n";
    };
    spawner_ = std::make_unique<AgentSpawner>(std::move(o));
  }

  // Instance `id` of offer `offer_index`, booting at hour 1 (failing at `failure_h`).
  void create(std::int64_t id, const std::string& onstart, std::size_t offer_index = 0,
              double boot_h = 1, double failure_h = kNever) {
    InstanceLaunch l;
    l.id = id;
    l.offer_index = offer_index;
    l.created_h = 0;
    l.boot_h = boot_h;
    l.failure_h = failure_h;
    l.onstart = onstart;
    l.env = {{"PROVERFLEET_SECRET", "s3cret"}, {"-p 8000:8000", "1"}};
    spawner_->on_created(l, scenario_.offers[offer_index]);
  }

  std::optional<SpawnedInstance> find(std::int64_t id) {
    for (const auto& i : spawner_->instances()) {
      if (i.id == id) return i;
    }
    return std::nullopt;
  }

  std::optional<SpawnedInstance> wait_state(std::int64_t id, SpawnState state,
                                            std::chrono::milliseconds limit = 20s) {
    std::optional<SpawnedInstance> found;
    eventually(
        [&] {
          found = find(id);
          return found && found->state == state;
        },
        limit);
    if (found && found->state == state) return found;
    return std::nullopt;
  }

  std::string log() {
    std::lock_guard lock(log_mu_);
    return log_;
  }

  // The onstart's traps are set once it has written `ready`: a signal before that would hit a
  // shell still without them.
  bool wait_ready(std::int64_t id) {
    return eventually([&] { return fs::exists(fs::path(spawner_->instance_dir(id)) / "ready"); },
                      20s);
  }

  fs::path dir_;
  pf::scenario::Scenario scenario_;
  std::atomic<double> now_h_{0};
  std::atomic<std::int64_t> stopped_id_{0};  // the instance the market has stopped (0: none)
  std::mutex log_mu_;
  std::string log_;
  std::unique_ptr<AgentSpawner> spawner_;
};

TEST_F(SpawnerTest, OnstartRunsAtBootWithTheInstancesEnvironmentOnly) {
  ::setenv("PF_SPAWNER_TEST_LEAK", "market-sim's own", 1);
  start();
  create(1, "env > env.txt; sleep 60");
  ASSERT_TRUE(wait_state(1, SpawnState::Waiting));
  now_h_ = 1.0;  // boot
  auto running = wait_state(1, SpawnState::Running);
  ASSERT_TRUE(running) << log();
  const fs::path home = spawner_->instance_dir(1);
  EXPECT_EQ(running->dir, home.string());
  ASSERT_TRUE(eventually(
      [&] { return read_text(home / "env.txt").find("PATH=") != std::string::npos; }, 20s));
  std::map<std::string, std::string> env;
  std::istringstream lines(read_text(home / "env.txt"));
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  EXPECT_EQ(env["PROVERFLEET_SECRET"], "s3cret");  // the create's env
  EXPECT_EQ(env["PROVERFLEET_PROVER"], "sim");
  EXPECT_EQ(env["PROVERFLEET_TIME_SCALE"], "60");
  EXPECT_EQ(env["HOME"], home.string());
  EXPECT_EQ(env["PROVERFLEET_STATE_DIR"], (home / "state").string());
  EXPECT_EQ(env["PROVERFLEET_PARAM_DIR"], (home / "params").string());
  EXPECT_EQ(env["PATH"].rfind("/opt/pf-test-bin:", 0), 0u) << env["PATH"];
  EXPECT_EQ(env.count("PF_SPAWNER_TEST_LEAK"), 0u);  // nothing of market-sim's environment
  EXPECT_EQ(env.count("-p 8000:8000"), 0u);
  EXPECT_THAT(log(), HasSubstr("not a variable name"));

  // The probe tree and the truth the agent will read.
  EXPECT_EQ(env["PROVERFLEET_PROBE_ROOT"], (home / "probe").string());
  EXPECT_EQ(read_text(home / "probe/sys/fs/cgroup/memory.max"), "137438953472\n");  // 128 GiB
  ASSERT_EQ(env["PROVERFLEET_SIM_TRUTH"], "@" + (home / "truth.json").string());
  auto truth = pf::agent::parse_sim_truth(json::parse(read_text(home / "truth.json")));
  ASSERT_TRUE(truth) << truth.error();
  EXPECT_DOUBLE_EQ(truth->truth.rate_full, 40);
  EXPECT_EQ(truth->co_tenants_file, (home / "co_tenants").string());
  EXPECT_EQ(read_text(home / "co_tenants"), "0\n");
  EXPECT_THAT(read_text(home / "agent.log"), HasSubstr("booted; running onstart"));

  spawner_->on_destroyed(1);
  auto ended = wait_state(1, SpawnState::Ended);
  ASSERT_TRUE(ended) << log();
  EXPECT_THAT(ended->outcome, HasSubstr("destroyed"));
  EXPECT_TRUE(group_gone(running->pid));
  ::unsetenv("PF_SPAWNER_TEST_LEAK");
}

// Contention is a function of our instances alive on the machine now, not frozen at create:
// the spawner rewrites each running instance's co_tenants file as neighbours come and go.
TEST_F(SpawnerTest, CoTenantsFollowTheMachinesInstances) {
  start();
  const std::string idle = "touch ready; while :; do sleep 0.05; done";
  create(1, idle, 0);  // offers 0 and 1 share machine 501
  now_h_ = 1.0;
  ASSERT_TRUE(wait_state(1, SpawnState::Running)) << log();
  const fs::path file = fs::path(spawner_->instance_dir(1)) / "co_tenants";
  EXPECT_TRUE(eventually([&] { return read_text(file) == "0\n"; }, 20s)) << read_text(file);
  create(2, idle, 1);
  EXPECT_TRUE(eventually([&] { return read_text(file) == "1\n"; }, 20s)) << read_text(file);
  spawner_->on_destroyed(2);
  EXPECT_TRUE(eventually([&] { return read_text(file) == "0\n"; }, 20s)) << read_text(file);
}

TEST_F(SpawnerTest, DestroyGivesTheGroupSigtermAndTimeToExit) {
  start(30s);
  create(1, "trap 'echo term > got_term; exit 0' TERM; touch ready; while :; do sleep 0.05; done");
  now_h_ = 1.0;
  auto running = wait_state(1, SpawnState::Running);
  ASSERT_TRUE(running) << log();
  ASSERT_TRUE(wait_ready(1));
  spawner_->on_destroyed(1);
  auto ended = wait_state(1, SpawnState::Ended, 20s);  // well inside the 30 s grace
  ASSERT_TRUE(ended) << log();
  EXPECT_THAT(ended->outcome, HasSubstr("destroyed (exit code 0)"));
  EXPECT_EQ(read_text(fs::path(ended->dir) / "got_term"), "term\n");
  EXPECT_TRUE(group_gone(running->pid));
}

// As a container: stopped (by its client or by the market: outbid, contract ended) its processes
// get SIGTERM and are gone, its disk stays; started again, the onstart runs again on that disk.
TEST_F(SpawnerTest, AStoppedContainerKeepsItsDiskAndRunsItsOnstartAgainWhenStarted) {
  start(30s);
  create(1,
         "echo run >> runs; trap 'echo term >> got_term; exit 0' TERM; touch ready; "
         "while :; do sleep 0.05; done");
  now_h_ = 1.0;
  auto first = wait_state(1, SpawnState::Running);
  ASSERT_TRUE(first) << log();
  ASSERT_TRUE(wait_ready(1));
  const fs::path dir = first->dir;

  stopped_id_ = 1;
  auto stopped = wait_state(1, SpawnState::Stopped);
  ASSERT_TRUE(stopped) << log();
  EXPECT_THAT(stopped->outcome, HasSubstr("container stopped (exit code 0)"));
  EXPECT_EQ(read_text(dir / "got_term"), "term\n");
  EXPECT_TRUE(group_gone(first->pid));
  EXPECT_EQ(read_text(dir / "runs"), "run\n");  // the disk is kept

  fs::remove(dir / "ready");
  stopped_id_ = 0;
  auto again = wait_state(1, SpawnState::Running);
  ASSERT_TRUE(again) << log();
  ASSERT_TRUE(wait_ready(1));
  EXPECT_NE(again->pid, first->pid);
  EXPECT_EQ(read_text(dir / "runs"), "run\nrun\n");
  EXPECT_THAT(log(), HasSubstr("started again"));

  // Destroyed while stopped: nothing is left to signal.
  stopped_id_ = 1;
  ASSERT_TRUE(wait_state(1, SpawnState::Stopped)) << log();
  spawner_->on_destroyed(1);
  auto ended = wait_state(1, SpawnState::Ended);
  ASSERT_TRUE(ended) << log();
  EXPECT_THAT(ended->outcome, HasSubstr("destroyed while stopped"));
  EXPECT_TRUE(group_gone(again->pid));
}

// A container the market holds stopped when it would boot waits until it runs.
TEST_F(SpawnerTest, AContainerStoppedBeforeItsBootBootsWhenStarted) {
  start();
  stopped_id_ = 1;
  create(1, "touch ready; while :; do sleep 0.05; done");
  now_h_ = 1.0;
  create(2, "");  // a second instance's passes show the first one was looked at since
  ASSERT_TRUE(wait_state(2, SpawnState::Ended));
  EXPECT_EQ(find(1)->state, SpawnState::Waiting);
  stopped_id_ = 0;
  ASSERT_TRUE(wait_state(1, SpawnState::Running)) << log();
}

TEST_F(SpawnerTest, AGroupIgnoringSigtermIsKilledAfterTheGrace) {
  start(300ms);
  create(1, "trap '' TERM; touch ready; while :; do sleep 0.05; done");
  now_h_ = 1.0;
  auto running = wait_state(1, SpawnState::Running);
  ASSERT_TRUE(running) << log();
  ASSERT_TRUE(wait_ready(1));
  spawner_->on_destroyed(1);
  auto ended = wait_state(1, SpawnState::Ended);
  ASSERT_TRUE(ended) << log();
  EXPECT_THAT(ended->outcome, HasSubstr("SIGKILL"));
  EXPECT_TRUE(group_gone(running->pid));
}

TEST_F(SpawnerTest, OfflineHostIsKilledAtItsScaledTimeWithoutGrace) {
  start(30s);
  // Offer 1004 goes offline; here 1 h after boot.
  create(1, "trap 'echo term > got_term; exit 0' TERM; touch ready; while :; do sleep 0.05; done",
         3, 1, 2);
  now_h_ = 1.5;
  auto running = wait_state(1, SpawnState::Running);
  ASSERT_TRUE(running) << log();
  ASSERT_TRUE(wait_ready(1));
  now_h_ = 2.0;
  auto ended = wait_state(1, SpawnState::Ended);
  ASSERT_TRUE(ended) << log();
  EXPECT_THAT(ended->outcome, HasSubstr("offline"));
  EXPECT_THAT(ended->outcome, HasSubstr("SIGKILL"));
  EXPECT_FALSE(fs::exists(fs::path(ended->dir) / "got_term"));  // no chance to report
  EXPECT_TRUE(group_gone(running->pid));
}

TEST_F(SpawnerTest, NeverBootingInstanceNeverStarts) {
  start();
  now_h_ = 100;
  create(1, "touch started; sleep 60", 2, kNever);
  ASSERT_TRUE(wait_state(1, SpawnState::Waiting));
  create(2, "");  // a second instance's passes show the first one was looked at since
  ASSERT_TRUE(wait_state(2, SpawnState::Ended));
  EXPECT_EQ(find(1)->state, SpawnState::Waiting);
  EXPECT_THAT(find(2)->outcome, HasSubstr("no onstart"));
  spawner_->on_destroyed(1);
  auto ended = wait_state(1, SpawnState::Ended);
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->pid, 0);
  EXPECT_THAT(ended->outcome, HasSubstr("destroyed before it booted"));
  EXPECT_FALSE(fs::exists(fs::path(ended->dir) / "started"));
}

TEST_F(SpawnerTest, StopAllEndsEveryGroup) {
  start(300ms);
  create(1, "sleep 60");
  create(2, "trap '' TERM; sleep 60 & sleep 60");
  now_h_ = 1.0;
  auto a = wait_state(1, SpawnState::Running);
  auto b = wait_state(2, SpawnState::Running);
  ASSERT_TRUE(a && b) << log();
  spawner_->stop_all();
  for (const auto& i : spawner_->instances()) {
    EXPECT_EQ(i.state, SpawnState::Ended) << i.id;
    EXPECT_THAT(i.outcome, HasSubstr("market-sim is stopping"));
  }
  EXPECT_TRUE(group_gone(a->pid));
  EXPECT_TRUE(group_gone(b->pid));
}

// --- market-sim and serve, real processes -----------------------------------------------------

TEST(MarketSimSpawnOptionsTest, BadOptionsAreNamed) {
  const std::string scenario = std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/tiny.json";
  struct Case {
    std::vector<std::string> extra;
    std::string message;
  };
  for (const auto& c :
       {Case{{"--work-dir", "/tmp/x"}, "--work-dir holds the spawned agents' files"},
        Case{{"--param-stand-in-mib", "5000"}, "stand-in size must be in [0, 1024] MiB"},
        Case{{"--param-min-kib-s", "0"},
             "--param-min-kib-s: must be a finite number in (0, 1e+09]"},
        Case{{"--param-min-kib-s", "nan"}, "--param-min-kib-s: must be a finite number"}}) {
    std::vector<std::string> argv = {kBinary,  "market-sim", "--scenario",
                                     scenario, "--listen",   "127.0.0.1:0"};
    argv.insert(argv.end(), c.extra.begin(), c.extra.end());
    auto p = Subprocess::spawn(argv);
    auto code = p.wait_exit(20s);
    ASSERT_TRUE(code);
    EXPECT_NE(*code, 0) << c.message;
    EXPECT_THAT(p.stderr_text(), HasSubstr(c.message));
  }
}

// Three offers on three machines: two that pay (60 and 50 proofs/h for $0.30 and $0.25), one
// that cannot ($3/h for 10/h).
json three_offer_scenario() {
  std::ifstream in(std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/tiny.json");
  json doc = json::parse(in);
  json base = doc["offers"][0];
  base["listed_from_h"] = 0;
  base["listed_until_h"] = 1000;
  base["truth"] = {{"rate_full", 60},
                   {"partitions_full", 8},
                   {"ram_visible_gib", 256},
                   {"cores_visible", 32},
                   {"proof_time_cv", 0.05},
                   {"boot_min", 3},
                   {"download_mbps", 800},
                   {"warmup_min", 4},
                   {"contention", 0.8},
                   {"throttle", nullptr},
                   {"failure", {{"kind", "none"}, {"after_h", 0}}}};
  base["cpu_ram"] = 262144;
  base["cpu_cores"] = 32;
  base["cpu_cores_effective"] = 32;
  doc["name"] = "three-offers";
  doc["hours"] = 1000;
  doc["offers"] = json::array();
  struct Variant {
    std::int64_t id, machine;
    double dph, rate;
  };
  for (const auto& v :
       {Variant{5001, 601, 0.30, 60}, Variant{5002, 602, 0.25, 50}, Variant{5003, 603, 3.00, 10}}) {
    json o = base;
    o["id"] = v.id;
    o["machine_id"] = v.machine;
    o["host_id"] = v.machine + 1000;
    o["dph_total"] = v.dph;
    o["truth"]["rate_full"] = v.rate;
    doc["offers"].push_back(o);
  }
  return doc;
}

class SpawnedAgentsE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("spawned-e2e");
    std::ofstream(dir_ / "scenario.json") << three_offer_scenario().dump(2);
    // The benchmark input every agent fetches from the manager (issue 13 item 3).
    std::ofstream(dir_ / "c1.json")
        << R"({"SectorNum":5,"Phase1Out":"YWJjZA==","SectorSize":34359738368})";
    std::ofstream(dir_ / "proverfleet.toml")
        << "[jobs]\nproof_check = \"sim\"\n"  // market-sim's agents run the sim prover
        << "[deploy]\nbenchmark_input = \"" << (dir_ / "c1.json").string() << "\"\n"
        << R"(heartbeat_s = 10
[lifecycle]
heartbeat_timeout_s = 30
destroy_retry_s = 0.5
[acceptance]
min_samples = 6
max_samples = 10
)";
    db_url_ = (dir_ / "pf.db").string();
  }

  void TearDown() override {
    manager_.reset();
    sim_.reset();
    fs::remove_all(dir_);
  }

  void start_sim(double time_scale) {
    pf::test::SpawnOptions sim_options;
    sim_options.env["PROVERFLEET_MARKET_SIM_API_KEY"] = kVastKey;
    sim_.emplace(
        Subprocess::spawn({kBinary, "market-sim", "--scenario", (dir_ / "scenario.json").string(),
                           "--listen", "127.0.0.1:0", "--time-scale", std::to_string(time_scale),
                           "--spawn-agents", "--work-dir", (dir_ / "work").string(),
                           "--param-stand-in-mib", "1", "--param-min-kib-s", "512", "--quiet"},
                          sim_options));
    auto line = sim_->wait_for_line("market-sim listening on", 20s);
    ASSERT_TRUE(line) << sim_->stderr_text();
    sim_url_ = parse_url(line->line);
  }

  void start_manager() {
    pf::test::SpawnOptions opt;
    opt.env["VAST_API_KEY"] = kVastKey;
    opt.env["PROVERFLEET_TOKEN"] = std::nullopt;
    opt.env["PROVERFLEET_DB"] = std::nullopt;
    // The operator token lies beside a SQLite file, or in serve's working directory.
    opt.working_dir = dir_.string();
    manager_.emplace(Subprocess::spawn(
        {kBinary, "serve", "--config", (dir_ / "proverfleet.toml").string(), "--listen",
         "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--db", db_url_, "--vast-url",
         sim_url_.str(), "--params-manifest", sim_url_.str() + "/proverfleet-sim/params.json",
         "--reconcile-interval", "0.5", "--tick-interval", "0.25"},
        opt));
    auto line = manager_->wait_for_line("proverfleet serve listening on", 20s);
    ASSERT_TRUE(line) << manager_->stderr_text();
    mgr_url_ = parse_url(line->line);
    token_ = pf::test::read_operator_token(dir_);
    ASSERT_FALSE(token_.empty());
  }

  CliRun cli(std::vector<std::string> args) { return run_cli(std::move(args), mgr_url_, token_); }

  json api(const std::string& path) { return operator_api(mgr_url_, token_, "GET", path); }

  static json record(const json& reply) {
    return reply.contains("instance") ? reply["instance"] : reply;
  }

  // What market-sim logged about its agents, and every process group it started.
  std::set<int> spawned_groups() {
    std::set<int> groups;
    static const std::regex re(R"(process group ([0-9]+))");
    const std::string text = sim_->stderr_text();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
         ++it) {
      groups.insert(std::stoi((*it)[1].str()));
    }
    return groups;
  }

  std::string agent_logs() {
    std::string out;
    std::error_code ec;
    if (!fs::exists(dir_ / "work/instances")) return out;
    for (const auto& d : fs::directory_iterator(dir_ / "work/instances", ec)) {
      std::string text = read_text(d.path() / "agent.log");
      if (text.size() > 4000) text = "..." + text.substr(text.size() - 4000);
      out += "--- " + d.path().filename().string() + "/agent.log\n" + text;
    }
    return out;
  }

  std::string diagnostics() {
    return "market-sim stderr:\n" + sim_->stderr_text().substr(0, 6000) + "\nagents:\n" +
           agent_logs();
  }

  const std::string kVastKey = "spawned-e2e-key";
  fs::path dir_;
  std::string db_url_;  // serve --db: a SQLite file in dir_, or a PostgreSQL database
  std::optional<Subprocess> sim_, manager_;
  Url sim_url_, mgr_url_;
  std::string token_;
};

TEST_F(SpawnedAgentsE2E, ParamStandInsAreServedWithRangesAndTheirDigests) {
  start_sim(60);
  httplib::Client c(sim_url_.host, sim_url_.port);
  auto r = c.Get("/proverfleet-sim/params.json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto files = pf::agent::parse_param_manifest(json::parse(r->body));
  ASSERT_TRUE(files) << files.error();
  ASSERT_EQ(files->size(), 2u);
  std::uint64_t total = 0;
  for (const auto& f : *files) {
    total += f.bytes;
    EXPECT_EQ(f.url.rfind(sim_url_.str() + "/proverfleet-sim/params/", 0), 0u) << f.url;
  }
  EXPECT_EQ(total, 1u << 20);

  const auto& small = (*files)[1];
  const std::string path = small.url.substr(sim_url_.str().size());
  auto whole = c.Get(path.c_str());
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, 200);
  EXPECT_EQ(whole->body.size(), small.bytes);
  EXPECT_EQ(pf::agent::param_digest_of(whole->body), small.digest);

  auto part = c.Get(path.c_str(), {{"Range", "bytes=100-199"}});
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, 206);
  EXPECT_EQ(part->body, whole->body.substr(100, 100));

  auto missing = c.Get("/proverfleet-sim/params/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  EXPECT_THAT(missing->body, HasSubstr("no parameter stand-in named nope"));
}

// The manager end to end on each store (issue 14). The market-sim tests around it start a
// manager only to deploy; what they check is market-sim's own process handling.
class SpawnedAgentsOnStores : public SpawnedAgentsE2E,
                              public ::testing::WithParamInterface<pf::testing::Backend> {
 protected:
  void SetUp() override {
    SpawnedAgentsE2E::SetUp();
    if (GetParam() == pf::testing::Backend::Postgres) db_url_ = pf::test::fresh_pg_database();
  }
};

INSTANTIATE_TEST_SUITE_P(Db, SpawnedAgentsOnStores, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(SpawnedAgentsOnStores, ThreeDeployedOffersRunRealAgentsUntilJudgedAndLeaveNothingBehind) {
  start_sim(600);  // 1 scenario hour = 6 s
  start_manager();

  std::map<std::int64_t, std::int64_t> ours;  // our instance id -> offer
  for (std::int64_t offer : {5001, 5002, 5003}) {
    auto run = cli({"deploy", std::to_string(offer), "--json"});
    ASSERT_EQ(run.code, 0) << run.out << run.err;
    ours[record(json::parse(run.out))["id"].get<std::int64_t>()] = offer;
  }

  // Judged: proving (accepted) or destroyed (rejected). Polled through the CLI as a user would.
  std::map<std::int64_t, std::string> states;
  const bool judged = eventually(
      [&] {
        auto run = cli({"instances", "--all", "--json"});
        if (run.code != 0) return false;
        auto list = json::parse(run.out, nullptr, false);
        if (!list.is_array()) return false;
        for (const auto& i : list) {
          const auto id = i["id"].get<std::int64_t>();
          if (ours.count(id)) states[id] = i["state"].get<std::string>();
        }
        return states.size() == 3 && std::all_of(states.begin(), states.end(), [](const auto& kv) {
                 return kv.second == "proving" || kv.second == "destroyed";
               });
      },
      120s);
  std::string seen;
  for (const auto& [id, state] : states) seen += std::to_string(id) + ": " + state + "\n";
  ASSERT_TRUE(judged) << seen << diagnostics();

  for (const auto& [id, offer] : ours) {
    const json detail = api("/api/v1/instances/" + std::to_string(id));
    const json inst = record(detail);
    ASSERT_TRUE(detail.contains("samples")) << detail.dump();
    // Every instance was measured by a real agent; an accepted one through the whole benchmark.
    EXPECT_GE(detail["samples"].size(), offer == 5003 ? 1u : 6u)
        << "offer " << offer << ": " << detail.dump();
    if (offer == 5003) {
      EXPECT_EQ(inst["state"], "destroyed") << detail.dump();
      EXPECT_THAT(inst.value("destroy_reason", ""), HasSubstr("rejected"));
    } else {
      EXPECT_EQ(inst["state"], "proving") << detail.dump() << diagnostics();
    }
  }
  EXPECT_THAT(agent_logs(), HasSubstr("parameters ready: 2 files"));
  EXPECT_THAT(agent_logs(), HasSubstr("benchmark input ready"));

  for (const auto& [id, state] : states) {
    if (state == "destroyed") continue;
    auto run = cli({"destroy", std::to_string(id)});
    ASSERT_EQ(run.code, 0) << run.out << run.err;
  }
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [id, offer] : ours) {
          if (record(api("/api/v1/instances/" + std::to_string(id)))["state"] != "destroyed")
            return false;
        }
        return true;
      },
      60s));

  const std::set<int> groups = spawned_groups();
  EXPECT_EQ(groups.size(), 3u) << diagnostics();
  for (int g : groups) {
    EXPECT_TRUE(eventually([&] { return group_gone(g); }, 30s)) << "group " << g;
  }
}

// Live processes (not zombies, not this test) whose command line or environment mentions
// `marker`, as "pid: command line".
std::vector<std::string> processes_mentioning(const std::string& marker) {
  std::vector<std::string> found;
  const std::string self = std::to_string(::getpid());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    if (read_text(entry.path() / "status").find("State:\tZ") != std::string::npos) continue;
    std::string cmdline = read_text(entry.path() / "cmdline");
    const std::string environ = read_text(entry.path() / "environ");
    if (cmdline.find(marker) == std::string::npos && environ.find(marker) == std::string::npos) {
      continue;
    }
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    found.push_back(pid + ": " + cmdline);
  }
  return found;
}

// Reproduction (issue 10): SIGKILL of market-sim --spawn-agents left every spawned agent running
// (PR_SET_PDEATHSIG ended only the onstart's shell; the agent it started was re-parented and
// kept heartbeating). The groups' watchdogs now end them.
TEST_F(SpawnedAgentsE2E, SigkillOfMarketSimLeavesNoSpawnedProcessRunning) {
  start_sim(600);
  start_manager();
  for (const char* offer : {"5001", "5002", "5003"}) {
    auto run = cli({"deploy", offer, "--json"});
    ASSERT_EQ(run.code, 0) << run.out << run.err;
  }
  const std::string work = (dir_ / "work").string();
  auto agents_running = [&] {
    int agents = 0;
    // The agent itself ("proverfleet agent", the default onstart), not its shell.
    for (const auto& p : processes_mentioning(work)) {
      agents += p.find(": proverfleet agent") != std::string::npos;
    }
    return agents;
  };
  ASSERT_TRUE(eventually([&] { return agents_running() >= 2; }, 90s)) << diagnostics();

  ASSERT_EQ(::kill(sim_->pid(), SIGKILL), 0);
  ASSERT_TRUE(sim_->wait_exit(30s));
  std::vector<std::string> left;
  const bool none_left = eventually(
      [&] {
        left = processes_mentioning(work);
        return left.empty();
      },
      15s);
  std::string listing;
  for (const auto& p : left) listing += p + "\n";
  EXPECT_TRUE(none_left) << "processes of the run left behind:\n" << listing;
}

TEST_F(SpawnedAgentsE2E, MarketSimExitingTakesItsAgentsAlong) {
  start_sim(600);
  start_manager();
  auto run = cli({"deploy", "5001", "--json"});
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  ASSERT_TRUE(eventually([&] { return !spawned_groups().empty(); }, 60s)) << diagnostics();
  const std::set<int> groups = spawned_groups();
  for (int g : groups) EXPECT_FALSE(group_gone(g));
  ASSERT_EQ(::kill(sim_->pid(), SIGTERM), 0);
  ASSERT_TRUE(sim_->wait_exit(30s));
  for (int g : groups) EXPECT_TRUE(group_gone(g)) << "group " << g;
}

}  // namespace
