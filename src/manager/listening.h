// Whether the manager itself can hear its agents: the state core::judge_hearing (core/hearing.h)
// judges silence by. Since when it has been listening (its start, the end of a stall seen
// between ticks, a new leader term, the recovery of its front's self-check) and whether its
// front serves. A part of the manager with its own lock, not the Manager's: the self-check loop
// that reports a stall never waits behind a reconcile or a tick (a report held back would let
// the manager's own blindness pass for its agents' silence).
#pragma once

#include <mutex>

#include "core/hearing.h"

namespace pf::manager {

class Listening {
 public:
  // A manager that just started heard nothing before `now`: its start is not its agents' fault.
  explicit Listening(double now) { state_.listening_since = now; }

  // Its front answers its own health check (`serving`) or not; listening starts again at `now`
  // when it comes back.
  void set_serving(bool serving, double now) {
    std::lock_guard lock(mu_);
    if (serving && !state_.serving) state_.listening_since = now;
    state_.serving = serving;
  }
  // It could not listen until `now` (a stall of its own, a new leader term).
  void interrupted(double now) {
    std::lock_guard lock(mu_);
    state_.listening_since = now;
  }
  core::ListeningState state() const {
    std::lock_guard lock(mu_);
    return state_;
  }
  // Whether `cause` differs from the one last noted (the tick's "hearing" events), noting it.
  bool note_cause(core::HearingCause cause) {
    std::lock_guard lock(mu_);
    if (cause == last_cause_) return false;
    last_cause_ = cause;
    return true;
  }

 private:
  mutable std::mutex mu_;
  core::ListeningState state_;
  core::HearingCause last_cause_ = core::HearingCause::Listening;
};

}  // namespace pf::manager
