// One interface for every prover the agent can drive: `cuzk` (the real daemon over gRPC),
// `sim` (market-sim instances: behaves as the scenario truth says) and `command` (an external
// program per proof). The agent starts a prover for a plan, keeps proofs in flight with
// prove() from several threads, and after a failure asks health() whether it died for memory.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "agent/probe.h"
#include "agent/process.h"
#include "core/job.h"
#include "core/planner.h"

namespace pf::agent {

struct ProofJob {
  std::int64_t index = 0;  // unique per agent run; part of request ids
  bool warmup = false;
  // A client's job (issue 12): its input as the manager serves it (the client's
  // cuzk.v1.SubmitProofRequest, serialized, request_id cleared), its kind and the manager's
  // job id. Null input: the benchmark input, which earns nothing.
  std::shared_ptr<const std::string> input = nullptr;
  core::JobKind kind = core::JobKind::PorepC2;
  std::int64_t job_id = 0;
};

struct ProofOutcome {
  enum class Kind {
    Completed,
    Failed,       // the prover is alive but this proof failed (cuzk FAILED, exit code != 0)
    Transport,    // the prover went away (crash, restart, connection lost)
    OutOfMemory,  // the prover was killed for memory
    Stopped,      // stop() was called
    Cancelled,    // cancel() was called for this proof's job
  };
  Kind kind = Kind::Failed;
  double seconds = 0;  // submit to result, simulated seconds for `sim`
  double gpu_ms = 0;
  double queue_ms = 0;
  std::string message;
  std::string proof = {};  // Completed job (input set): the proof bytes for the client
};

const char* to_string(ProofOutcome::Kind kind);

struct ProverHealth {
  bool running = false;
  bool oom = false;     // it died and the evidence says memory (oom_kill count, SIGKILL)
  std::string message;  // what happened, e.g. "cuzk killed by signal 9 (SIGKILL)"
};

class Prover {
 public:
  virtual ~Prover() = default;
  virtual std::string kind() const = 0;
  // True while the first proof must run the smaller warm-up plan (cuzk: no PCE file yet).
  virtual bool needs_cache_warmup() const { return false; }
  // The job kinds it can prove with these parameter files (core/proof_params.h). A test double
  // or an operator's command proves whatever it is given; cuzk only the circuits it has.
  virtual core::KindSet proof_kinds(const std::vector<std::string>& /*param_files*/) const {
    return core::kFleetKinds;
  }
  // Starts at the plan's full size, or its warm-up size. Blocks until it accepts proofs.
  // Returns a description for the prover_started event.
  virtual tl::expected<std::string, std::string> start(const core::ProverPlan& plan,
                                                       bool warmup) = 0;
  // One proof; blocking; called concurrently from several threads.
  virtual ProofOutcome prove(const ProofJob& job) = 0;
  virtual ProverHealth health() = 0;
  // Stops the prover; blocked prove() calls return soon after. Idempotent.
  virtual void stop() = 0;
  // Cancels the proof of client job `job_id` (ProofJob::job_id) if one is in flight: its
  // prove() returns Cancelled soon after and what it held (GPU time, a process) is free again.
  // No effect on other proofs, or when no such proof runs. Called from any thread.
  virtual void cancel(std::int64_t job_id) = 0;
  // Highest memory the running prover reached, GiB, when known.
  virtual std::optional<double> peak_memory_gib() = 0;
  // GPU readings the prover itself provides (sim); nullopt: ask nvidia-smi.
  virtual std::optional<std::vector<GpuInfo>> gpu_samples() { return std::nullopt; }
  // Prover-specific state for heartbeats (cuzk: a /status summary); null when none.
  virtual nlohmann::json status_json() { return nullptr; }
};

// Whether a child that ended with `status` was killed for memory: SIGKILL, and the cgroup's
// oom_kill count rose since it started (or no count is available to say otherwise).
bool killed_for_memory(const ExitStatus& status, std::optional<std::int64_t> oom_kills_before,
                       std::optional<std::int64_t> oom_kills_after);

}  // namespace pf::agent
