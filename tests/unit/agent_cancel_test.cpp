// Per-proof cancel on the agent (issue 12): when the manager drops a job whose proof runs, each
// prover ends that proof at once and lets go of what it held, so the slot takes new work; the
// cancel of a job it is not proving does nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent/process.h"
#include "agent/prover_command.h"
#include "agent/prover_cuzk.h"
#include "agent/prover_sim.h"
#include "support/eventually.h"
#include "support/fake_cuzk.h"
#include "support/temp_dir.h"

namespace pf::agent {
namespace {

using pf::test::eventually;
using namespace std::chrono_literals;

ProofJob client_job(std::int64_t job_id, std::string input) {
  ProofJob job;
  job.index = job_id;
  job.job_id = job_id;
  job.input = std::make_shared<const std::string>(std::move(input));
  return job;
}

core::ProverPlan one_gpu_plan() {
  core::ProverPlan plan;
  plan.partitions = plan.warmup_partitions = 10;
  plan.gpus = 1;
  return plan;
}

// Cancels `job_id` until its proof ends (the proof may not have begun at the first cancel, and
// a cancel for a job not in flight does nothing), within `timeout`.
ProofOutcome cancel_until_done(Prover& prover, std::int64_t job_id,
                               std::future<ProofOutcome>& proof, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    prover.cancel(job_id);
    if (proof.wait_for(100ms) == std::future_status::ready) return proof.get();
  }
  ADD_FAILURE() << "the proof of job " << job_id << " did not end within the timeout";
  return {ProofOutcome::Kind::Failed, 0, 0, 0, "not cancelled"};
}

TEST(AgentCancel, TheSimProverEndsTheProofAndFreesTheGpu) {
  pf::testing::TempDir dir;
  const std::string co_tenants = dir.file("co-tenants");
  std::ofstream(co_tenants) << "1\n";  // a co-tenant: proofs take 1,000 s (contention 0.001)
  auto truth = parse_sim_truth(nlohmann::json{{"rate_full", 3600},
                                              {"partitions_full", 10},
                                              {"ram_visible_gib", 256},
                                              {"proof_time_cv", 0},
                                              {"warmup_min", 0},
                                              {"contention", 0.001},
                                              {"co_tenants_file", co_tenants}});
  ASSERT_TRUE(truth) << truth.error();
  const AgentClock clock;
  SimProver prover(*truth, clock);
  ASSERT_TRUE(prover.start(one_gpu_plan(), false));

  auto slow = std::async(std::launch::async, [&] { return prover.prove(client_job(5, "five")); });
  const ProofOutcome out = cancel_until_done(prover, 5, slow, 30s);
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Cancelled) << out.message;

  // The GPU is free: the next proof (no co-tenant now: 1 s) does not wait for the cancelled one.
  std::ofstream(co_tenants) << "0\n";
  prover.cancel(5);  // no longer in flight: nothing happens
  auto next = std::async(std::launch::async, [&] { return prover.prove(client_job(6, "six")); });
  ASSERT_EQ(next.wait_for(60s), std::future_status::ready);
  const ProofOutcome six = next.get();
  EXPECT_EQ(six.kind, ProofOutcome::Kind::Completed) << six.message;
  EXPECT_EQ(six.proof, sim_proof_of("six"));
  EXPECT_LT(six.seconds, 100);
  prover.stop();
}

TEST(AgentCancel, TheCommandProverEndsTheProofsProcess) {
  pf::testing::TempDir dir;
  CommandProverOptions o;
  o.command = "exec sleep 300";
  o.work_dir = dir.path();
  const AgentClock clock;
  CommandProver prover(o, clock);
  ASSERT_TRUE(prover.start(one_gpu_plan(), false));
  auto proof = std::async(std::launch::async, [&] { return prover.prove(client_job(8, "x")); });
  const auto started = std::chrono::steady_clock::now();
  const ProofOutcome out = cancel_until_done(prover, 8, proof, 60s);
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Cancelled) << out.message;
  EXPECT_LT(std::chrono::steady_clock::now() - started, 60s);
  prover.stop();
}

// The real daemon's CancelProof does nothing (cuzk-server/src/service.rs; docs/gateway.md, "What
// real Curio and cuzk do"), and the fake behaves the same. The agent still sends it (a daemon that
// one day honours it frees its GPU sooner), but does not count on it: the slot stays held until the
// daemon's Prove returns, so the daemon is never handed more proofs than its plan has room for.
TEST(AgentCancel, TheCuzkProverSendsCancelProofButHoldsTheSlotUntilTheDaemonsProofEnds) {
  pf::testing::TempDir dir;
  std::filesystem::create_directories(dir.file("params"));
  std::ofstream(dir.file("c1.json"))
      << R"({"SectorNum":1,"Phase1Out":"e30=","SectorSize":34359738368})";
  test::FakeCuzk fake;
  fake.delay_ms = 1500;
  CuzkOptions o;
  o.daemon.clear();
  o.listen = fake.address();
  o.status_listen.clear();
  o.param_dir = dir.file("params");
  o.config_path = dir.file("cuzk.toml");
  o.c1_path = dir.file("c1.json");
  o.startup_timeout_s = 5;
  o.prove_timeout_s = 300;
  CuzkProver prover(o);
  ASSERT_TRUE(prover.start(one_gpu_plan(), false));

  cuzk::v1::SubmitProofRequest request;
  request.set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  request.set_vanilla_proof("c1 output");
  std::string input;
  request.SerializeToString(&input);
  const auto started = std::chrono::steady_clock::now();
  auto proof = std::async(std::launch::async, [&] { return prover.prove(client_job(9, input)); });
  const ProofOutcome out = cancel_until_done(prover, 9, proof, 60s);
  // The daemon ran the proof to its end: the call returned only after the daemon's proof time.
  EXPECT_GE(std::chrono::steady_clock::now() - started, 1500ms);
  // A proof that completed although its job was cancelled is handed on as done; the manager
  // acknowledges it with applied: false (the job was dropped).
  EXPECT_EQ(out.kind, ProofOutcome::Kind::Completed) << out.message;
  const auto cancelled = fake.cancelled();
  ASSERT_FALSE(cancelled.empty());
  const auto sent = fake.requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(cancelled.back(), sent[0].request_id());  // the daemon's job id is our request id
  prover.stop();
}

// cuzk's daemon handles SIGINT only, and its process may not exit on it (the engine stops, the
// gRPC server does not): the agent sends SIGINT first, then SIGTERM, then SIGKILL, each after
// the grace. A child that, like cuzk, survives SIGINT ends on the SIGTERM that follows.
TEST(AgentCancel, ADaemonThatSurvivesSigintIsEndedBySigtermAfterTheGrace) {
  std::mutex mu;
  std::vector<std::string> lines;
  ChildOptions options;
  options.argv = {"bash", "-c",
                  "trap 'echo got-int' INT; trap 'echo got-term; exit 7' TERM; echo ready; "
                  "while true; do sleep 0.05; done"};
  options.on_line = [&](const std::string& line, bool) {
    std::lock_guard lock(mu);
    lines.push_back(line);
  };
  auto child = ChildProcess::spawn(options);
  ASSERT_TRUE(child) << child.error();
  eventually([&] {
    std::lock_guard lock(mu);
    return !lines.empty();
  });
  const ExitStatus st = (*child)->terminate(300ms, SIGINT);
  EXPECT_EQ(st.code, 7) << st.describe();
  std::lock_guard lock(mu);
  EXPECT_NE(std::find(lines.begin(), lines.end(), "got-int"), lines.end());
  EXPECT_NE(std::find(lines.begin(), lines.end(), "got-term"), lines.end());
}

}  // namespace
}  // namespace pf::agent
