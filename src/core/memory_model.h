// The prover's memory model (cuzk, 32 GiB PoRep C2): peak ≈ 70 + 14·p GiB with p partitions
// synthesised concurrently, and the rate curve that says how much of the full rate p buys.
#pragma once

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

}  // namespace pf::core
