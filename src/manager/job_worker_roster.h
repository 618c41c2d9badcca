// The instances that take proof jobs (core::job_worker), kept between reads of the store
// (issue 12: gateway_dispatch_per_s).
//
// Every lease asks the Manager for its workers; reading every instance row for that costs more
// than the lease itself with a large fleet. What decides a worker changes rarely — its state,
// its measured rate, its plan's proofs in flight — and the Manager says when (changed()); what
// changes often — its agent being heard — is followed here from the heartbeats (heard()), and
// silence is a matter of time, judged at each call. So the rows are read once per change (and at
// least every max_age_s, so that a write that forgot to say so is seen within that bound).
//
// Thread-safe. Lock order: the roster's mutex is a leaf, never held while reading the rows, so
// changed() and heard() may be called while holding the store's lock or the Manager's.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/fleet.h"
#include "core/job_schedule.h"

namespace pf::manager {

class JobWorkerRoster {
 public:
  // The rows of the live instances (store::Store::instances(false)).
  using ReadRows = std::function<std::vector<core::InstanceRecord>()>;
  // The proofs an instance's plan keeps in flight (from its plan_json).
  using PlanSlots = std::function<int(const core::InstanceRecord&)>;
  // The kinds its prover has the parameters for (from its plan_json); empty function: every
  // fleet kind.
  using PlanKinds = std::function<core::KindSet(const core::InstanceRecord&)>;

  JobWorkerRoster(ReadRows read_rows, PlanSlots plan_slots, double max_age_s,
                  PlanKinds plan_kinds = {});

  // A row changed in what decides a worker (state, verdict, plan) or was written behind the
  // Manager's back: the next workers() reads the rows again.
  void changed() { ++version_; }
  // The instance's agent was heard at `at` (its row's last_heartbeat_at was set to it).
  void heard(std::int64_t instance_id, double at);
  // Instances that take jobs at `now` (core::job_worker_if_heard, heard within heard_within_s),
  // in the rows' order.
  std::vector<core::WorkerView> workers(double now, double heard_within_s);
  // Reads of the rows so far (tests: how often the store was read).
  std::uint64_t reads() const { return reads_.load(); }

 private:
  struct Candidate {
    core::WorkerView view;
    double last_heard_at = 0;
  };

  const ReadRows read_rows_;
  const PlanSlots plan_slots_;
  const PlanKinds plan_kinds_;
  const double max_age_s_;
  std::atomic<std::uint64_t> version_{1};  // of the rows; 0 = never read
  std::atomic<std::uint64_t> reads_{0};

  std::mutex mu_;
  std::uint64_t read_version_ = 0;  // version_ when the candidates were read
  double read_at_ = 0;
  int readers_ = 0;  // callers reading the rows now (the others use the candidates in hand)
  std::vector<Candidate> candidates_;
  std::unordered_map<std::int64_t, std::size_t> index_;  // instance id → candidates_ position
  // Heartbeats while a read is in progress: the rows read may predate them.
  std::vector<std::pair<std::int64_t, double>> heard_while_reading_;

  // Caller holds mu_.
  void note_heard(std::int64_t instance_id, double at);
};

}  // namespace pf::manager
