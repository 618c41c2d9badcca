#include "core/reconcile.h"

#include <map>

#include "core/unconfirmed_create.h"

namespace pf::core {
namespace {

std::string status_name(const std::string& status) {
  return status.empty() ? "(none)" : status;
}

}  // namespace

MarketStatus market_status_of(const ListedInstance& l) {
  return MarketStatus{l.actual_status, l.intended_status, l.cur_state, l.next_state,
                      l.status_msg,    l.end_date,        l.is_bid};
}

const char* to_string(ReconcileAction::Kind kind) {
  using K = ReconcileAction::Kind;
  switch (kind) {
    case K::RecordOrphan:
      return "record_orphan";
    case K::DestroyListed:
      return "destroy_listed";
    case K::Adopt:
      return "adopt";
    case K::RecordStatus:
      return "record_status";
    case K::ConfirmCreate:
      return "confirm_create";
    case K::Close:
      return "close";
  }
  return "unknown";
}

std::optional<std::string> deployment_of_label(const std::string& label) {
  const std::string prefix = market_label("");
  if (label.rfind(prefix, 0) != 0) return std::nullopt;
  return label.substr(prefix.size());
}

std::vector<ReconcileAction> plan_reconcile(const std::vector<InstanceRecord>& rows,
                                            const std::vector<ListedInstance>& listed, double now,
                                            const std::set<std::int64_t>& creates_in_flight,
                                            const ReconcileConfig& cfg) {
  using K = ReconcileAction::Kind;
  using S = InstanceState;
  std::vector<ReconcileAction> plan;
  std::map<std::string, const InstanceRecord*> by_deployment;
  for (const auto& r : rows) by_deployment[r.deployment_id] = &r;
  // A row adopted in this plan holds that market id from here on.
  std::map<std::int64_t, std::int64_t> market_of;
  for (const auto& r : rows)
    if (r.market_id) market_of[r.id] = *r.market_id;
  std::set<std::int64_t> seen;

  auto action = [&](K kind, std::int64_t id, const ListedInstance& inst, std::string reason) {
    ReconcileAction a;
    a.kind = kind;
    a.instance_id = id;
    a.listed = inst;
    a.reason = std::move(reason);
    plan.push_back(std::move(a));
  };

  for (const auto& inst : listed) {
    const auto dep = deployment_of_label(inst.label);
    if (!dep) continue;  // not ours
    seen.insert(inst.id);
    auto found = by_deployment.find(*dep);
    if (found == by_deployment.end()) {
      // Without its secret no agent can register, so it can only bill.
      ReconcileAction a;
      a.kind = K::RecordOrphan;
      a.listed = inst;
      a.deployment_id = *dep;
      a.close = Closing{CloseCause::Orphan, "orphan: our label, unknown to the store"};
      a.reason = "found market instance " + std::to_string(inst.id) +
                 " with our label but no record: destroying it";
      plan.push_back(std::move(a));
      continue;
    }
    const InstanceRecord& rec = *found->second;
    if (rec.state == S::Destroyed) {
      action(K::DestroyListed, rec.id, inst,
             "destroyed instance " + std::to_string(inst.id) + " still listed: destroying again");
      continue;
    }
    auto known = market_of.find(rec.id);
    if (known != market_of.end() && known->second != inst.id) {
      action(K::DestroyListed, rec.id, inst,
             "duplicate market instance " + std::to_string(inst.id) + " for this deployment");
      continue;
    }
    if (known == market_of.end()) {
      market_of[rec.id] = inst.id;
      action(K::Adopt, rec.id, inst,
             "adopted market instance " + std::to_string(inst.id) + " found by label");
    }
    // A stop the instance cannot come back from (its contract ended) closes it now, blaming
    // nobody; any other stop is recorded with its cause and judged by the lifecycle
    // (market_stopped_grace_s).
    const auto stop = explain_market_stop(market_status_of(inst), now);
    if (stop && !stop->may_resume && rec.state != S::Destroying) {
      ReconcileAction a;
      a.kind = K::Close;
      a.instance_id = rec.id;
      a.listed = inst;
      a.close = Closing{CloseCause::MarketStopped, "the market stopped it: " + stop->reason};
      a.reason = "the market stopped it for good (" + std::string(to_string(stop->cause)) + ")";
      plan.push_back(std::move(a));
      continue;
    }
    if (inst.actual_status != rec.market_status || rec.market_status_since == 0) {
      action(K::RecordStatus, rec.id, inst,
             "market status " + status_name(rec.market_status) + " → " +
                 status_name(inst.actual_status) + (stop ? ": " + stop->reason : ""));
    }
    if (rec.state == S::Renting)
      action(K::ConfirmCreate, rec.id, inst, "market instance confirmed");
  }

  for (const auto& rec : rows) {
    if (rec.state == S::Destroyed || rec.state == S::Destroying) continue;  // tick confirms
    auto known = market_of.find(rec.id);
    if (known != market_of.end() && seen.count(known->second)) continue;
    ReconcileAction a;
    a.kind = K::Close;
    a.instance_id = rec.id;
    if (!rec.market_id) {
      // Its label is not in this complete list (a listed one was adopted above).
      const UnconfirmedCreate unconfirmed{creates_in_flight.count(rec.id) > 0, false,
                                          cfg.vanish_grace_s, cfg.renting_max_s};
      auto why = unconfirmed_create_close_reason(rec, now, unconfirmed);
      if (!why) continue;
      a.close = Closing{CloseCause::NotRented, *why};
      a.reason = "nothing was rented";
      plan.push_back(std::move(a));
      continue;
    }
    // Reads can lag a create: a young instance missing from the list is not yet gone.
    if (now - rec.created_at < cfg.vanish_grace_s ||
        (rec.state == S::Booting && now - rec.state_since < cfg.vanish_grace_s)) {
      continue;
    }
    a.close = Closing{CloseCause::Vanished, "instance vanished from the market"};
    a.reason = "market no longer lists it";
    plan.push_back(std::move(a));
  }
  return plan;
}

}  // namespace pf::core
