// The instance lifecycle: states, deadlines computed from what we know, and the checks that
// decide when an instance must be destroyed. Pure: every function takes `now`.
//
//   renting ─► booting ─► registered ─► fetching_params ─► warming_up ─► benchmarking ─► proving
//      └──────────┴───────────┴──────────────┴───────────────┴──────────────┴──────────────┴─►
//                                                                  destroying ─► destroyed
#pragma once

#include <optional>
#include <string>

#include "core/close_cause.h"
#include "core/economics.h"
#include "core/fleet.h"
#include "core/hearing.h"

namespace pf::core {

struct LifecycleConfig {
  // renting: the create's outcome must be known (confirmed or reconciled) within this.
  double renting_max_s = 10 * 60;
  // booting: vast does not bill while loading, but a host that never starts wastes our time.
  double boot_loading_max_s = 45 * 60;     // market still loading/provisioning
  double boot_register_grace_s = 15 * 60;  // market says running, agent has not registered
  // registered → the agent must start fetching within this.
  double registered_max_s = 10 * 60;
  // fetching_params: bytes ÷ (advertised speed × fraction) × slack, clamped.
  double params_speed_fraction = 0.35;
  double params_slack = 2.0;
  double params_min_s = 30 * 60;
  double params_max_s = 12 * 3600;
  double params_unknown_mbps = 100;
  // warming_up: parameter load + cache extraction + first proofs.
  double warmup_max_s = 60 * 60;
  // benchmarking: enough time to see max_samples at the break-even rate, × slack.
  double bench_slack = 2.0;
  double bench_min_s = 20 * 60;
  double bench_max_s = 4 * 3600;
  int bench_max_samples = 20;
  // Agents heartbeat every few seconds; this long without one means the box is gone.
  double heartbeat_timeout_s = 5 * 60;
  // Market status "unknown" is sometimes transient; persistent unknown is not.
  double market_unknown_grace_s = 10 * 60;
  // The market stopped an instance we never asked to stop (contract end, outbid, credit run
  // out): it may resume (credit topped up, priority regained). Wait this long, judging nothing
  // of its silence, then close it without blaming the host: stopped, it still pays its disk.
  double market_stopped_grace_s = 10 * 60;
  // The same for an interruptible rental (bid_price set): stopped, it was most likely outbid
  // and resumes once the higher bid leaves, while waiting costs only its disk and a replacement
  // pays a whole setup again; its jobs went back to the queue when the stop was seen.
  double bid_stopped_grace_s = 3600;
  int max_prover_crashes = 3;
  // A destroying instance is re-sent the destroy at most this often.
  double destroy_retry_s = 30;
};

// Deadline (epoch seconds) for `state`, entered at `entered_at`; 0 = none. `break_even_rate`
// is the instance's (core/break_even.h): the benchmark must see its samples at that rate.
double state_deadline(const InstanceRecord& rec, InstanceState state, double entered_at,
                      double break_even_rate, const LifecycleConfig& cfg);

// Whether `from` may move to `to` (destroying is reachable from every live state).
bool transition_allowed(InstanceState from, InstanceState to);

// Moves `rec` into `to` at `now`: state, state_since, deadline, market_stopped_s back to 0;
// destroy_reason when entering destroying, destroyed_at when destroyed. Returns a human-readable
// event message, or nullopt (record unchanged) when the transition is not allowed. Closes go
// through core::close_instance (core/close.h), which also records the typed cause.
std::optional<std::string> apply_transition(InstanceRecord& rec, InstanceState to, double now,
                                            const std::string& reason, double break_even_rate,
                                            const LifecycleConfig& cfg);

// Why this instance must be destroyed now, if it must: deadline passed, heartbeat lost,
// prover crashed repeatedly, market exited/offline/persistently unknown. Verdicts that read
// the agent's silence (heartbeat lost, never registered, a deadline passed in an agent-driven
// state) follow `hearing` (core/hearing.h): they wait while the manager could not hear, and
// silence counts only from when it listened. The default hears everything (the simulator).
// The cause is typed where the verdict is made (never recovered from the reason's text).
std::optional<Closing> destroy_reason(const InstanceRecord& rec, double now,
                                      const LifecycleConfig& cfg, const Hearing& hearing = {});

// Whether `state`'s deadline measures the agent's progress (its reports or its registration),
// not the market's alone.
bool deadline_reads_agent(InstanceState state);

}  // namespace pf::core
