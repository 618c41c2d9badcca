// The prover plan: from what the probe measured (real memory limit, usable cores, GPUs) to the
// prover's configuration. Pure: no I/O, so the same inputs always give the same plan and the
// agent, `proverfleet plan` and the tests share one implementation.
//
// Memory decides concurrency: with p partitions synthesised at once the prover peaks at
// base + per_partition·p GiB (core::MemoryModel). cuzk's budget "auto" reads /proc/meminfo,
// which in a container is the whole host, so the plan always sets memory.total_budget
// explicitly from the probed limit.
#pragma once

#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "core/memory_model.h"

namespace pf::core {

// The machines a plan is made for: anything outside is a probe or typing error, and planning it
// would overflow the partition arithmetic or build a device list billions long.
inline constexpr int kMaxPlanGpus = 64;
inline constexpr double kMaxPlanRamGib = 64 * 1024;  // 64 TiB
inline constexpr double kMaxPlanCores = 4096;
// More concurrent partitions than any plan for such a machine makes (a reported plan beyond it
// is garbage).
inline constexpr int kMaxPlanPartitions = kMaxPlanGpus * 64;

struct PlanInput {
  double ram_gib = 0;      // usable memory: the smallest real limit the probe found
  double cores = 0;        // usable CPUs: affinity mask and cpu quota, whichever is smaller
  int gpus = 0;            // GPUs the prover may use
  bool pce_cached = true;  // the constraint-evaluator cache file exists (else warm-up pays it)
};

struct PlanLimits {
  MemoryModel model;
  // The published sweep gains nothing past 12–14 concurrent partitions per GPU
  // (pw12 37.7 s, pw14 37.8 s, pw16 38.4 s/proof: DDR bandwidth pressure).
  int max_partitions_per_gpu = 14;
  // Each partition synthesis keeps cores busy; oversubscribing them regresses badly
  // (pw30 on 96 cores: 60 s/proof against 38). 0 disables the core cap.
  double cores_per_partition = 2;
  // First proof without the cache file: PCE extraction needs this much on top (cuzk.md §5).
  double pce_extraction_gib = 14;
  // cuzk's recommended GPU thread pool (cuts b_g2_msm bucket memory); never above the cores.
  int gpu_threads_max = 32;
  // A second GPU worker per device only pays at high partition concurrency (~6%, none below
  // ~10 partitions per device).
  int dual_worker_min_partitions_per_gpu = 10;
  // Proofs kept in flight beyond those the partitions cover, so the pipeline never drains.
  int extra_proofs_in_flight = 1;
  int partition_cap = 0;  // > 0: an upper bound from outside (OOM back-off, operator)
};

struct ProverPlan {
  int partitions = 0;            // concurrent partition syntheses at steady state
  int warmup_partitions = 0;     // for the first proof while the PCE file does not exist yet
  double total_budget_gib = 0;   // cuzk memory.total_budget (whole GiB)
  double warmup_budget_gib = 0;  // the same for the warm-up run (adds the PCE transient)
  double expected_peak_gib = 0;  // model peak at `partitions`
  double usable_ram_gib = 0;     // the limit the plan was made for
  int gpu_workers_per_device = 1;
  int synthesis_threads = 1;
  int gpu_threads = 1;
  int gpus = 0;
  int proofs_in_flight = 1;          // concurrent Prove calls
  std::vector<std::string> reasons;  // why each number is what it is, in plain words
};

// The plan for `input`, or an error naming why no plan fits (e.g. RAM below the one-partition
// minimum, no GPU, or an input outside (0, kMaxPlan*]).
tl::expected<ProverPlan, std::string> plan_prover(const PlanInput& input, const PlanLimits& limits);

// The next smaller plan after the prover was killed for memory while running
// `running_partitions` (the full plan's or the warm-up's): at most three quarters of them and
// at least one fewer, for both. An error once it was already running a single partition:
// nothing smaller exists.
tl::expected<ProverPlan, std::string> plan_after_oom(const PlanInput& input,
                                                     const PlanLimits& limits,
                                                     int running_partitions);

// The partitions a plan runs at, given whether the PCE file exists yet.
inline int effective_partitions(const ProverPlan& plan, bool pce_cached) {
  return pce_cached ? plan.partitions : plan.warmup_partitions;
}

struct CuzkEndpoints {
  std::string listen = "127.0.0.1:9820";         // gRPC
  std::string status_listen = "127.0.0.1:9821";  // HTTP GET /status
  std::string param_cache = "/data/zk/params";   // parameters and PCE files
  std::string log_level = "info";
};

// The cuzk daemon's TOML configuration for `plan`, at its full size or (warmup) at the smaller
// size the first proof runs with while the PCE file does not exist yet. Writes only keys that
// the pinned cuzk (deploy/agent-image/Dockerfile's CURIO_COMMIT) reads in
// extern/cuzk/cuzk-core/src/config.rs: [daemon] listen, status_listen; [srs] param_cache;
// [memory] total_budget; [gpus] devices, gpu_threads, gpu_workers_per_device; [synthesis]
// threads; [pipeline] enabled; [logging] level. cuzk ignores unknown keys without a word, so a
// key it does not read would be a setting silently lost. That cuzk has no partition count:
// partition_workers is deprecated (ignored with a warning) and concurrent syntheses are bounded
// by memory.total_budget alone, which the plan sets to the model peak at its partitions.
std::string cuzk_config_toml(const ProverPlan& plan, bool warmup, const CuzkEndpoints& endpoints);

// Parses "256G", "256GiB", "240 GB", "1T", "524288M" or a plain number (GiB) into GiB.
// Decimal units (GB, TB, MB) are converted to GiB. Errors name the text.
tl::expected<double, std::string> parse_gib(const std::string& text);

}  // namespace pf::core
