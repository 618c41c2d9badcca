// JobQueue: construction, the clients' side (submit, await, cancel, status, listings) and the
// manager's (instance closed, tick, shutdown). Agents' side: job_queue_agents.cpp.
#include "jobs/job_queue.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "core/job_lease.h"
#include "core/job_outcome.h"
#include "core/text.h"
#include "jobs/job_queue_impl.h"
#include "store/store.h"
#include "util/sha256.h"

namespace pf::jobs {
namespace {

using Code = JobError::Code;

constexpr std::size_t kMaxRequestIdBytes = 256;
// The retention sweep lists the input directory: often enough that disk is freed within a
// minute of a job's retention ending, rarely enough to cost nothing.
constexpr double kSweepEveryS = 60;
// How often tick() records the queue alive: the downtime a restart measures is longer than the
// real one by at most this (plus a tick), in the lease holders' favour.
constexpr double kAliveEveryS = 5;
constexpr const char* kObservedSinceKey = "jobs.observed_since";
// The last time this queue recorded itself running (every tick): after a restart, the downtime
// since then is not held against leases (core/job_lease.h).
constexpr const char* kAliveAtKey = "jobs.alive_at";

// A setting holding a number (epoch seconds); nullopt when absent.
std::optional<double> number_setting(store::Store& store, const char* key) {
  auto text = store.setting(key);
  if (!text) return std::nullopt;
  try {
    return std::stod(*text);
  } catch (const std::exception&) {
    throw store::StoreError(std::string("setting ") + key + " is not a number: '" + *text + "'");
  }
}

std::optional<JobError> check_request(const SubmitRequest& r, const JobQueueConfig& config) {
  if (r.request_id.empty()) return job_error(Code::InvalidArgument, "request_id: empty");
  if (r.request_id.size() > kMaxRequestIdBytes) {
    return job_error(Code::InvalidArgument, "request_id: " + std::to_string(r.request_id.size()) +
                                                " bytes, longer than " +
                                                std::to_string(kMaxRequestIdBytes));
  }
  for (unsigned char c : r.request_id) {
    if (c < 0x20 || c > 0x7e) {
      return job_error(Code::InvalidArgument, "request_id: not printable ASCII");
    }
  }
  if (r.client.size() > kMaxRequestIdBytes) {
    return job_error(Code::InvalidArgument,
                     "client: longer than " + std::to_string(kMaxRequestIdBytes) + " bytes");
  }
  if (r.input.empty()) return job_error(Code::InvalidArgument, "input: empty");
  if (static_cast<std::int64_t>(r.input.size()) > config.max_input_bytes) {
    return job_error(Code::ResourceExhausted,
                     "input: " + std::to_string(r.input.size()) + " bytes is over the limit of " +
                         std::to_string(config.max_input_bytes) + " bytes ([jobs] max_input_mib)");
  }
  if (r.deadline_s && !(std::isfinite(*r.deadline_s) && *r.deadline_s > 0)) {
    return job_error(Code::InvalidArgument, "deadline: must be a positive number of seconds");
  }
  return std::nullopt;
}

// The job `client` asked for with `request_id`: request ids are per client. A job recorded
// before clients were (schema < 12, client "") is any client's, as every job was then, so a
// client returning after the upgrade joins the job it was waiting for.
std::optional<core::Job> stored_client_job(store::Store& store, const std::string& client,
                                           const std::string& request_id) {
  if (auto job = store.client_job(client, request_id)) return job;
  if (client.empty()) return std::nullopt;
  return store.client_job("", request_id);
}

JobError unavailable(const std::exception& e) {
  return job_error(Code::Unavailable, e.what());
}

// What a re-submission changes in the row: a fresh run of the job with the request as sent now.
void restart(core::Job& job, const SubmitRequest& r, const InputStore::Stored& input, double now,
             double deadline_s) {
  job.kind = r.kind;
  job.priority = r.priority;
  job.state = core::JobState::Queued;
  job.input_digest = input.digest;
  job.input_bytes = input.bytes;
  job.failures = 0;
  job.lease_expires_at = 0;
  job.submitted_at = now;
  job.deadline_at = now + deadline_s;
  job.assigned_at = job.started_at = job.finished_at = job.delivered_at = 0;
  job.proof_digest.clear();
  job.prove_ms = job.gpu_ms = job.queue_ms = 0;
}

}  // namespace

void Effects::run(const JobQueueHooks& hooks) const {
  if (hooks.event) {
    for (const auto& [instance_id, message] : events) hooks.event(instance_id, message);
  }
  if (hooks.strike) {
    for (const auto& [instance_id, strike] : strikes) hooks.strike(instance_id, strike);
  }
}

std::string describe(const core::Job& job) {
  return "job " + std::to_string(job.id) + " (request " + job.request_id + ", " +
         core::to_string(job.kind) + ")";
}

core::JobEvent timeline_event(const core::Job& job, core::JobEventKind kind, double at,
                              std::string detail) {
  return core::JobEvent{job.id, at, kind, job.attempts, job.instance_id, std::move(detail)};
}

JobQueue::Impl::Impl(store::Store& store_in, JobQueueConfig config_in, JobQueueHooks hooks_in,
                     Clock clock_in)
    : store(store_in),
      config(std::move(config_in)),
      hooks(std::move(hooks_in)),
      clock(std::move(clock_in)),
      inputs(store, clock) {
  const double now = clock();
  opened_at = now;
  // Leases held when the manager stopped keep what they had left then (renewals included):
  // their agents name them on their next heartbeat; a lease that had run out returns at once.
  const auto alive_at = number_setting(store, kAliveAtKey);
  std::vector<core::Job> restored;
  for (auto& job : store.open_jobs()) {
    if (core::is_leased(job.state)) {
      job.lease_expires_at =
          core::restored_lease_expiry(job.lease_expires_at, alive_at, now, config.lease_s);
      if (job.hedge_instance_id) {
        job.hedge_lease_expires_at =
            core::restored_lease_expiry(job.hedge_lease_expires_at, alive_at, now, config.lease_s);
      }
      restored.push_back(job);
    }
    open.emplace(job.id, std::move(job));
  }
  // Stored too: a second restart before the next renewal starts from these expiries.
  store.transaction([&] {
    for (const auto& job : restored) store.update_job(job);
  });
  host_failures_in_a_row = store.job_failure_streaks();
  if (auto since = number_setting(store, kObservedSinceKey)) {
    observed_since = *since;
  } else {
    observed_since = now;
    store.put_setting(kObservedSinceKey, std::to_string(now));
  }
}

void JobQueue::Impl::fenced(const std::function<void()>& write) {
  store.transaction([&] {
    if (hooks.fence) hooks.fence();
    write();
  });
}

void JobQueue::Impl::commit(const std::vector<core::Job>& jobs,
                            const std::vector<core::JobEvent>& events,
                            const std::function<void()>& also) {
  store.transaction([&] {
    if (hooks.fence) hooks.fence();
    if (also) also();
    for (const auto& job : jobs) store.update_job(job);
    store.add_job_events(events);
  });
  for (const auto& job : jobs) {
    if (core::is_terminal(job.state)) {
      open.erase(job.id);
    } else {
      open[job.id] = job;
    }
  }
}

void JobQueue::Impl::requeue(core::Job& job) {
  job.state = core::JobState::Queued;
  job.lease_expires_at = 0;
  job.assigned_at = 0;
  job.started_at = 0;
  drop_hedge(job);
}

void JobQueue::Impl::drop_hedge(core::Job& job) {
  job.hedge_instance_id.reset();
  job.hedge_assigned_at = 0;
  job.hedge_lease_expires_at = 0;
}

void JobQueue::Impl::promote_hedge(core::Job& job) {
  job.instance_id = job.hedge_instance_id;
  job.assigned_at = job.hedge_assigned_at;
  job.lease_expires_at = job.hedge_lease_expires_at;
  job.started_at = 0;  // the hedge's own start was not recorded: its lease stands for it
  drop_hedge(job);
}

std::map<std::int64_t, int> JobQueue::Impl::held_counts() const {
  std::map<std::int64_t, int> held;
  for (const auto& [id, job] : open) {
    if (!core::is_leased(job.state)) continue;
    if (job.instance_id) ++held[*job.instance_id];
    if (job.hedge_instance_id) ++held[*job.hedge_instance_id];
  }
  return held;
}

void JobQueue::Impl::wake_workers() {
  ++work_generation;
  work_cv.notify_all();
}

std::optional<core::Job> JobQueue::Impl::find(std::int64_t job_id) {
  if (auto it = open.find(job_id); it != open.end()) return it->second;
  return store.job(job_id);
}

JobQueue::JobQueue(store::Store& store, JobQueueConfig config, JobQueueHooks hooks, Clock clock)
    : impl_(std::make_unique<Impl>(store, std::move(config), std::move(hooks), std::move(clock))) {}

JobQueue::~JobQueue() {
  shutdown();
}

// --- clients -------------------------------------------------------------------------------

JobResult<Submitted> JobQueue::submit(const SubmitRequest& request) {
  Impl& q = *impl_;
  if (auto bad = check_request(request, q.config)) return tl::unexpected(*bad);
  const double deadline_s = request.deadline_s.value_or(q.config.default_deadline_s);
  // The input's digest, computed only when the request_id is known (a retry): a retry joins
  // only with the input its job was recorded with.
  std::optional<std::string> digest;
  const auto same_input = [&](const core::Job& existing) {
    if (!digest) digest = util::sha256_hex(request.input);
    return existing.input_digest == *digest;
  };
  // A known request_id that needs no new input joins without touching the disk.
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    try {
      if (auto existing = stored_client_job(q.store, request.client, request.request_id)) {
        const bool kept =
            existing->state != core::JobState::Done || q.store.job_proof(existing->id).has_value();
        const auto outcome = core::resubmission_outcome(*existing, kept, same_input(*existing));
        if (outcome.action == core::Resubmission::Join) {
          return Submitted{*q.find(existing->id), true, false};
        }
        if (outcome.action == core::Resubmission::Conflict) {
          return tl::unexpected(job_error(Code::AlreadyExists, outcome.reason));
        }
      } else if (static_cast<int>(q.open.size()) >= q.config.max_open_jobs) {
        return tl::unexpected(job_error(
            Code::ResourceExhausted,
            "queue full: " + std::to_string(q.open.size()) + " open jobs ([jobs] max_open_jobs)"));
      }
    } catch (const store::StoreError& e) {
      return tl::unexpected(unavailable(e));
    }
  }

  // The input is stored whole before the row that names it (the sweep's grace keeps it until
  // then), outside the queue's lock: a large input does not hold up leases and heartbeats.
  InputStore::Stored input;
  try {
    input = q.inputs.put(request.input, digest.value_or(std::string()));
  } catch (const std::exception& e) {
    return tl::unexpected(unavailable(e));
  }

  Effects effects;
  Submitted out;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    const double now = q.clock();
    try {
      // Looked up again: a concurrent submit of the same request_id may have won meanwhile.
      if (auto existing = stored_client_job(q.store, request.client, request.request_id)) {
        const bool kept =
            existing->state != core::JobState::Done || q.store.job_proof(existing->id).has_value();
        const auto outcome =
            core::resubmission_outcome(*existing, kept, existing->input_digest == input.digest);
        core::Job job = *q.find(existing->id);
        if (outcome.action == core::Resubmission::Join) return Submitted{job, true, false};
        if (outcome.action == core::Resubmission::Conflict) {
          return tl::unexpected(job_error(Code::AlreadyExists, outcome.reason));
        }
        if (static_cast<int>(q.open.size()) >= q.config.max_open_jobs) {
          return tl::unexpected(job_error(Code::ResourceExhausted, "queue full"));
        }
        if (outcome.action == core::Resubmission::Redo && job.instance_id) {
          const std::int64_t maker = *job.instance_id;
          ++job.rejections;
          if (std::find(job.avoid_instances.begin(), job.avoid_instances.end(), maker) ==
              job.avoid_instances.end()) {
            job.avoid_instances.push_back(maker);
          }
          core::Strike strike;
          strike.kind = core::StrikeKind::RejectedProof;
          strike.instance_id = maker;
          strike.at = now;
          strike.reason = describe(job) + ": " + outcome.reason;
          effects.strikes.emplace_back(maker, strike);
          effects.events.emplace_back(maker, describe(job) + ": " + outcome.reason +
                                                 "; proving it again on another instance");
        }
        restart(job, request, input, now, deadline_s);
        job.error = outcome.reason;
        q.commit({job}, {timeline_event(job, core::JobEventKind::Resubmitted, now,
                                        outcome.reason + "; a new run, due in " +
                                            core::fixed(deadline_s, 0) + " s")});
        out = Submitted{job, false, true};
      } else {
        core::Job job;
        job.client = request.client;
        job.request_id = request.request_id;
        job.kind = request.kind;
        job.priority = request.priority;
        job.state = core::JobState::Queued;
        job.input_digest = input.digest;
        job.input_bytes = input.bytes;
        job.submitted_at = now;
        job.deadline_at = now + deadline_s;
        q.fenced([&] {
          job.id = q.store.insert_job(job);
          q.store.add_job_events(
              {timeline_event(job, core::JobEventKind::Recorded, now,
                              std::to_string(job.input_bytes) + " bytes of input, due in " +
                                  core::fixed(deadline_s, 0) + " s" +
                                  (job.client.empty() ? "" : ", from " + job.client))});
        });
        q.open.emplace(job.id, job);
        out = Submitted{job, false, false};
      }
    } catch (const store::StoreError& e) {
      return tl::unexpected(unavailable(e));
    }
    q.wake_workers();
    q.enter(&effects);
  }
  effects.run(q.hooks);
  return out;
}

JobResult<std::optional<Finished>> JobQueue::await(std::int64_t job_id,
                                                   std::chrono::milliseconds timeout) {
  Impl& q = *impl_;
  const auto until = std::chrono::steady_clock::now() + timeout;
  std::unique_lock lock(q.mu);
  q.enter(nullptr);
  for (;;) {
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    try {
      if (!q.open.contains(job_id)) {
        auto job = q.store.job(job_id);
        if (!job) {
          return tl::unexpected(job_error(Code::NotFound, "no job " + std::to_string(job_id)));
        }
        Finished done{*job, {}};
        if (job->state == core::JobState::Done) {
          auto proof = q.store.job_proof(job_id);
          if (!proof) {
            return tl::unexpected(job_error(
                Code::FailedPrecondition,
                describe(*job) + ": its proof is no longer kept (retention); submit it again"));
          }
          done.proof = std::move(*proof);
          if (done.job.delivered_at == 0) {
            const double now = q.clock();
            done.job.delivered_at = now;
            const double spare = done.job.deadline_at - now;
            const std::string detail =
                core::fixed(now - done.job.submitted_at, 1) + " s after it was submitted, " +
                (done.job.deadline_at <= 0 ? std::string("no deadline")
                 : spare >= 0              ? core::fixed(spare, 1) + " s before its deadline"
                                           : core::fixed(-spare, 1) + " s after its deadline");
            q.fenced([&] {
              q.store.update_job(done.job);
              q.store.add_job_events(
                  {timeline_event(done.job, core::JobEventKind::Delivered, now, detail)});
            });
          }
        }
        return std::optional<Finished>(std::move(done));
      }
    } catch (const store::StoreError& e) {
      return tl::unexpected(unavailable(e));
    }
    if (q.finished_cv.wait_until(lock, until) == std::cv_status::timeout &&
        q.open.contains(job_id) && !q.stopping) {
      return std::optional<Finished>();
    }
  }
}

JobResult<void> JobQueue::undeliver(std::int64_t job_id) {
  Impl& q = *impl_;
  std::lock_guard lock(q.mu);
  try {
    auto job = q.store.job(job_id);
    if (!job || job->state != core::JobState::Done || job->delivered_at == 0) return {};
    job->delivered_at = 0;
    q.fenced([&] {
      q.store.update_job(*job);
      q.store.add_job_events({timeline_event(
          *job, core::JobEventKind::Undelivered, q.clock(),
          "the client left before the proof reached it: its next call is a retry")});
    });
    return {};
  } catch (const store::StoreError& e) {
    return tl::unexpected(unavailable(e));
  }
}

JobResult<bool> JobQueue::cancel(std::int64_t job_id) {
  Impl& q = *impl_;
  Effects effects;
  bool was_leased = false;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    try {
      auto it = q.open.find(job_id);
      if (it == q.open.end()) {
        if (!q.store.job(job_id)) {
          return tl::unexpected(job_error(Code::NotFound, "no job " + std::to_string(job_id)));
        }
        return false;
      }
      core::Job job = it->second;
      was_leased = core::is_leased(job.state);
      job.state = core::JobState::Cancelled;
      job.finished_at = q.clock();
      job.lease_expires_at = 0;
      job.error = "cancelled by the client";
      q.commit({job}, {timeline_event(job, core::JobEventKind::Cancelled, job.finished_at,
                                      was_leased && job.instance_id
                                          ? "by the client, while leased to instance " +
                                                std::to_string(*job.instance_id)
                                          : std::string("by the client, while queued"))});
      if (was_leased && job.instance_id) {
        effects.events.emplace_back(*job.instance_id,
                                    describe(job) + " cancelled by the client while leased here");
      }
    } catch (const store::StoreError& e) {
      return tl::unexpected(unavailable(e));
    }
    q.finished_cv.notify_all();
    q.wake_workers();
    q.enter(&effects);
  }
  effects.run(q.hooks);
  return was_leased;
}

QueueStatus JobQueue::status() {
  Impl& q = *impl_;
  const auto workers = q.hooks.workers ? q.hooks.workers() : std::vector<core::WorkerView>{};
  QueueStatus out;
  std::lock_guard lock(q.mu);
  q.enter(nullptr);
  const std::map<std::int64_t, int> held = q.held_counts();
  int queued_total = 0;
  for (const auto& [id, job] : q.open) {
    auto& counts = out.by_kind[job.kind];
    if (job.state == core::JobState::Queued) {
      ++counts.pending;
      ++queued_total;
    } else {
      ++counts.in_progress;
    }
  }
  for (const auto& w : workers) {
    const auto it = held.find(w.instance_id);
    out.free_slots += std::max(0, w.slots - (it == held.end() ? 0 : it->second));
  }
  out.hedges_started = q.hedges_started;
  out.hedges_won = q.hedges_won;
  // Censoring for Curio's backpressure: queued jobs that free slots will take at once are not
  // "pending"; only the backlog beyond them is.
  int absorb = std::min(out.free_slots, queued_total);
  for (auto& [kind, counts] : out.by_kind) {
    const int taken = std::min(absorb, counts.pending);
    counts.pending -= taken;
    absorb -= taken;
  }
  try {
    const auto counts = q.store.job_counts();
    const auto count = [&](core::JobState s) {
      const auto it = counts.find(s);
      return it == counts.end() ? std::int64_t{0} : it->second;
    };
    out.completed = count(core::JobState::Done);
    out.failed = count(core::JobState::Failed);
    out.cancelled = count(core::JobState::Cancelled);
  } catch (const store::StoreError&) {
    // The live counts above are what backpressure needs; totals come back with the store.
  }
  return out;
}

std::optional<core::Job> JobQueue::job(std::int64_t job_id) {
  std::lock_guard lock(impl_->mu);
  impl_->enter(nullptr);
  return impl_->find(job_id);
}

std::optional<core::Job> JobQueue::job_by_request(const std::string& request_id) {
  std::lock_guard lock(impl_->mu);
  impl_->enter(nullptr);
  auto job = impl_->store.job_by_request(request_id);
  if (!job) return std::nullopt;
  return impl_->find(job->id);
}

std::optional<core::Job> JobQueue::client_job(const std::string& client,
                                              const std::string& request_id) {
  std::lock_guard lock(impl_->mu);
  impl_->enter(nullptr);
  auto job = stored_client_job(impl_->store, client, request_id);
  if (!job) return std::nullopt;
  return impl_->find(job->id);
}

std::vector<double> JobQueue::arrivals_since(double since) {
  return impl_->store.job_arrivals_since(since);
}

double JobQueue::observed_since() {
  std::lock_guard lock(impl_->mu);
  impl_->enter(nullptr);
  return impl_->observed_since;
}

std::vector<core::Job> JobQueue::list(const store::JobFilter& filter, std::size_t limit,
                                      std::int64_t before_id) {
  std::lock_guard lock(impl_->mu);
  impl_->enter(nullptr);
  auto jobs = impl_->store.jobs(filter, limit, before_id);
  for (auto& job : jobs) {
    if (auto it = impl_->open.find(job.id); it != impl_->open.end()) job = it->second;
  }
  return jobs;
}

std::vector<core::JobEvent> JobQueue::timeline(std::int64_t job_id, std::size_t limit) {
  // The store's transaction order is the timeline's: no need for the queue's lock.
  return impl_->store.job_events(job_id, limit);
}

// --- manager -------------------------------------------------------------------------------

void JobQueue::Impl::drain_closed(Effects& effects) {
  std::vector<std::pair<std::int64_t, std::string>> closed;
  {
    std::lock_guard guard(closed_mu);
    closed.swap(closed_pending);
  }
  for (std::size_t i = 0; i < closed.size(); ++i) {
    const auto& [instance_id, why] = closed[i];
    std::vector<core::Job> returned;
    std::vector<core::Job> changed;  // returned, and hedged jobs that keep their other copy
    std::vector<core::JobEvent> steps;
    const double now = clock();
    const std::string closed_why = "instance " + std::to_string(instance_id) + ": " + why;
    for (const auto& [id, held] : open) {
      if (!core::is_leased(held.state)) continue;
      core::Job job = held;
      if (job.hedge_instance_id == instance_id) {
        drop_hedge(job);  // the holder proves on
        changed.push_back(job);
      } else if (job.instance_id == instance_id && job.hedge_instance_id) {
        promote_hedge(job);
        steps.push_back(timeline_event(job, core::JobEventKind::Leased, now,
                                       "holds it alone now (the hedge's copy): " + closed_why));
        changed.push_back(job);
      } else if (job.instance_id == instance_id) {
        requeue(job);
        steps.push_back(timeline_event(job, core::JobEventKind::Requeued, now, closed_why));
        returned.push_back(job);
        changed.push_back(job);
      }
    }
    if (changed.empty()) continue;
    try {
      commit(changed, steps);
    } catch (const store::StoreError&) {
      // Tried again by the next caller; the leases also expire on their own meanwhile.
      std::lock_guard guard(closed_mu);
      closed_pending.insert(closed_pending.begin(), closed.begin() + static_cast<long>(i),
                            closed.end());
      return;
    }
    wake_workers();
    if (returned.empty()) continue;
    std::string ids;
    for (const auto& job : returned) ids += (ids.empty() ? "" : ", ") + std::to_string(job.id);
    effects.events.emplace_back(
        instance_id,
        std::to_string(returned.size()) + " job(s) returned to the queue (" + ids + "): " + why);
  }
}

void JobQueue::Impl::enter(Effects* effects) {
  drain_closed(deferred);
  if (effects == nullptr) return;
  for (auto& e : deferred.events) effects->events.push_back(std::move(e));
  for (auto& st : deferred.strikes) effects->strikes.push_back(std::move(st));
  deferred = Effects{};
}

void JobQueue::return_jobs_of(std::int64_t instance_id, const std::string& why) {
  Impl& q = *impl_;
  {
    std::lock_guard guard(q.closed_mu);
    q.closed_pending.emplace_back(instance_id, why);
  }
  Effects effects;
  {
    std::unique_lock lock(q.mu, std::try_to_lock);
    if (!lock.owns_lock()) return;  // the holder or the next caller applies it
    q.enter(&effects);
  }
  effects.run(q.hooks);
}

void JobQueue::tick() {
  Impl& q = *impl_;
  Effects effects;
  std::optional<double> sweep_inputs_since;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return;
    const double now = q.clock();
    std::vector<core::Job> expired;
    for (const auto& [id, job] : q.open) {
      if (!core::is_leased(job.state)) continue;
      if (job.lease_expires_at <= now ||
          (job.hedge_instance_id && job.hedge_lease_expires_at <= now))
        expired.push_back(job);
    }
    if (!expired.empty()) {
      std::vector<core::JobEvent> steps;
      for (auto& job : expired) {
        const std::string why =
            "attempt " + std::to_string(job.attempts) + "'s lease was not renewed";
        const bool holder_lost = job.lease_expires_at <= now;
        if (job.hedge_instance_id && job.hedge_lease_expires_at <= now) {
          effects.events.emplace_back(*job.hedge_instance_id,
                                      describe(job) + ": this hedge's lease was not renewed");
          Impl::drop_hedge(job);  // the holder proves on, or is handled below
        }
        if (!holder_lost) continue;
        if (job.hedge_instance_id) {
          if (job.instance_id) {
            effects.events.emplace_back(*job.instance_id,
                                        describe(job) + " left to its hedge: " + why);
          }
          Impl::promote_hedge(job);
          steps.push_back(timeline_event(job, core::JobEventKind::Leased, now,
                                         "holds it alone now (the hedge's copy): " + why));
          continue;
        }
        if (job.instance_id) {
          effects.events.emplace_back(*job.instance_id,
                                      describe(job) + " returned to the queue: " + why);
        }
        Impl::requeue(job);
        steps.push_back(timeline_event(job, core::JobEventKind::Requeued, now, why));
      }
      q.commit(expired, steps);
      q.wake_workers();
    }
    if (now >= q.alive_written_at + kAliveEveryS || now < q.alive_written_at) {
      q.store.put_setting(kAliveAtKey, std::to_string(now));
      q.alive_written_at = now;
    }
    if (now >= q.next_sweep_at) {
      q.next_sweep_at = now + kSweepEveryS;
      const double keep_since = now - q.config.retention_s;
      q.store.drop_job_proofs(keep_since);
      if (q.config.timeline_retention_s > 0) {
        q.store.drop_job_events(now - q.config.timeline_retention_s);
      }
      sweep_inputs_since = keep_since;
    }
    q.enter(&effects);
  }
  effects.run(q.hooks);
  // Without the queue's lock: deleting many MiB of chunks holds up no lease. Whether an input
  // is needed is read from the job rows, not from this queue's memory.
  if (sweep_inputs_since) q.inputs.sweep(*sweep_inputs_since);
}

void JobQueue::shutdown() {
  Impl& q = *impl_;
  std::lock_guard lock(q.mu);
  q.enter(nullptr);
  q.stopping = true;
  q.finished_cv.notify_all();
  q.wake_workers();
}

}  // namespace pf::jobs
