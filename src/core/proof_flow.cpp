#include "core/proof_flow.h"

#include <algorithm>

namespace pf::core {

ProofStep record_proof(InstanceRecord& rec, const ProofInput& in, const LifecycleConfig& cfg) {
  using S = InstanceState;
  ProofStep step;
  if (in.marked_warmup) {
    step.phase = ProofPhase::Warmup;
    // The benchmark's first interval is measured from the end of warm-up.
    if (rec.state < S::Benchmarking) rec.bench_since = std::max(rec.bench_since, in.at);
    return step;
  }
  if (rec.state == S::Proving || (!in.benchmark && rec.state < S::Proving)) {
    step.phase = ProofPhase::Production;
    step.accept_unmeasured = rec.state != S::Proving;
    rec.proofs_production++;
    return step;
  }
  step.phase = ProofPhase::Benchmark;
  rec.proofs_benchmark++;
  if (rec.state < S::Benchmarking) {
    if (rec.bench_since <= 0) rec.bench_since = in.at;
    step.entered_benchmark = apply_transition(rec, S::Benchmarking, in.now, "first measured proof",
                                              in.break_even_rate, cfg);
  }
  step.evaluate = rec.state == S::Benchmarking;
  return step;
}

}  // namespace pf::core
