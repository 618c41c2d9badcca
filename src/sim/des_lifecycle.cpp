#include "sim/des_lifecycle.h"

#include "core/production.h"

namespace pf::sim {

using S = core::InstanceState;

std::optional<std::string> RentalLifecycle::transition(core::InstanceRecord& rec, S to, double now,
                                                       const std::string& reason) const {
  return core::apply_transition(rec, to, now, reason, settings_.break_even_rate,
                                settings_.lifecycle);
}

ProofOutcome RentalLifecycle::proof(core::InstanceRecord& rec, bool marked_warmup, double now,
                                    double seconds, core::RunContext bench,
                                    core::RunContext window) {
  ProofOutcome out;
  core::ProofInput in;
  in.marked_warmup = marked_warmup;
  in.at = now;
  in.now = now;
  in.benchmark = settings_.acceptance != nullptr;
  in.break_even_rate = settings_.break_even_rate;
  out.step = core::record_proof(rec, in, settings_.lifecycle);
  out.sample.instance_id = rec.id;
  out.sample.seq = ++seq_;
  out.sample.at = now;
  out.sample.seconds = seconds;
  out.sample.phase = out.step.phase;
  if (out.step.entered_benchmark) bench_samples_.clear();
  if (out.step.accept_unmeasured) {
    core::Verdict v;
    v.decision = core::Verdict::Decision::Accept;
    v.reason = "no benchmark: this policy proves for money once warmed up";
    rec.verdict = v;
    out.accepted = transition(rec, S::Proving, now, v.reason).has_value();
  }
  if (out.step.phase == core::ProofPhase::Benchmark) bench_samples_.push_back(out.sample);
  if (out.step.phase == core::ProofPhase::Production) {
    production_samples_.push_back(out.sample);
    const double z =
        settings_.acceptance ? settings_.acceptance->interval_z() : core::AcceptanceConfig{}.z;
    for (const auto& run :
         core::new_production_windows(rec, production_samples_, settings_.production_window_s, z)) {
      out.production_runs.push_back(
          core::make_bench_run(rec, "production", now, run.estimate, window));
    }
    rec.production_windows += static_cast<int>(out.production_runs.size());
  }
  if (out.step.evaluate) {
    bool accepted = false;
    out.benchmark = evaluate(rec, now, bench, out.benchmark_run, accepted);
    out.accepted = out.accepted || accepted;
  }
  return out;
}

std::optional<core::BenchmarkStep> RentalLifecycle::evaluate(core::InstanceRecord& rec, double now,
                                                             core::RunContext bench,
                                                             std::optional<core::BenchRun>& run,
                                                             bool& accepted) {
  accepted = false;
  if (!settings_.acceptance || rec.state != S::Benchmarking) return std::nullopt;
  auto step = core::evaluate_benchmark(rec, bench_samples_, now, settings_.break_even_rate,
                                       *settings_.acceptance);
  if (!step) return std::nullopt;
  rec.verdict = step->verdict;
  if (!step->decided) return step;
  run = core::make_bench_run(rec, "benchmark", now, core::estimate_of(step->verdict), bench);
  if (step->accept) accepted = transition(rec, S::Proving, now, step->verdict.reason).has_value();
  return step;
}

std::optional<core::Closing> RentalLifecycle::check(const core::InstanceRecord& rec,
                                                    double now) const {
  return core::destroy_reason(rec, now, settings_.lifecycle);
}

std::optional<core::CloseStep> RentalLifecycle::close(
    core::InstanceRecord& rec, const core::Closing& closing, double now, int our_others_on_machine,
    const std::optional<core::Strike>& asked) const {
  return core::close_instance(rec, closing, now, our_others_on_machine, asked, settings_.lifecycle);
}

}  // namespace pf::sim
