// On-demand or a bid, and at what price (core/rental_terms.h).
#include "core/rental_terms.h"

#include <gtest/gtest.h>

#include "core/bid_change.h"
#include "core/billing.h"

namespace pf::core {
namespace {

// An offer whose on-demand compute is $0.40/hr, which takes bids from $0.15/hr.
Offer bid_offer() {
  Offer o;
  o.id = 7;
  o.machine_id = 70;
  o.gpu_name = "RTX 4090";
  o.num_gpus = 1;
  o.dph_base = 0.40;
  o.dph_total = 0.42;
  o.storage_cost_gb_month = 0.1;
  o.min_bid = 0.15;
  return o;
}

BidConfig bids_on() {
  BidConfig c;
  c.enabled = true;
  return c;
}

constexpr double kRate = 50;      // proofs/hour
constexpr double kProofH = 0.02;  // 1.2 min a proof
constexpr double kDiskGb = 200;

TEST(RentalTerms, OffByDefaultAndWithoutAMinBidEveryRentalIsOnDemand) {
  const auto off = choose_rental_terms(bid_offer(), kRate, kProofH, kDiskGb, {}, BidConfig{}, 0);
  EXPECT_FALSE(off.bid_price);
  EXPECT_NE(off.reason.find("[bids] enabled"), std::string::npos) << off.reason;
  Offer no_bids = bid_offer();
  no_bids.min_bid = 0;
  const auto none = choose_rental_terms(no_bids, kRate, kProofH, kDiskGb, {}, bids_on(), 0);
  EXPECT_FALSE(none.bid_price);
  EXPECT_NE(none.reason.find("no min_bid"), std::string::npos) << none.reason;
}

TEST(RentalTerms, ACheapBidWithFewPreemptionsIsTakenAtMinBidPlusTheMargin) {
  const Offer o = bid_offer();
  const auto t = choose_rental_terms(o, kRate, kProofH, kDiskGb, {}, bids_on(), 0);
  ASSERT_TRUE(t.bid_price) << t.reason;
  EXPECT_DOUBLE_EQ(*t.bid_price, 0.15 * 1.3);
  EXPECT_LT(t.bid_usd_per_proof, t.on_demand_usd_per_proof);
  // The on-demand figure is the offer's compute and storage over the rate.
  EXPECT_NEAR(t.on_demand_usd_per_proof,
              (compute_usd_per_hour(o, kDiskGb) + storage_usd_per_hour(o, kDiskGb)) / kRate, 1e-12);
  EXPECT_NE(t.reason.find("bid $0.195/hr"), std::string::npos) << t.reason;
}

TEST(RentalTerms, TheBidStaysWithinWhatVastTakes) {
  Offer tiny = bid_offer();
  tiny.min_bid = 0.0001;  // 0.00013 with the margin: vast's floor is 0.001
  const auto t = choose_rental_terms(tiny, kRate, kProofH, kDiskGb, {}, bids_on(), 0);
  ASSERT_TRUE(t.bid_price) << t.reason;
  EXPECT_DOUBLE_EQ(*t.bid_price, kMinBidUsdPerHour);
  Offer huge = bid_offer();
  huge.dph_base = 400;
  huge.dph_total = 400;
  huge.min_bid = 100;  // 130 with the margin
  const auto over = choose_rental_terms(huge, kRate, kProofH, kDiskGb, {}, bids_on(), 0);
  EXPECT_FALSE(over.bid_price);
  EXPECT_NE(over.reason.find("$128/hr vast takes"), std::string::npos) << over.reason;
}

TEST(RentalTerms, ABidNearTheOnDemandPriceIsNotWorthItsPreemptions) {
  Offer o = bid_offer();
  o.min_bid = 0.30;  // 0.39 with the margin: over 85 % of 0.40
  const auto t = choose_rental_terms(o, kRate, kProofH, kDiskGb, {}, bids_on(), 0);
  EXPECT_FALSE(t.bid_price);
  EXPECT_NE(t.reason.find("85 %"), std::string::npos) << t.reason;
}

TEST(RentalTerms, SlowProofsOnAPreemptedModelStayOnDemandForTheirDeadlines) {
  // Three rentals of the model, 10 running hours, 20 preemptions: the estimate leaves the prior.
  std::vector<BidRental> seen = {{"RTX 4090", 1, 4, 8, {}}, {"RTX 4090", 2, 6, 12, {}}};
  const BidConfig cfg = bids_on();
  const auto rate = model_preemption_rate(seen, "rtx 4090", cfg);
  EXPECT_DOUBLE_EQ(rate.evidence_h, 10);
  EXPECT_EQ(rate.preemptions, 20);
  EXPECT_NEAR(rate.per_hour, (0.25 * 4 + 20) / 14, 1e-12);
  // A proof of 3 minutes: 7.5 % of them cut, over the 5 % allowed.
  const auto t = choose_rental_terms(bid_offer(), kRate, 0.05, kDiskGb, seen, cfg, 0);
  EXPECT_FALSE(t.bid_price);
  EXPECT_NE(t.reason.find("of proofs would be cut"), std::string::npos) << t.reason;
  // Another model's record says nothing of this one.
  const auto other = model_preemption_rate(seen, "RTX 3090", cfg);
  EXPECT_DOUBLE_EQ(other.per_hour, 0.25);
}

TEST(RentalTerms, AMachineThatPreemptsUsOftenIsRentedOnDemandWithoutBeingBlamed) {
  std::vector<BidRental> seen = {{"RTX 4090", 70, 3, 4, {}}};
  const auto t = choose_rental_terms(bid_offer(), kRate, kProofH, kDiskGb, seen, bids_on(), 0);
  EXPECT_FALSE(t.bid_price);
  EXPECT_NE(t.reason.find("machine 70 preempted our bids 4 times"), std::string::npos) << t.reason;
  // Too little evidence on the machine: its model's rate decides.
  std::vector<BidRental> brief = {{"RTX 4090", 70, 1, 2, {}}};
  EXPECT_TRUE(
      choose_rental_terms(bid_offer(), kRate, kProofH, kDiskGb, brief, bids_on(), 0).bid_price);
}

// A machine where our last bid was closed stopped (outbid, never on top again) is rented
// on-demand for outbid_memory_h: the same bid would most likely sit stopped again.
TEST(RentalTerms, AMachineWhereOurLastBidWasOutbidForGoodIsRentedOnDemandForAWhile) {
  const double closed_at = 1'000'000;
  std::vector<BidRental> seen(1);
  seen[0].gpu_name = "RTX 4090";
  seen[0].machine_id = 70;
  seen[0].preemptions = 1;
  seen[0].closed_stopped_at = closed_at;
  const auto soon =
      choose_rental_terms(bid_offer(), kRate, kProofH, kDiskGb, seen, bids_on(), closed_at + 3600);
  EXPECT_FALSE(soon.bid_price);
  EXPECT_NE(soon.reason.find("closed stopped (outbid) 1.0 h ago"), std::string::npos)
      << soon.reason;
  const auto later = choose_rental_terms(bid_offer(), kRate, kProofH, kDiskGb, seen, bids_on(),
                                         closed_at + 12 * 3600);
  EXPECT_TRUE(later.bid_price) << later.reason;
  seen[0].machine_id = 71;  // another machine's history says nothing of this one
  EXPECT_TRUE(
      choose_rental_terms(bid_offer(), kRate, kProofH, kDiskGb, seen, bids_on(), closed_at + 3600)
          .bid_price);
}

TEST(RentalTerms, OurBidRentalsAreReadFromTheirBills) {
  InstanceRecord bid;
  bid.offer = bid_offer();
  bid.bid_price = 0.2;
  bid.spend_usd = 1.0;
  bid.storage_spend_usd = 0.15;
  bid.bandwidth_spend_usd = 0.05;
  bid.market_stops = 3;
  InstanceRecord on_demand;
  on_demand.offer = bid_offer();
  on_demand.spend_usd = 5;
  const std::vector<InstanceRecord> fleet = {bid, on_demand};
  const auto rentals = bid_rentals(fleet);
  ASSERT_EQ(rentals.size(), 1u);
  EXPECT_NEAR(rentals[0].running_h, 0.8 / 0.2, 1e-12);  // compute spend over the bid
  EXPECT_EQ(rentals[0].preemptions, 3);
  EXPECT_EQ(rentals[0].machine_id, 70);
  EXPECT_FALSE(rentals[0].closed_stopped_at);
  bid.close_cause = CloseCause::MarketStopped;  // closed because the market kept it stopped
  bid.state_since = 500;
  bid.destroyed_at = 600;
  const std::vector<InstanceRecord> closed = {bid};
  EXPECT_EQ(bid_rentals(closed)[0].closed_stopped_at, 600);
}

// --- changes of bid (core/bid_change.h) ---------------------------------------------------------

constexpr double kStoppedAt = 1'000'000;
constexpr double kRevenuePerProof = 0.012;

// An accepted bid rental of bid_offer() proving 50/hr, stopped by the market at kStoppedAt.
InstanceRecord stopped_bid_rental() {
  InstanceRecord r;
  r.id = 3;
  r.offer = bid_offer();
  r.disk_gb = kDiskGb;
  r.bid_price = 0.195;
  r.state = InstanceState::Proving;
  r.market_status = "stopped";
  r.market_status_since = kStoppedAt;
  Verdict v;
  v.decision = Verdict::Decision::Accept;
  v.rate = kRate;
  r.verdict = v;
  return r;
}

TEST(StoppedBid, AnAcceptedRentalOutbidForTwoMinutesIsRaisedToTheCeilingOnce) {
  const BidConfig cfg = bids_on();
  InstanceRecord r = stopped_bid_rental();
  EXPECT_FALSE(change_of_bid(r, kStoppedAt + 119, kRevenuePerProof, cfg))
      << "a stop may be short: not yet";
  const auto raise = change_of_bid(r, kStoppedAt + 120, kRevenuePerProof, cfg);
  ASSERT_TRUE(raise);
  EXPECT_DOUBLE_EQ(raise->bid_price, bid_ceiling(r.offer, kDiskGb, cfg));
  EXPECT_NEAR(raise->bid_price, 0.40 * 0.85, 1e-12);
  EXPECT_NE(raise->reason.find("$0.195 to $0.340/hr"), std::string::npos) << raise->reason;
  // At the ceiling there is nothing left to raise: it waits for the lifecycle's grace.
  r.bid_price = raise->bid_price;
  EXPECT_FALSE(change_of_bid(r, kStoppedAt + 600, kRevenuePerProof, cfg));
}

TEST(StoppedBid, NoRaiseWhereItCannotHelpOrWouldNotPay) {
  const BidConfig cfg = bids_on();
  const double later = kStoppedAt + 600;
  InstanceRecord ended = stopped_bid_rental();
  ended.offer.end_date = kStoppedAt;  // the host's contract ended: it cannot restart
  EXPECT_FALSE(change_of_bid(ended, later, kRevenuePerProof, cfg));
  InstanceRecord setting_up = stopped_bid_rental();
  setting_up.state = InstanceState::FetchingParams;
  setting_up.verdict.reset();  // no measured rate: its worth at a higher price is unknown
  EXPECT_FALSE(change_of_bid(setting_up, later, kRevenuePerProof, cfg));
  InstanceRecord slow = stopped_bid_rental();
  slow.verdict->rate = 20;  // $0.24/hr of proofs: under the ceiling's $0.34 and its storage
  EXPECT_FALSE(change_of_bid(slow, later, kRevenuePerProof, cfg));
  InstanceRecord on_demand = stopped_bid_rental();
  on_demand.bid_price.reset();
  EXPECT_FALSE(change_of_bid(on_demand, later, kRevenuePerProof, cfg));
  InstanceRecord closing = stopped_bid_rental();
  closing.state = InstanceState::Destroying;
  EXPECT_FALSE(change_of_bid(closing, later, kRevenuePerProof, cfg));
  BidConfig never = bids_on();
  never.raise_stopped_after_s = 0;
  EXPECT_FALSE(change_of_bid(stopped_bid_rental(), later, kRevenuePerProof, never));
  EXPECT_FALSE(change_of_bid(stopped_bid_rental(), later, kRevenuePerProof, BidConfig{}));
  EXPECT_TRUE(change_of_bid(stopped_bid_rental(), later, kRevenuePerProof, cfg));
}

// A raised bid goes back to the rental's own once it has run lower_raised_after_h (the rival has
// most likely left); a running bid at its own price is left alone.
TEST(StoppedBid, ARaisedBidGoesBackToItsOwnAfterItHasRunItsTime) {
  const BidConfig cfg = bids_on();
  InstanceRecord r = stopped_bid_rental();
  r.bid_price = bid_ceiling(r.offer, kDiskGb, cfg);
  r.market_status = "running";
  r.market_status_since = kStoppedAt;  // resumed then, at the raised price
  EXPECT_FALSE(change_of_bid(r, kStoppedAt + 3 * 3600 - 1, kRevenuePerProof, cfg));
  const auto lower = change_of_bid(r, kStoppedAt + 3 * 3600, kRevenuePerProof, cfg);
  ASSERT_TRUE(lower);
  EXPECT_DOUBLE_EQ(lower->bid_price, bid_for(r.offer, cfg));
  EXPECT_NEAR(lower->bid_price, 0.195, 1e-12);
  EXPECT_NE(lower->reason.find("back from $0.340 to the rental's own $0.195/hr"), std::string::npos)
      << lower->reason;
  r.bid_price = lower->bid_price;
  EXPECT_FALSE(change_of_bid(r, kStoppedAt + 10 * 3600, kRevenuePerProof, cfg));
  BidConfig kept = bids_on();
  kept.lower_raised_after_h = 0;
  r.bid_price = bid_ceiling(r.offer, kDiskGb, cfg);
  EXPECT_FALSE(change_of_bid(r, kStoppedAt + 10 * 3600, kRevenuePerProof, kept));
}

}  // namespace
}  // namespace pf::core
