#include "scenario/bid_market.h"

#include <algorithm>
#include <limits>

namespace pf::scenario {

double bid_at(const BidHistory& bids, double t) {
  double bid = bids.empty() ? 0 : bids.front().second;
  for (const auto& [from, price] : bids) {
    if (from <= t) bid = price;
  }
  return bid;
}

std::optional<MarketStop> market_stop_at(const ScenarioOffer& offer, const BidHistory& bids,
                                         double t) {
  if (offer.contract_end_h && t >= *offer.contract_end_h) return MarketStop::ContractEnded;
  if (bids.empty() || !offer.bid_market) return std::nullopt;
  const double bid = bid_at(bids, t);
  if (bid < offer.bid_market->min_bid) return MarketStop::Outbid;
  for (const auto& rival : offer.bid_market->rivals) {
    // A rival that bid as much came first.
    if (rival.from_h <= t && t < rival.to_h && rival.price >= bid) return MarketStop::Outbid;
  }
  return std::nullopt;
}

std::vector<std::pair<double, double>> market_stop_periods(const ScenarioOffer& offer,
                                                           const BidHistory& bids, double created_h,
                                                           double until) {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  // The stop changes only where a bid, a rival or the contract does: walk those hours.
  std::vector<double> edges = {created_h};
  for (const auto& bid : bids) edges.push_back(bid.first);
  if (offer.bid_market) {
    for (const auto& rival : offer.bid_market->rivals) {
      edges.push_back(rival.from_h);
      edges.push_back(rival.to_h);
    }
  }
  if (offer.contract_end_h) edges.push_back(*offer.contract_end_h);
  std::sort(edges.begin(), edges.end());
  std::vector<std::pair<double, double>> periods;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    const double from = std::max(edges[i], created_h);
    const double to = i + 1 < edges.size() ? edges[i + 1] : kNever;
    if (!(to > from) || from >= until) continue;
    if (!market_stop_at(offer, bids, from)) continue;
    if (!periods.empty() && periods.back().second >= from) {
      periods.back().second = to;
    } else {
      periods.emplace_back(from, to);
    }
  }
  return periods;
}

}  // namespace pf::scenario
