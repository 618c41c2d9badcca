#include "manager/jobs_report.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "store/store.h"

namespace pf::manager {

using core::JobState;

namespace {

// A job with any moment inside [since, now], or still open: it may count in the window.
bool touches_window(const core::Job& job, double since) {
  if (!core::is_terminal(job.state)) return true;
  for (double at :
       {job.submitted_at, job.assigned_at, job.finished_at, job.delivered_at, job.deadline_at}) {
    if (at >= since) return true;
  }
  return false;
}

}  // namespace

std::vector<core::AcceptedSpan> accepted_spans(const std::vector<core::InstanceRecord>& instances,
                                               const std::vector<core::BenchRun>& runs,
                                               double now) {
  std::map<std::int64_t, double> accepted_at;  // the accepting benchmark run of closed instances
  for (const auto& run : runs) {
    if (run.kind != "benchmark") continue;
    auto [it, inserted] = accepted_at.emplace(run.instance_id, run.at);
    if (!inserted) it->second = std::max(it->second, run.at);
  }
  std::vector<core::AcceptedSpan> spans;
  for (const auto& rec : instances) {
    if (!rec.verdict || rec.verdict->decision != core::Verdict::Decision::Accept) continue;
    core::AcceptedSpan span{rec.id, 0, now};
    if (rec.state == core::InstanceState::Proving) {
      span.from = rec.state_since;
    } else if (auto it = accepted_at.find(rec.id); it != accepted_at.end()) {
      span.from = it->second;
      if (rec.destroyed_at) {
        span.until = *rec.destroyed_at;
      } else if (rec.state == core::InstanceState::Destroying) {
        span.until = rec.state_since;  // destroying: no longer taking jobs
      }
    } else {
      continue;  // accepted, but when is not on record
    }
    if (span.until > span.from) spans.push_back(span);
  }
  return spans;
}

JobsReport build_jobs_report(Manager& manager, jobs::JobQueue& queue,
                             const JobsReportOptions& options, double now) {
  return build_jobs_report(manager, queue, options, now, manager.store().instances(false));
}

JobsReport build_jobs_report(Manager& manager, jobs::JobQueue& queue,
                             const JobsReportOptions& options, double now,
                             const std::vector<core::InstanceRecord>& live) {
  JobsReport report;
  report.at = now;
  report.prices = options.prices;
  report.since = std::max(now - options.window_s, queue.observed_since());
  if (report.since > now) report.since = now;

  const auto status = queue.status();
  report.completed = status.completed;
  report.failed = status.failed;
  report.cancelled = status.cancelled;
  report.hedges_started = status.hedges_started;
  report.hedges_won = status.hedges_won;

  // Every open job (any age) and the newest jobs, as many as the bound allows.
  std::set<std::int64_t> listed;
  const auto open = queue.list(
      store::JobFilter::in_states({JobState::Queued, JobState::Assigned, JobState::Proving}),
      options.max_scanned);
  for (const auto& job : open) {
    listed.insert(job.id);
    report.scanned.push_back(job);
  }
  const auto newest = queue.list(store::JobFilter{}, options.max_scanned);
  report.has_jobs = !newest.empty() || !open.empty();
  for (const auto& job : newest) {
    if (!touches_window(job, report.since) || listed.count(job.id)) continue;
    listed.insert(job.id);
    report.scanned.push_back(job);
  }
  report.truncated = newest.size() >= options.max_scanned && !newest.empty() &&
                     newest.back().submitted_at >= report.since;
  report.truncated = report.truncated || open.size() >= options.max_scanned;

  for (const auto& job : open) {
    ++report.open_by_state[job.state];
    if (job.state == JobState::Queued) {
      ++report.queued_by_kind[job.kind];
    } else {
      ++report.in_progress_by_kind[job.kind];
      if (job.instance_id) ++report.in_flight_by_instance[*job.instance_id];
    }
  }
  report.arrivals_last_hour = static_cast<int>(queue.arrivals_since(now - 3600).size());
  report.inputs = manager.store().job_input_totals();

  report.latency = core::latency_stats(report.scanned, report.since, now);

  // The live rows and the closed ones the window still sees (billed into it, or closed in it):
  // every other row adds exactly 0 to the money figures, and a fleet keeps thousands (issue 14).
  // Merged by id, so the sums add in the order they always did.
  auto& store = manager.store();
  const auto closed = store.destroyed_instances_since(report.since);
  std::vector<core::InstanceRecord> instances;
  instances.reserve(live.size() + closed.size());
  std::merge(live.begin(), live.end(), closed.begin(), closed.end(), std::back_inserter(instances),
             [](const auto& a, const auto& b) { return a.id < b.id; });
  // The accepting run of each instance accepted but no longer proving, whose span may reach
  // into the window.
  std::vector<core::BenchRun> runs;
  for (const auto& rec : instances) {
    if (rec.state != core::InstanceState::Proving && rec.verdict &&
        rec.verdict->decision == core::Verdict::Decision::Accept &&
        (!rec.destroyed_at || *rec.destroyed_at >= report.since)) {
      const auto mine = store.instance_bench_runs(rec.id);
      runs.insert(runs.end(), mine.begin(), mine.end());
    }
  }
  report.money = core::jobs_money(report.scanned, instances, accepted_spans(instances, runs, now),
                                  options.prices, report.since, now);
  return report;
}

void apply_profit_basis(FleetSummary& summary, const JobsReport* report,
                        double revenue_per_proof_usd) {
  const bool has_jobs = report && report->has_jobs;
  const auto profit =
      core::fleet_profit(has_jobs, summary.proofs_per_hour, revenue_per_proof_usd,
                         summary.dollars_per_hour, has_jobs ? report->money.revenue_per_hour : 0);
  summary.profit_basis = profit.basis;
  summary.profit_reason = profit.reason;
  summary.revenue_per_hour = profit.revenue_per_hour;
  summary.profit_per_hour = profit.profit_per_hour;
}

}  // namespace pf::manager
