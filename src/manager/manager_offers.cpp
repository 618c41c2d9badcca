// The Manager's offers: the market's listing ranked for the operator (and the autopilot) by
// what each machine is expected to earn, and the rental of one, whose intent is recorded before
// the market's create is sent so a crash leaves a row for reconciliation to settle; and the
// changes of a bid rental's bid (core/bid_change.h), each recorded as an event before it is sent.
#include <algorithm>

#include "core/bid_change.h"
#include "core/text.h"
#include "manager/manager.h"
#include "store/store.h"

namespace pf::manager {
namespace {

using core::InstanceRecord;
using S = core::InstanceState;
using nlohmann::json;

// The market being busy, unreachable or failing on its side (a 5xx after every retry) is not the
// client's mistake and not a fault of ours: 503 (with Retry-After, see error_reply) tells a
// client to come back; any other market failure (a reply we cannot read, a refusal) is a bad
// gateway.
ApiError market_failure(const std::string& what, const market::MarketError& e) {
  int status = 502;
  if (e.kind == market::ErrorKind::OfferGone) status = 409;
  if (e.kind == market::ErrorKind::RateLimited || e.kind == market::ErrorKind::Transport ||
      e.kind == market::ErrorKind::NotLeader ||
      (e.kind == market::ErrorKind::MarketError && e.http_status >= 500))
    status = 503;
  return ApiError{status, what + ": " + e.message + " (" + market::to_string(e.kind) + ")"};
}

}  // namespace

ApiResult<std::vector<core::RankedOffer>> Manager::rank_offers(const json& filters, int limit,
                                                               core::RankOrder order) {
  market::SearchRequest req;
  req.query = filters;
  req.allocated_storage_gb = config_.disk_gb;  // dph_total prices the disk a create rents
  auto found = market_.search_offers(req);
  if (!found) return tl::unexpected(market_failure("offer search failed", found.error()));
  // The autopilot's prediction (the machine's runs, its model's fleet data) and the verdicts'
  // break-even, with each machine's history.
  core::RankConfig rank = config_.rank;
  rank.profit_objective = config_.profit_objective;
  const auto fleet = store_.instances(true);
  const auto runs = store_.all_bench_runs();
  const auto bad_hosts = store_.bad_hosts();
  auto ranked = core::rank_offers(std::move(found->offers), rank, order,
                                  core::RankHistory{fleet, runs, bad_hosts, clock_()});
  if (limit > 0 && ranked.size() > static_cast<std::size_t>(limit)) {
    ranked.resize(static_cast<std::size_t>(limit));
  }
  return ranked;
}

core::RentalTerms Manager::rental_terms(const core::Offer& offer, double now) {
  // Priced only where a bid is possible: the prediction reads the fleet's whole history.
  if (!core::bid_possible(offer, config_.bids)) {
    return core::choose_rental_terms(offer, 0, 0, config_.disk_gb, {}, config_.bids, now);
  }
  core::RankConfig rank = config_.rank;
  rank.profit_objective = config_.profit_objective;
  const auto fleet = store_.instances(true);
  const auto runs = store_.all_bench_runs();
  const auto ranked = core::rank_offers({offer}, rank, core::RankOrder::Cost,
                                        core::RankHistory{fleet, runs, {}, now});
  const double rate = ranked.empty() ? 0 : ranked.front().prediction.rate;
  return core::rental_terms_for(offer, rate, config_.disk_gb, fleet, config_.bids, now);
}

ApiResult<InstanceRecord> Manager::deploy(std::int64_t offer_id, const std::string& origin,
                                          bool automatic_blocks_applied,
                                          const core::Offer* searched) {
  if (offer_id <= 0) return tl::unexpected(ApiError{400, "offer_id must be a positive integer"});
  const double now = clock_();
  {
    std::lock_guard lock(mu_);
    // Never rent the same offer twice: vast accepts both and the second never starts.
    for (const auto& r : store_.instances(false)) {
      if (r.offer.id == offer_id) {
        return tl::unexpected(
            ApiError{409, "offer " + std::to_string(offer_id) + " is already rented by instance " +
                              std::to_string(r.id) + " (" + core::to_string(r.state) + ")"});
      }
    }
  }
  // Re-check the offer right before renting: offers vanish and change between searches.
  std::vector<core::Offer> listed;
  if (searched != nullptr && searched->id == offer_id) {
    listed.push_back(*searched);
  } else {
    market::SearchRequest check;
    check.query = json{{"id", {{"eq", offer_id}}}};
    check.limit = 1;
    check.allocated_storage_gb = config_.disk_gb;
    auto found = market_.search_offers(check);
    if (!found) {
      return tl::unexpected(market_failure("re-checking the offer failed", found.error()));
    }
    listed = std::move(found->offers);
  }
  auto it = std::find_if(listed.begin(), listed.end(),
                         [&](const core::Offer& o) { return o.id == offer_id; });
  if (it == listed.end()) {
    return tl::unexpected(
        ApiError{404, "offer " + std::to_string(offer_id) + " is not listed (taken or withdrawn)"});
  }
  for (const auto& b : store_.bad_hosts()) {
    if (automatic_blocks_applied && b.source != "operator") continue;
    if (b.machine_id == it->machine_id && core::is_active(b, now)) {
      return tl::unexpected(ApiError{409, "machine " + std::to_string(b.machine_id) +
                                              " is on the bad-host list: " + b.reason});
    }
  }

  const core::RentalTerms terms = rental_terms(*it, now);

  // Record the intent before acting: a crash after the create leaves a row to reconcile with.
  const std::string secret = random_token();
  InstanceRecord rec;
  rec.deployment_id = random_token().substr(0, 16);
  rec.offer = *it;
  rec.disk_gb = config_.disk_gb;    // what the create below rents; billed for storage
  rec.bid_price = terms.bid_price;  // what compute is billed at, when interruptible
  rec.created_at = now;
  rec.state = S::Renting;
  rec.state_since = now;
  rec.secret_hash = hash_token(secret);
  rec.origin = origin;
  rec.billed_until = now;
  for (const auto& p : config_.params) rec.params_total_bytes += static_cast<double>(p.bytes);
  rec.deadline_at = core::state_deadline(rec, S::Renting, now, break_even(rec), config_.lifecycle);
  {
    std::lock_guard lock(mu_);
    store_.transaction([&] {
      rec.id = store_.insert_instance(rec);
      event(rec.id, "operator",
            "renting offer " + std::to_string(offer_id) + " (" + rec.offer.gpu_name + " x" +
                std::to_string(rec.offer.num_gpus) + ", $" + core::fixed(rec.offer.dph_total, 3) +
                "/hr) for " + origin + ", " + terms.reason,
            {{"offer_id", offer_id},
             {"origin", origin},
             {"bid_price", terms.bid_price ? json(*terms.bid_price) : json(nullptr)},
             {"on_demand_usd_per_proof", terms.on_demand_usd_per_proof},
             {"bid_usd_per_proof", terms.bid_usd_per_proof},
             {"preemptions_per_hour", terms.preemptions_per_hour}});
    });
    market_calls_.create_started(rec.id);
  }
  // Until the create returns, reconcile must not take the row's absence from a list as proof
  // that nothing was rented.
  struct CreateDone {
    Manager& m;
    std::int64_t id;
    ~CreateDone() { m.market_calls_.create_returned(id); }
  } create_done{*this, rec.id};

  market::CreateRequest create;
  create.offer_id = offer_id;
  create.image = config_.image;
  create.disk_gb = config_.disk_gb;
  create.label = core::market_label(rec.deployment_id);
  create.env = {{"PROVERFLEET_MANAGER", config_.public_url},
                {"PROVERFLEET_DEPLOYMENT", rec.deployment_id},
                {"PROVERFLEET_SECRET", secret}};
  create.onstart = config_.onstart;
  create.runtype = "ssh";
  create.bid_price = terms.bid_price;
  auto created = market_.create_instance(create);

  std::lock_guard lock(mu_);
  auto fresh = store_.instance(rec.id);
  if (!fresh) return tl::unexpected(ApiError{500, "instance row vanished during deploy"});
  rec = *fresh;
  if (created) {
    // Reconciliation may already have adopted it while the create was in flight.
    if (rec.state == S::Renting) {
      rec.market_id = created->instance_id;
      transition(rec, S::Booting,
                 "market instance " + std::to_string(created->instance_id) +
                     (created->reconciled ? " (reply lost; found by label)" : ""));
    }
    return rec;
  }
  const auto& err = created.error();
  if (err.kind == market::ErrorKind::CreateUnknown) {
    event(rec.id, "market",
          "create outcome unknown: " + err.message + "; reconciliation will adopt or close it");
    return rec;
  }
  // A definite rejection: nothing was rented, so the row closes without a destroy.
  close(rec, {core::CloseCause::NotRented, "create failed: " + err.message});
  transition(rec, S::Destroyed, "nothing was rented");
  return tl::unexpected(market_failure("create failed", err));
}

// --- changes of bid ------------------------------------------------------------------------------

std::optional<Manager::BidChangeToSend> Manager::decide_bid_change(const InstanceRecord& rec,
                                                                   double now) {
  if (!rec.market_id) return std::nullopt;
  const auto change =
      core::change_of_bid(rec, now, config_.rank.economics.revenue_per_proof_usd, config_.bids);
  if (!change) return std::nullopt;
  // Sent at most once per destroy_retry_s while unconfirmed: the row keeps the old bid until the
  // market confirms, so the decision stands until then.
  if (!market_calls_.bid_change_due(rec.id, now, config_.lifecycle.destroy_retry_s)) {
    return std::nullopt;
  }
  event(rec.id, "market", "changing the bid: " + change->reason,
        {{"from", *rec.bid_price}, {"to", change->bid_price}});
  return BidChangeToSend{rec.id, *rec.market_id, change->bid_price};
}

void Manager::send_bid_changes(const std::vector<BidChangeToSend>& changes) {
  for (const auto& c : changes) {
    auto sent = market_.change_bid(c.market_id, c.bid_price);  // idempotent: a price, not a step
    std::lock_guard lock(mu_);
    if (!still_leading()) return;  // the new leader decides again from the row
    auto rec = store_.instance(c.id);
    if (!rec || rec->state == S::Destroying || rec->state == S::Destroyed) continue;
    if (!sent) {
      event(c.id, "market",
            "change of bid to $" + core::fixed(c.bid_price, 3) +
                "/hr failed, will retry: " + sent.error().message);
      continue;
    }
    // What ran so far was billed at the old bid; from now on compute is billed at the new one.
    core::accrue_rental_spend(*rec, clock_());
    const double from = rec->bid_price.value_or(0);
    rec->bid_price = c.bid_price;
    store_.transaction([&] {
      store_.update_instance(*rec);
      event(c.id, "market",
            "bid changed from $" + core::fixed(from, 3) + " to $" + core::fixed(c.bid_price, 3) +
                "/hr (market confirmed)",
            {{"from", from}, {"to", c.bid_price}});
    });
  }
}

}  // namespace pf::manager
