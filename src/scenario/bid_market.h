// What vast's market does to one rental of a /3 offer (docs/scenario-format.md, "/3"): its
// contract's end and, for an interruptible rental, being outbid. One physics for market-sim,
// which serves it, and the simulator, which plays it.
//  - At the offer's contract_end_h every rental of it stops for good (vast: end_date).
//  - An interruptible rental (one with bids) runs while its bid is at least the offer's min_bid
//    and above every rival bid standing at that hour (a rival that bid as much came first);
//    otherwise it is stopped until that is true again. On-demand rentals are never outbid.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include "scenario/scenario.h"

namespace pf::scenario {

// A rental's bids, $/hour of compute: [from_h, price) in order, the first from its creation;
// empty: on-demand.
using BidHistory = std::vector<std::pair<double, double>>;

enum class MarketStop { ContractEnded, Outbid };

// The bid standing at hour t (the first before any change; 0 for on-demand).
double bid_at(const BidHistory& bids, double t);

// Why the market has the rental stopped at hour t, if it does.
std::optional<MarketStop> market_stop_at(const ScenarioOffer& offer, const BidHistory& bids,
                                         double t);

// The hours the market keeps the rental stopped, [from, to) in order (to is +inf when it never
// runs again), between its creation and `until`.
std::vector<std::pair<double, double>> market_stop_periods(const ScenarioOffer& offer,
                                                           const BidHistory& bids, double created_h,
                                                           double until);

}  // namespace pf::scenario
