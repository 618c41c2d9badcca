#include "manager/fleet_watch.h"

#include <algorithm>
#include <utility>

#include "core/billing.h"
#include "core/blocklist.h"
#include "core/job_latency.h"
#include "core/learned_predictor.h"
#include "core/scoring.h"
#include "manager/webhooks.h"
#include "store/store.h"

namespace pf::manager {
namespace {

using core::InstanceRecord;
using core::InstanceState;
using nlohmann::json;

bool live(const InstanceRecord& r) {
  return r.state != InstanceState::Destroying && r.state != InstanceState::Destroyed;
}

json alert_json(const core::Alert& a) {
  json out = {{"instance_id", a.instance_id},
              {"kind", core::to_string(a.kind)},
              {"drop_warranted", a.drop_warranted},
              {"reason", a.reason},
              {"since", a.since},
              {"acted", a.acted}};
  return out;
}

constexpr std::size_t kMaxMissedRemembered = 20'000;

}  // namespace

FleetWatch::FleetWatch(Manager& manager, FleetWatchConfig config, Clock clock)
    : manager_(manager), config_(std::move(config)), clock_(std::move(clock)) {}

core::AlertsView FleetWatch::run_once() {
  std::lock_guard run_lock(run_mu_);
  const double now = clock_();
  auto& store = manager_.store();
  const auto fleet = store.instances(true);
  const auto measurements = core::join_measurements(store.all_bench_runs(), fleet);
  const auto bad_hosts = store.bad_hosts();
  const core::FleetKnowledge knowledge = core::learn_fleet(measurements, config_.policy.predictor);
  std::map<std::int64_t, std::vector<core::BenchRun>> windows;
  for (const auto& m : measurements) {
    if (m.run.kind == "production") windows[m.run.instance_id].push_back(m.run);
  }
  // The gateway's jobs: which instances hold work now (an accepted instance without a job is
  // idle, not stalled), and the jobs that missed their deadline.
  std::optional<JobsReport> report;
  if (auto* queue = manager_.jobs())
    report = build_jobs_report(manager_, *queue, config_.jobs, now);
  std::map<std::int64_t, int> live_on_machine;
  for (const auto& r : fleet) {
    if (live(r)) live_on_machine[r.offer.machine_id]++;
  }

  std::vector<core::Alert> found;
  std::set<std::int64_t> seen;
  for (const auto& rec : fleet) {
    if (!live(rec)) continue;
    seen.insert(rec.id);
    // Progress: any counted proof, while it holds work. The first look, and any look while it
    // holds none, counts from now (no history is assumed).
    const int proofs = rec.proofs_benchmark + rec.proofs_production;
    const bool holds_work = report && report->in_flight_by_instance.count(rec.id) > 0 &&
                            report->in_flight_by_instance.at(rec.id) > 0;
    auto [it, fresh] = progress_.try_emplace(rec.id, proofs, now);
    if (!holds_work || (!fresh && it->second.first != proofs)) it->second = {proofs, now};

    const double be = core::objective_break_even(rec.offer, core::rental_usd_per_hour(rec),
                                                 config_.policy.scoring);
    const auto& ws = windows[rec.id];
    if (auto a = core::production_alert(rec, ws, be, config_.policy.watch)) found.push_back(*a);
    if (rec.state == InstanceState::FetchingParams) {
      const int others = std::max(0, live_on_machine[rec.offer.machine_id] - 1);
      const core::Prediction pred =
          core::predict_offer(rec.offer, knowledge, config_.policy.predictor, others,
                              core::Reasons::Skipped);  // judge_download reads its numbers only
      const auto judged = core::judge_download(rec, pred, others,
                                               core::auto_strikes(bad_hosts, rec.offer.machine_id),
                                               now, config_.policy);
      if (auto a = core::download_alert(rec, judged)) found.push_back(*a);
    }
    const double rate = core::stall_reference_rate(rec, ws);
    if (auto a = core::stall_alert(rec, it->second.second, rate, now, 3 * config_.heartbeat_s,
                                   holds_work, config_.alerts.stall)) {
      found.push_back(*a);
    }
  }
  std::erase_if(progress_, [&](const auto& p) { return !seen.count(p.first); });

  // Keep when each alert was first seen and whether it was acted on.
  for (auto& a : found) {
    a.since = now;
    for (const auto& old : last_) {
      if (old.instance_id == a.instance_id && old.kind == a.kind) {
        a.since = old.since;
        a.acted = old.acted;
      }
    }
  }
  const core::AlertChanges changes = core::alert_changes(last_, found);
  std::map<std::int64_t, const InstanceRecord*> by_id;
  for (const auto& r : fleet) by_id[r.id] = &r;
  for (const auto& a : changes.raised) {
    manager_.store().append_event(core::InstanceEvent{
        0, a.instance_id, now, "alert",
        std::string(a.drop_warranted ? "alert: " : "warning: ") + a.reason,
        json{{"kind", core::to_string(a.kind)}, {"drop_warranted", a.drop_warranted}}.dump()});
    json data = alert_json(a);
    data["origin"] = by_id.count(a.instance_id) ? by_id[a.instance_id]->origin : "";
    manager_.notify(kWebhookAlertRaised, std::move(data));
  }
  for (const auto& a : changes.cleared) {
    // An instance that closed takes its alerts with it: nothing to announce.
    const auto row = by_id.find(a.instance_id);
    if (row == by_id.end() || !live(*row->second)) continue;
    manager_.store().append_event(core::InstanceEvent{
        0, a.instance_id, now, "alert", "cleared: " + std::string(core::to_string(a.kind)),
        json{{"kind", core::to_string(a.kind)}, {"cleared", true}}.dump()});
    manager_.notify(kWebhookAlertCleared, alert_json(a));
  }

  // Act where the operator let the manager act.
  for (auto& a : found) {
    if (a.acted || !by_id.count(a.instance_id)) continue;
    if (!core::alert_acts(a, by_id[a.instance_id]->origin, config_.alerts)) continue;
    auto closed = manager_.request_destroy(a.instance_id, "alert: " + a.reason,
                                           core::CloseCause::Dropped, a.strike);
    a.acted = closed.has_value();
  }
  last_ = found;

  // The fleet: spend against the budget, jobs missing deadlines.
  core::AlertsView view;
  view.checked_at = now;
  view.instances = found;
  double live_dph = 0, spend = 0;
  for (const auto& r : fleet) {
    spend += r.spend_usd;
    if (live(r)) live_dph += core::fleet_usd_per_hour(r);
  }
  if (auto over = core::budget_alert(live_dph, spend, config_.alerts)) {
    auto [entry, first] =
        fleet_.try_emplace(core::kSpendAlert, core::FleetAlert{core::kSpendAlert, *over, now});
    entry->second.reason = *over;
    if (first) {
      manager_.notify(kWebhookSpendOverBudget,
                      {{"reason", *over},
                       {"dollars_per_hour", live_dph},
                       {"spend_usd", spend},
                       {"budget_dollars_per_hour", config_.alerts.budget_dollars_per_hour},
                       {"budget_usd", config_.alerts.budget_usd}});
    }
  } else {
    fleet_.erase(core::kSpendAlert);
  }
  if (report) {
    std::vector<std::int64_t> fresh;
    int missed = 0;
    for (const auto& job : report->scanned) {
      const auto t = core::job_timeliness(job, now).timeliness;
      if (t != core::Timeliness::Late && t != core::Timeliness::Missed) continue;
      ++missed;
      if (!missed_announced_.count(job.id)) fresh.push_back(job.id);
    }
    if (auto reason =
            core::deadline_alert(static_cast<int>(fresh.size()), missed, config_.jobs.window_s)) {
      fleet_[core::kJobsAlert] = core::FleetAlert{core::kJobsAlert, *reason, now};
      json ids = json::array();
      for (std::size_t i = 0; i < fresh.size() && i < 100; ++i) ids.push_back(fresh[i]);
      manager_.notify(
          kWebhookJobsMissedDeadline,
          {{"reason", *reason}, {"new", fresh.size()}, {"in_window", missed}, {"job_ids", ids}});
      for (auto id : fresh) missed_announced_.insert(id);
      // Job ids only grow: the oldest are forgotten first.
      while (missed_announced_.size() > kMaxMissedRemembered) {
        missed_announced_.erase(missed_announced_.begin());
      }
    } else if (missed == 0) {
      fleet_.erase(core::kJobsAlert);
    }
  }
  for (const auto& [kind, alert] : fleet_) view.fleet.push_back(alert);
  manager_.set_alerts(view);
  return view;
}

}  // namespace pf::manager
