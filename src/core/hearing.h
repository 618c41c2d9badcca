// Whether the manager was in a position to hear its agents. Silence is evidence against a
// host only when the manager was listening: a heartbeat that could not arrive (the manager was
// restarting, stalled or overloaded) or a fleet that fell silent at once (the manager's own
// network) says nothing about any one machine. Pure: the manager and the simulator pass what
// they know and get a value with its reason.
//
// The rule:
//  1. The manager listens from `listening_since` (its start, or the end of its last stall or
//     failed self-check). Silence is counted only from then: an agent is silent for
//     now − max(last heartbeat, listening_since).
//  2. Verdicts that read an agent's silence or its missed progress (heartbeat lost, never
//     registered, a deadline passed in booting or a later agent-driven state) wait until the
//     manager has listened for one whole heartbeat timeout, and never less than the agents'
//     longest retry gap (kAgentRetryMaxS), so every live agent had a chance to reach it.
//  3. While at least `silent_fleet_fraction` of the agents we expect to hear from (and at least
//     `silent_fleet_min_agents` of them) are silent at once, none of them is judged by silence.
//  4. While the manager knows it is not serving (`serving == false`), no silence verdict fires.
// Market-reported verdicts (exited, offline, unknown) and the agent's own reports (crashes,
// benchmark results) do not depend on hearing and are unaffected.
#pragma once

#include <string>
#include <vector>

#include "core/fleet.h"

namespace pf::core {

// The longest an agent waits between tries to reach the manager (real seconds; its register,
// event and log retries are capped here). A manager that has listened this long has had a try
// from every live agent that can reach it, so rule 2 never waits less than this.
inline constexpr double kAgentRetryMaxS = 15;

// How long the manager must have listened before silence is judged (rule 2).
double settling_window_s(double heartbeat_timeout_s);

struct HearingConfig {
  double silent_fleet_fraction = 0.5;
  int silent_fleet_min_agents = 3;
};

// What the manager knows of its own hearing, kept by its shell.
struct ListeningState {
  bool serving = true;         // false while a self-check of its own front fails
  double listening_since = 0;  // epoch s; 0 = always listening (the simulator)
};

enum class HearingCause {
  Listening,    // silence is judged
  NotServing,   // rule 4
  Settling,     // rule 2: not yet listened for a whole heartbeat timeout
  FleetSilent,  // rule 3
};
const char* to_string(HearingCause cause);

struct Hearing {
  bool may_judge_silence = true;  // rules 2–4 allow silence verdicts now
  HearingCause cause = HearingCause::Listening;
  double listening_since = 0;  // silence is counted from here (rule 1)
  int agents_expected = 0;     // live instances whose agent should be heartbeating
  int agents_silent = 0;       // of those, silent for a whole heartbeat timeout
  std::string reason;          // why silence is not judged now (empty when it is)
};

// Whether `rec` is in a state whose agent must heartbeat (registered or later, still live).
bool agent_expected(const InstanceRecord& rec);

// Seconds `rec`'s agent has been silent while the manager listened (rule 1) and the market had
// it running (a resumed instance counts from its resume); 0 when it never heartbeated.
double heard_silence_s(const InstanceRecord& rec, double now, double listening_since);

// Applies rules 2–4 to the live instances.
Hearing judge_hearing(const std::vector<InstanceRecord>& live, double now,
                      const ListeningState& listening, double heartbeat_timeout_s,
                      const HearingConfig& cfg = {});

}  // namespace pf::core
