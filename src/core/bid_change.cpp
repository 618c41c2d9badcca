#include "core/bid_change.h"

#include <cmath>

#include "core/billing.h"
#include "core/text.h"

namespace pf::core {

namespace {

bool accepted(const InstanceRecord& rec) {
  return rec.verdict && rec.verdict->decision == Verdict::Decision::Accept;
}

std::optional<BidChange> raise_when_stopped(const InstanceRecord& rec, double now,
                                            double revenue_per_proof_usd, const BidConfig& cfg) {
  if (!(cfg.raise_stopped_after_s > 0)) return std::nullopt;
  if (rec.offer.end_date > 0 && now >= rec.offer.end_date) return std::nullopt;  // for good
  const double stopped_s = now - rec.market_status_since;
  if (stopped_s < cfg.raise_stopped_after_s) return std::nullopt;
  if (!accepted(rec)) return std::nullopt;  // setup not paid, rate not measured
  const double rate = rec.verdict->rate;
  const double ceiling = bid_ceiling(rec.offer, rec.disk_gb, cfg);
  const double bid = *rec.bid_price;
  if (!(ceiling > bid * (1 + 1e-9))) return std::nullopt;  // raised already
  const double cost_h = ceiling + storage_usd_per_hour(rec.offer, rec.disk_gb);
  const double earns_h = rate * revenue_per_proof_usd;
  if (!(earns_h > cost_h)) return std::nullopt;
  return BidChange{ceiling, "stopped by the market for " + fixed(stopped_s / 60, 0) +
                                " min (outbid): bid raised from $" + fixed(bid, 3) + " to $" +
                                fixed(ceiling, 3) + "/hr (" +
                                fixed(cfg.max_share_of_on_demand * 100, 0) +
                                " % of on-demand compute); at " + fixed(rate, 1) +
                                " proofs/hr it still earns $" + fixed(earns_h - cost_h, 3) + "/hr"};
}

std::optional<BidChange> lower_when_raised(const InstanceRecord& rec, double now,
                                           const BidConfig& cfg) {
  if (!(cfg.lower_raised_after_h > 0)) return std::nullopt;
  const double own = bid_for(rec.offer, cfg);
  const double bid = *rec.bid_price;
  if (!(bid > own * (1 + 1e-9))) return std::nullopt;  // not raised
  const double running_s = now - rec.market_status_since;
  if (running_s < cfg.lower_raised_after_h * 3600) return std::nullopt;
  return BidChange{own, "the raised bid has run " + fixed(running_s / 3600, 1) + " h: back from $" +
                            fixed(bid, 3) + " to the rental's own $" + fixed(own, 3) +
                            "/hr (min_bid + " + fixed(cfg.margin_over_min_bid * 100, 0) +
                            " %); a stop that follows raises it again"};
}

}  // namespace

std::optional<BidChange> change_of_bid(const InstanceRecord& rec, double now,
                                       double revenue_per_proof_usd, const BidConfig& cfg) {
  using S = InstanceState;
  if (!cfg.enabled || !rec.bid_price) return std::nullopt;
  if (rec.state == S::Destroying || rec.state == S::Destroyed) return std::nullopt;
  if (rec.market_status == "stopped") {
    return raise_when_stopped(rec, now, revenue_per_proof_usd, cfg);
  }
  if (rec.market_status == "running") return lower_when_raised(rec, now, cfg);
  return std::nullopt;
}

}  // namespace pf::core
