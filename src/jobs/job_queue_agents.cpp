// JobQueue, the agents' side: leases (placed by core::plan_jobs, carried out through
// jobs/lease_plan.h), input downloads, started and result reports (fenced by attempt and
// instance), lease renewal from heartbeats.
#include <algorithm>

#include "core/job_outcome.h"
#include "jobs/job_queue.h"
#include "jobs/job_queue_impl.h"
#include "store/store.h"
#include "util/sha256.h"

namespace pf::jobs {
namespace {

using Code = JobError::Code;

constexpr int kMaxJobsPerLease = 64;  // the heartbeat names at most 64 held jobs
constexpr std::int64_t kMaxInputChunk = 16LL * 1024 * 1024;
// A long-poll re-reads the fleet this often even when nothing is submitted: an instance that
// was just accepted starts taking the backlog without waiting for the next arrival.
constexpr auto kLeaseRecheck = std::chrono::seconds(2);

std::string fixed1(double v) {
  const auto tenths = static_cast<long long>(v * 10 + (v < 0 ? -0.5 : 0.5));
  return std::to_string(tenths / 10) + "." + std::to_string(std::abs(tenths % 10));
}

}  // namespace

std::optional<std::string> JobQueue::Impl::not_held(const core::Job& job, std::int64_t instance_id,
                                                    int attempt) {
  if (core::is_terminal(job.state)) {
    return describe(job) + " is already " + core::to_string(job.state);
  }
  if (!core::is_leased(job.state)) return describe(job) + " was returned to the queue";
  if (job.instance_id != instance_id && job.hedge_instance_id != instance_id) {
    return describe(job) + " is leased to another instance";
  }
  if (job.attempts != attempt) {
    return "attempt " + std::to_string(attempt) + " of " + describe(job) +
           " is not the current one (" + std::to_string(job.attempts) + ")";
  }
  return std::nullopt;
}

std::vector<core::JobPlacement> JobQueue::Impl::placements_for(
    std::int64_t instance_id, int max_jobs, std::vector<core::WorkerView> workers, double now) {
  if (!plan.current(work_generation, workers, now)) {
    if (plan.fleet_changed(workers)) wake_workers();  // waiters may be placed differently now
    std::map<std::int64_t, int> held = held_counts();
    std::vector<core::JobToPlace> queued;
    for (const auto& [id, job] : open) {
      if (!core::is_leased(job.state)) {
        queued.push_back({job.id, job.kind, job.priority, job.submitted_at, job.deadline_at,
                          job.avoid_instances});
      }
    }
    std::vector<core::WorkerView> placed_on = workers;
    for (auto& w : placed_on) w.held = held[w.instance_id];
    plan.remake(work_generation, std::move(workers), now, core::plan_jobs(now, queued, placed_on));
  }
  auto taken = plan.take(instance_id, max_jobs);
  // Every job of the plan is still queued while its generation lasts; should one not be (a
  // change that forgot to bump the generation), it is skipped and the plan made again next time.
  const auto gone = std::remove_if(taken.begin(), taken.end(), [&](const core::JobPlacement& p) {
    const auto it = open.find(p.job_id);
    return it == open.end() || it->second.state != core::JobState::Queued;
  });
  if (gone != taken.end()) {
    taken.erase(gone, taken.end());
    plan.forget();
  }
  return taken;
}

std::vector<core::Hedge> JobQueue::Impl::hedges_for(std::int64_t instance_id, int max_jobs,
                                                    const std::vector<core::WorkerView>& workers,
                                                    double now) {
  if (!config.hedging.enabled) return {};
  const std::map<std::int64_t, int> held = held_counts();
  std::vector<core::WorkerView> fleet = workers;
  std::map<std::int64_t, double> seconds_per_proof;
  for (auto& w : fleet) {
    const auto it = held.find(w.instance_id);
    w.held = it == held.end() ? 0 : it->second;
    seconds_per_proof[w.instance_id] = w.seconds_per_proof;
  }
  std::vector<core::HeldJob> at_stake;
  for (const auto& [id, job] : open) {
    if (!core::is_leased(job.state) || !job.instance_id) continue;
    core::HeldJob h;
    h.job_id = job.id;
    h.kind = job.kind;
    h.holder = *job.instance_id;
    h.started_at = job.started_at > 0 ? job.started_at : job.assigned_at;
    h.deadline_at = job.deadline_at;
    const auto spp = seconds_per_proof.find(h.holder);
    h.holder_seconds_per_proof = spp == seconds_per_proof.end() ? 0 : spp->second;
    // Heard: its last renewal (every heartbeat renews its leases), not before this queue opened.
    h.holder_heard_at = std::max(job.lease_expires_at - config.lease_s, opened_at);
    h.hedged = job.hedge_instance_id.has_value();
    h.avoid_instances = job.avoid_instances;
    at_stake.push_back(std::move(h));
  }
  return core::hedges_for(instance_id, max_jobs, now, at_stake, fleet, config.hedging);
}

JobResult<std::vector<Lease>> JobQueue::lease(std::int64_t instance_id, int max_jobs,
                                              std::chrono::milliseconds wait,
                                              const std::function<bool()>& caller_gone) {
  Impl& q = *impl_;
  if (max_jobs < 1 || max_jobs > kMaxJobsPerLease) {
    return tl::unexpected(job_error(Code::InvalidArgument,
                                    "max_jobs: must be 1.." + std::to_string(kMaxJobsPerLease)));
  }
  const auto until =
      std::chrono::steady_clock::now() + std::max(wait, std::chrono::milliseconds(0));
  for (;;) {
    // Nobody to hand jobs to: the reply would go nowhere and the jobs wait out their leases.
    if (caller_gone && caller_gone()) return std::vector<Lease>{};
    // The hook reads the Manager's state under the Manager's lock: never under ours.
    auto workers = q.hooks.workers ? q.hooks.workers() : std::vector<core::WorkerView>{};
    Effects effects;
    std::vector<Lease> out;
    {
      std::unique_lock lock(q.mu);
      q.enter(nullptr);
      if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
      const double now = q.clock();
      const bool is_worker =
          std::any_of(workers.begin(), workers.end(),
                      [&](const core::WorkerView& w) { return w.instance_id == instance_id; });
      if (is_worker) {
        std::vector<core::Job> leased;
        std::vector<core::JobEvent> steps;
        // The fleet as the hook gave it, for hedging (placements_for keeps its own copy).
        const std::vector<core::WorkerView> fleet =
            q.config.hedging.enabled ? workers : std::vector<core::WorkerView>{};
        for (const auto& p : q.placements_for(instance_id, max_jobs, std::move(workers), now)) {
          core::Job job = q.open.at(p.job_id);
          job.state = core::JobState::Assigned;
          ++job.attempts;
          job.instance_id = instance_id;
          job.assigned_at = now;
          job.started_at = 0;
          job.lease_expires_at = now + q.config.lease_s;
          steps.push_back(timeline_event(job, core::JobEventKind::Leased, now,
                                         (p.late ? "expected late: " : "") + p.reason));
          leased.push_back(std::move(job));
          effects.events.emplace_back(instance_id, describe(leased.back()) + " leased, attempt " +
                                                       std::to_string(leased.back().attempts) +
                                                       (p.late ? " (expected late)" : "") + ": " +
                                                       p.reason);
        }
        // Nothing queued for it: a slot no queued job wants may run a copy of a job at risk.
        int hedged = 0;
        if (leased.empty()) {
          for (const auto& h : q.hedges_for(instance_id, max_jobs, fleet, now)) {
            core::Job job = q.open.at(h.job_id);
            job.hedge_instance_id = instance_id;
            job.hedge_assigned_at = now;
            job.hedge_lease_expires_at = now + q.config.lease_s;
            steps.push_back(core::JobEvent{job.id, now, core::JobEventKind::Hedged, job.attempts,
                                           instance_id, h.reason});
            effects.events.emplace_back(instance_id, describe(job) + " hedged here, attempt " +
                                                         std::to_string(job.attempts) + ": " +
                                                         h.reason);
            effects.events.emplace_back(h.holder, describe(job) + " hedged on instance " +
                                                      std::to_string(instance_id) + ": " +
                                                      h.reason);
            leased.push_back(std::move(job));
            ++hedged;
          }
        }
        if (!leased.empty()) {
          try {
            q.commit(leased, steps);
          } catch (const store::StoreError& e) {
            // The placements taken are not leased: the next lease plans again.
            q.plan.forget();
            return tl::unexpected(job_error(Code::Unavailable, e.what()));
          }
          q.hedges_started += hedged;
          for (const auto& job : leased) out.push_back(Lease{job, q.config.lease_s});
        }
      }
      const std::uint64_t generation = q.work_generation;
      if (out.empty()) {
        const auto at = std::chrono::steady_clock::now();
        if (at >= until) return out;
        q.work_cv.wait_until(lock, std::min(until, at + kLeaseRecheck),
                             [&] { return q.stopping || q.work_generation != generation; });
        continue;
      }
      q.enter(&effects);
    }
    effects.run(q.hooks);
    return out;
  }
}

std::uint64_t JobQueue::plans_made() {
  std::lock_guard lock(impl_->mu);
  return impl_->plan.plans_made();
}

JobResult<InputChunk> JobQueue::read_input(std::int64_t instance_id, std::int64_t job_id,
                                           int attempt, std::int64_t offset,
                                           std::int64_t max_bytes) {
  Impl& q = *impl_;
  if (offset < 0) return tl::unexpected(job_error(Code::InvalidArgument, "offset: negative"));
  if (max_bytes < 1) return tl::unexpected(job_error(Code::InvalidArgument, "max_bytes: < 1"));
  std::string digest;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    std::optional<core::Job> job;
    try {
      job = q.find(job_id);
    } catch (const store::StoreError& e) {
      return tl::unexpected(job_error(Code::Unavailable, e.what()));
    }
    if (!job) return tl::unexpected(job_error(Code::NotFound, "no job " + std::to_string(job_id)));
    if (auto why = Impl::not_held(*job, instance_id, attempt)) {
      return tl::unexpected(job_error(Code::FailedPrecondition, *why));
    }
    digest = job->input_digest;
  }
  // The input is read without the lock: it cannot go away while the job is open (the sweep
  // keeps inputs of open jobs) and its content never changes (its name is its digest).
  auto range = q.inputs.read(digest, offset, std::min(max_bytes, kMaxInputChunk));
  if (!range) return tl::unexpected(job_error(Code::Unavailable, range.error()));
  // The chunk that ends the input is the download's end on the job's timeline (a resumed
  // download's earlier chunks are not steps of their own).
  const auto end = offset + static_cast<std::int64_t>(range->bytes.size());
  if (!range->bytes.empty() && end == range->total) {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    try {
      const auto job = q.find(job_id);
      if (job && !Impl::not_held(*job, instance_id, attempt)) {
        q.fenced([&] {
          q.store.add_job_events({timeline_event(*job, core::JobEventKind::InputFetched, q.clock(),
                                                 std::to_string(range->total) + " bytes")});
        });
      }
    } catch (const store::StoreError& e) {
      return tl::unexpected(job_error(Code::Unavailable, e.what()));
    }
  }
  return InputChunk{std::move(range->bytes), offset, range->total, digest};
}

JobResult<ReportAck> JobQueue::started(std::int64_t instance_id, std::int64_t job_id, int attempt) {
  Impl& q = *impl_;
  Effects effects;
  ReportAck ack;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    try {
      auto job = q.find(job_id);
      if (!job) {
        return tl::unexpected(job_error(Code::NotFound, "no job " + std::to_string(job_id)));
      }
      if (auto why = Impl::not_held(*job, instance_id, attempt)) return ReportAck{false, *why};
      if (job->instance_id != instance_id) {
        // The hedge's copy: the job's state and start are its holder's.
        q.fenced([&] {
          q.store.add_job_events({core::JobEvent{job->id, q.clock(), core::JobEventKind::Proving,
                                                 attempt, instance_id, "the hedge's copy"}});
        });
        return ReportAck{true, "proving"};
      }
      if (job->state == core::JobState::Proving) return ReportAck{false, "already proving"};
      job->state = core::JobState::Proving;
      job->started_at = q.clock();
      const double waited = job->started_at - job->assigned_at;
      q.commit({*job}, {timeline_event(*job, core::JobEventKind::Proving, job->started_at,
                                       fixed1(waited) + " s after the lease")});
      effects.events.emplace_back(instance_id,
                                  describe(*job) + " proving, attempt " + std::to_string(attempt));
      ack = ReportAck{true, "proving"};
    } catch (const store::StoreError& e) {
      return tl::unexpected(job_error(Code::Unavailable, e.what()));
    }
    q.enter(&effects);
  }
  effects.run(q.hooks);
  return ack;
}

JobResult<ReportAck> JobQueue::report(std::int64_t instance_id, const ProofReport& r) {
  Impl& q = *impl_;
  if (r.ok && r.proof.empty()) {
    return tl::unexpected(job_error(Code::InvalidArgument, "proof: empty"));
  }
  const std::string proof_digest = r.ok ? util::sha256_hex(r.proof) : std::string();
  // An untrusted host's proof is checked before anything stores or serves it (proof_check.h);
  // outside the queue's lock, which the check (and the sim check's input read) need not hold.
  std::optional<std::string> invalid;
  if (r.ok && q.config.proof_check != ProofCheck::None) {
    std::optional<core::Job> held;
    try {
      std::lock_guard lock(q.mu);
      held = q.find(r.job_id);
    } catch (const store::StoreError& e) {
      return tl::unexpected(job_error(Code::Unavailable, e.what()));
    }
    if (held) {
      invalid = proof_problem(
          q.config.proof_check, held->kind, r.proof, [&]() -> std::optional<std::string> {
            auto whole = q.inputs.read(held->input_digest, 0, held->input_bytes);
            if (!whole) return std::nullopt;
            return std::move(whole->bytes);
          });
    }
  }
  Effects effects;
  ReportAck ack;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    if (q.stopping) return tl::unexpected(job_error(Code::Unavailable, "shutting down"));
    try {
      auto found = q.find(r.job_id);
      if (!found) {
        return tl::unexpected(job_error(Code::NotFound, "no job " + std::to_string(r.job_id)));
      }
      core::Job job = std::move(*found);
      if (auto why = Impl::not_held(job, instance_id, r.attempt)) {
        effects.events.emplace_back(instance_id, "late result ignored: " + *why);
        ack = ReportAck{false, *why};
      } else if (r.ok && !invalid) {
        const double now = q.clock();
        // Hedged: the first valid proof wins; the other copy is dropped at its next heartbeat
        // (renew names it), and the job's maker is the instance that proved it.
        const std::optional<std::int64_t> other = !job.hedge_instance_id ? std::nullopt
                                                  : job.hedge_instance_id == instance_id
                                                      ? job.instance_id
                                                      : job.hedge_instance_id;
        const bool hedge_won = job.hedge_instance_id == instance_id;
        job.instance_id = instance_id;
        Impl::drop_hedge(job);
        if (other) {
          effects.events.emplace_back(
              *other, describe(job) + " proved first by instance " + std::to_string(instance_id) +
                          (hedge_won ? " (its hedge)" : "") + ": this copy is dropped");
        }
        job.state = core::JobState::Done;
        job.finished_at = now;
        job.lease_expires_at = 0;
        job.proof_digest = proof_digest;
        job.error.clear();
        job.prove_ms = r.prove_ms;
        job.gpu_ms = r.gpu_ms;
        job.queue_ms = r.queue_ms;
        // The row says done only together with its proof; a proof ends the host's streak.
        const bool had_streak = q.host_failures_in_a_row.count(instance_id) > 0;
        const std::string checked =
            q.config.proof_check == ProofCheck::None
                ? ""
                : ", checked (" + std::string(to_string(q.config.proof_check)) + ")";
        q.commit({job},
                 {timeline_event(job, core::JobEventKind::Proved, now,
                                 fixed1(r.prove_ms / 1000) + " s proving (GPU " +
                                     fixed1(r.gpu_ms / 1000) + " s), proof sha256 " + proof_digest +
                                     checked)},
                 [&] {
                   q.store.put_job_proof(job.id, r.proof);
                   if (had_streak) q.store.put_job_failure_streak(instance_id, 0);
                 });
        q.host_failures_in_a_row.erase(instance_id);
        if (hedge_won) ++q.hedges_won;
        effects.events.emplace_back(
            instance_id, describe(job) + " done, attempt " + std::to_string(r.attempt) + ", " +
                             fixed1(r.prove_ms / 1000) + " s proving, " +
                             fixed1(now - job.submitted_at) + " s since submitted");
        ack = ReportAck{true, "done"};
      } else {
        core::JobFailure failure;
        failure.failures_before = job.failures;
        failure.max_attempts = q.config.max_attempts;
        failure.host_failures_in_a_row = q.host_failures_in_a_row[instance_id];
        failure.strike_after_failures = q.config.strike_after_failures;
        failure.oom = r.oom && !invalid;
        // A proof that fails its check is the host's doing: struck at once, with the evidence.
        if (invalid) failure.strike_after_failures = 1;
        const auto outcome = core::job_failure_outcome(failure);
        const std::string message = invalid ? "invalid proof: " + *invalid : r.message;
        const double now = q.clock();
        if (outcome.count_failure) ++job.failures;
        if (outcome.avoid_instance &&
            std::find(job.avoid_instances.begin(), job.avoid_instances.end(), instance_id) ==
                job.avoid_instances.end()) {
          job.avoid_instances.push_back(instance_id);
        }
        job.error = message;
        // Hedged: the copy that failed leaves; the other runs on (the job neither fails nor
        // returns to the queue while a copy of it proves).
        const bool other_runs = job.hedge_instance_id.has_value();
        if (other_runs && job.hedge_instance_id == instance_id) {
          Impl::drop_hedge(job);
        } else if (other_runs) {
          Impl::promote_hedge(job);
        } else if (outcome.fail_job) {
          job.state = core::JobState::Failed;
          job.finished_at = now;
          job.lease_expires_at = 0;
        } else {
          Impl::requeue(job);
        }
        // On the instance that reported it (a hedged job's holder may have changed above).
        std::vector<core::JobEvent> steps{core::JobEvent{
            job.id, now,
            invalid ? core::JobEventKind::ProofRejected : core::JobEventKind::ProverFailed,
            r.attempt, instance_id,
            (invalid ? message + " (proof sha256 " + proof_digest + ")"
                     : message + (r.oom ? " (out of memory)" : "")) +
                "; " + (other_runs ? "the other copy runs on" : outcome.reason)}};
        if (outcome.fail_job && !other_runs) {
          steps.push_back(timeline_event(job, core::JobEventKind::Failed, now, job.error));
        }
        q.commit({job}, steps, [&] {
          q.store.put_job_failure_streak(instance_id, outcome.host_failures_in_a_row);
        });
        if (outcome.host_failures_in_a_row > 0) {
          q.host_failures_in_a_row[instance_id] = outcome.host_failures_in_a_row;
        } else {
          q.host_failures_in_a_row.erase(instance_id);
        }
        effects.events.emplace_back(instance_id, describe(job) + " failed, attempt " +
                                                     std::to_string(r.attempt) + ": " + message +
                                                     " (" + outcome.reason + ")");
        if (outcome.strike_host) {
          core::Strike strike;
          strike.kind = invalid ? core::StrikeKind::InvalidProof : core::StrikeKind::FailedProofs;
          strike.instance_id = instance_id;
          strike.at = now;
          strike.reason = invalid ? describe(job) + ", attempt " + std::to_string(r.attempt) +
                                        ": " + message + " (proof sha256 " + proof_digest + ")"
                                  : outcome.reason + "; last: " + describe(job) + ": " + message;
          effects.strikes.emplace_back(instance_id, strike);
        }
        ack = ReportAck{true, other_runs         ? "the other copy runs on"
                              : outcome.fail_job ? "failed"
                                                 : "requeued"};
      }
    } catch (const store::StoreError& e) {
      return tl::unexpected(job_error(Code::Unavailable, e.what()));
    }
    if (ack.applied) {
      q.finished_cv.notify_all();
      q.wake_workers();
    }
    q.enter(&effects);
  }
  effects.run(q.hooks);
  return ack;
}

std::vector<std::int64_t> JobQueue::renew(std::int64_t instance_id,
                                          const std::vector<std::pair<std::int64_t, int>>& held) {
  Impl& q = *impl_;
  std::vector<std::int64_t> drop;
  Effects effects;
  {
    std::lock_guard lock(q.mu);
    q.enter(nullptr);
    const double expires = q.clock() + q.config.lease_s;
    std::vector<std::int64_t> renewed;
    for (const auto& [job_id, attempt] : held) {
      auto it = q.open.find(job_id);
      if (it == q.open.end() || Impl::not_held(it->second, instance_id, attempt)) {
        drop.push_back(job_id);
        continue;
      }
      if (it->second.instance_id == instance_id) {
        it->second.lease_expires_at = expires;
      } else {
        it->second.hedge_lease_expires_at = expires;  // the hedge's copy
      }
      renewed.push_back(job_id);
    }
    // Stored so a restart knows the expiry. The agent is alive whatever the store says: a
    // failed write keeps the renewal here and only a restart would see the older expiry.
    try {
      q.fenced([&] { q.store.renew_job_leases(instance_id, renewed, expires); });
    } catch (const store::StoreError& e) {
      effects.events.emplace_back(instance_id,
                                  std::string("job lease renewal not stored: ") + e.what());
    }
    q.enter(&effects);
  }
  effects.run(q.hooks);
  return drop;
}

}  // namespace pf::jobs
