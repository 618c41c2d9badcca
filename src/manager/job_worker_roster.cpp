#include "manager/job_worker_roster.h"

#include <algorithm>

#include "core/job_worker.h"

namespace pf::manager {

JobWorkerRoster::JobWorkerRoster(ReadRows read_rows, PlanSlots plan_slots, double max_age_s,
                                 PlanKinds plan_kinds)
    : read_rows_(std::move(read_rows)),
      plan_slots_(std::move(plan_slots)),
      plan_kinds_(std::move(plan_kinds)),
      max_age_s_(max_age_s) {}

void JobWorkerRoster::note_heard(std::int64_t instance_id, double at) {
  const auto it = index_.find(instance_id);
  if (it == index_.end()) return;  // not a worker when heard: its row says so when it becomes one
  auto& last = candidates_[it->second].last_heard_at;
  last = std::max(last, at);
}

void JobWorkerRoster::heard(std::int64_t instance_id, double at) {
  std::lock_guard lock(mu_);
  note_heard(instance_id, at);
  if (readers_ > 0) heard_while_reading_.emplace_back(instance_id, at);
}

std::vector<core::WorkerView> JobWorkerRoster::workers(double now, double heard_within_s) {
  std::unique_lock lock(mu_);
  const std::uint64_t version = version_.load();
  const bool stale = read_version_ != version || now < read_at_ || now - read_at_ >= max_age_s_;
  // While one caller reads, the others answer from the rows in hand: as a moment ago.
  if (stale && (readers_ == 0 || read_version_ == 0)) {
    if (readers_++ == 0) heard_while_reading_.clear();
    lock.unlock();
    std::vector<core::InstanceRecord> rows;
    try {
      rows = read_rows_();
    } catch (...) {
      lock.lock();
      --readers_;
      throw;
    }
    ++reads_;
    std::vector<Candidate> fresh;
    for (const auto& rec : rows) {
      if (auto w = core::job_worker_if_heard(rec, plan_slots_(rec))) {
        if (plan_kinds_) w->kinds = plan_kinds_(rec);
        fresh.push_back({*w, rec.last_heartbeat_at});
      }
    }
    lock.lock();
    --readers_;
    // A concurrent reader may have installed rows of a later version meanwhile.
    if (version >= read_version_) {
      // A row read may predate a heartbeat already followed here: the later time stands.
      for (auto& c : fresh) {
        if (const auto it = index_.find(c.view.instance_id); it != index_.end()) {
          c.last_heard_at = std::max(c.last_heard_at, candidates_[it->second].last_heard_at);
        }
      }
      candidates_ = std::move(fresh);
      index_.clear();
      for (std::size_t i = 0; i < candidates_.size(); ++i) {
        index_[candidates_[i].view.instance_id] = i;
      }
      read_version_ = version;
      read_at_ = now;
      for (const auto& [id, at] : heard_while_reading_) note_heard(id, at);
    }
  }
  std::vector<core::WorkerView> out;
  out.reserve(candidates_.size());
  for (const auto& c : candidates_) {
    if (core::heard_for_jobs(c.last_heard_at, now, heard_within_s)) out.push_back(c.view);
  }
  return out;
}

}  // namespace pf::manager
