// The fleet watch: every instance judged by the autopilot's watches whoever rented it, with
// the autopilot on or off (core/alerts.h decides), plus the fleet's spend against its budget
// and jobs missing their deadlines. Each look:
//  - builds each live instance's alerts (production drift, slow download, stall) from the
//    store's rows and bench runs and the agents' progress;
//  - announces alerts that appeared or cleared: an "alert" event on the instance and a webhook
//    (alert.raised / alert.cleared); fleet alerts as spend.over_budget / jobs.missed_deadline;
//  - closes an instance whose alert warrants a drop when the operator let the manager act for
//    that origin (`[alerts] act_on_hand_deployed`, `act_on_autopilot_rented`), the same way the
//    autopilot drops (Manager::request_destroy, cause dropped, the alert's strike); replacing
//    it is the autopilot's renting step, when it runs;
//  - hands the findings to the Manager (Manager::alerts) for the API and dashboard.
// A shell: it owns a little memory (when each instance last made progress, what was
// announced), no policy. After a restart the alerts still active are announced once more.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include "core/alerts.h"
#include "core/policy.h"
#include "manager/jobs_report.h"
#include "manager/manager.h"

namespace pf::manager {

struct FleetWatchConfig {
  core::AlertConfig alerts;
  // The autopilot's policy settings: production watch, download judgement, predictor, scoring
  // (the same values the autopilot decides with, so an alert says what it would do).
  core::PolicyConfig policy;
  double heartbeat_s = 10;  // an agent heard within 3 × this counts as reporting
  JobsReportOptions jobs;   // window and prices of the missed-deadline count
};

class FleetWatch {
 public:
  using Clock = std::function<double()>;
  FleetWatch(Manager& manager, FleetWatchConfig config, Clock clock);

  // One look (serve calls it every `[alerts] interval_s`). Returns what it found.
  core::AlertsView run_once();

 private:
  Manager& manager_;
  FleetWatchConfig config_;
  Clock clock_;
  std::mutex run_mu_;  // one look at a time; guards everything below
  // Proofs counted (benchmark + production) and when that count last changed, per instance.
  std::map<std::int64_t, std::pair<int, double>> progress_;
  std::vector<core::Alert> last_;
  std::map<std::string, core::FleetAlert> fleet_;  // active fleet alerts by kind
  std::set<std::int64_t> missed_announced_;        // job ids already announced as missed
};

}  // namespace pf::manager
