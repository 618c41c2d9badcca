#include "sim/des_dispatch.h"

#include <algorithm>

namespace pf::sim {
namespace {

bool same_workers(const std::vector<core::WorkerView>& a, const std::vector<core::WorkerView>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const core::WorkerView& x, const core::WorkerView& y) {
                      return x.instance_id == y.instance_id &&
                             x.seconds_per_proof == y.seconds_per_proof && x.slots == y.slots &&
                             x.held == y.held && x.busy_s == y.busy_s;
                    });
}

}  // namespace

void JobDispatch::arrive(std::int64_t job_id, double submitted_at, double deadline_at) {
  queued_[job_id] = Job{submitted_at, deadline_at};
  ++generation_;
}

std::vector<std::int64_t> JobDispatch::expire(double now) {
  std::vector<std::int64_t> gone;
  for (auto it = queued_.begin(); it != queued_.end();) {
    if (it->second.deadline_at > 0 && it->second.deadline_at <= now) {
      gone.push_back(it->first);
      it = queued_.erase(it);
      ++generation_;
    } else {
      ++it;
    }
  }
  return gone;
}

std::vector<core::WorkerView> JobDispatch::with_held(std::vector<core::WorkerView> workers) const {
  for (auto& w : workers) {
    const auto it = held_.find(w.instance_id);
    w.held = it == held_.end() ? 0 : static_cast<int>(it->second.size());
  }
  return workers;
}

std::vector<std::int64_t> JobDispatch::lease(std::int64_t instance_id, int max_jobs, double now,
                                             std::vector<core::WorkerView> workers) {
  std::vector<std::int64_t> out;
  workers = with_held(std::move(workers));
  const bool asker_works =
      std::any_of(workers.begin(), workers.end(),
                  [instance_id](const auto& w) { return w.instance_id == instance_id; });
  if (!asker_works || queued_.empty() || max_jobs < 1) return out;
  if (!plan_ || plan_->generation != generation_ || plan_->now != now ||
      !same_workers(plan_->workers, workers)) {
    // The queue as the manager's lease hands it to place_jobs: by job id (its map's order).
    std::vector<core::JobToPlace> queued;
    queued.reserve(queued_.size());
    for (const auto& [id, job] : queued_) {
      core::JobToPlace j;
      j.job_id = id;
      j.submitted_at = job.submitted_at;
      j.deadline_at = job.deadline_at;
      queued.push_back(std::move(j));
    }
    plan_ = Plan{generation_, now, workers, core::place_jobs(now, queued, workers)};
  }
  for (const auto& p : plan_->placements) {
    if (p.instance_id != instance_id) continue;
    const auto it = queued_.find(p.job_id);
    held_[instance_id].insert(*it);
    queued_.erase(it);
    out.push_back(p.job_id);
    if (static_cast<int>(out.size()) >= max_jobs) break;
  }
  if (!out.empty()) ++generation_;
  return out;
}

bool JobDispatch::drop_held(std::int64_t instance_id, std::int64_t job_id) {
  const auto it = held_.find(instance_id);
  if (it == held_.end()) return false;
  const bool had = it->second.erase(job_id) > 0;
  if (it->second.empty()) held_.erase(it);
  return had;
}

std::optional<std::int64_t> JobDispatch::done(std::int64_t instance_id, std::int64_t job_id) {
  if (drop_held(instance_id, job_id)) ++generation_;
  const auto pair = hedges_.find(job_id);
  if (pair == hedges_.end()) return std::nullopt;
  const std::int64_t other =
      pair->second.first == instance_id ? pair->second.second : pair->second.first;
  hedges_.erase(pair);
  drop_held(other, job_id);
  return other;
}

void JobDispatch::release(std::int64_t instance_id) {
  const auto it = held_.find(instance_id);
  if (it == held_.end()) return;
  for (auto job = it->second.begin(); job != it->second.end();) {
    const auto pair = hedges_.find(job->first);
    if (pair == hedges_.end()) {
      ++job;
      continue;
    }
    hedges_.erase(pair);  // the other prover keeps it
    job = it->second.erase(job);
  }
  queued_.merge(it->second);
  held_.erase(it);
  ++generation_;
}

void JobDispatch::hedge(std::int64_t instance_id, std::int64_t job_id) {
  for (const auto& [holder, jobs] : held_) {
    const auto job = jobs.find(job_id);
    if (holder == instance_id || job == jobs.end()) continue;
    const Job copy = job->second;
    hedges_[job_id] = {holder, instance_id};
    held_[instance_id].emplace(job_id, copy);
    ++generation_;
    return;
  }
}

std::vector<JobDispatch::HeldCopy> JobDispatch::held_copies() const {
  std::vector<HeldCopy> out;
  for (const auto& [instance, jobs] : held_) {
    for (const auto& [id, job] : jobs) out.push_back({instance, id, job.deadline_at});
  }
  return out;
}

int JobDispatch::in_flight() const {
  int n = 0;
  for (const auto& [instance, jobs] : held_) n += static_cast<int>(jobs.size());
  return n;
}

std::vector<double> JobDispatch::queued_deadlines() const {
  std::vector<double> out;
  out.reserve(queued_.size());
  for (const auto& [id, job] : queued_) out.push_back(job.deadline_at);
  return out;
}

}  // namespace pf::sim
