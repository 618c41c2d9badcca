// The `sim` prover: what market-sim's instances run. It proves nothing; it behaves as the
// scenario's hidden truth for this offer says, through the one truth model
// (scenario/truth_model.h) the policy simulator uses too, in the agent's scaled time:
// - memory: with p partitions the real peak is mem_base_gib + mem_per_partition_gib·p; above
//   ram_visible_gib it is killed for memory at the end of the first proof's warm-up;
// - rate: rate_full · g(p / partitions_full) · contention^(our other instances on the machine
//   now, re-read from co_tenants_file for each proof) · rate_multiplier, × the throttle factor
//   after throttle.after_h hours of proving time;
// - completions one after another, gaps lognormal with mean 3600/rate and CV proof_time_cv
//   from the portable seeded stream (scenario/draws.h); the k-th proof after each start adds
//   warmup_min·0.5^(k−1) for k up to warmup_proofs; the rate is fixed when a proof begins;
// - failure "crash": after failure.after_h hours of proving time (summed over starts) every
//   proof and every restart fails as a crash. ("never_boots" and "offline" are market-sim's
//   to act out: it does not start, or stops, the agent.)
// A job's proof (ProofJob::input set) is sim_proof_of(input); the timing is the truth's as for
// the benchmark input: the simulated machine's speed does not depend on what it proves.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "agent/clock.h"
#include "agent/prover.h"
#include "scenario/draws.h"
#include "scenario/scenario.h"

namespace pf::agent {

struct SimTruth {
  scenario::Truth truth;
  int co_tenants = 0;           // our other instances on the machine, when no file says
  std::string co_tenants_file;  // market-sim keeps the current count here ("" = none)
  double rate_multiplier = 1;   // an extra factor, for tests and manual runs
  std::uint64_t seed = 1;
};

// The proof the sim prover returns for a job: hex SHA-256 of ("pf-sim-proof:" + input bytes)
// (issue 12 contract), so tests check that every client got the proof of its own input.
std::string sim_proof_of(std::string_view input);

// The scenario's `truth` object (same keys, /2's included; the scenario's required keys
// default here to no effect when absent), plus optional "co_tenants", "co_tenants_file",
// "rate_multiplier" and "seed". cores_visible, boot_min and download_mbps are accepted and
// ignored: they are market-sim's. Errors name the key.
tl::expected<SimTruth, std::string> parse_sim_truth(const nlohmann::json& truth);

class SimProver final : public Prover {
 public:
  SimProver(SimTruth truth, const AgentClock& clock);
  ~SimProver() override;

  std::string kind() const override { return "sim"; }
  tl::expected<std::string, std::string> start(const core::ProverPlan& plan, bool warmup) override;
  ProofOutcome prove(const ProofJob& job) override;
  ProverHealth health() override;
  void stop() override;
  void cancel(std::int64_t job_id) override;
  std::optional<double> peak_memory_gib() override;
  std::optional<std::vector<GpuInfo>> gpu_samples() override;

  // Proofs per hour at `partitions` right now (after throttle), for tests and logs.
  double rate_now(int partitions) const;

 private:
  double proving_s(double now) const;  // proving time so far (truth_model.h)
  bool crashed_at(double now) const;
  bool throttled_at(double now) const;
  int co_tenants_now() const;
  double rate_at(int partitions, double now) const;
  void mark_down(double now);

  SimTruth truth_;
  const AgentClock& clock_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  scenario::Stream rng_;
  bool running_ = false;
  bool stopping_ = false;
  bool oom_ = false;
  bool crashed_ = false;
  int partitions_ = 0;
  int gpus_ = 1;
  int in_flight_ = 0;
  std::uint64_t generation_ = 0;  // bumps on every start/stop, so old waiters notice
  double proved_s_ = 0;           // proving time of the runs before the current one
  double running_since_ = -1;     // simulated epoch of the current run's start; -1: down
  double last_done_ = 0;
  int proofs_begun_ = 0;  // since the last start: the warm-up truth counts them
  std::optional<double> oom_at_;
  // Client jobs being proved: their place on the GPU's timeline, and whether cancel() asked.
  struct JobInFlight {
    double begin = 0, done_at = 0;
    bool cancelled = false;
  };
  std::map<std::int64_t, JobInFlight> jobs_in_flight_;
};

}  // namespace pf::agent
