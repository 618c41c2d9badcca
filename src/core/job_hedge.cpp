#include "core/job_hedge.h"

#include <algorithm>
#include <limits>

#include "core/text.h"

namespace pf::core {

std::optional<Hedge::Cause> proof_at_risk(double now, const HeldJob& job,
                                          const HedgeConfig& config) {
  if (now - job.holder_heard_at >= config.silent_after_s) return Hedge::Cause::Silent;
  const double spp = job.holder_seconds_per_proof;
  if (spp > 0 &&
      now - job.started_at >= std::max(config.overdue_factor * spp, spp + config.overdue_min_s)) {
    return Hedge::Cause::Overdue;
  }
  return std::nullopt;
}

std::vector<Hedge> plan_hedges(double now, const std::vector<HeldJob>& held,
                               const std::vector<WorkerView>& workers, const HedgeConfig& config) {
  std::vector<Hedge> out;
  if (!config.enabled) return out;
  std::vector<int> spare(workers.size(), 0);
  bool any_spare = false;
  for (std::size_t w = 0; w < workers.size(); ++w) {
    spare[w] = std::max(0, std::max(1, workers[w].slots) - std::max(0, workers[w].held));
    any_spare = any_spare || spare[w] > 0;
  }
  if (!any_spare) return out;

  struct AtRisk {
    const HeldJob* job;
    Hedge::Cause cause;
  };
  std::vector<AtRisk> at_risk;
  for (const auto& job : held) {
    if (job.hedged) continue;
    if (job.deadline_at > 0 && job.deadline_at <= now) continue;  // nothing can be on time
    if (auto cause = proof_at_risk(now, job, config)) at_risk.push_back({&job, *cause});
  }
  // Earliest deadline first (none last), then the older job.
  std::sort(at_risk.begin(), at_risk.end(), [](const AtRisk& a, const AtRisk& b) {
    const double da =
        a.job->deadline_at > 0 ? a.job->deadline_at : std::numeric_limits<double>::infinity();
    const double db =
        b.job->deadline_at > 0 ? b.job->deadline_at : std::numeric_limits<double>::infinity();
    if (da != db) return da < db;
    return a.job->job_id < b.job->job_id;
  });

  for (const auto& [job, cause] : at_risk) {
    int best = -1;
    double best_finish = std::numeric_limits<double>::infinity();
    for (std::size_t w = 0; w < workers.size(); ++w) {
      const WorkerView& worker = workers[w];
      if (spare[w] == 0 || worker.instance_id == job->holder) continue;
      if (!has_kind(worker.kinds, job->kind) || worker.seconds_per_proof <= 0) continue;
      if (std::find(job->avoid_instances.begin(), job->avoid_instances.end(), worker.instance_id) !=
          job->avoid_instances.end()) {
        continue;
      }
      const double finish = now + worker.seconds_per_proof;
      if (job->deadline_at > 0 && finish > job->deadline_at) continue;  // could not save it
      if (finish < best_finish) {
        best = static_cast<int>(w);
        best_finish = finish;
      }
    }
    if (best < 0) continue;
    --spare[static_cast<std::size_t>(best)];
    Hedge h;
    h.job_id = job->job_id;
    h.holder = job->holder;
    h.instance_id = workers[static_cast<std::size_t>(best)].instance_id;
    h.expected_finish_at = best_finish;
    h.cause = cause;
    const std::string due =
        job->deadline_at > 0 ? fixed(job->deadline_at - best_finish, 0) + " s before its deadline"
                             : std::string("(no deadline)");
    h.reason = cause == Hedge::Cause::Silent
                   ? "instance " + std::to_string(job->holder) + " not heard for " +
                         fixed(now - job->holder_heard_at, 0) + " s"
                   : "its proof on instance " + std::to_string(job->holder) + " has run " +
                         fixed(now - job->started_at, 0) + " s against " +
                         fixed(job->holder_seconds_per_proof, 0) + " s expected";
    h.reason += "; instance " + std::to_string(h.instance_id) + " would finish it " + due;
    out.push_back(std::move(h));
  }
  return out;
}

std::vector<Hedge> hedges_for(std::int64_t instance_id, int max_jobs, double now,
                              const std::vector<HeldJob>& held,
                              const std::vector<WorkerView>& workers, const HedgeConfig& config) {
  std::vector<Hedge> mine;
  for (auto& h : plan_hedges(now, held, workers, config)) {
    if (static_cast<int>(mine.size()) >= max_jobs) break;
    if (h.instance_id == instance_id) mine.push_back(std::move(h));
  }
  return mine;
}

}  // namespace pf::core
