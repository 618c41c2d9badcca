#include "agent/prover_supervisor.h"

#include <algorithm>
#include <cmath>

#include "agent/json_setting.h"
#include "agent/param_manifest.h"
#include "agent/plan_json.h"
#include "core/oom_memory.h"
#include "core/text.h"

namespace pf::agent {

using nlohmann::json;

json ProverSupervisor::reported_plan(const core::ProverPlan& plan) const {
  json out = plan_to_json(plan);
  // What the manager places jobs by (core/job_schedule.h): the kinds this prover has the
  // parameters for, from the manifest the manager handed over (fetched and verified by now).
  std::vector<std::string> names;
  if (auto files = parse_param_manifest(terms_.params_manifest)) {
    for (const auto& f : *files) names.push_back(f.name);
  }
  json kinds = json::array();
  const core::KindSet provable = prover_.proof_kinds(names);
  for (core::JobKind kind : {core::JobKind::PorepC2, core::JobKind::SnapUpdate}) {
    if (core::has_kind(provable, kind)) kinds.push_back(core::to_string(kind));
  }
  out["proof_kinds"] = std::move(kinds);
  return out;
}

core::PlanInput ProverSupervisor::plan_input() const {
  return agent::plan_input(probe_.result, !prover_.needs_cache_warmup());
}

core::PlanLimits ProverSupervisor::plan_limits(std::optional<int> oom_cap) {
  PartitionCaps caps{oom_cap, o_.partitions, setting<int>(terms_.prover_settings, "partitions"),
                     std::nullopt};
  {
    std::lock_guard lock(state_.mu);
    caps.command = state_.partitions_command;
  }
  return agent::plan_limits(caps, terms_.machine_per_partition_gib);
}

tl::expected<void, std::string> ProverSupervisor::after_death(const ProofOutcome& outcome,
                                                              const ProverHealth& health,
                                                              int& crash_streak) {
  const bool oom = outcome.kind == ProofOutcome::Kind::OutOfMemory || health.oom;
  const std::string message = !health.message.empty() && health.message != "running"
                                  ? health.message + "; " + outcome.message
                                  : outcome.message;
  if (oom) {
    const int ran = state_.running_partitions;
    auto next = core::plan_after_oom(plan_input(), plan_limits(std::nullopt), ran);
    json data = {{"partitions", ran},
                 {"usable_ram_gib", probe_.result.memory.usable_gib},
                 {"model_peak_gib", state_.plan ? state_.plan->expected_peak_gib : 0.0}};
    if (auto peak = prover_.peak_memory_gib()) data["observed_peak_gib"] = *peak;
    if (!next) {
      reporter_.emit_simple("oom", message, data);
      return tl::unexpected(next.error());
    }
    data["next_partitions"] = next->partitions;
    reporter_.emit_simple("oom", message, data);
    log_.line("killed for memory at " + std::to_string(ran) + " partitions; re-planned to " +
              std::to_string(next->partitions));
    if (auto error = cap_file_.save(next->partitions)) log_.line(*error);
    std::lock_guard lock(state_.mu);
    state_.plan = *next;
    return {};
  }
  ++crash_streak;
  reporter_.emit_simple("prover_crashed", message, {{"restarts_in_a_row", crash_streak}});
  log_.line("prover crashed (" + message + ")");
  if (crash_streak > o_.max_restarts) {
    return tl::unexpected("the prover failed " + std::to_string(crash_streak) +
                          " times in a row without a proof; last: " + message);
  }
  hooks_.pause(std::min(60.0, std::pow(2.0, crash_streak)));
  return {};
}

void ProverSupervisor::report_memory_check(const core::ProverPlan& p) {
  json check = {{"partitions", p.partitions},
                {"model_peak_gib", p.expected_peak_gib},
                {"usable_ram_gib", p.usable_ram_gib}};
  std::string msg = "model peak " + core::fixed(p.expected_peak_gib, 1) + " GiB";
  if (auto peak = prover_.peak_memory_gib()) {
    check["observed_peak_gib"] = *peak;
    check["ratio"] = p.expected_peak_gib > 0 ? *peak / p.expected_peak_gib : 0;
    msg = "observed peak " + core::fixed(*peak, 1) + " GiB vs " + msg;
  } else {
    msg = "observed peak unknown; " + msg;
  }
  reporter_.emit_simple("memory_check", msg, check);
}

tl::expected<void, std::string> ProverSupervisor::run() {
  if (probe_.result.gpus.empty()) log_.line("no GPU found by the probe; planning for one");
  // This instance's own lesson (its state dir) first, else what the manager knows of the
  // machine's earlier rentals.
  const auto cap = cap_file_.load();
  auto first = cap ? core::plan_prover(plan_input(), plan_limits(cap))
                   : core::plan_for_machine(plan_input(), plan_limits(std::nullopt),
                                            terms_.machine_oom_partitions);
  if (!first) return tl::unexpected("no prover plan fits this machine: " + first.error());
  {
    std::lock_guard lock(state_.mu);
    state_.plan = *first;
  }
  for (const auto& r : first->reasons) log_.line("plan: " + r);
  if (!terms_.machine_memory_reason.empty()) log_.line("plan: " + terms_.machine_memory_reason);

  int crash_streak = 0;
  bool cache_warmed = false;
  while (!state_.stopping()) {
    core::ProverPlan p;
    {
      std::lock_guard lock(state_.mu);
      p = *state_.plan;
    }
    const bool warm = !cache_warmed && prover_.needs_cache_warmup();
    {
      std::lock_guard lock(state_.mu);
      state_.running_partitions = warm ? p.warmup_partitions : p.partitions;
    }
    hooks_.set_phase("warming_up");
    auto started = prover_.start(p, warm);
    if (!started) {
      if (state_.stopping()) break;
      auto r =
          after_death({ProofOutcome::Kind::Transport, 0, 0, 0, "start failed: " + started.error()},
                      {}, crash_streak);
      if (!r) return r;
      continue;
    }
    log_.line("prover started: " + *started);
    json data = {{"plan", reported_plan(p)},
                 {"warmup_plan", warm},
                 {"prover", prover_.kind()},
                 {"partitions", warm ? p.warmup_partitions : p.partitions}};
    reporter_.emit_simple("prover_started", *started, data);

    ProofJob warmup_job;
    warmup_job.warmup = true;
    ProofOutcome warmup = slots_.run_proof(warmup_job);
    if (warmup.kind == ProofOutcome::Kind::Stopped || state_.stopping()) break;
    if (warmup.kind == ProofOutcome::Kind::Failed) {
      // The prover is alive but could not prove: start it again, within the same limit.
      slots_.record_failed(warmup);
      prover_.stop();
      if (++crash_streak > o_.max_restarts) {
        return tl::unexpected("the warm-up proof failed " + std::to_string(crash_streak) +
                              " times in a row; last: " + warmup.message);
      }
      hooks_.pause(std::min(60.0, std::pow(2.0, crash_streak)));
      continue;
    }
    if (warmup.kind != ProofOutcome::Kind::Completed) {
      const ProverHealth h = slots_.settled_health();
      prover_.stop();
      auto r = after_death(warmup, h, crash_streak);
      if (!r) return r;
      continue;
    }
    slots_.record_completed(warmup, true);
    crash_streak = 0;
    if (warm) {
      cache_warmed = true;
      prover_.stop();
      if (prover_.needs_cache_warmup()) {
        log_.line(
            "warning: the PCE file is still missing after the warm-up proof; starting the "
            "full plan anyway");
      } else {
        log_.line("PCE file written; restarting at the full plan");
      }
      continue;
    }
    slots_.note_peak();
    report_memory_check(p);
    bool enough = false;
    {
      std::lock_guard lock(state_.mu);
      enough = terms_.max_samples > 0 && state_.measured >= terms_.max_samples;
    }
    hooks_.set_phase(enough ? "proving" : "benchmarking");

    SessionEnd end = slots_.run_session(p);
    if (end.why == SessionEnd::Why::Stop) break;
    if (end.why == SessionEnd::Why::Replan) {
      probe_.refresh({o_.probe_root, o_.nvidia_smi, o_.param_dir});
      auto next = core::plan_prover(plan_input(), plan_limits(cap_file_.load()));
      if (!next) return tl::unexpected("re-plan failed: " + next.error());
      reporter_.emit_simple("replan", std::to_string(next->partitions) + " partitions",
                            {{"plan", reported_plan(*next)}});
      std::lock_guard lock(state_.mu);
      state_.plan = *next;
      continue;
    }
    auto r = after_death(end.outcome, end.health, crash_streak);
    if (!r) return r;
  }
  return {};
}

}  // namespace pf::agent
