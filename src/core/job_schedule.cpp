#include "core/job_schedule.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <tuple>

namespace pf::core {
namespace {

bool avoids(const JobToPlace& job, std::int64_t instance_id) {
  return std::find(job.avoid_instances.begin(), job.avoid_instances.end(), instance_id) !=
         job.avoid_instances.end();
}

}  // namespace

std::vector<JobPlacement> place_jobs(double now, const std::vector<JobToPlace>& queued,
                                     const std::vector<WorkerView>& workers) {
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

  std::vector<int> load;  // jobs on each worker: held + placed here
  load.reserve(workers.size());
  for (const auto& w : workers) load.push_back(std::max(0, w.held));

  std::vector<JobPlacement> placements;
  for (const JobToPlace* job : order) {
    // Best candidate by (avoided, late, finish time).
    int best = -1;
    bool best_avoided = true, best_late = true;
    double best_finish = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < workers.size(); ++i) {
      const WorkerView& w = workers[i];
      const int slots = std::max(1, w.slots);
      if (w.seconds_per_proof <= 0 || load[i] >= slots) continue;
      // Free slot now: the job starts at once and takes one proof's time.
      const double finish = now + w.seconds_per_proof;
      const bool late = job->deadline_at > 0 && finish > job->deadline_at;
      const bool avoided = avoids(*job, w.instance_id);
      const auto key = [](bool a, bool l, double f) { return std::tuple(a, l, f); };
      if (best < 0 || key(avoided, late, finish) < key(best_avoided, best_late, best_finish)) {
        best = static_cast<int>(i);
        best_avoided = avoided;
        best_late = late;
        best_finish = finish;
      }
    }
    if (best < 0) break;  // no free slot anywhere: the rest wait
    ++load[static_cast<std::size_t>(best)];
    JobPlacement placement;
    placement.job_id = job->job_id;
    placement.instance_id = workers[static_cast<std::size_t>(best)].instance_id;
    placement.expected_finish_at = best_finish;
    placement.late = best_late;
    char text[160];
    std::snprintf(text, sizeof text, "expected to finish in %.0f s%s%s", best_finish - now,
                  best_late ? " (after its deadline: no instance can meet it)" : "",
                  best_avoided ? " (an instance that failed it: no other is free)" : "");
    placement.reason = text;
    placements.push_back(std::move(placement));
  }
  return placements;
}

}  // namespace pf::core
