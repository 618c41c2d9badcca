#include "core/alerts.h"

#include <algorithm>
#include <map>
#include <utility>

#include "core/text.h"

namespace pf::core {

const char* to_string(AlertKind kind) {
  switch (kind) {
    case AlertKind::ProductionDrift:
      return "production_drift";
    case AlertKind::SlowDownload:
      return "slow_download";
    case AlertKind::Stall:
      return "stall";
  }
  return "unknown";
}

std::optional<Alert> production_alert(const InstanceRecord& rec,
                                      const std::vector<BenchRun>& windows, double be,
                                      const WatchConfig& watch) {
  if (rec.state != InstanceState::Proving) return std::nullopt;
  const WatchResult w = watch_production(rec, windows, be, watch);
  if (!w.drop && !w.below) return std::nullopt;
  Alert a;
  a.instance_id = rec.id;
  a.kind = AlertKind::ProductionDrift;
  a.drop_warranted = w.drop;
  a.reason = w.reason;
  return a;
}

std::optional<Alert> download_alert(const InstanceRecord& rec,
                                    const std::optional<DownloadJudgement>& judged) {
  if (!judged) return std::nullopt;
  Alert a;
  a.instance_id = rec.id;
  a.kind = AlertKind::SlowDownload;
  a.drop_warranted = true;
  a.reason = judged->reason;
  a.strike = judged->strike;
  return a;
}

double stall_reference_rate(const InstanceRecord& rec, const std::vector<BenchRun>& windows) {
  const BenchRun* latest = nullptr;
  for (const auto& w : windows) {
    if (!latest || w.at > latest->at) latest = &w;
  }
  if (latest && latest->at >= rec.state_since) return latest->rate;
  return rec.verdict ? rec.verdict->rate : 0;
}

std::optional<Alert> stall_alert(const InstanceRecord& rec, double last_progress_at, double rate,
                                 double now, double heard_within_s, bool holds_work,
                                 const StallConfig& cfg) {
  if (rec.state != InstanceState::Proving || !holds_work) return std::nullopt;
  // Not heard: the lifecycle's silence rules judge it (under the manager's hearing).
  if (rec.last_heartbeat_at <= 0 || now - rec.last_heartbeat_at > heard_within_s) {
    return std::nullopt;
  }
  const double window = std::max(cfg.min_s, rate > 0 ? cfg.factor * 3600 / rate : 0.0);
  const double quiet = now - last_progress_at;
  if (quiet <= window) return std::nullopt;
  Alert a;
  a.instance_id = rec.id;
  a.kind = AlertKind::Stall;
  a.drop_warranted = true;
  a.reason = "no proof for " + fixed(quiet / 60, 0) + " min while the agent reports in (" +
             (rate > 0 ? "at " + fixed(rate, 1) + "/hr a proof is due every " +
                             fixed(60 / rate, 1) + " min; "
                       : "") +
             "stalled after " + fixed(window / 60, 0) + " min)";
  return a;
}

bool alert_acts(const Alert& alert, const std::string& origin, const AlertConfig& cfg) {
  if (!alert.drop_warranted) return false;
  return origin == "autopilot" ? cfg.act_on_autopilot_rented : cfg.act_on_hand_deployed;
}

AlertChanges alert_changes(const std::vector<Alert>& before, const std::vector<Alert>& now) {
  using Key = std::pair<std::int64_t, AlertKind>;
  std::map<Key, const Alert*> old_by_key;
  for (const auto& a : before) old_by_key[{a.instance_id, a.kind}] = &a;
  AlertChanges out;
  std::map<Key, bool> still;
  for (const auto& a : now) {
    const Key key{a.instance_id, a.kind};
    still[key] = true;
    const auto it = old_by_key.find(key);
    if (it == old_by_key.end() || (a.drop_warranted && !it->second->drop_warranted)) {
      out.raised.push_back(a);
    }
  }
  for (const auto& a : before) {
    if (!still.count({a.instance_id, a.kind})) out.cleared.push_back(a);
  }
  return out;
}

std::optional<std::string> budget_alert(double live_dph, double spend_usd, const AlertConfig& cfg) {
  std::string reason;
  if (cfg.budget_dollars_per_hour > 0 && live_dph > cfg.budget_dollars_per_hour) {
    reason = "live instances cost $" + fixed(live_dph, 2) + "/hr, over the budget of $" +
             fixed(cfg.budget_dollars_per_hour, 2) + "/hr";
  }
  if (cfg.budget_usd > 0 && spend_usd > cfg.budget_usd) {
    reason += std::string(reason.empty() ? "" : "; ") + "spent $" + fixed(spend_usd, 2) +
              ", over the budget of $" + fixed(cfg.budget_usd, 2);
  }
  if (reason.empty()) return std::nullopt;
  return reason;
}

std::optional<std::string> deadline_alert(int newly_missed, int missed_in_window, double window_s) {
  if (newly_missed <= 0) return std::nullopt;
  return std::to_string(newly_missed) + (newly_missed == 1 ? " job" : " jobs") +
         " missed the deadline (" + std::to_string(std::max(missed_in_window, newly_missed)) +
         " in the last " + fixed(window_s / 60, 0) + " min)";
}

}  // namespace pf::core
