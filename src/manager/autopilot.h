// The autopilot: runs the fleet policy (core::decide, the same function `proverfleet sim`
// measures) against the live market at a fixed interval and carries out its actions through
// the Manager, so every rent and drop goes the same recorded, idempotent way an operator's
// does. The operator can pause it; the pause is kept in the store, so a restart does not
// silently resume spending.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/policy.h"
#include "core/scale_to_demand.h"
#include "manager/manager.h"
#include "market/market.h"

namespace pf::manager {

struct AutopilotConfig {
  bool enabled = false;
  nlohmann::json filters = nlohmann::json::object();  // vast JSON query of candidate offers
  core::PolicyConfig policy;
  // Where jobs arrive through the gateway, the demand is the queue's (core/scale_to_demand.h);
  // policy.demand_proofs_per_hour stays the demand until a job was ever submitted.
  core::ScaleToDemandConfig scale;
  std::size_t decisions_kept = 100;  // recent decisions shown by status()
  // A round searches the market only when its last search is older than this; meanwhile it
  // decides on that search's offers, less those rented since. vast allows about ten searches a
  // minute for everything one account does (market/rate_limits.h): an autopilot searching
  // every few seconds would leave none to the operator's offer page and deploys.
  double offers_max_age_s = 15;
};

// One action the autopilot took (or tried), for the operator to read.
struct AutopilotDecision {
  double at = 0;
  std::string action;  // "rent" | "drop"
  std::int64_t offer_id = 0;
  std::int64_t instance_id = 0;  // drop: the instance; rent: the new instance, if created
  bool ok = true;
  std::string reason;  // the policy's reason, then the outcome when it failed
};

// What the autopilot reads of the job queue each round: the queue as it is at `now` and the
// arrivals since `since`. serve wires it to jobs::JobQueue (job_signal in job_signal.h).
using JobSignal = std::function<core::QueueSnapshot(double now, double since)>;

struct AutopilotStatus {
  bool enabled = false;
  bool paused = false;
  std::string paused_by;
  double paused_at = 0;
  double last_run_at = 0;  // 0: never ran
  bool in_round = false;   // a round is deciding or renting now (paced calls make it last)
  std::string last_error;  // empty when the last run completed
  int runs = 0, rents = 0, drops = 0;
  std::vector<AutopilotDecision> recent;  // newest last
  // The demand the last round sized the fleet for (nullopt: unlimited) and where it came from.
  std::optional<double> demand_proofs_per_hour;
  std::string demand_reason;
};

class Autopilot {
 public:
  using Clock = std::function<double()>;
  // `jobs`: the job queue's signal; empty (or no job ever submitted) keeps the configured demand.
  Autopilot(Manager& manager, market::Market& market, AutopilotConfig config, Clock clock,
            JobSignal jobs = {});

  // One decision round. Does nothing when disabled or paused. Returns the actions taken.
  std::vector<AutopilotDecision> run_once();

  // Persists the pause; `who` says where it came from ("operator via API", ...).
  void set_paused(bool paused, const std::string& who);
  AutopilotStatus status();

 private:
  bool paused_in_store();

  Manager& manager_;
  market::Market& market_;
  AutopilotConfig config_;
  Clock clock_;
  JobSignal jobs_;
  std::optional<double> demand_;       // the queue's demand the fleet was last sized for (run_mu_)
  std::vector<core::Offer> searched_;  // the last search's offers (run_mu_)
  double searched_at_ = 0;             // when (run_mu_); 0: never
  std::mutex run_mu_;                  // one round at a time
  std::atomic<bool> in_round_{false};
  std::mutex mu_;  // guards the fields below
  double last_run_at_ = 0;
  std::string last_error_;
  int runs_ = 0, rents_ = 0, drops_ = 0;
  std::deque<AutopilotDecision> recent_;
  std::optional<double> sized_for_;
  std::string demand_reason_;
};

nlohmann::json to_json(const AutopilotStatus& status);

}  // namespace pf::manager
