#include "core/rental_terms.h"

#include <algorithm>
#include <cmath>

#include "core/billing.h"
#include "core/text.h"

namespace pf::core {

std::vector<BidRental> bid_rentals(std::span<const InstanceRecord> fleet) {
  std::vector<BidRental> out;
  for (const auto& rec : fleet) {
    if (!rec.bid_price || *rec.bid_price <= 0) continue;
    BidRental r;
    r.gpu_name = rec.offer.gpu_name;
    r.machine_id = rec.offer.machine_id;
    // Compute is billed only while it runs, at the bid: the bill says how long it ran.
    const double compute_usd =
        std::max(0.0, rec.spend_usd - rec.storage_spend_usd - rec.bandwidth_spend_usd);
    r.running_h = compute_usd / *rec.bid_price;
    r.preemptions = rec.market_stops;
    if (rec.close_cause == CloseCause::MarketStopped) {
      r.closed_stopped_at = rec.destroyed_at.value_or(rec.state_since);
    }
    out.push_back(std::move(r));
  }
  return out;
}

PreemptionRate model_preemption_rate(std::span<const BidRental> history,
                                     const std::string& gpu_name, const BidConfig& cfg) {
  PreemptionRate rate;
  for (const auto& r : history) {
    if (!iequals(r.gpu_name, gpu_name)) continue;
    rate.evidence_h += r.running_h;
    rate.preemptions += r.preemptions;
  }
  // Gamma-Poisson posterior mean: the prior counts as prior_weight_h hours at its rate.
  const double weight = std::max(0.0, cfg.prior_weight_h);
  const double hours = weight + rate.evidence_h;
  rate.per_hour = hours > 0 ? (cfg.prior_preemptions_per_hour * weight + rate.preemptions) / hours
                            : cfg.prior_preemptions_per_hour;
  return rate;
}

PreemptionRate machine_preemption_rate(std::span<const BidRental> history,
                                       std::int64_t machine_id) {
  PreemptionRate rate;
  for (const auto& r : history) {
    if (r.machine_id != machine_id) continue;
    rate.evidence_h += r.running_h;
    rate.preemptions += r.preemptions;
  }
  if (rate.evidence_h > 0) rate.per_hour = rate.preemptions / rate.evidence_h;
  return rate;
}

double bid_for(const Offer& offer, const BidConfig& cfg) {
  return std::max(kMinBidUsdPerHour, offer.min_bid * (1 + std::max(0.0, cfg.margin_over_min_bid)));
}

double bid_ceiling(const Offer& offer, double disk_gb, const BidConfig& cfg) {
  return std::min(compute_usd_per_hour(offer, disk_gb) * cfg.max_share_of_on_demand,
                  kMaxBidUsdPerHour);
}

RentalTerms choose_rental_terms(const Offer& offer, double rate, double proof_h, double disk_gb,
                                std::span<const BidRental> history, const BidConfig& cfg,
                                double now) {
  RentalTerms terms;
  const double compute = compute_usd_per_hour(offer, disk_gb);
  const double storage = storage_usd_per_hour(offer, disk_gb);
  if (rate > 0) terms.on_demand_usd_per_proof = (compute + storage) / rate;
  auto on_demand = [&](std::string why) {
    terms.bid_price.reset();
    terms.reason = "on-demand: " + std::move(why);
    return terms;
  };
  if (!cfg.enabled) return on_demand("interruptible rentals are off ([bids] enabled)");
  if (!(offer.min_bid > 0)) return on_demand("the offer takes no bids (no min_bid)");
  if (!(rate > 0)) return on_demand("no predicted rate to price a bid against");

  const double bid = bid_for(offer, cfg);
  if (bid > kMaxBidUsdPerHour) {
    return on_demand("a bid of $" + fixed(bid, 3) + "/hr is over the $" +
                     fixed(kMaxBidUsdPerHour, 0) + "/hr vast takes");
  }
  if (bid > bid_ceiling(offer, disk_gb, cfg)) {
    return on_demand("a bid of $" + fixed(bid, 3) + "/hr (min_bid $" + fixed(offer.min_bid, 3) +
                     " + " + fixed(cfg.margin_over_min_bid * 100, 0) + " %) is over " +
                     fixed(cfg.max_share_of_on_demand * 100, 0) + " % of the on-demand $" +
                     fixed(compute, 3) + "/hr");
  }
  for (const auto& r : history) {
    if (r.machine_id != offer.machine_id || !r.closed_stopped_at) continue;
    const double ago_h = (now - *r.closed_stopped_at) / 3600;
    if (ago_h < cfg.outbid_memory_h) {
      return on_demand("our last bid on machine " + std::to_string(offer.machine_id) +
                       " was closed stopped (outbid) " + fixed(std::max(0.0, ago_h), 1) +
                       " h ago; bids there again after " + fixed(cfg.outbid_memory_h, 0) + " h");
    }
  }
  const PreemptionRate machine = machine_preemption_rate(history, offer.machine_id);
  if (machine.evidence_h >= cfg.host_min_evidence_h &&
      machine.per_hour >= cfg.host_avoid_preemptions_per_hour) {
    return on_demand("machine " + std::to_string(offer.machine_id) + " preempted our bids " +
                     std::to_string(machine.preemptions) + " times in " +
                     fixed(machine.evidence_h, 1) + " running hours");
  }
  const PreemptionRate model = model_preemption_rate(history, offer.gpu_name, cfg);
  terms.preemptions_per_hour = model.per_hour;
  const double cut_share = model.per_hour * std::max(0.0, proof_h);
  if (cut_share > cfg.max_preemption_per_proof) {
    return on_demand(fixed(cut_share * 100, 1) + " % of proofs would be cut by a preemption (" +
                     fixed(model.per_hour, 2) + "/running hour on " + offer.gpu_name +
                     "), over the " + fixed(cfg.max_preemption_per_proof * 100, 1) + " % allowed");
  }
  // Per running hour: the bid, storage for that hour and for the stops that come with it; the
  // proofs of that hour less what each resume loses.
  const double productive = 1 - model.per_hour * std::max(0.0, cfg.restart_h);
  if (!(productive > 0)) return on_demand("preemptions would leave no time to prove");
  const double cost_per_running_h = bid + storage * (1 + model.per_hour * cfg.stop_h);
  terms.bid_usd_per_proof = cost_per_running_h / (rate * productive);
  if (terms.bid_usd_per_proof >= terms.on_demand_usd_per_proof) {
    return on_demand("a bid's $" + fixed(terms.bid_usd_per_proof, 3) +
                     "/proof is no cheaper than $" + fixed(terms.on_demand_usd_per_proof, 3) +
                     " on-demand");
  }
  terms.bid_price = bid;
  terms.reason = "bid $" + fixed(bid, 3) + "/hr (min_bid $" + fixed(offer.min_bid, 3) + "): $" +
                 fixed(terms.bid_usd_per_proof, 3) + "/proof against $" +
                 fixed(terms.on_demand_usd_per_proof, 3) + " on-demand, with " +
                 fixed(model.per_hour, 2) + " preemptions/running hour (" +
                 std::to_string(model.preemptions) + " in " + fixed(model.evidence_h, 1) +
                 " h seen on " + offer.gpu_name + ")";
  return terms;
}

bool bid_possible(const Offer& offer, const BidConfig& cfg) {
  return cfg.enabled && offer.min_bid > 0;
}

RentalTerms rental_terms_for(const Offer& offer, double predicted_rate, double disk_gb,
                             std::span<const InstanceRecord> fleet, const BidConfig& cfg,
                             double now) {
  const double proof_h = predicted_rate > 0 ? std::max(1, offer.num_gpus) / predicted_rate : 0;
  return choose_rental_terms(offer, predicted_rate, proof_h, disk_gb, bid_rentals(fleet), cfg, now);
}

}  // namespace pf::core
