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
};

// Workers in order of (expected finish of one more job, position in `workers`): the order the
// rule ranks candidates in once the avoid list and the deadline are set aside — lateness only
// grows with the finish, so among the instances a job does not avoid the first in this order is
// its best, and when it avoids them all the first overall is. A heap, so that a plan costs
// O(jobs × log workers) rather than jobs × workers: the queue plans under its lock while
// agents wait for work.
// Entries go stale when their worker's lanes change (its version moves on); stale ones are
// dropped as they surface.
class FinishOrder {
 public:
  struct Entry {
    double finish = 0;
    std::size_t worker = 0;
    std::uint64_t version = 0;
  };

  void push(double finish, std::size_t worker, std::uint64_t version) {
    heap_.push_back({finish, worker, version});
    std::push_heap(heap_.begin(), heap_.end(), later);
  }

  // The best candidate for `job` among the entries whose version is current; worker -1: none.
  Candidate best(const JobToPlace& job, const std::vector<WorkerView>& workers,
                 const std::vector<std::uint64_t>& versions) {
    Candidate first_avoided;
    std::vector<Entry>& set_aside = set_aside_;  // current entries looked at, put back after
    set_aside.clear();
    Candidate out;
    while (!heap_.empty()) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      const Entry e = heap_.back();
      heap_.pop_back();
      if (e.version != versions[e.worker]) continue;  // stale
      set_aside.push_back(e);
      if (!has_kind(workers[e.worker].kinds, job.kind)) continue;  // lacks its parameters
      Candidate c;
      c.worker = static_cast<int>(e.worker);
      c.finish = e.finish;
      c.late = job.deadline_at > 0 && e.finish > job.deadline_at;
      c.avoided = avoids(job, workers[e.worker].instance_id);
      if (!c.avoided) {
        out = c;
        break;
      }
      if (first_avoided.worker < 0) first_avoided = c;
    }
    for (const auto& e : set_aside) push(e.finish, e.worker, e.version);
    return out.worker >= 0 ? out : first_avoided;
  }

  // Whether any entry is current (stale ones on top are dropped on the way).
  bool has_current(const std::vector<std::uint64_t>& versions) {
    while (!heap_.empty() && heap_.front().version != versions[heap_.front().worker]) {
      std::pop_heap(heap_.begin(), heap_.end(), later);
      heap_.pop_back();
    }
    return !heap_.empty();
  }

 private:
  // Heap order: the top is the smallest (finish, worker).
  static bool later(const Entry& a, const Entry& b) {
    return std::tie(a.finish, a.worker) > std::tie(b.finish, b.worker);
  }
  std::vector<Entry> heap_;
  std::vector<Entry> set_aside_;  // best()'s scratch, kept to spare an allocation per job
};

// "expected to finish in 120 s on #3 (after its deadline: ...)": where a job goes and when.
std::string expected_finish_text(double takes_s, std::int64_t instance_id, bool late,
                                 bool avoided) {
  std::string text =
      "expected to finish in " + fixed(takes_s, 0) + " s on #" + std::to_string(instance_id);
  if (late) text += " (after its deadline: no instance can meet it)";
  if (avoided) text += " (an instance that failed it: no other can take it)";
  return text;
}

}  // namespace

std::string JobWait::reason() const {
  switch (cause) {
    case Cause::NoRatedInstance:
      return "no instance with a measured rate";
    case Cause::NoParameters:
      return std::string("no instance has the parameters for ") + to_string(kind);
    case Cause::NoFreeSlot:
      return "waits: no free slot; " +
             expected_finish_text(expected_finish_at - planned_at, instance_id, late, avoided);
    case Cause::BusyIsBetter:
      return "waits for busy #" + std::to_string(instance_id) + ": " +
             expected_finish_text(expected_finish_at - planned_at, instance_id, late, avoided) +
             ", the best free one #" + std::to_string(free_instance_id) + " would take " +
             fixed(free_finish_at - planned_at, 0) + " s" +
             (free_late && !late ? " and miss its deadline" : "");
  }
  return "waits";
}

namespace {

// plan_jobs, or only its placements (`with_waits` false): once no slot is free anywhere no job
// can be placed any more (placing only fills slots), so the rest of the queue is not looked at.
// The simulator leases through place_jobs on every free slot of every instance, with queues of
// hundreds of jobs in an overload.
JobPlan make_plan(double now, const std::vector<JobToPlace>& queued,
                  const std::vector<WorkerView>& workers, const PlacementConfig& config,
                  bool with_waits) {
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

  // Every worker with a measured rate in `any`; those with a slot free now also in `free`.
  FinishOrder any, free;
  std::vector<std::uint64_t> versions(workers.size(), 0);
  const auto enter = [&](std::size_t i) {
    const double first_free = *std::min_element(free_at[i].begin(), free_at[i].end());
    const double start = std::max(now, first_free);
    const double finish = start + workers[i].seconds_per_proof;
    any.push(finish, i, versions[i]);
    if (start <= now) free.push(finish, i, versions[i]);
  };
  for (std::size_t i = 0; i < workers.size(); ++i) {
    if (workers[i].seconds_per_proof > 0) enter(i);  // no measured rate: not placed on
  }

  JobPlan plan;
  // Jobs no instance can finish by their deadline any more, held back until the jobs of their
  // priority that still can are placed (`deferred`), then placed in their own order.
  std::vector<const JobToPlace*> deferred;
  const auto place = [&](const JobToPlace* job, bool may_defer) {
    const Candidate best_any = any.best(*job, workers, versions);
    const Candidate best_free = free.best(*job, workers, versions);
    if (best_any.worker < 0) {
      const bool any_rated = std::any_of(workers.begin(), workers.end(), [](const WorkerView& w) {
        return w.seconds_per_proof > 0;
      });
      JobWait w;
      w.job_id = job->job_id;
      w.cause = any_rated ? JobWait::Cause::NoParameters : JobWait::Cause::NoRatedInstance;
      w.kind = job->kind;
      w.planned_at = now;
      plan.waits.push_back(w);
      return;
    }
    if (may_defer && best_any.late) {
      deferred.push_back(job);
      return;
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
    ++versions[wi];
    enter(wi);

    if (wait) {
      JobWait w;
      w.job_id = job->job_id;
      w.instance_id = instance;
      w.expected_finish_at = chosen.finish;
      w.late = chosen.late;
      w.cause = best_free.worker < 0 ? JobWait::Cause::NoFreeSlot : JobWait::Cause::BusyIsBetter;
      w.kind = job->kind;
      w.planned_at = now;
      w.avoided = chosen.avoided;
      if (best_free.worker >= 0) {
        w.free_instance_id = workers[static_cast<std::size_t>(best_free.worker)].instance_id;
        w.free_finish_at = best_free.finish;
        w.free_late = best_free.late;
      }
      plan.waits.push_back(w);
      return;
    }
    JobPlacement placement;
    placement.job_id = job->job_id;
    placement.instance_id = instance;
    placement.expected_finish_at = chosen.finish;
    placement.late = chosen.late;
    placement.reason =
        expected_finish_text(chosen.finish - now, instance, chosen.late, chosen.avoided);
    plan.placements.push_back(std::move(placement));
  };
  const auto place_deferred = [&] {
    for (const JobToPlace* job : deferred) place(job, false);
    deferred.clear();
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (!with_waits && !free.has_current(versions)) return plan;
    if (k > 0 && order[k]->priority != order[k - 1]->priority) place_deferred();
    place(order[k], true);
  }
  place_deferred();
  return plan;
}

}  // namespace

JobPlan plan_jobs(double now, const std::vector<JobToPlace>& queued,
                  const std::vector<WorkerView>& workers, const PlacementConfig& config) {
  return make_plan(now, queued, workers, config, true);
}

std::vector<JobPlacement> place_jobs(double now, const std::vector<JobToPlace>& queued,
                                     const std::vector<WorkerView>& workers,
                                     const PlacementConfig& config) {
  return make_plan(now, queued, workers, config, false).placements;
}

}  // namespace pf::core
