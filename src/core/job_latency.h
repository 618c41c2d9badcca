// How fast and how punctually the fleet answers its clients (issue 12 item 6): queue wait and
// end-to-end latency percentiles, and the share of jobs delivered by their deadline, over a
// window. Pure: the operator API, the dashboard and /metrics pass the jobs they listed and `now`.
//
// Rules:
//  - queue wait = assigned_at − submitted_at of the lease that holds or finished the job (a job
//    whose lease was lost waited from its submission until its last lease); counted in the
//    window when that lease was handed out in it. Jobs still queued are not in the percentiles
//    (their wait is not over): `oldest_queued_s` reports them.
//  - end-to-end = finished_at − submitted_at of a done job (the proof was ready; the client's
//    pickup is its own); counted when it finished in the window.
//  - timeliness (job_timeliness): a done job delivered by its deadline is on time; delivered
//    after it, or not yet delivered once the deadline passed, late; a failed job missed; an open
//    job past its deadline is late already; a cancelled job was withdrawn by its client and
//    counts neither way. Late and missed settle at the moment they became so.
//  - on-time share = on time ÷ (on time + late + missed) among jobs settled in the window; none
//    when nothing settled.
#pragma once

#include <optional>
#include <vector>

#include "core/job.h"

namespace pf::core {

enum class Timeliness {
  Pending,    // not settled: still open (or done and undelivered) before its deadline
  OnTime,     // delivered by its deadline
  Late,       // delivered after its deadline, or still open / undelivered past it
  Missed,     // failed: the client got an error
  Withdrawn,  // cancelled by its client
};
const char* to_string(Timeliness timeliness);

struct TimelinessVerdict {
  Timeliness timeliness = Timeliness::Pending;
  double settled_at = 0;  // epoch s when it settled (0 while pending)
};
TimelinessVerdict job_timeliness(const Job& job, double now);

// The q-quantile (0 ≤ q ≤ 1) of `values` by nearest rank (the smallest value with at least q of
// them at or below it): always a value that occurred. None for no values.
std::optional<double> percentile(std::vector<double> values, double q);

struct LatencyQuantiles {
  int count = 0;
  std::optional<double> p50, p95;  // seconds
};

struct LatencyStats {
  double since = 0, until = 0;            // the window, epoch s
  LatencyQuantiles queue_wait_s;          // leases handed out in the window
  LatencyQuantiles end_to_end_s;          // done jobs finished in the window
  double oldest_queued_s = 0;             // the longest any job still queued has waited (0: none)
  int on_time = 0, late = 0, missed = 0;  // settled in the window
  std::optional<double> on_time_share;    // on_time ÷ (on_time + late + missed)
  // Jobs at risk: still queued, their deadline not passed, with less time left than the
  // window's median end-to-end time (submission to proof) — jobs have recently needed longer
  // than that, so one still waiting is likely late. 0 without a finished job in the window
  // (nothing to compare with; a queue that grows with nothing finishing is its own alert).
  int at_risk = 0;
};

// Seconds the job waited for the lease it holds or finished with; none before its first lease
// or while it is back in the queue.
std::optional<double> queue_wait_s(const Job& job);
// Seconds from submission to the proof; none unless done.
std::optional<double> end_to_end_s(const Job& job);

// Queued with its deadline still ahead but nearer than `typical_s`, the time jobs have recently
// needed from submission to proof: likely late unless something changes. What
// LatencyStats::at_risk counts and the operator's "at risk" filter lists (store::JobFilter).
bool is_at_risk(const Job& job, double now, double typical_s);

LatencyStats latency_stats(const std::vector<Job>& jobs, double since, double now);

}  // namespace pf::core
