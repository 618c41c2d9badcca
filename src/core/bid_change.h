// When to change an interruptible rental's bid: raise it when the market has stopped the
// rental, lower it again once the raise has had its time.
//
// vast stops a bid rental when a higher bid takes its machine (docs.vast.ai, "Instance types":
// interruptible instances; vast-cli vast.py `change bid`, PUT /api/v0/instances/bid_price/{id}/
// with {"client_id": "me", "price": X}) and starts it again by itself once its bid is on top.
// Other renters' bids are not shown, so the only price known to win the machine back is the
// highest we would pay. An accepted rental has paid its setup (the parameter download, the
// benchmark): when its stop has lasted `raise_stopped_after_s` and it still earns at the
// ceiling the rental terms allow (`max_share_of_on_demand` of the on-demand compute price), its
// bid goes to that ceiling in one step (every minute stopped is a minute of lost proofs; a ladder
// of small raises would cost a reconcile round each). Once it has run `lower_raised_after_h` at
// the raised price, the bid goes back to the rental's own (min_bid and the margin): the rival has
// most likely left, and if not, the stop that follows raises it again. A raise therefore costs
// its premium for a bounded time, against a stop whose proofs are lost for as long as it lasts.
// No raise answers a contract's end (the machine cannot restart) or a rental still setting up
// (its rate is unknown): those wait, and the lifecycle closes them after [lifecycle]
// bid_stopped_grace_s, blaming no one. Pure.
#pragma once

#include <optional>
#include <string>

#include "core/fleet.h"
#include "core/rental_terms.h"

namespace pf::core {

struct BidChange {
  double bid_price = 0;  // the new bid, $/hour of compute
  std::string reason;
};

// `revenue_per_proof_usd`: what a proof earns. nullopt: keep the bid.
std::optional<BidChange> change_of_bid(const InstanceRecord& rec, double now,
                                       double revenue_per_proof_usd, const BidConfig& cfg);

}  // namespace pf::core
