#include "agent/proof_slots.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent/machine_plan.h"

namespace pf::agent {

using nlohmann::json;

ProofOutcome ProofSlots::run_proof(ProofJob job) {
  {
    std::lock_guard lock(state_.mu);
    state_.in_flight++;
  }
  job.index = next_proof_index_.fetch_add(1);
  ProofOutcome out = prover_.prove(job);
  std::lock_guard lock(state_.mu);
  state_.in_flight--;
  return out;
}

void ProofSlots::note_peak() {
  if (auto peak = prover_.peak_memory_gib()) {
    std::lock_guard lock(state_.mu);
    state_.peak_memory_gib = std::max(state_.peak_memory_gib, *peak);
  }
}

void ProofSlots::record_completed(const ProofOutcome& out, bool warmup) {
  {
    std::lock_guard lock(state_.mu);
    state_.completed++;
    state_.consecutive_failed_proofs = 0;
    if (!warmup) state_.measured++;
    if (!warmup && state_.phase == "benchmarking" && config_.max_samples > 0 &&
        state_.measured >= config_.max_samples) {
      state_.phase = "proving";
      reporter_.heartbeat_soon(false);
    }
  }
  note_peak();
  json e = {{"type", "proof_done"},
            {"seconds", std::max(out.seconds, 1e-3)},
            {"gpu_ms", out.gpu_ms},
            {"queue_ms", out.queue_ms},
            {"phase", warmup ? "warmup" : "measured"}};
  reporter_.emit(std::move(e));
}

bool ProofSlots::record_failed(const ProofOutcome& out) {
  int streak = 0;
  {
    std::lock_guard lock(state_.mu);
    state_.failed++;
    streak = ++state_.consecutive_failed_proofs;
  }
  log_.line("proof failed: " + out.message);
  reporter_.emit_simple("error", "proof failed: " + out.message, {{"consecutive", streak}});
  return streak >= kFailedProofsBeforeRestart;
}

ProverHealth ProofSlots::settled_health() {
  ProverHealth h = prover_.health();
  for (int i = 0; i < 50 && h.running; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    h = prover_.health();
  }
  return h;
}

SessionEnd ProofSlots::run_session(const core::ProverPlan& p) {
  std::optional<SessionEnd> end;
  int target = 0;
  {
    std::lock_guard lock(state_.mu);
    target = proofs_in_flight(p, state_.concurrency_command, config_.concurrency,
                              config_.settings_concurrency);
  }
  std::vector<std::thread> workers;
  auto worker = [this, &end, &target](int id) {
    while (true) {
      {
        std::unique_lock lock(state_.mu);
        state_.cv.wait(lock,
                       [&] { return end.has_value() || state_.stop_requested || id < target; });
        if (end || state_.stop_requested) return;
      }
      // Once the manager has work for us, the slots take its jobs instead of the benchmark.
      ProofOutcome out;
      if (work_ && work_->wants_workers()) {
        auto job_out = work_->prove_next(
            std::chrono::milliseconds(250), [this](ProofJob job) { return run_proof(job); },
            [this, &end] {
              std::lock_guard lock(state_.mu);
              return end.has_value() || state_.stop_requested;
            });
        if (!job_out) continue;
        out = std::move(*job_out);
      } else {
        out = run_proof(ProofJob{});
      }
      switch (out.kind) {
        case ProofOutcome::Kind::Completed:
          record_completed(out, false);
          break;
        case ProofOutcome::Kind::Failed:
          if (record_failed(out)) {
            std::lock_guard lock(state_.mu);
            if (!end) {
              ProofOutcome why = out;
              why.kind = ProofOutcome::Kind::Transport;
              why.message = std::to_string(kFailedProofsBeforeRestart) +
                            " proofs failed in a row; last: " + out.message;
              end = SessionEnd{SessionEnd::Why::Died, why, {}};
            }
            state_.cv.notify_all();
            return;
          }
          break;
        case ProofOutcome::Kind::Transport:
        case ProofOutcome::Kind::OutOfMemory: {
          std::lock_guard lock(state_.mu);
          if (!end) end = SessionEnd{SessionEnd::Why::Died, out, {}};
          state_.cv.notify_all();
          return;
        }
        case ProofOutcome::Kind::Stopped:
          return;
        case ProofOutcome::Kind::Cancelled:  // the manager dropped the job: not a failure
          break;
      }
    }
  };
  for (int i = 0; i < target; ++i) workers.emplace_back(worker, i);
  if (work_) work_->set_slots(target);
  log_.line("proving with " + std::to_string(target) + " proofs in flight");
  SessionEnd result;
  {
    std::unique_lock lock(state_.mu);
    while (true) {
      state_.cv.wait(lock, [&] {
        return end.has_value() || state_.stop_requested || state_.replan_requested ||
               (state_.concurrency_command && *state_.concurrency_command != target);
      });
      if (end) {
        result = *end;
        break;
      }
      if (state_.stop_requested) {
        end = SessionEnd{SessionEnd::Why::Stop, {}, {}};
        result = *end;
        break;
      }
      if (state_.replan_requested) {
        state_.replan_requested = false;
        end = SessionEnd{SessionEnd::Why::Replan, {}, {}};
        result = *end;
        break;
      }
      target = *state_.concurrency_command;
      if (work_) work_->set_slots(target);
      while (static_cast<int>(workers.size()) < target) {
        workers.emplace_back(worker, static_cast<int>(workers.size()));
      }
      state_.cv.notify_all();
    }
  }
  state_.cv.notify_all();
  if (work_) work_->set_slots(0);  // held jobs keep their leases until the prover is back
  if (result.why == SessionEnd::Why::Died) result.health = settled_health();
  note_peak();
  prover_.stop();
  for (auto& w : workers) w.join();
  return result;
}

}  // namespace pf::agent
