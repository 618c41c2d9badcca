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
                                             std::vector<core::WorkerView> workers,
                                             const core::HedgeConfig& hedging) {
  std::vector<std::int64_t> out;
  workers = with_held(std::move(workers));
  const bool asker_works =
      std::any_of(workers.begin(), workers.end(),
                  [instance_id](const auto& w) { return w.instance_id == instance_id; });
  if (!asker_works || max_jobs < 1) return out;
  if (!queued_.empty()) {
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
      Job job = it->second;
      job.leased_at = now;
      job.renewed_at = now;
      held_[instance_id].emplace(p.job_id, job);
      queued_.erase(it);
      out.push_back(p.job_id);
      if (static_cast<int>(out.size()) >= max_jobs) break;
    }
  }
  if (!out.empty()) {
    ++generation_;
    return out;
  }
  return lease_hedges(instance_id, max_jobs, now, workers, hedging);
}

std::vector<std::int64_t> JobDispatch::lease_hedges(std::int64_t instance_id, int max_jobs,
                                                    double now,
                                                    const std::vector<core::WorkerView>& workers,
                                                    const core::HedgeConfig& hedging) {
  std::vector<std::int64_t> out;
  if (!hedging.enabled) return out;
  std::map<std::int64_t, double> seconds_per_proof;
  for (const auto& w : workers) seconds_per_proof[w.instance_id] = w.seconds_per_proof;
  std::vector<core::HeldJob> at_stake;
  for (const auto& [instance, jobs] : held_) {
    for (const auto& [id, job] : jobs) {
      const auto pair = hedges_.find(id);
      if (pair != hedges_.end() && pair->second.second == instance) continue;  // the copy
      core::HeldJob h;
      h.job_id = id;
      h.holder = instance;
      h.started_at = job.leased_at;
      h.deadline_at = job.deadline_at;
      const auto spp = seconds_per_proof.find(instance);
      h.holder_seconds_per_proof = spp == seconds_per_proof.end() ? 0 : spp->second;
      h.holder_heard_at = job.renewed_at;
      h.hedged = pair != hedges_.end();
      at_stake.push_back(std::move(h));
    }
  }
  for (const auto& h : core::hedges_for(instance_id, max_jobs, now, at_stake, workers, hedging)) {
    Job copy = held_.at(h.holder).at(h.job_id);
    copy.leased_at = now;
    copy.renewed_at = now;
    hedges_[h.job_id] = {h.holder, instance_id};
    held_[instance_id].emplace(h.job_id, copy);
    ++generation_;
    out.push_back(h.job_id);
  }
  return out;
}

void JobDispatch::renew(std::int64_t instance_id, double now) {
  const auto it = held_.find(instance_id);
  if (it == held_.end()) return;
  for (auto& [id, job] : it->second) job.renewed_at = now;
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

std::optional<std::int64_t> JobDispatch::hedger(std::int64_t job_id) const {
  const auto it = hedges_.find(job_id);
  if (it == hedges_.end()) return std::nullopt;
  return it->second.second;
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
