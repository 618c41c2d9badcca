// Alerts: what the autopilot's watches see, for every instance whoever rented it. The
// autopilot drops an instance whose production drifted below break-even or whose parameter
// download no longer pays (core/policy.h), but only while it runs; an operator renting by hand
// with the autopilot off was told nothing. These functions judge each live instance the same
// way, plus a stalled prover (heartbeats arrive, no proof does), and say whether the manager
// acts on what they found. Pure: the manager's watch (manager/fleet_watch.h) gathers the
// inputs, keeps the alerts, sends webhooks and carries out the drops.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/blocklist.h"
#include "core/fleet.h"
#include "core/policy.h"

namespace pf::core {

enum class AlertKind {
  ProductionDrift,  // a proving instance's production windows below break-even
  SlowDownload,     // parameters arriving too slowly to pay (policy's setup watch)
  Stall,            // heard from, but no proof for far longer than its rate allows
};
inline constexpr std::array<AlertKind, 3> kAllAlertKinds{AlertKind::ProductionDrift,
                                                         AlertKind::SlowDownload, AlertKind::Stall};
// "production_drift" | "slow_download" | "stall" (JSON, webhooks, events).
const char* to_string(AlertKind kind);

struct Alert {
  std::int64_t instance_id = 0;
  AlertKind kind = AlertKind::ProductionDrift;
  // True when the watch's rule for dropping is met (the autopilot would drop it); false for a
  // warning (one production window dipped below break-even).
  bool drop_warranted = false;
  std::string reason;
  std::optional<Strike> strike;  // blame the drop carries, if any (slow download)
  double since = 0;              // when the watch first saw it (kept while it lasts)
  bool acted = false;            // the manager closed the instance for it
};

// An alert about the whole fleet: "spend" (over budget) or "jobs" (deadlines missed).
inline constexpr const char* kSpendAlert = "spend";
inline constexpr const char* kJobsAlert = "jobs";
inline constexpr std::array<const char*, 2> kFleetAlertKinds{kSpendAlert, kJobsAlert};
struct FleetAlert {
  std::string kind;
  std::string reason;
  double since = 0;
};

// What the watch found at its last look (the dashboard, GET /api/v1/alerts, `status`).
struct AlertsView {
  double checked_at = 0;  // 0: the watch has not looked yet
  std::vector<Alert> instances;
  std::vector<FleetAlert> fleet;
};

struct StallConfig {
  // A proving instance is stalled when no proof came for this many of its expected intervals
  // (3600 / its measured rate) ...
  double factor = 4;
  // ... and for at least this long (a slow rate must not make the window shorter than a few
  // heartbeats, nor a fast one alert on one slow proof).
  double min_s = 30 * 60;
};

struct AlertConfig {
  StallConfig stall;
  // Whether the manager itself closes an instance whose alert warrants a drop: for instances
  // the operator deployed by hand (origin "deploy" or "adopted"; default: alert only) and for
  // those the autopilot rented (its own rules: drop and let it rent a replacement).
  bool act_on_hand_deployed = false;
  bool act_on_autopilot_rented = true;
  // Fleet spend: alert when live instances' prices add up above this many $/hour, or when the
  // all-time spend passes this many dollars (0: no budget).
  double budget_dollars_per_hour = 0;
  double budget_usd = 0;
};

// Production drift for a proving instance (watch_production on its production windows).
std::optional<Alert> production_alert(const InstanceRecord& instance,
                                      const std::vector<BenchRun>& windows, double break_even_rate,
                                      const WatchConfig& watch);

// A slow download, from the policy's setup-watch judgement of the instance (judge_download).
std::optional<Alert> download_alert(const InstanceRecord& instance,
                                    const std::optional<DownloadJudgement>& judged);

// The rate (proofs/hour) a stall is judged at: the instance's latest production window when
// it was measured in its current state, else its benchmark verdict's rate (0 without either).
double stall_reference_rate(const InstanceRecord& instance, const std::vector<BenchRun>& windows);

// A stalled prover: a proving instance that holds work (`holds_work`: jobs leased to it; an
// accepted instance with nothing to prove is idle, not stalled), whose agent is heard (last
// heartbeat within `heard_within_s`), but whose last proof — or, with none since it took work
// or since the manager began watching, that moment: `last_progress_at` — is older than the
// stall window at `rate` (proofs/hour: its latest measured rate; <= 0 uses the minimum
// window). Silence itself is the lifecycle's verdict (heartbeat lost), not a stall.
std::optional<Alert> stall_alert(const InstanceRecord& instance, double last_progress_at,
                                 double rate, double now, double heard_within_s, bool holds_work,
                                 const StallConfig& config);

// Whether the manager closes the instance for this alert: only a warranted drop, and only for
// the kind of origin the operator let it act on.
bool alert_acts(const Alert& alert, const std::string& origin, const AlertConfig& config);

// Alerts are announced (event, webhook) when they first appear and when they clear; an alert
// is the same while its instance and kind are, and a warning that becomes a warranted drop is
// announced again.
struct AlertChanges {
  std::vector<Alert> raised;   // new, or escalated to drop_warranted
  std::vector<Alert> cleared;  // gone (as they were last seen)
};
AlertChanges alert_changes(const std::vector<Alert>& before, const std::vector<Alert>& now);

// Fleet spend against the budget: a reason when over it (either budget), else nullopt.
std::optional<std::string> budget_alert(double live_dollars_per_hour, double spend_usd,
                                        const AlertConfig& config);

// Jobs that missed their deadline (late or failed, core/job_latency.h job_timeliness): a
// reason when some were not announced before (`newly_missed` > 0), naming how many missed in
// the report's window; else nullopt.
std::optional<std::string> deadline_alert(int newly_missed, int missed_in_window, double window_s);

}  // namespace pf::core
