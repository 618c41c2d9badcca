// The policy simulator: a discrete-event engine that plays a scenario's market in virtual time
// (spec: /work/shared/spec/scenario.md, "Physics the simulation must apply") and runs a fleet
// policy against it with the same core code the manager runs: lifecycle transitions,
// deadlines and destroy checks (lifecycle.h), spend accrual, the policy's acceptance test on
// each proof, and the planner (memory_model.h) on the agent's side.
//
// Physics, per rented instance (t0 = rent), all of it from the one truth model
// (scenario/truth_model.h) that market-sim and the sim prover use too:
//   loading until t0 + boot_min (never_boots: forever; not billed) → registered, downloading
//   params.bytes at download_mbps (bandwidth billed per GB) → the prover starts with the plan
//   the policy's agent makes from the probed memory (truth ram_visible_gib). A plan whose real
//   peak (mem_base_gib + mem_per_partition_gib·p; /1: 70 + 14·p) exceeds it is OOM-killed at the
//   end of warm-up; the agent may re-plan.
//   Proofs: each needs lognormal work (mean 1, CV proof_time_cv) done at
//   rate_full · g(p / partitions_full) · contention^(others alive on the machine now) · throttle
//   per hour; the k-th proof after each prover start waits warmup_min·0.5^(k−1) more for k up
//   to warmup_proofs (/1: 1). Rate changes (contention, throttle) take effect mid-proof.
//   Throttle and crash come after after_h hours of proving time (summed over prover runs); a
//   crash shows "exited" (still billed); offline: after_h hours after boot the host disappears
//   (not billed, no heartbeats). A throttle with reported: false marks nothing, it only slows.
//   Prices: a rental pays the price listed when it was created (/2 dph_changes).
//   Revenue /1: production proofs earn revenue_per_proof, at most demand per simulated hour
//   (buckets [h, h+1)). /2: jobs arrive (Poisson, demand.arrivals) into the queue; an accepted
//   instance asks for one per production proof (idle while it gets none) and the manager's
//   placement (core::place_jobs, as jobs::JobQueue::lease runs it: sim/des_dispatch.h) decides
//   which; a job earns only if delivered within deadline_min of its arrival; a job still queued
//   at its deadline leaves unserved.
// Randomness: each rental draws its proof times from its own stream, seeded by the scenario
// seed, the offer id and how many times that offer was rented before, so policies that rent
// the same offer see the same machine behaviour (common random numbers); job arrivals come
// from a stream of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/acceptance.h"
#include "core/billing.h"
#include "core/blocklist.h"
#include "core/demand_estimate.h"
#include "core/fleet.h"
#include "core/job_hedge.h"
#include "core/learned_predictor.h"
#include "core/lifecycle.h"
#include "core/policy.h"
#include "core/rental_terms.h"
#include "sim/des_report.h"
#include "sim/scenario_vocabulary.h"

namespace pf::sim {

// Virtual time zero as epoch seconds in records (the core treats 0 as "unset").
inline constexpr double kDesEpoch = 1'750'000'000;

using CloseCause = core::CloseCause;

struct ClosedInstance {
  const core::InstanceRecord& record;  // final state
  core::InstanceState state_before;    // the state it was closed from
  CloseCause cause;
  std::string reason;
  int our_others_on_machine = 0;  // other instances of ours alive on the machine
  // The strike the close earns (core::close_instance): the policy's own for a drop.
  std::optional<core::Strike> strike;
  double now = 0;
};

// What a policy sees each decision. Only clairvoyant may look at `scenario` truth and
// `offer_index`; the engine passes them to everyone so clairvoyant needs no back door.
struct DesView {
  double now = 0;                                  // epoch seconds
  const std::vector<core::InstanceRecord>& fleet;  // every rental so far, destroyed included
  const std::vector<core::Offer>& offers;          // listed now
  const std::vector<std::size_t>& offer_index;     // offers[i] is scenario.offers[offer_index[i]]
  const std::vector<core::Measurement>& history;
  const std::vector<core::BadHost>& bad_hosts;
  const Scenario& scenario;
  // For clairvoyant: scenario offer index of each fleet record (same order as `fleet`).
  const std::vector<std::size_t>& fleet_offer_index;
  // /2: the job queue as a gateway would show it (recent arrivals, jobs waiting); nullopt in
  // /1, where demand is the scenario's fixed rate.
  std::optional<core::QueueObservation> jobs = std::nullopt;
};

// What the agent's probe finds on a rented instance: the truth's cgroup memory and usable cores.
struct AgentProbe {
  double ram_gib = 0;
  double cores = 0;
  int gpus = 0;
};

// A fleet policy as the engine drives it: the decisions plus the manager/agent settings that
// go with them.
class DesPolicy {
 public:
  virtual ~DesPolicy() = default;
  virtual std::string name() const = 0;
  virtual core::LifecycleConfig lifecycle() const = 0;
  // The benchmark test; nullptr: no benchmark, an instance proves for money once warmed up.
  virtual const core::Acceptance* acceptance() const = 0;
  virtual double break_even_rate(const core::Offer& offer) const = 0;
  // Proofs after each prover start that the agent marks as warm-up (not measured).
  virtual int warmup_proofs() const { return 1; }
  // Concurrent partitions the agent runs given what it probed on the instance. `after_oom` is
  // the plan that was just OOM-killed (0 on the first start). 0 = do not (re)start the prover.
  virtual int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                              int after_oom) const = 0;
  virtual std::vector<core::Action> decide(const DesView& view) = 0;
  // On-demand or a bid per rental (core/rental_terms.h, the serve's [bids]); default: off.
  virtual const core::BidConfig& bids() const {
    static const core::BidConfig kOff{};
    return kOff;
  }
  // Hedged proving (core/job_hedge.h): a held job whose proof is at risk is started on a spare
  // prover too; default: off.
  virtual const core::HedgeConfig& hedging() const { return core::kHedgingOff; }
  // An instance was closed; the policy may add or update entries of the bad-host list.
  virtual void on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) {
    (void)closed;
    (void)bad_hosts;
  }
};

struct DesOptions {
  double tick_s = 60;                     // heartbeats, progress, lifecycle checks
  double decide_every_s = 300;            // policy decisions
  double production_window_s = 3600;      // production measurement windows
  bool details = false;                   // fill DesReport::instances
  double disk_gb = core::kDefaultDiskGb;  // each rental's disk, billed for storage (serve's)
};

// Runs `policy` over `scenario` and reports. Deterministic: same scenario, policy and options
// ⇒ same report.
DesReport run_des(const Scenario& scenario, DesPolicy& policy, const DesOptions& options = {});

// What the agent's probe finds on an instance of this offer.
AgentProbe probe_of(const ScenarioOffer& offer);

// Partitions the real planner (core/planner.h) runs with that probe: what a probing agent runs,
// the "best plan" clairvoyant and the report's truth use. 0 when no plan fits.
int planned_partitions(const AgentProbe& probe);

}  // namespace pf::sim
