// The `command` prover: runs an external program once per proof (`/bin/sh -c COMMAND`), for
// provers other than cuzk and for tests. Exit code 0 is a completed proof; the last stdout
// line may be a JSON object with "seconds", "gpu_ms" and "queue_ms" to report the prover's own
// timings. The child sees PF_PROOF_INDEX, PF_PROOF_WARMUP (1/0), PF_PARTITIONS, PF_GPUS and
// PF_TOTAL_BUDGET_GIB, plus the extra environment given.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>

#include "agent/clock.h"
#include "agent/prover.h"

namespace pf::agent {

struct CommandProverOptions {
  std::string command;
  std::string probe_root = "/";  // where the cgroup oom_kill count is read
  std::map<std::string, std::string> env;
  double proof_timeout_s = 4 * 3600;  // simulated seconds
};

class CommandProver final : public Prover {
 public:
  CommandProver(CommandProverOptions options, const AgentClock& clock);
  ~CommandProver() override;

  std::string kind() const override { return "command"; }
  tl::expected<std::string, std::string> start(const core::ProverPlan& plan, bool warmup) override;
  ProofOutcome prove(const ProofJob& job) override;
  ProverHealth health() override;
  void stop() override;
  std::optional<double> peak_memory_gib() override;

 private:
  CommandProverOptions options_;
  const AgentClock& clock_;
  std::mutex mu_;
  bool stopping_ = false;
  bool running_ = false;
  bool oom_ = false;
  std::string last_message_;
  int partitions_ = 0;
  int gpus_ = 1;
  double budget_gib_ = 0;
};

}  // namespace pf::agent
