// The `command` prover: runs an external program once per proof (`/bin/sh -c COMMAND`), for
// provers other than cuzk and for tests. Exit code 0 is a completed proof; the last stdout
// line may be a JSON object with "seconds", "gpu_ms" and "queue_ms" to report the prover's own
// timings. The child sees PF_PROOF_INDEX, PF_PROOF_WARMUP (1/0), PF_PARTITIONS, PF_GPUS and
// PF_TOTAL_BUDGET_GIB, plus the extra environment given.
//
// A client's job (ProofJob::input set, issue 12): the input bytes (the client's serialized
// cuzk.v1.SubmitProofRequest) are written to a fresh 0600 file whose path is in PF_JOB_INPUT;
// the command must write the proof bytes to the path in PF_JOB_PROOF (a file that does not
// exist yet) and exit 0. PF_JOB_ID and PF_JOB_KIND ("porep-c2", ...) name the job. Exit 0
// without a proof file, or with one over max_proof_bytes, is a failed proof. Both files are
// removed after the proof. For the benchmark input PF_JOB_INPUT and PF_JOB_PROOF are unset.
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
  std::string work_dir;               // job input/proof files; empty: the system temp dir
  std::size_t max_proof_bytes = 16u << 20;
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
  void cancel(std::int64_t job_id) override;
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
  // Client jobs being proved → whether cancel() asked for them.
  std::map<std::int64_t, bool> jobs_in_flight_;
};

}  // namespace pf::agent
