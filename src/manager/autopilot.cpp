#include "manager/autopilot.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "core/blocklist.h"
#include "core/learned_predictor.h"
#include "manager/webhooks.h"
#include "store/store.h"

namespace pf::manager {
namespace {

constexpr const char* kPausedKey = "autopilot.paused";
constexpr const char* kPausedByKey = "autopilot.paused_by";
constexpr const char* kPausedAtKey = "autopilot.paused_at";

}  // namespace

Autopilot::Autopilot(Manager& manager, market::Market& market, AutopilotConfig config, Clock clock,
                     JobSignal jobs)
    : manager_(manager),
      market_(market),
      config_(std::move(config)),
      clock_(std::move(clock)),
      jobs_(std::move(jobs)) {}

bool Autopilot::paused_in_store() {
  return manager_.store().setting(kPausedKey).value_or("0") == "1";
}

void Autopilot::set_paused(bool paused, const std::string& who) {
  auto& store = manager_.store();
  store.transaction([&] {
    store.put_setting(kPausedKey, paused ? "1" : "0");
    store.put_setting(kPausedByKey, who);
    store.put_setting(kPausedAtKey, std::to_string(clock_()));
  });
  if (paused) {
    manager_.notify(kWebhookAutopilotPaused, {{"paused_by", who}, {"paused_at", clock_()}});
  }
}

AutopilotStatus Autopilot::status() {
  AutopilotStatus s;
  s.enabled = config_.enabled;
  auto& store = manager_.store();
  s.paused = paused_in_store();
  s.paused_by = store.setting(kPausedByKey).value_or("");
  try {
    s.paused_at = std::stod(store.setting(kPausedAtKey).value_or("0"));
  } catch (const std::exception&) {
    s.paused_at = 0;
  }
  s.in_round = in_round_.load();
  std::lock_guard lock(mu_);
  s.last_run_at = last_run_at_;
  s.last_error = last_error_;
  s.runs = runs_;
  s.rents = rents_;
  s.drops = drops_;
  s.recent.assign(recent_.begin(), recent_.end());
  s.demand_proofs_per_hour = sized_for_;
  s.demand_reason = demand_reason_;
  return s;
}

std::vector<AutopilotDecision> Autopilot::run_once() {
  std::vector<AutopilotDecision> taken;
  if (!config_.enabled || paused_in_store()) return taken;
  std::lock_guard run_lock(run_mu_);
  struct InRound {
    std::atomic<bool>& flag;
    explicit InRound(std::atomic<bool>& f) : flag(f) { flag = true; }
    ~InRound() { flag = false; }
  } in_round(in_round_);
  const double now = clock_();
  auto finish = [&](std::string error) {
    std::lock_guard lock(mu_);
    last_run_at_ = now;
    last_error_ = std::move(error);
    ++runs_;
    for (const auto& d : taken) {
      (d.action == "rent" ? rents_ : drops_) += d.ok ? 1 : 0;
      recent_.push_back(d);
      while (recent_.size() > config_.decisions_kept) recent_.pop_front();
    }
  };

  auto& store = manager_.store();
  if (searched_at_ == 0 || now - searched_at_ >= config_.offers_max_age_s || now < searched_at_) {
    market::SearchRequest request;
    request.query = config_.filters;
    request.allocated_storage_gb = manager_.config().disk_gb;  // priced as the create rents
    auto found = market_.search_offers(request);
    if (!found) {
      // Without a complete view of the market nothing is rented or dropped this round.
      searched_at_ = 0;
      finish("offer search failed: " + found.error().message);
      return taken;
    }
    searched_ = std::move(found->offers);
    searched_at_ = now;
  }
  const auto fleet = store.instances(true);
  // A recent search still lists what was rented since (a fresh one would not).
  std::vector<core::Offer> offers;
  for (const auto& o : searched_) {
    const bool rented = std::any_of(fleet.begin(), fleet.end(), [&](const core::InstanceRecord& r) {
      return r.offer.id == o.id && r.state != core::InstanceState::Destroyed;
    });
    if (!rented) offers.push_back(o);
  }
  const auto measurements = core::join_measurements(store.all_bench_runs(), fleet);
  const auto bad_hosts = store.bad_hosts();
  core::PolicyHistory history;
  history.measurements = measurements;
  history.exploration_spent_usd =
      core::exploration_spend(fleet, now, config_.policy.exploration_window_s);
  // core::decide also leaves alone the machines the operator recently took an instance off.
  // Once jobs come through the gateway, the demand is the queue's (the same decision `sim`
  // makes on /2 scenarios); before the first job, the configured demand.
  std::vector<core::Action> actions;
  std::optional<double> sized_for = config_.policy.demand_proofs_per_hour;
  std::string demand_reason = "configured";
  const core::QueueSnapshot seen =
      jobs_ ? jobs_(now, now - config_.scale.forecast.history_days * 86400.0 -
                             config_.scale.forecast.bin_s - config_.scale.estimate.window_s)
            : core::QueueSnapshot{};
  if (seen.any_job) {
    auto scaled = core::decide_for_jobs(fleet, offers, history, bad_hosts, now, config_.policy,
                                        seen.view(), demand_, config_.scale);
    if (scaled.demand) demand_ = scaled.demand->proofs_per_hour;
    sized_for = scaled.sized_for;
    demand_reason =
        scaled.demand ? scaled.demand->reason : "job queue watched too briefly: sized as before";
    actions = std::move(scaled.actions);
  } else {
    actions = core::decide(fleet, offers, history, bad_hosts, now, config_.policy);
  }
  {
    std::lock_guard lock(mu_);
    sized_for_ = sized_for;
    demand_reason_ = demand_reason;
  }

  for (const auto& a : actions) {
    // Paced market calls make a round last seconds: a pause the operator gives meanwhile stops
    // what is left of it.
    if (paused_in_store()) break;
    AutopilotDecision d;
    d.at = now;
    d.reason = a.reason;
    if (a.kind == core::Action::Kind::Drop) {
      d.action = "drop";
      d.instance_id = a.instance_id;
      d.offer_id = a.offer.id;
      // The drop and its blame go through the Manager: under its lock, with events.
      auto r = manager_.request_destroy(a.instance_id, "autopilot: " + a.reason,
                                        core::CloseCause::Dropped, a.strike);
      if (!r) {
        d.ok = false;
        d.reason += " — not dropped: " + r.error().message;
      }
    } else {
      d.action = "rent";
      d.offer_id = a.offer.id;
      // Rented as this round's search listed it: no second search per rental.
      auto r =
          manager_.deploy(a.offer.id, "autopilot", /*automatic_blocks_applied=*/true, &a.offer);
      if (r) {
        d.instance_id = r->id;
        core::InstanceEvent why;
        why.instance_id = r->id;
        why.at = now;
        why.kind = "autopilot";
        why.message = (a.exploratory ? "rented to find out: " : "rented: ") + a.reason;
        nlohmann::json data = {{"predicted_rate", a.prediction.rate},
                               {"p_pays", a.score.p_pays},
                               {"exploratory", a.exploratory}};
        why.data_json = data.dump();
        store.append_event(why);
      } else {
        // An offer taken between search and rent is routine; the next round re-decides, without
        // it while it decides on this search (409: gone or already rented; 404: not listed).
        d.ok = false;
        d.reason += " — not rented: " + r.error().message;
        if (r.error().status == 409 || r.error().status == 404) {
          std::erase_if(searched_, [&](const core::Offer& o) { return o.id == a.offer.id; });
        }
      }
    }
    taken.push_back(std::move(d));
  }
  finish("");
  return taken;
}

nlohmann::json to_json(const AutopilotStatus& s) {
  nlohmann::json recent = nlohmann::json::array();
  for (const auto& d : s.recent) {
    recent.push_back({{"at", d.at},
                      {"action", d.action},
                      {"offer_id", d.offer_id},
                      {"instance_id", d.instance_id},
                      {"ok", d.ok},
                      {"reason", d.reason}});
  }
  return {{"enabled", s.enabled},
          {"paused", s.paused},
          {"in_round", s.in_round},
          {"active", s.enabled && !s.paused},
          {"paused_by", s.paused_by},
          {"paused_at", s.paused_at},
          {"last_run_at", s.last_run_at},
          {"last_error", s.last_error},
          {"runs", s.runs},
          {"rents", s.rents},
          {"drops", s.drops},
          {"recent", recent},
          {"demand",
           {{"proofs_per_hour", s.demand_proofs_per_hour ? nlohmann::json(*s.demand_proofs_per_hour)
                                                         : nlohmann::json(nullptr)},
            {"reason", s.demand_reason}}}};
}

}  // namespace pf::manager
