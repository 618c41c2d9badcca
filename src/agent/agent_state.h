// What the agent's threads share: the main thread's supervision, the proof slots, the
// reporter (which reads it for heartbeats and writes the manager's commands into it) and a
// stop requested from anywhere (a signal, the manager, a refused token). One lock and one
// condition variable, so a waiter can wait on any mix of them: a stop, a re-plan, a new
// concurrency, its session's end.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>

#include "core/planner.h"

namespace pf::agent {

struct AgentState {
  std::mutex mu;
  std::condition_variable cv;  // notified on a stop, a command and a session's end

  // Everything below is guarded by mu.
  std::string phase = "starting";
  bool stop_requested = false;
  std::string stop_reason;
  // The manager's commands (manager_commands.h), taken by the running proof session.
  bool replan_requested = false;
  std::optional<int> concurrency_command;
  // The operator's partition cap from a "replan:N" command: tightens the plan's cap (the
  // memory model and any OOM back-off still bound it).
  std::optional<int> partitions_command;
  // Proofs of this run, for heartbeats; measured: completed outside warm-up.
  int in_flight = 0, completed = 0, failed = 0, measured = 0;
  int consecutive_failed_proofs = 0;
  double peak_memory_gib = 0;
  std::optional<core::ProverPlan> plan;
  int running_partitions = 0;

  bool stopping() {
    std::lock_guard lock(mu);
    return stop_requested;
  }
  // Records the first stop request and its reason and wakes every waiter; false when a stop
  // was requested already (the first reason stands).
  bool request_stop(const std::string& reason) {
    {
      std::lock_guard lock(mu);
      if (stop_requested) return false;
      stop_requested = true;
      stop_reason = reason;
    }
    cv.notify_all();
    return true;
  }
  // Waits up to `real` (wall time); false when a stop was requested meanwhile.
  template <typename Rep, typename Period>
  bool wait_unless_stopped(std::chrono::duration<Rep, Period> real) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, real, [&] { return stop_requested; });
    return !stop_requested;
  }
  void wait_for_stop() {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return stop_requested; });
  }
};

}  // namespace pf::agent
