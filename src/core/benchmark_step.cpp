#include "core/benchmark_step.h"

#include <algorithm>

#include "core/market_stop.h"

namespace pf::core {

BenchmarkInput benchmark_input(const InstanceRecord& rec, const std::vector<ProofSample>& samples,
                               double now, double break_even_rate) {
  BenchmarkInput in;
  for (const auto& s : samples)
    if (s.phase == ProofPhase::Benchmark) in.samples.push_back(s);
  in.since = rec.bench_since;
  if (in.since <= 0 && !in.samples.empty()) {
    in.since =
        std::min_element(in.samples.begin(), in.samples.end(), [](const auto& a, const auto& b) {
          return a.at < b.at;
        })->at;
  }
  // The time cap counts the benchmark's running time: a market stop (outbid, a contract pause)
  // is not the host's slowness.
  in.now = in.since + running_seconds_in_state(rec, now);
  in.break_even_rate = break_even_rate;
  return in;
}

std::optional<BenchmarkStep> evaluate_benchmark(const InstanceRecord& rec,
                                                const std::vector<ProofSample>& samples, double now,
                                                double break_even_rate,
                                                const Acceptance& acceptance) {
  const BenchmarkInput in = benchmark_input(rec, samples, now, break_even_rate);
  if (in.samples.empty()) return std::nullopt;
  BenchmarkStep step;
  step.verdict = acceptance.evaluate(in);
  switch (step.verdict.decision) {
    case Verdict::Decision::Continue:
      break;
    case Verdict::Decision::Accept:
      step.decided = true;
      step.accept = true;
      break;
    case Verdict::Decision::Reject:
      step.decided = true;
      step.reject = Closing{CloseCause::Rejected, "benchmark " + step.verdict.reason};
      break;
  }
  return step;
}

}  // namespace pf::core
