// The prover's memory model (cuzk, 32 GiB PoRep C2): peak ≈ 70 + 14·p GiB with p partitions
// synthesised concurrently, and the rate curve that says how much of the full rate p buys.
//
// The model is learned per machine and per GPU model from what the agents saw
// (learned_memory_model): the peak after warm-up at a plan (the `memory_check` event) and OOM
// kills at a plan. Observations may raise the per-partition figure, never lower it below the
// configured one: one warm-up proof's peak under-states the peak with several proofs in flight,
// and an OOM costs the warm-up again while a plan one partition smaller costs a few percent.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace pf::core {

struct MemoryModel {
  double base_gib = 70;           // parameters, SRS and buffers, independent of p
  double per_partition_gib = 14;  // each concurrent partition synthesis
  double headroom_gib = 5;        // kept free for the OS, agent and allocator slack
  int partitions_per_proof = 10;  // a 32 GiB PoRep C2 proof has 10 partitions (per GPU)
};

// Concurrent partitions that fit in `usable_ram_gib`: ⌊(RAM − base − headroom) / per⌋, ≥ 0.
int partitions_for_ram(double usable_ram_gib, const MemoryModel& model);

// Peak memory the prover reaches with p partitions.
double peak_memory_gib(int partitions, const MemoryModel& model);

// Fraction of full rate reached at p of p_full partitions:
// g(x) = min(1, (1 − e^(−3x)) / (1 − e^(−3))), x = p / p_full.
double rate_fraction(int partitions, int partitions_full);

// One memory observation on a rental: the plan it ran at and the peak the agent saw, or an OOM
// kill at that plan (the peak then exceeded `usable_ram_gib`).
struct MemoryObservation {
  std::int64_t instance_id = 0;
  std::int64_t machine_id = 0;
  std::string gpu_name;
  int num_gpus = 0;
  double at = 0;
  int partitions = 0;
  double observed_peak_gib = 0;  // 0: not measured (an OOM without a reading)
  double model_peak_gib = 0;     // what the plan expected
  double usable_ram_gib = 0;     // the limit the plan was made for; 0: unknown
  bool oom = false;
};

struct MemoryLearningConfig {
  // The configured per-partition figure counts as this many machines for a GPU model's figure.
  double model_prior_weight = 2;
  // An OOM at p partitions under a limit U says the per-partition figure exceeds (U − base)/p;
  // it is taken as that bound times this margin.
  double oom_margin = 1.05;
  // Observations imply at most this many GiB per partition (beyond it: a bad report).
  double max_per_partition_gib = 64;
};

// The memory model a plan on `machine_id` (a `gpu_name` machine) should use, and where it came
// from: "machine" (that machine's observations: their median), "model" (the median over the
// GPU model's machines, shrunk toward the configured figure), or "configured". Never below
// `configured.per_partition_gib`. Observations that say nothing (no partitions, a peak at or
// below the base, non-finite) are skipped.
struct LearnedMemory {
  MemoryModel model;
  std::string source = "configured";
  int observations = 0;  // observations behind the figure
  std::string reason;    // plain words for logs and the agent's plan
};
LearnedMemory learned_memory_model(const MemoryModel& configured,
                                   std::span<const MemoryObservation> observations,
                                   std::int64_t machine_id, const std::string& gpu_name,
                                   const MemoryLearningConfig& config = {});

}  // namespace pf::core
