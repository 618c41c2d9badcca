// The agent's clock. With --time-scale N (market-sim instances) simulated time runs N times
// faster than the wall: every duration the agent waits is simulated seconds ÷ N of real
// time, and every time it reports (event `at`, proof `seconds`) is in simulated seconds,
// counted from the wall-clock epoch time the agent started. At N = 1 it is the system clock.
#pragma once

#include <chrono>

#include "util/steady_clock.h"

namespace pf::agent {

using util::steady_seconds;  // for measuring intervals in real time, never reported

class AgentClock {
 public:
  explicit AgentClock(double scale = 1)
      : scale_(scale > 0 ? scale : 1),
        start_epoch_(
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count()),
        start_(std::chrono::steady_clock::now()) {}

  double scale() const { return scale_; }
  // Simulated epoch seconds.
  double now() const { return start_epoch_ + elapsed(); }
  // Simulated seconds since the agent started.
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() *
           scale_;
  }
  // The real duration of `sim_seconds` of simulated time.
  std::chrono::steady_clock::duration real(double sim_seconds) const {
    if (!(sim_seconds > 0)) return std::chrono::steady_clock::duration::zero();
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(sim_seconds / scale_));
  }
  // The steady-clock instant at which simulated epoch time `sim_epoch` arrives.
  std::chrono::steady_clock::time_point real_deadline(double sim_epoch) const {
    return start_ + real(sim_epoch - start_epoch_);
  }

 private:
  double scale_;
  double start_epoch_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace pf::agent
