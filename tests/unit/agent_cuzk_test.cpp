// The cuzk adapter end to end against a fake daemon (tests/support/fake_cuzk.h): the request on
// the wire, success, FAILED status, INTERNAL, transport errors (daemon gone, nothing listening,
// deadline), slow concurrent proofs, spawning the daemon with the generated config, telling an
// OOM kill from another SIGKILL, and the /status summary.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <toml++/toml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/prover_cuzk.h"
#include "support/eventually.h"
#include "support/fake_cuzk.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using pf::test::eventually;
using namespace std::chrono_literals;

class CuzkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pf_cuzk_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "params");
    std::ofstream(dir_ / "c1.json")
        << R"({"SectorNum":1,"Phase1Out":"e30=","SectorSize":34359738368})";
    core::PlanInput in;
    in.ram_gib = 256;
    in.cores = 32;
    in.gpus = 1;
    plan_ = *core::plan_prover(in, core::PlanLimits{});
  }
  void TearDown() override { fs::remove_all(dir_); }

  CuzkOptions external() {
    CuzkOptions o;
    o.daemon.clear();
    o.listen = fake_.address();
    o.status_listen.clear();
    o.param_dir = (dir_ / "params").string();
    o.config_path = (dir_ / "cuzk.toml").string();
    o.c1_path = (dir_ / "c1.json").string();
    o.startup_timeout_s = 5;
    o.prove_timeout_s = 30;
    return o;
  }

  static inline int counter_ = 0;
  fs::path dir_;
  test::FakeCuzk fake_;
  core::ProverPlan plan_;
};

TEST_F(CuzkTest, ProveSendsAPorepC2RequestAndReportsTheTimings) {
  CuzkProver prover(external());
  auto started = prover.start(plan_, false);
  ASSERT_TRUE(started) << started.error();
  EXPECT_NE(started->find("external cuzk at " + fake_.address()), std::string::npos) << *started;
  const ProofOutcome out = prover.prove({7, false});
  ASSERT_EQ(out.kind, ProofOutcome::Kind::Completed) << out.message;
  EXPECT_DOUBLE_EQ(out.gpu_ms, 37500);
  EXPECT_DOUBLE_EQ(out.queue_ms, 12);
  EXPECT_GT(out.seconds, 0);
  const auto reqs = fake_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_EQ(reqs[0].proof_kind(), cuzk::v1::POREP_SEAL_COMMIT);
  EXPECT_EQ(reqs[0].sector_size(), 34359738368u);
  EXPECT_EQ(reqs[0].registered_proof(), 8u);
  EXPECT_EQ(reqs[0].vanilla_proof().rfind(R"({"SectorNum":1,)", 0), 0u);
  EXPECT_EQ(reqs[0].request_id().rfind("pf-", 0), 0u);
  EXPECT_NE(reqs[0].request_id().find("-7"), std::string::npos) << reqs[0].request_id();
  EXPECT_TRUE(prover.health().running);
}

// Issue 12: a client's job reaches the daemon as the client sent it (every field of its
// SubmitProofRequest), under our request id, and its proof bytes come back.
TEST_F(CuzkTest, AJobGoesToTheDaemonAsTheClientSentItAndItsProofComesBack) {
  CuzkProver prover(external());
  ASSERT_TRUE(prover.start(plan_, false));
  cuzk::v1::SubmitProofRequest client;
  client.set_proof_kind(cuzk::v1::SNAP_DEALS_UPDATE);
  client.set_sector_size(68719476736u);
  client.set_registered_proof(9);
  client.set_sector_number(4242);
  client.set_miner_id(1234);
  client.set_randomness(std::string(32, '\x07'));
  client.add_vanilla_proofs("partition-0");
  client.add_vanilla_proofs("partition-1");
  client.set_comm_r_old("old");
  client.set_comm_r_new("new");
  client.set_comm_d_new("d");
  ProofJob job;
  job.index = 9;
  job.job_id = 77;
  job.kind = core::JobKind::SnapUpdate;
  job.input = std::make_shared<const std::string>(client.SerializeAsString());
  const ProofOutcome out = prover.prove(job);
  ASSERT_EQ(out.kind, ProofOutcome::Kind::Completed) << out.message;
  EXPECT_EQ(out.proof, test::groth16_stand_in_proof(16));  // SnapDeals: 16 partitions
  const auto reqs = fake_.requests();
  ASSERT_EQ(reqs.size(), 1u);
  cuzk::v1::SubmitProofRequest expected = client;
  expected.set_request_id(reqs[0].request_id());
  EXPECT_EQ(reqs[0].SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(reqs[0].request_id().rfind("pf-", 0), 0u);
  EXPECT_NE(reqs[0].request_id().find("-job77"), std::string::npos) << reqs[0].request_id();

  // The benchmark input still has no proof to hand over; an input that is not a request fails
  // the proof, not the prover.
  EXPECT_TRUE(prover.prove({10, false}).proof.empty());
  job.input = std::make_shared<const std::string>("\xff\xff not protobuf");
  const ProofOutcome bad = prover.prove(job);
  EXPECT_EQ(bad.kind, ProofOutcome::Kind::Failed);
  EXPECT_NE(bad.message.find("not a cuzk.v1.SubmitProofRequest"), std::string::npos) << bad.message;
  EXPECT_TRUE(prover.health().running);
}

TEST_F(CuzkTest, AFailedStatusIsAFailedProofAndTheProverStaysUp) {
  fake_.mode = test::FakeCuzk::Mode::Failed;
  CuzkProver prover(external());
  ASSERT_TRUE(prover.start(plan_, false));
  const ProofOutcome out = prover.prove({1, false});
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Failed);
  EXPECT_NE(out.message.find("FAILED: proof self-verification failed"), std::string::npos)
      << out.message;
  EXPECT_TRUE(prover.health().running);
}

TEST_F(CuzkTest, AnInternalErrorIsAFailedProofNotATransportError) {
  fake_.mode = test::FakeCuzk::Mode::Internal;
  CuzkProver prover(external());
  ASSERT_TRUE(prover.start(plan_, false));
  const ProofOutcome out = prover.prove({1, false});
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Failed);
  EXPECT_NE(out.message.find("synthesis panicked"), std::string::npos) << out.message;
}

TEST_F(CuzkTest, TheDaemonGoingAwayMidProofIsATransportError) {
  fake_.delay_ms = 3000;
  CuzkProver prover(external());
  ASSERT_TRUE(prover.start(plan_, false));
  const int proves_before = fake_.proves;
  std::thread crash([&] {
    // The daemon dies while the proof is in its hands.
    eventually([&] { return fake_.proves > proves_before; });
    fake_.shutdown();
  });
  const ProofOutcome out = prover.prove({1, false});
  crash.join();
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Transport) << out.message;
  EXPECT_NE(out.message.find("transport error"), std::string::npos) << out.message;
  EXPECT_FALSE(prover.health().running);
}

TEST_F(CuzkTest, ADeadlinePassedIsATransportError) {
  fake_.delay_ms = 2000;
  CuzkOptions o = external();
  o.prove_timeout_s = 0.2;
  CuzkProver prover(o);
  ASSERT_TRUE(prover.start(plan_, false));
  const ProofOutcome out = prover.prove({1, false});
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Transport) << out.message;
}

TEST_F(CuzkTest, NothingListeningFailsTheStartClearly) {
  CuzkOptions o = external();
  fake_.shutdown();
  o.startup_timeout_s = 1;
  CuzkProver prover(o);
  auto started = prover.start(plan_, false);
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("did not answer GetStatus at " + o.listen), std::string::npos)
      << started.error();
}

TEST_F(CuzkTest, AMissingC1InputIsAClearError) {
  CuzkOptions o = external();
  o.c1_path = (dir_ / "missing.json").string();
  CuzkProver prover(o);
  auto started = prover.start(plan_, false);
  ASSERT_FALSE(started);
  EXPECT_NE(started.error().find("missing.json"), std::string::npos) << started.error();
  o.c1_path.clear();
  CuzkProver no_input(o);
  auto none = no_input.start(plan_, false);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().find("deploy.benchmark_input"), std::string::npos) << none.error();
}

TEST_F(CuzkTest, SlowProofsRunConcurrently) {
  fake_.delay_ms = 400;
  CuzkProver prover(external());
  ASSERT_TRUE(prover.start(plan_, false));
  std::vector<ProofOutcome> outs(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { outs[static_cast<std::size_t>(i)] = prover.prove({i, false}); });
  }
  for (auto& t : threads) t.join();
  for (const auto& o : outs) {
    EXPECT_EQ(o.kind, ProofOutcome::Kind::Completed) << o.message;
    EXPECT_GE(o.seconds, 0.4);
  }
  EXPECT_EQ(fake_.max_concurrent.load(), 3);
  const auto ids = fake_.requests();
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_NE(ids[0].request_id(), ids[1].request_id());
}

TEST_F(CuzkTest, StopEndsBlockedProofsAsStopped) {
  fake_.delay_ms = 5000;
  CuzkProver prover(external());
  ASSERT_TRUE(prover.start(plan_, false));
  ProofOutcome out;
  const int proves_before = fake_.proves;
  std::thread t([&] { out = prover.prove({1, false}); });
  ASSERT_TRUE(eventually([&] { return fake_.proves > proves_before; }));  // the proof is blocked
  prover.stop();  // an external daemon is not ours to kill: its calls are cancelled
  t.join();
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Stopped) << out.message;
}

// curio's `make install-cuzk` installs the daemon as /usr/local/bin/cuzk (and so does the agent
// image): with no program named, the prover starts `cuzk` from PATH with its config.
TEST_F(CuzkTest, TheDefaultDaemonIsCuzkFromPath) {
  EXPECT_EQ(CuzkOptions{}.daemon, "cuzk");
  fs::create_directories(dir_ / "bin");
  {
    std::ofstream s(dir_ / "bin" / "cuzk");
    s << "#!/bin/sh\necho \"$@\" > \"" << (dir_ / "argv").string() << "\"\nexec sleep 60\n";
  }
  fs::permissions(dir_ / "bin" / "cuzk", fs::perms::owner_all);
  const char* old_path = std::getenv("PATH");
  const std::string saved = old_path != nullptr ? old_path : "/usr/bin:/bin";
  ::setenv("PATH", ((dir_ / "bin").string() + ":" + saved).c_str(), 1);
  CuzkOptions o = external();
  o.daemon = CuzkOptions{}.daemon;
  o.probe_root = dir_.string();
  CuzkProver prover(o);
  auto started = prover.start(plan_, false);
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_TRUE(started) << started.error();
  EXPECT_EQ(started->rfind("cuzk pid ", 0), 0u) << *started;
  std::string argv;
  eventually([&] {
    std::ifstream in(dir_ / "argv");
    std::getline(in, argv);
    return !argv.empty();
  });
  EXPECT_EQ(argv, "-c " + o.config_path);
  prover.stop();
}

TEST_F(CuzkTest, TheSpawnedDaemonGetsTheConfigAndAnOomKillIsRecognised) {
  // A stand-in daemon: records its config and pid, then idles; the fake answers gRPC for it.
  const fs::path script = dir_ / "fake-daemon";
  {
    std::ofstream s(script);
    s << "#!/bin/sh\ncp \"$2\" \"" << (dir_ / "seen.toml").string() << "\"\necho $$ > \""
      << (dir_ / "pid").string() << "\"\necho daemon says hello\nexec sleep 60\n";
  }
  fs::permissions(script, fs::perms::owner_all);
  const fs::path root = dir_ / "root";
  fs::create_directories(root / "sys/fs/cgroup");
  std::ofstream(root / "sys/fs/cgroup/cgroup.controllers") << "memory\n";
  std::ofstream(root / "sys/fs/cgroup/memory.events") << "oom 0\noom_kill 0\n";

  std::vector<std::string> lines;
  std::mutex lines_mu;
  CuzkOptions o = external();
  o.daemon = script.string();
  o.probe_root = root.string();
  o.log = [&](const std::string& line) {
    std::lock_guard lock(lines_mu);
    lines.push_back(line);
  };
  CuzkProver prover(o);
  EXPECT_TRUE(prover.needs_cache_warmup());
  auto started = prover.start(plan_, true);
  ASSERT_TRUE(started) << started.error();
  EXPECT_NE(started->find("pid"), std::string::npos);
  // The script records its pid after copying the config.
  pid_t pid = 0;
  const auto recorded_pid = [&] {
    std::ifstream in(dir_ / "pid");
    in >> pid;
    return pid > 0;
  };
  eventually(recorded_pid);
  ASSERT_GT(pid, 0);

  const toml::table seen = toml::parse_file((dir_ / "seen.toml").string());
  EXPECT_EQ(seen["memory"]["total_budget"].value<std::string>(),
            std::to_string(static_cast<int>(plan_.warmup_budget_gib)) + "GiB");
  EXPECT_FALSE(seen["pipeline"]["max_parallel_synthesis"]);  // the pinned cuzk has no such key
  EXPECT_EQ(seen["srs"]["param_cache"].value<std::string>(), o.param_dir);

  EXPECT_TRUE(prover.health().running);
  std::ofstream(root / "sys/fs/cgroup/memory.events") << "oom 1\noom_kill 1\n";
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  ProverHealth h;
  eventually([&] {
    h = prover.health();
    return !h.running;
  });
  EXPECT_FALSE(h.running);
  EXPECT_TRUE(h.oom) << h.message;
  EXPECT_NE(h.message.find("SIGKILL"), std::string::npos) << h.message;
  {
    std::lock_guard lock(lines_mu);
    EXPECT_NE(std::find(lines.begin(), lines.end(), "cuzk: daemon says hello"), lines.end());
  }

  // The PCE file appears: the next start runs the full plan. A SIGKILL without the oom_kill
  // count rising is a crash, not an OOM.
  std::ofstream(dir_ / "params" / kPorepPceFile) << "pce";
  EXPECT_FALSE(prover.needs_cache_warmup());
  fs::remove(dir_ / "pid");
  ASSERT_TRUE(prover.start(plan_, false));
  pid = 0;
  eventually(recorded_pid);
  ASSERT_GT(pid, 0);
  const toml::table full = toml::parse_file((dir_ / "seen.toml").string());
  EXPECT_EQ(full["memory"]["total_budget"].value<std::string>(),
            std::to_string(static_cast<int>(plan_.total_budget_gib)) + "GiB");
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  eventually([&] {
    h = prover.health();
    return !h.running;
  });
  EXPECT_FALSE(h.running);
  EXPECT_FALSE(h.oom) << h.message;
}

TEST_F(CuzkTest, StatusSummarisesTheHttpEndpointOrFallsBackToGetStatus) {
  httplib::Server http;
  http.Get("/status", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"uptime_secs": 12.5,
      "memory": {"total_bytes": 255550554112, "used_bytes": 107374182400, "available_bytes": 1},
      "synthesis": {"max_concurrent": 26, "active": 7},
      "pipelines": [{"job_id": "a", "proof_kind": "porep-c2", "partitions": []}],
      "gpu_workers": [{"worker_id": 0, "gpu_ordinal": 0, "state": "proving"},
                      {"worker_id": 1, "gpu_ordinal": 0, "state": "idle"}],
      "counters": {"total_completed": 3, "total_failed": 0, "queue_depth": 4}})",
                    "application/json");
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { http.listen_after_bind(); });
  ASSERT_TRUE(eventually([&] { return http.is_running(); }));

  CuzkOptions o = external();
  o.status_listen = "127.0.0.1:" + std::to_string(port);
  CuzkProver prover(o);
  const auto s = prover.status_json();
  http.stop();
  serving.join();
  ASSERT_TRUE(s.is_object()) << s.dump();
  EXPECT_DOUBLE_EQ(s["memory_used_gib"].get<double>(), 100.0);
  EXPECT_EQ(s["synthesis_active"], 7);
  EXPECT_EQ(s["pipelines"], 1);
  EXPECT_EQ(s["gpu_workers"], 2);
  EXPECT_EQ(s["gpu_workers_busy"], 1);
  EXPECT_EQ(s["queue_depth"], 4);

  CuzkProver grpc_only(external());
  const auto g = grpc_only.status_json();
  EXPECT_EQ(g["pending"], 2);
  EXPECT_EQ(g["in_progress"], 1);
  EXPECT_EQ(g["gpu_workers"], 1);
}

}  // namespace
}  // namespace pf::agent
