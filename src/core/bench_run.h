// One measured run of an instance's host, as the host history keeps it: the benchmark verdict
// and every production window are built here, by the manager and the simulator alike.
#pragma once

#include <string>

#include "core/acceptance.h"
#include "core/fleet.h"

namespace pf::core {

struct RunContext {
  bool contended = false;  // another of our instances was alive on the machine
  bool throttled = false;  // the GPU reported throttling during the run
};

// `kind` is "benchmark" or "production"; `at` is when the run ended (epoch seconds).
inline BenchRun make_bench_run(const InstanceRecord& rec, const std::string& kind, double at,
                               const RateEstimate& estimate, RunContext context) {
  BenchRun run;
  run.host = {rec.offer.machine_id, rec.offer.gpu_name, rec.offer.num_gpus};
  run.instance_id = rec.id;
  run.at = at;
  run.rate = estimate.rate;
  run.low = estimate.low;
  run.high = estimate.high;
  run.samples = estimate.samples;
  run.kind = kind;
  run.contended = context.contended;
  run.throttled = context.throttled;
  run.plan_json = rec.plan_json;
  return run;
}

// A verdict's rate, interval and sample count as an estimate.
inline RateEstimate estimate_of(const Verdict& verdict) {
  RateEstimate e;
  e.rate = verdict.rate;
  e.low = verdict.low;
  e.high = verdict.high;
  e.samples = verdict.samples;
  return e;
}

}  // namespace pf::core
