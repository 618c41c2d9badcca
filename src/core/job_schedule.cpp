#include "core/job_schedule.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "core/text.h"

namespace pf::core {
namespace {

bool avoids(const JobToPlace& job, std::int64_t instance_id) {
  return std::find(job.avoid_instances.begin(), job.avoid_instances.end(), instance_id) !=
         job.avoid_instances.end();
}

// When each of a worker's slots frees (epoch s), as far as this plan knows.
std::vector<double> slot_free_times(double now, const WorkerView& w) {
  const int slots = std::max(1, w.slots);
  const int held = std::max(0, w.held);
  std::vector<double> free_at(static_cast<std::size_t>(slots), now);
  // The held proofs in flight finish spread over what is left of them: until busy_s when the
  // shell knows it, else (progress unknown, on average half way) one proof time's share each.
  const int running = std::min(held, slots);
  for (int k = 1; k <= running; ++k) {
    const double done =
        w.busy_s >= 0 ? w.busy_s * k / running : w.seconds_per_proof * k / (running + 1);
    free_at[static_cast<std::size_t>(k - 1)] = now + done;
  }
  // Held beyond its slots (should not happen: an agent leases at most its slots) queue behind.
  for (int k = running; k < held; ++k) {
    auto first = std::min_element(free_at.begin(), free_at.end());
    *first += w.seconds_per_proof;
  }
  return free_at;
}

struct Candidate {
  int worker = -1;
  bool avoided = true;
  bool late = true;
  double finish = std::numeric_limits<double>::infinity();
  auto key() const { return std::tuple(avoided, late, finish); }
};

}  // namespace

JobPlan plan_jobs(double now, const std::vector<JobToPlace>& queued,
                  const std::vector<WorkerView>& workers, const PlacementConfig& config) {
  std::vector<const JobToPlace*> order;
  order.reserve(queued.size());
  for (const auto& job : queued) order.push_back(&job);
  std::stable_sort(order.begin(), order.end(), [](const JobToPlace* a, const JobToPlace* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    const double da = a->deadline_at > 0 ? a->deadline_at : std::numeric_limits<double>::max();
    const double db = b->deadline_at > 0 ? b->deadline_at : std::numeric_limits<double>::max();
    if (da != db) return da < db;
    return a->submitted_at < b->submitted_at;
  });

  std::vector<std::vector<double>> free_at;  // per worker, when each slot frees
  free_at.reserve(workers.size());
  for (const auto& w : workers) free_at.push_back(slot_free_times(now, w));

  JobPlan plan;
  for (const JobToPlace* job : order) {
    Candidate best_any, best_free;
    for (std::size_t i = 0; i < workers.size(); ++i) {
      const WorkerView& w = workers[i];
      if (!(w.seconds_per_proof > 0)) continue;  // no measured rate: not placed on
      const double start = std::max(now, *std::min_element(free_at[i].begin(), free_at[i].end()));
      Candidate c;
      c.worker = static_cast<int>(i);
      c.finish = start + w.seconds_per_proof;
      c.late = job->deadline_at > 0 && c.finish > job->deadline_at;
      c.avoided = avoids(*job, w.instance_id);
      if (best_any.worker < 0 || c.key() < best_any.key()) best_any = c;
      if (start <= now && (best_free.worker < 0 || c.key() < best_free.key())) best_free = c;
    }
    if (best_any.worker < 0) {
      plan.waits.push_back({job->job_id, 0, 0, false, "no instance with a measured rate"});
      continue;
    }
    // Wait for a busy instance only when it is clearly better than every free one.
    bool wait = best_free.worker < 0;
    if (!wait && best_any.worker != best_free.worker) {
      const bool better_class = std::tuple(best_any.avoided, best_any.late) <
                                std::tuple(best_free.avoided, best_free.late);
      const bool same_class = std::tuple(best_any.avoided, best_any.late) ==
                              std::tuple(best_free.avoided, best_free.late);
      const double free_takes = best_free.finish - now;
      wait = better_class ||
             (same_class && best_any.finish < now + free_takes * (1 - config.hold_margin));
    }
    const Candidate& chosen = wait ? best_any : best_free;
    const auto wi = static_cast<std::size_t>(chosen.worker);
    const std::int64_t instance = workers[wi].instance_id;
    *std::min_element(free_at[wi].begin(), free_at[wi].end()) = chosen.finish;

    std::string reason = "expected to finish in " + fixed(chosen.finish - now, 0) + " s on #" +
                         std::to_string(instance);
    if (chosen.late) reason += " (after its deadline: no instance can meet it)";
    if (chosen.avoided) reason += " (an instance that failed it: no other can take it)";
    if (wait) {
      reason = best_free.worker < 0
                   ? "waits: no free slot; " + reason
                   : "waits for busy #" + std::to_string(instance) + ": " + reason +
                         ", the best free one #" +
                         std::to_string(
                             workers[static_cast<std::size_t>(best_free.worker)].instance_id) +
                         " would take " + fixed(best_free.finish - now, 0) + " s" +
                         (best_free.late && !chosen.late ? " and miss its deadline" : "");
      plan.waits.push_back({job->job_id, instance, chosen.finish, chosen.late, std::move(reason)});
      continue;
    }
    JobPlacement placement;
    placement.job_id = job->job_id;
    placement.instance_id = instance;
    placement.expected_finish_at = chosen.finish;
    placement.late = chosen.late;
    placement.reason = std::move(reason);
    plan.placements.push_back(std::move(placement));
  }
  return plan;
}

std::vector<JobPlacement> place_jobs(double now, const std::vector<JobToPlace>& queued,
                                     const std::vector<WorkerView>& workers,
                                     const PlacementConfig& config) {
  return plan_jobs(now, queued, workers, config).placements;
}

}  // namespace pf::core
