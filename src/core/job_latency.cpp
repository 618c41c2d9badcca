#include "core/job_latency.h"

#include <algorithm>
#include <cmath>

namespace pf::core {

const char* to_string(Timeliness timeliness) {
  switch (timeliness) {
    case Timeliness::Pending:
      return "pending";
    case Timeliness::OnTime:
      return "on_time";
    case Timeliness::Late:
      return "late";
    case Timeliness::Missed:
      return "missed";
    case Timeliness::Withdrawn:
      return "withdrawn";
  }
  return "pending";
}

TimelinessVerdict job_timeliness(const Job& job, double now) {
  // A job without a deadline (0) can only be on time once delivered, never late.
  const bool has_deadline = job.deadline_at > 0;
  const bool past_deadline = has_deadline && now > job.deadline_at;
  switch (job.state) {
    case JobState::Cancelled:
      return {Timeliness::Withdrawn, job.finished_at};
    case JobState::Failed:
      return {Timeliness::Missed, job.finished_at};
    case JobState::Done:
      if (job.delivered_at > 0) {
        if (!has_deadline || job.delivered_at <= job.deadline_at) {
          return {Timeliness::OnTime, job.delivered_at};
        }
        // Late from the moment the deadline passed, though it was handed over later.
        return {Timeliness::Late, job.deadline_at};
      }
      break;
    case JobState::Queued:
    case JobState::Assigned:
    case JobState::Proving:
      break;
  }
  if (past_deadline) return {Timeliness::Late, job.deadline_at};
  return {Timeliness::Pending, 0};
}

std::optional<double> percentile(std::vector<double> values, double q) {
  if (values.empty()) return std::nullopt;
  q = std::clamp(q, 0.0, 1.0);
  std::sort(values.begin(), values.end());
  // Nearest rank: the ⌈q·n⌉-th smallest (1-based), at least the first.
  const auto n = values.size();
  auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
  rank = std::clamp<std::size_t>(rank, 1, n);
  return values[rank - 1];
}

std::optional<double> queue_wait_s(const Job& job) {
  if (job.assigned_at <= 0 || job.state == JobState::Queued) return std::nullopt;
  return std::max(0.0, job.assigned_at - job.submitted_at);
}

std::optional<double> end_to_end_s(const Job& job) {
  if (job.state != JobState::Done || job.finished_at <= 0) return std::nullopt;
  return std::max(0.0, job.finished_at - job.submitted_at);
}

bool is_at_risk(const Job& job, double now, double typical_s) {
  if (job.state != JobState::Queued || job.deadline_at <= 0) return false;
  const double left = job.deadline_at - now;
  return left > 0 && left < typical_s;
}

namespace {

LatencyQuantiles quantiles(std::vector<double> values) {
  LatencyQuantiles out;
  out.count = static_cast<int>(values.size());
  out.p50 = percentile(values, 0.50);
  out.p95 = percentile(std::move(values), 0.95);
  return out;
}

bool in_window(double at, double since, double now) {
  return at > 0 && at >= since && at <= now;
}

}  // namespace

LatencyStats latency_stats(const std::vector<Job>& jobs, double since, double now) {
  LatencyStats stats;
  stats.since = since;
  stats.until = now;
  std::vector<double> waits, e2e;
  for (const auto& job : jobs) {
    if (job.state == JobState::Queued) {
      stats.oldest_queued_s = std::max(stats.oldest_queued_s, now - job.submitted_at);
    }
    if (auto wait = queue_wait_s(job); wait && in_window(job.assigned_at, since, now)) {
      waits.push_back(*wait);
    }
    if (auto total = end_to_end_s(job); total && in_window(job.finished_at, since, now)) {
      e2e.push_back(*total);
    }
    const auto verdict = job_timeliness(job, now);
    if (!in_window(verdict.settled_at, since, now)) continue;
    switch (verdict.timeliness) {
      case Timeliness::OnTime:
        ++stats.on_time;
        break;
      case Timeliness::Late:
        ++stats.late;
        break;
      case Timeliness::Missed:
        ++stats.missed;
        break;
      case Timeliness::Pending:
      case Timeliness::Withdrawn:
        break;
    }
  }
  stats.queue_wait_s = quantiles(std::move(waits));
  stats.end_to_end_s = quantiles(std::move(e2e));
  if (const auto typical = stats.end_to_end_s.p50) {
    for (const auto& job : jobs) {
      if (is_at_risk(job, now, *typical)) ++stats.at_risk;
    }
  }
  const int settled = stats.on_time + stats.late + stats.missed;
  if (settled > 0) stats.on_time_share = static_cast<double>(stats.on_time) / settled;
  return stats;
}

}  // namespace pf::core
