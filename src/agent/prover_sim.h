// The `sim` prover: what market-sim's instances run. It proves nothing; it behaves as the
// scenario's hidden truth for this offer says (spec/scenario.md "Physics"), in the agent's
// scaled time:
// - memory: with p partitions it peaks at 70 + 14·p GiB; above ram_visible_gib it is killed
//   for memory halfway through the first proof's warm-up;
// - rate: rate_full · g(p / partitions_full) (core::rate_fraction) · rate_multiplier, × the
//   throttle factor after throttle.after_h hours since its first start;
// - completions one after another, gaps lognormal with mean 3600/rate and CV proof_time_cv;
//   the first proof after each start adds warmup_min;
// - failure "crash": after failure.after_h hours every proof and every restart fails as a
//   crash. ("never_boots" and "offline" are market-sim's to act out: it does not start, or
//   stops, the agent.)
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <tl/expected.hpp>

#include "agent/clock.h"
#include "agent/prover.h"
#include "core/memory_model.h"

namespace pf::agent {

struct SimTruth {
  double rate_full = 0;
  int partitions_full = 1;
  double ram_visible_gib = 0;
  double proof_time_cv = 0;
  double warmup_min = 0;
  std::optional<double> throttle_after_h;
  double throttle_factor = 1;
  std::string failure_kind = "none";  // none | crash | never_boots | offline
  double failure_after_h = 0;
  double rate_multiplier = 1;  // e.g. contention from other instances on the machine
  std::uint64_t seed = 1;
};

// The scenario's `truth` object (same keys), plus optional "rate_multiplier" and "seed".
// Other keys of the scenario truth (cores_visible, boot_min, download_mbps, contention) are
// accepted and ignored: they are market-sim's. Errors name the key.
tl::expected<SimTruth, std::string> parse_sim_truth(const nlohmann::json& truth);

class SimProver final : public Prover {
 public:
  SimProver(SimTruth truth, const AgentClock& clock, core::MemoryModel model = {});
  ~SimProver() override;

  std::string kind() const override { return "sim"; }
  tl::expected<std::string, std::string> start(const core::ProverPlan& plan, bool warmup) override;
  ProofOutcome prove(const ProofJob& job) override;
  ProverHealth health() override;
  void stop() override;
  std::optional<double> peak_memory_gib() override;
  std::optional<std::vector<GpuInfo>> gpu_samples() override;

  // Proofs per hour at `partitions` right now (after throttle), for tests and logs.
  double rate_now(int partitions) const;

 private:
  bool crashed_at(double now) const;
  bool throttled_at(double now) const;
  double draw_gap_s(double mean_s);

  SimTruth truth_;
  const AgentClock& clock_;
  core::MemoryModel model_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::mt19937_64 rng_;
  bool running_ = false;
  bool stopping_ = false;
  bool oom_ = false;
  bool crashed_ = false;
  int partitions_ = 0;
  int gpus_ = 1;
  int in_flight_ = 0;
  std::uint64_t generation_ = 0;  // bumps on every start/stop, so old waiters notice
  double first_start_ = -1;       // simulated epoch of the very first start
  double last_done_ = 0;
  bool first_pending_ = true;
  std::optional<double> oom_at_;
};

}  // namespace pf::agent
