#include "agent/work_loop.h"

#include <algorithm>
#include <random>

#include "market/backoff.h"

namespace pf::agent {

using nlohmann::json;

WorkLoop::WorkLoop(WorkClient& client, WorkLoopOptions options)
    : client_(client), options_(std::move(options)) {
  feeder_ = std::thread([this] { feeder_loop(); });
  uploader_ = std::thread([this] { uploader_loop(); });
}

WorkLoop::~WorkLoop() {
  stop(std::chrono::milliseconds(0));
}

void WorkLoop::stop(std::chrono::milliseconds drain) {
  {
    std::unique_lock lock(mu_);
    stopping_ = true;
    cv_.notify_all();
    // Results already proved are worth a short wait: the manager then needs no lease expiry.
    cv_.wait_for(lock, drain, [&] { return uploads_.empty(); });
    uploads_closed_ = true;
  }
  cv_.notify_all();
  if (feeder_.joinable()) feeder_.join();
  if (uploader_.joinable()) uploader_.join();
}

// --- heartbeat -----------------------------------------------------------------------------------

void WorkLoop::on_heartbeat(bool work, const std::vector<std::int64_t>& drop_jobs) {
  std::vector<std::int64_t> proving;  // dropped jobs whose proofs run: cancelled in the prover
  std::unique_lock lock(mu_);
  if (work != work_ && options_.log) {
    options_.log(work ? "the manager has work for this instance: taking jobs"
                      : "the manager has no work for this instance: no new jobs");
  }
  work_ = work;
  for (const std::int64_t id : drop_jobs) {
    auto it = held_.find(id);
    if (it == held_.end() || it->second.dropped) continue;
    if (options_.log) options_.log("the manager dropped job " + std::to_string(id));
    ++counters_.dropped;
    ready_.erase(std::remove(ready_.begin(), ready_.end(), id), ready_.end());
    if (it->second.stage == Stage::Queued) {
      held_.erase(it);
    } else {
      if (it->second.stage == Stage::Proving) proving.push_back(id);
      it->second.dropped = true;  // its worker or upload forgets it
    }
  }
  cv_.notify_all();
  lock.unlock();  // a prover's cancel may wait for its daemon
  if (options_.cancel_proof) {
    for (const std::int64_t id : proving) {
      options_.cancel_proof(id);
      if (options_.log) options_.log("cancelled the proof of job " + std::to_string(id));
    }
  }
}

json WorkLoop::held_json() const {
  std::lock_guard lock(mu_);
  json out = json::array();
  for (const auto& [id, held] : held_) {
    if (held.dropped) continue;
    out.push_back({{"id", id}, {"attempt", held.job.attempt}});
  }
  return out;
}

bool WorkLoop::work_enabled() const {
  std::lock_guard lock(mu_);
  return work_;
}

int WorkLoop::held_count() const {
  std::lock_guard lock(mu_);
  return static_cast<int>(std::count_if(held_.begin(), held_.end(),
                                        [](const auto& entry) { return !entry.second.dropped; }));
}

std::string WorkLoop::phase_for(const std::string& phase) const {
  if (phase != "benchmarking" && phase != "proving") return phase;
  std::lock_guard lock(mu_);
  if (!work_ && held_.empty()) return phase;
  return held_.empty() ? "idle" : "proving";
}

// --- workers -------------------------------------------------------------------------------------

void WorkLoop::set_slots(int slots) {
  std::lock_guard lock(mu_);
  slots_ = std::clamp(slots, 0, kMaxHeldJobs);
  cv_.notify_all();
}

bool WorkLoop::wants_workers() const {
  std::lock_guard lock(mu_);
  return work_ || !held_.empty();
}

int WorkLoop::busy_slots_locked() const {
  return static_cast<int>(std::count_if(held_.begin(), held_.end(), [](const auto& entry) {
    return entry.second.stage != Stage::Uploading;
  }));
}

int WorkLoop::lease_room_locked() const {
  // Results waiting for upload count too, up to as many as there are slots: when the manager
  // takes results slower than they are proved, leasing more would only hold more leases whose
  // proofs wait, and the heartbeat would name ever more jobs.
  const int held = static_cast<int>(held_.size());
  const int cap = std::min(2 * slots_, kMaxHeldJobs);
  return std::max(0, std::min(slots_ - busy_slots_locked(), cap - held));
}

bool WorkLoop::dropped(std::int64_t id, int attempt) const {
  std::lock_guard lock(mu_);
  auto it = held_.find(id);
  return stopping_ || it == held_.end() || it->second.job.attempt != attempt || it->second.dropped;
}

void WorkLoop::forget_locked(std::int64_t id) {
  held_.erase(id);
  ready_.erase(std::remove(ready_.begin(), ready_.end(), id), ready_.end());
  cv_.notify_all();
}

std::optional<ProofOutcome> WorkLoop::prove_next(std::chrono::milliseconds wait,
                                                 const std::function<ProofOutcome(ProofJob)>& prove,
                                                 const std::function<bool()>& interrupted) {
  LeasedJob job;
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, wait, [&] { return stopping_ || !ready_.empty(); });
    if (stopping_ || ready_.empty()) return std::nullopt;
    const std::int64_t id = ready_.front();
    ready_.pop_front();
    auto it = held_.find(id);
    if (it == held_.end() || it->second.dropped) return std::nullopt;
    it->second.stage = Stage::Fetching;
    job = it->second.job;
  }
  const std::int64_t id = job.id;
  const int attempt = job.attempt;
  auto input = client_.fetch_input(job, [this, id, attempt] { return dropped(id, attempt); });

  std::unique_lock lock(mu_);
  auto it = held_.find(id);
  const bool ours = it != held_.end() && it->second.job.attempt == attempt;
  if (!ours) return std::nullopt;
  if (it->second.dropped) {
    forget_locked(id);
    return std::nullopt;
  }
  if (!input) {
    const InputError& e = input.error();
    if (e.kind == InputError::Kind::Cancelled) {
      // Stopping: keep the lease until the agent is gone (it is named while we live).
      it->second.stage = Stage::Queued;
      ready_.push_front(id);
    } else if (e.kind == InputError::Kind::NotOurs) {
      if (options_.log)
        options_.log("job " + std::to_string(id) + " is no longer ours: " + e.message);
      ++counters_.lost;
      forget_locked(id);
    } else {
      if (options_.log) options_.log("job " + std::to_string(id) + " input failed: " + e.message);
      it->second.stage = Stage::Uploading;
      JobReport report;
      report.job_id = id;
      report.attempt = attempt;
      report.message = "input: " + e.message;
      uploads_.push_back(Upload{id, attempt, false, std::move(report)});
      cv_.notify_all();
    }
    return std::nullopt;
  }
  it->second.stage = Stage::Proving;
  uploads_.push_back(Upload{id, attempt, true, {}});
  cv_.notify_all();
  lock.unlock();

  ProofJob proof_job;
  proof_job.input = std::move(*input);
  proof_job.kind = job.kind;
  proof_job.job_id = id;
  ProofOutcome out = prove(std::move(proof_job));
  const bool cut_short = out.kind != ProofOutcome::Kind::Completed &&
                         out.kind != ProofOutcome::Kind::Failed && interrupted && interrupted();

  lock.lock();
  it = held_.find(id);
  if (it == held_.end() || it->second.job.attempt != attempt) return out;
  if (it->second.dropped) {
    forget_locked(id);
    // A proof cancelled because its job was dropped says nothing of the prover.
    if (out.kind == ProofOutcome::Kind::Cancelled) return std::nullopt;
    return out;
  }
  if (out.kind == ProofOutcome::Kind::Stopped || cut_short) {
    // Not the job's failure: it runs again once the prover is back, under the same lease.
    ++counters_.requeued;
    it->second.stage = Stage::Queued;
    ready_.push_front(id);
    cv_.notify_all();
    return out;
  }
  JobReport report;
  report.job_id = id;
  report.attempt = attempt;
  report.ok = out.kind == ProofOutcome::Kind::Completed;
  if (report.ok) {
    ++counters_.proved;
    report.proof = std::move(out.proof);
    out.proof.clear();
    report.prove_ms = out.seconds * 1000;
    report.gpu_ms = out.gpu_ms;
    report.queue_ms = out.queue_ms;
  } else {
    report.message = std::string(to_string(out.kind)) + ": " + out.message;
    report.oom = out.kind == ProofOutcome::Kind::OutOfMemory;
  }
  it->second.stage = Stage::Uploading;
  uploads_.push_back(Upload{id, attempt, false, std::move(report)});
  cv_.notify_all();
  return out;
}

// --- threads -------------------------------------------------------------------------------------

bool WorkLoop::wait_for(double seconds) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stopping_; });
  return !stopping_;
}

void WorkLoop::feeder_loop() {
  std::mt19937_64 rng(std::random_device{}());
  int failures = 0;
  while (true) {
    int want = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || (work_ && lease_room_locked() > 0); });
      if (stopping_) return;
      want = lease_room_locked();
    }
    auto leased = client_.lease(want);
    if (!leased) {
      if (options_.log) options_.log("cannot lease jobs: " + leased.error().message);
      const double delay = market::full_jitter_delay_s(
          std::min(failures++, 6), options_.lease_retry_base_s, options_.lease_retry_max_s, rng);
      if (!wait_for(delay)) return;
      continue;
    }
    failures = 0;
    std::lock_guard lock(mu_);
    for (auto& job : *leased) {
      if (options_.log) {
        options_.log("leased job " + std::to_string(job.id) + " attempt " +
                     std::to_string(job.attempt) + " (" + core::to_string(job.kind) + ", " +
                     std::to_string(job.input_bytes) + " bytes)");
      }
      ++counters_.leased;
      const std::int64_t id = job.id;
      ready_.erase(std::remove(ready_.begin(), ready_.end(), id), ready_.end());
      held_[id] = Held{std::move(job), Stage::Queued, false};
      ready_.push_back(id);
    }
    cv_.notify_all();
  }
}

void WorkLoop::uploader_loop() {
  while (true) {
    Upload upload;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return uploads_closed_ || !uploads_.empty(); });
      if (uploads_.empty()) return;
      upload = uploads_.front();
    }
    const std::int64_t id = upload.job_id;
    const int attempt = upload.attempt;
    auto cancelled = [this, id, attempt] {
      std::lock_guard lock(mu_);
      auto it = held_.find(id);
      return uploads_closed_ || it == held_.end() || it->second.job.attempt != attempt ||
             it->second.dropped;
    };
    const Delivery d = upload.started ? client_.report_started(id, attempt, cancelled)
                                      : client_.report_result(upload.result, cancelled);
    std::lock_guard lock(mu_);
    uploads_.pop_front();
    auto it = held_.find(id);
    const bool ours = it != held_.end() && it->second.job.attempt == attempt;
    if (upload.started) {
      if (d.kind == Delivery::Kind::Refused && ours) {
        // The job is not ours any more: its proof's result would be refused too.
        if (options_.log)
          options_.log("job " + std::to_string(id) + " was taken back: " + d.reason);
        it->second.dropped = true;
        ++counters_.lost;
      }
    } else {
      ++counters_.reported;
      if (options_.log) {
        options_.log("job " + std::to_string(id) + " result " + to_string(d.kind) +
                     (d.reason.empty() ? "" : ": " + d.reason));
      }
      if (ours) forget_locked(id);
    }
    cv_.notify_all();
  }
}

WorkLoop::Counters WorkLoop::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

}  // namespace pf::agent
