#include "core/lifecycle.h"

#include <algorithm>

#include "core/billing.h"
#include "core/text.h"

namespace pf::core {

double state_deadline(const InstanceRecord& rec, InstanceState state, double entered_at,
                      double min_rate, const LifecycleConfig& c) {
  switch (state) {
    case InstanceState::Renting:
      return entered_at + c.renting_max_s;
    case InstanceState::Booting:
      return entered_at + c.boot_loading_max_s;
    case InstanceState::Registered:
      return entered_at + c.registered_max_s;
    case InstanceState::FetchingParams: {
      double bytes = rec.params_total_bytes > 0 ? rec.params_total_bytes : 47e9;
      double mbps = rec.offer.inet_down_mbps > 0
                        ? rec.offer.inet_down_mbps * c.params_speed_fraction
                        : c.params_unknown_mbps;
      double expected = bytes * 8 / (mbps * 1e6);
      return entered_at + std::clamp(expected * c.params_slack, c.params_min_s, c.params_max_s);
    }
    case InstanceState::WarmingUp:
      return entered_at + c.warmup_max_s;
    case InstanceState::Benchmarking: {
      // A host proving at break-even delivers max_samples in max_samples/min_rate hours; one
      // that cannot manage that in slack× the time is below break-even anyway.
      double need =
          min_rate > 0 ? c.bench_max_samples * 3600.0 / min_rate * c.bench_slack : c.bench_max_s;
      return entered_at + std::clamp(need, c.bench_min_s, c.bench_max_s);
    }
    case InstanceState::Proving:
    case InstanceState::Destroying:
    case InstanceState::Destroyed:
      return 0;
  }
  return 0;
}

bool transition_allowed(InstanceState from, InstanceState to) {
  using S = InstanceState;
  if (from == S::Destroyed) return false;
  if (to == S::Destroying) return from != S::Destroying;
  if (to == S::Destroyed) return from == S::Destroying;
  // Forward moves only, skipping allowed (an agent may report fetching before we saw it
  // register, or a re-registered agent may already have its parameters).
  auto rank = [](S s) { return static_cast<int>(s); };
  return rank(to) > rank(from) && to != S::Destroying && from != S::Destroying;
}

std::optional<std::string> apply_transition(InstanceRecord& rec, InstanceState to, double now,
                                            const std::string& reason, double break_even_rate,
                                            const LifecycleConfig& cfg) {
  if (!transition_allowed(rec.state, to)) return std::nullopt;
  std::string msg = std::string(to_string(rec.state)) + " → " + to_string(to);
  if (!reason.empty()) msg += ": " + reason;
  rec.state = to;
  rec.state_since = now;
  rec.market_stopped_s = 0;
  rec.deadline_at = state_deadline(rec, to, now, break_even_rate, cfg);
  if (to == InstanceState::Destroying) rec.destroy_reason = reason;
  if (to == InstanceState::Destroyed) rec.destroyed_at = now;
  return msg;
}

std::optional<Closing> destroy_reason(const InstanceRecord& rec, double now,
                                      const LifecycleConfig& cfg, const Hearing& hearing) {
  using S = InstanceState;
  using C = CloseCause;
  if (rec.state == S::Destroying || rec.state == S::Destroyed) return std::nullopt;

  const std::string& ms = rec.market_status;
  if (ms == "exited") return Closing{C::MarketExited, "market reports the instance exited"};
  if (ms == "offline") return Closing{C::HostOffline, "market reports the host offline"};
  if (ms == "stopped") {
    // Not the host: its silence and deadlines are not judged while the market holds it stopped.
    const double stopped_s = now - rec.market_status_since;
    const double grace_s = rec.bid_price ? cfg.bid_stopped_grace_s : cfg.market_stopped_grace_s;
    if (stopped_s < grace_s) return std::nullopt;
    return Closing{C::MarketStopped,
                   "the market stopped the instance " + fixed(stopped_s / 60, 0) +
                       " min ago (contract ended, outbid or credit run out) and it did not "
                       "resume; stopped, it still pays for its disk"};
  }
  if (ms == "unknown" && now - rec.market_status_since >= cfg.market_unknown_grace_s) {
    return Closing{C::OtherLifecycle, "market status unknown for " +
                                          fixed((now - rec.market_status_since) / 60, 0) + " min"};
  }
  if (rec.prover_crashes >= cfg.max_prover_crashes) {
    return Closing{C::OtherLifecycle,
                   "prover crashed " + std::to_string(rec.prover_crashes) + " times"};
  }
  const bool silence_judged = hearing.may_judge_silence;
  if (silence_judged && agent_expected(rec) && rec.last_heartbeat_at > 0) {
    const double silent = heard_silence_s(rec, now, hearing.listening_since);
    if (silent >= cfg.heartbeat_timeout_s) {
      return Closing{C::HostOffline, "heartbeat lost for " + fixed(silent, 0) + " s"};
    }
  }
  // A booted instance whose agent never registers: the grace counts from when the market
  // said running (slow image pulls are not billed and are judged by the loading deadline
  // alone), and from when the manager listened.
  if (silence_judged && rec.state == S::Booting && compute_billed(ms) &&
      now - std::max(rec.market_status_since, hearing.listening_since) >=
          cfg.boot_register_grace_s) {
    return Closing{C::OtherLifecycle, "running for " +
                                          fixed((now - rec.market_status_since) / 60, 0) +
                                          " min but the agent never registered"};
  }
  const bool deadline_judged = silence_judged || !deadline_reads_agent(rec.state);
  if (deadline_judged && rec.deadline_at > 0 && now >= rec.deadline_at) {
    return Closing{C::Deadline, std::string("deadline passed in ") + to_string(rec.state) +
                                    " after " + fixed((now - rec.state_since) / 60, 0) + " min"};
  }
  return std::nullopt;
}

bool deadline_reads_agent(InstanceState state) {
  using S = InstanceState;
  // Booting ends when the agent registers: a manager that could not be reached kept it there.
  return state == S::Booting || state == S::Registered || state == S::FetchingParams ||
         state == S::WarmingUp || state == S::Benchmarking;
}

}  // namespace pf::core
