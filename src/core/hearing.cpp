#include "core/hearing.h"

#include <algorithm>

#include "core/text.h"

namespace pf::core {

const char* to_string(HearingCause cause) {
  switch (cause) {
    case HearingCause::Listening:
      return "listening";
    case HearingCause::NotServing:
      return "not_serving";
    case HearingCause::Settling:
      return "settling";
    case HearingCause::FleetSilent:
      return "fleet_silent";
  }
  return "?";
}

bool agent_expected(const InstanceRecord& rec) {
  return rec.state >= InstanceState::Registered && rec.state != InstanceState::Destroying &&
         rec.state != InstanceState::Destroyed;
}

double heard_silence_s(const InstanceRecord& rec, double now, double listening_since) {
  if (rec.last_heartbeat_at <= 0) return 0;
  double since = std::max(rec.last_heartbeat_at, listening_since);
  // Running again after a stop (the market's or its client's), the agent starts afresh: it was
  // stopped with its container, not silent, so its silence counts from when the market said
  // it runs (the status's time is newer than its last heartbeat only then, or at boot).
  if (rec.market_status == "running") since = std::max(since, rec.market_status_since);
  return std::max(0.0, now - since);
}

double settling_window_s(double heartbeat_timeout_s) {
  return std::max(heartbeat_timeout_s, kAgentRetryMaxS);
}

Hearing judge_hearing(const std::vector<InstanceRecord>& live, double now,
                      const ListeningState& listening, double heartbeat_timeout_s,
                      const HearingConfig& cfg) {
  Hearing h;
  h.listening_since = listening.listening_since;
  for (const auto& rec : live) {
    if (!agent_expected(rec) || rec.last_heartbeat_at <= 0) continue;
    ++h.agents_expected;
    if (heard_silence_s(rec, now, listening.listening_since) >= heartbeat_timeout_s) {
      ++h.agents_silent;
    }
  }
  if (!listening.serving) {
    h.may_judge_silence = false;
    h.cause = HearingCause::NotServing;
    h.reason = "the manager's own front is not serving";
  } else if (listening.listening_since > 0 &&
             now - listening.listening_since < settling_window_s(heartbeat_timeout_s)) {
    h.may_judge_silence = false;
    h.cause = HearingCause::Settling;
    h.reason = "the manager has listened for only " + fixed(now - listening.listening_since, 0) +
               " s (restart or stall); silence is judged after " +
               fixed(settling_window_s(heartbeat_timeout_s), 0) + " s";
  } else if (h.agents_silent >= cfg.silent_fleet_min_agents &&
             h.agents_silent >= cfg.silent_fleet_fraction * h.agents_expected) {
    h.may_judge_silence = false;
    h.cause = HearingCause::FleetSilent;
    h.reason = std::to_string(h.agents_silent) + " of " + std::to_string(h.agents_expected) +
               " agents are silent at once: the manager's side is suspect, no host is blamed";
  }
  return h;
}

}  // namespace pf::core
