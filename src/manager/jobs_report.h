// The operator's view of the gateway's jobs (issue 12 item 6): queue by kind, arrivals, jobs in
// flight per instance, latency, on-time share, revenue, realised $/proof and idle hours. A shell:
// it lists jobs and instance rows and hands them to core/job_latency.h and core/job_economics.h,
// which decide every figure. GET /api/v1/fleet ("jobs"), the dashboard's stream and /metrics
// read it.
//
// Bounds: one report lists at most `max_scanned` jobs of the window plus every open job (both
// newest first); when the window holds more, `truncated` says the figures cover the newest ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "core/job.h"
#include "core/job_economics.h"
#include "core/job_latency.h"
#include "jobs/job_queue.h"
#include "manager/manager.h"
#include "store/job_input_store.h"

namespace pf::manager {

struct JobsReportOptions {
  core::PriceConfig prices;
  double window_s = 3600;  // latency, on-time share, revenue, spend and idle hours
  std::size_t max_scanned = 5000;
};

struct JobsReport {
  double at = 0;
  double since = 0;  // the window's start: now − window_s, or when the gateway began if later
  bool has_jobs = false;  // the gateway ever recorded a job (sets the fleet's profit basis)
  std::map<core::JobKind, int> queued_by_kind;            // jobs waiting now
  std::map<core::JobKind, int> in_progress_by_kind;       // assigned or proving now
  std::map<core::JobState, int> open_by_state;            // queued, assigned, proving
  std::int64_t completed = 0, failed = 0, cancelled = 0;  // since the store began
  std::int64_t hedges_started = 0, hedges_won = 0;        // since the queue was opened
  int arrivals_last_hour = 0;
  // Job inputs the database holds now (open jobs' and those within retention): what an
  // operator sizes the database for (docs/operating.md).
  store::InputTotals inputs;
  std::map<std::int64_t, int> in_flight_by_instance;  // assigned or proving, by holder
  core::LatencyStats latency;
  core::JobsMoney money;
  bool truncated = false;
  core::PriceConfig prices;  // what the revenue was priced with
  // What was listed (window and open jobs), for /metrics' once-per-job counters.
  std::vector<core::Job> scanned;
};

JobsReport build_jobs_report(Manager& manager, jobs::JobQueue& queue,
                             const JobsReportOptions& options, double now);
// The same from the live rows the caller already read (store().instances(false), by id).
JobsReport build_jobs_report(Manager& manager, jobs::JobQueue& queue,
                             const JobsReportOptions& options, double now,
                             const std::vector<core::InstanceRecord>& live_rows);

// When each instance in `instances` was accepted and until when (destroyed, destroying, or now):
// a proving instance since it entered proving; a closed one since its accepting benchmark run.
std::vector<core::AcceptedSpan> accepted_spans(const std::vector<core::InstanceRecord>& instances,
                                               const std::vector<core::BenchRun>& runs, double now);

// The fleet summary with its profit on the right basis (core::fleet_profit): delivered jobs'
// revenue once the gateway has seen a job, the measured-proofs estimate before (report null:
// no gateway).
void apply_profit_basis(FleetSummary& summary, const JobsReport* report,
                        double revenue_per_proof_usd);

}  // namespace pf::manager
