#include "manager/job_signal.h"

namespace pf::manager {
namespace {

// Queued jobs read per round for their deadlines (the queue refuses jobs beyond its
// max_open_jobs, 10,000 by default).
constexpr std::size_t kMaxQueuedRead = 20000;

}  // namespace

JobSignal job_signal(jobs::JobQueue& queue, int admit_window) {
  return [&queue, admit_window](double now, double since) {
    core::QueueSnapshot seen;
    seen.now = now;
    seen.any_job = !queue.list(store::JobFilter{}, 1).empty();
    if (!seen.any_job) return seen;
    seen.observed_since = queue.observed_since();
    seen.arrivals = queue.arrivals_since(since);
    for (const auto& job :
         queue.list(store::JobFilter::in_states({core::JobState::Queued}), kMaxQueuedRead)) {
      seen.queued_deadlines.push_back(job.deadline_at);
    }
    seen.queued = static_cast<int>(seen.queued_deadlines.size());
    for (const auto& [kind, counts] : queue.status().by_kind) seen.in_flight += counts.in_progress;
    seen.admit_window = admit_window;
    return seen;
  };
}

JobSignal job_signal(Manager& manager, int admit_window) {
  return [&manager, admit_window](double now, double since) {
    jobs::JobQueue* queue = manager.jobs();
    if (queue == nullptr) {
      core::QueueSnapshot none;
      none.now = now;
      return none;
    }
    return job_signal(*queue, admit_window)(now, since);
  };
}

}  // namespace pf::manager
