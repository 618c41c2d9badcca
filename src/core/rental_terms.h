// On-demand or interruptible, and at what bid: decided per offer when it is rented.
//
// vast's interruptible rentals (docs.vast.ai, "Instance types" / "Interruptible instances";
// vast-cli vast.py `create instance --bid_price`, sent as `price`; `change bid` is
// PUT /api/v0/instances/bid_price/{id}/): a rental created with a price runs while that price is
// at least the offer's `min_bid` and above every other renter's bid on the machine; outbid, it
// is stopped (storage still billed, no compute) and resumes by itself once it is on top again.
// It pays its bid for compute while it runs. A stop ends the agent with its container, so each
// resume costs a prover restart and its warm-up, and the proofs in flight go back to the queue.
//
// The choice weighs the expected cost per proof of both terms for this offer, with the
// preemption rate learned from our own interruptible rentals of the same GPU model (a
// gamma-Poisson estimate: a prior rate worth `prior_weight_h` hours, then what was seen), and
// refuses a bid where a proof would too often be cut (its job's deadline is at stake) or where
// this machine has preempted us often (it is avoided for bids, not called bad). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "core/fleet.h"
#include "core/offer.h"

namespace pf::core {

struct BidConfig {
  bool enabled = false;  // off: every rental is on-demand
  // The bid: min_bid raised by this share (a bid at min_bid loses to any rival).
  double margin_over_min_bid = 0.3;
  // Never bid above this share of the offer's on-demand compute price: above it the saving does
  // not pay for the preemptions.
  double max_share_of_on_demand = 0.85;
  // Preemptions per running hour before any interruptible rental of a GPU model was seen, and
  // how many hours of evidence that guess is worth.
  double prior_preemptions_per_hour = 0.25;
  double prior_weight_h = 4;
  // Hours a preemption lasts (stopped: storage billed, no proofs) and what each resume costs in
  // lost proving (the prover's restart and warm-up, the proofs cut short).
  double stop_h = 1.0;
  double restart_h = 0.25;
  // A proof's chance of being cut by a preemption above which the offer is rented on-demand:
  // each cut proof's job is requeued with its deadline.
  double max_preemption_per_proof = 0.05;
  // A machine whose own record shows this many preemptions per running hour (with at least
  // `host_min_evidence_h` of it) is rented on-demand only.
  double host_avoid_preemptions_per_hour = 1.0;
  double host_min_evidence_h = 2;
  // A machine where our last bid rental was closed stopped (outbid and never on top again within
  // [lifecycle] bid_stopped_grace_s) is rented on-demand for this long: a rival that outbid us
  // there would most likely outbid the same bid again.
  double outbid_memory_h = 12;
  // An accepted bid rental the market has held stopped this long (most likely outbid) has its
  // bid raised to the ceiling above (core/bid_change.h), where it still pays; 0: never raised.
  double raise_stopped_after_s = 120;
  // A raised bid that has run this long goes back to the rental's own bid (the rival that
  // outbid it has most likely left; if not, the next stop raises it again). 0: kept raised.
  double lower_raised_after_h = 3;
};

// One of our interruptible rentals as the record shows it.
struct BidRental {
  std::string gpu_name;
  std::int64_t machine_id = 0;
  double running_h = 0;  // compute-billed hours
  int preemptions = 0;   // times the market stopped it
  // When it was closed because the market kept it stopped (CloseCause::MarketStopped).
  std::optional<double> closed_stopped_at;
};

// Our interruptible rentals, from the fleet's rows (bid_price set; destroyed ones included).
std::vector<BidRental> bid_rentals(std::span<const InstanceRecord> fleet);

struct PreemptionRate {
  double per_hour = 0;    // the estimate
  double evidence_h = 0;  // running hours observed
  int preemptions = 0;    // observed
};
// The GPU model's rate (with the prior) and one machine's (observed only; per_hour 0 without
// evidence).
PreemptionRate model_preemption_rate(std::span<const BidRental> history,
                                     const std::string& gpu_name, const BidConfig& cfg);
PreemptionRate machine_preemption_rate(std::span<const BidRental> history, std::int64_t machine_id);

struct RentalTerms {
  std::optional<double> bid_price;  // $/hour of compute; nullopt: on-demand
  double on_demand_usd_per_proof = 0;
  double bid_usd_per_proof = 0;  // 0: no bid was priced
  double preemptions_per_hour = 0;
  std::string reason;
};

// `rate`: predicted proofs/hour of the whole offer; `proof_h`: hours one proof takes on it
// (its concurrency over the rate); `disk_gb`: the disk rented (storage); `now`: epoch seconds.
RentalTerms choose_rental_terms(const Offer& offer, double rate, double proof_h, double disk_gb,
                                std::span<const BidRental> history, const BidConfig& cfg,
                                double now);

// The bid the terms make for the offer, $/hour of compute: min_bid raised by the margin, at least
// vast's floor (it may be over the ceiling: choose_rental_terms then rents on-demand).
double bid_for(const Offer& offer, const BidConfig& cfg);
// The highest bid the terms allow for the offer, $/hour of compute: max_share_of_on_demand of its
// on-demand compute price (and no more than vast takes).
double bid_ceiling(const Offer& offer, double disk_gb, const BidConfig& cfg);

// Whether the offer needs pricing at all: bids on and the offer takes them. Where not,
// choose_rental_terms says why without a rate, so a caller skips the prediction.
bool bid_possible(const Offer& offer, const BidConfig& cfg);

// The terms of renting the offer now, as the manager's deploy and the simulator's rent both
// choose them: from its predicted rate (a proof holds one GPU while it runs, so each takes about
// the GPU count over the rate) and our rows so far (destroyed ones included).
RentalTerms rental_terms_for(const Offer& offer, double predicted_rate, double disk_gb,
                             std::span<const InstanceRecord> fleet, const BidConfig& cfg,
                             double now);

}  // namespace pf::core
