#include "core/scoring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

Offer offer(double dph, double inet_down = 2000, double reliability = 0.99) {
  Offer o;
  o.id = 1;
  o.machine_id = 1;
  o.gpu_name = "RTX 4090";
  o.num_gpus = 1;
  o.cpu_ram_gib = 256;
  o.cpu_cores_effective = 64;
  o.pcie_bw_gbs = 25;
  o.inet_down_mbps = inet_down;
  o.dph_total = dph;
  o.reliability = reliability;
  derive_offer_fields(o);
  return o;
}

// A prediction with median `rate` and log-sd `sd` (band ±1.645 sd).
Prediction prediction(double rate, double sd) {
  Prediction p;
  p.rate = rate;
  p.low = rate * std::exp(-1.645 * sd);
  p.high = rate * std::exp(1.645 * sd);
  p.source = "model";
  return p;
}

ScoringConfig scoring_config() {
  ScoringConfig c;
  c.economics.revenue_per_proof_usd = 0.012;
  c.economics.target_cost_per_proof_usd = 0.008;
  return c;
}

TEST(Scoring, ClearWinnerIsLikelyToPayAndWorthRenting) {
  const Score s = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), {});
  EXPECT_DOUBLE_EQ(s.break_even_rate, 25);  // price ÷ revenue
  EXPECT_GT(s.p_pays, 0.99);
  EXPECT_GT(s.value_usd, 10);
  EXPECT_FALSE(s.exploratory());
  ASSERT_TRUE(s.cost_per_proof);
  EXPECT_LT(*s.cost_per_proof, 0.012);
  EXPECT_THAT(s.reasons.front(), HasSubstr("P(≥ break-even 25.0/hr)"));
}

TEST(Scoring, TargetObjectiveUsesTheTargetCostForBreakEven) {
  ScoringConfig c = scoring_config();
  c.profit_objective = false;
  EXPECT_DOUBLE_EQ(score_offer(offer(0.4), prediction(60, 0.1), c, {}).break_even_rate, 50);
}

TEST(Scoring, UncertainOfferBelowBreakEvenIsWorthExploring) {
  // Point estimate 20/hr against break-even 25/hr, but a wide band.
  const Score s = score_offer(offer(0.3), prediction(20, 0.6), scoring_config(), {});
  EXPECT_LE(s.exploit_value_usd, 0);
  EXPECT_GT(s.value_usd, 0);
  EXPECT_TRUE(s.exploratory());
  EXPECT_GT(s.exploration_value_usd, 0);
  EXPECT_GT(s.exploration_cost_usd, 0);
  EXPECT_GT(s.p_pays, 0.1);
  EXPECT_LT(s.p_pays, 0.5);
  // The same estimate with a narrow band is not worth it.
  EXPECT_LT(score_offer(offer(0.3), prediction(20, 0.05), scoring_config(), {}).value_usd, 0);
}

TEST(Scoring, SlowerDownloadCostsMore) {
  const Score fast = score_offer(offer(0.3, 2000), prediction(60, 0.1), scoring_config(), {});
  const Score slow = score_offer(offer(0.3, 50), prediction(60, 0.1), scoring_config(), {});
  EXPECT_GT(slow.setup_hours, fast.setup_hours + 4);
  EXPECT_GT(slow.setup_cost_usd, fast.setup_cost_usd);
  EXPECT_LT(slow.value_usd, fast.value_usd);
}

TEST(Scoring, FailureRiskFromReliabilityAndStrikesLowersValue) {
  const Score solid =
      score_offer(offer(0.3, 2000, 0.99), prediction(60, 0.1), scoring_config(), {});
  const Score shaky = score_offer(offer(0.3, 2000, 0.6), prediction(60, 0.1), scoring_config(), {});
  EXPECT_GT(shaky.failure_risk, solid.failure_risk);
  EXPECT_LT(shaky.value_usd, solid.value_usd);
  ScoreContext struck;
  struck.failure_strikes = 2;
  const Score history =
      score_offer(offer(0.3, 2000, 0.99), prediction(60, 0.1), scoring_config(), struck);
  EXPECT_LT(history.value_usd, solid.value_usd);
  EXPECT_THAT(history.reasons[2], HasSubstr("2 strike(s)"));
}

TEST(Scoring, NoTimeLeftMeansNothingToEarn) {
  ScoreContext ctx;
  ctx.lifetime_h = 0.2;
  const Score s = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), ctx);
  EXPECT_DOUBLE_EQ(s.productive_hours, 0);
  EXPECT_LT(s.value_usd, 0);
}

TEST(Scoring, DemandRoomCapsTheRevenue) {
  ScoreContext ctx;
  ctx.demand_room = 10;
  const Score capped = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), ctx);
  const Score open = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), {});
  EXPECT_LE(capped.paid_rate, 10 + 1e-9);
  EXPECT_NEAR(open.paid_rate, open.rate_if_accepted, 1e-9);
  // 10 paid proofs/hour earn $0.12 against $0.30: not worth it.
  EXPECT_LT(capped.value_usd, 0);
  EXPECT_GT(open.value_usd, 0);
}

TEST(Scoring, RoomAboveTheLastingLevelIsPaidOnlyWhileItLasts) {
  // 60 proofs/hour of room now, none that lasts: a backlog worked off over ~half an hour is
  // mostly gone by the time the rental proves, so it pays only 0.5·e^(−setup/0.5) hours of
  // proofs and is not worth its setup; the same room lasting (no lasting level given) is.
  ScoreContext lasting;
  lasting.demand_room = 60;
  ScoreContext fleeting = lasting;
  fleeting.lasting_room = 0;
  fleeting.room_lasts_h = 0.5;
  const Score keeps = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), lasting);
  const Score goes = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), fleeting);
  EXPECT_GT(keeps.value_usd, 5);
  EXPECT_NEAR(goes.transient_hours, 0.5 * std::exp(-goes.setup_hours / 0.5), 1e-9);
  EXPECT_LT(goes.value_usd, 0);
  EXPECT_LT(goes.expected_proofs, 60 * goes.transient_hours + 1e-9);
  EXPECT_THAT(goes.reasons.front(), HasSubstr("beyond 0/hr"));
  // Room that lasts is valued as before, whatever the persistence.
  ScoreContext all_lasting = fleeting;
  all_lasting.lasting_room = 60;
  EXPECT_DOUBLE_EQ(
      score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), all_lasting).value_usd,
      keeps.value_usd);
  // Room that lasts for days is worth about as much as room that lasts.
  ScoreContext long_lived = fleeting;
  long_lived.room_lasts_h = 1000;
  EXPECT_NEAR(score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), long_lived).value_usd,
              keeps.value_usd, 0.05 * keeps.value_usd);
  // Half of it lasting: between the two, and never charged the price after the room is gone.
  ScoreContext half = fleeting;
  half.lasting_room = 30;
  const Score some = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), half);
  EXPECT_GT(some.value_usd, goes.value_usd);
  EXPECT_LT(some.value_usd, keeps.value_usd);
}

TEST(Scoring, ReevaluationUsesTheSetupStillAhead) {
  ScoreContext ctx;
  ctx.setup_hours_left = 30;  // a download that will take more than a day
  const Score s = score_offer(offer(0.3), prediction(60, 0.1), scoring_config(), ctx);
  EXPECT_DOUBLE_EQ(s.setup_hours, 30);
  EXPECT_DOUBLE_EQ(s.setup_cost_usd, 9);
}

TEST(Scoring, AMeasuredDownloadRateReplacesTheAdvertisedEstimate) {
  Offer o = offer(0.3);
  o.inet_down_mbps = 2000;  // advertised: ~0.5 h for 47 GB at the conservative fraction
  const Score advertised = score_offer(o, prediction(60, 0.1), scoring_config(), {});
  ScoreContext ctx;
  ctx.measured_download_mbps = 50;  // what it delivered to us: ~2.1 h, no derating
  const Score measured = score_offer(o, prediction(60, 0.1), scoring_config(), ctx);
  const SetupConfig setup = scoring_config().setup;
  const double expected_download_h = setup.params_bytes * 8 / 50e6 / 3600;
  EXPECT_NEAR(measured.setup_hours - advertised.setup_hours,
              expected_download_h - download_hours(o, setup), 1e-9);
  EXPECT_LT(measured.value_usd, advertised.value_usd);
}

}  // namespace
}  // namespace pf::core
