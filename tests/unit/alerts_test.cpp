// The alert decisions (core/alerts.h): production drift, slow download and stall for any
// instance whoever rented it; whether the manager acts by origin; raise/clear bookkeeping;
// the fleet's budget and missed deadlines.
#include "core/alerts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/learned_predictor.h"

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kNow = 1'750'000'000;

Offer offer_4090(double dph = 0.3) {
  Offer o;
  o.id = 1;
  o.machine_id = 1;
  o.gpu_name = "RTX 4090";
  o.num_gpus = 1;
  o.cpu_ram_gib = 256;
  o.cpu_cores = o.cpu_cores_effective = 64;
  o.pcie_bw_gbs = 25;
  o.inet_down_mbps = 2000;
  o.dph_total = dph;
  derive_offer_fields(o);
  return o;
}

InstanceRecord instance(InstanceState state, double since, const std::string& origin = "deploy") {
  InstanceRecord r;
  r.id = 7;
  r.offer = offer_4090();
  r.state = state;
  r.state_since = since;
  r.created_at = since;
  r.origin = origin;
  return r;
}

BenchRun window(double rate, double low, double high, double at) {
  BenchRun w;
  w.instance_id = 7;
  w.kind = "production";
  w.rate = rate;
  w.low = low;
  w.high = high;
  w.samples = 30;
  w.at = at;
  return w;
}

TEST(Alerts, ProductionDriftWarnsOnADipAndWarrantsADropWhenClearlyBelow) {
  const auto rec = instance(InstanceState::Proving, kNow - 9000);
  WatchConfig watch;
  EXPECT_FALSE(production_alert(rec, {window(50, 45, 55, kNow)}, 25, watch));
  const auto dip = production_alert(rec, {window(23, 20, 27, kNow)}, 25, watch);
  ASSERT_TRUE(dip);
  EXPECT_EQ(dip->kind, AlertKind::ProductionDrift);
  EXPECT_FALSE(dip->drop_warranted);
  EXPECT_THAT(dip->reason, HasSubstr("dips below break-even"));
  const auto below = production_alert(rec, {window(15, 13, 18, kNow)}, 25, watch);
  ASSERT_TRUE(below);
  EXPECT_TRUE(below->drop_warranted);
  EXPECT_THAT(below->reason, HasSubstr("below break-even 25.0/hr"));
  // Only proving instances drift.
  EXPECT_FALSE(production_alert(instance(InstanceState::Benchmarking, kNow - 9000),
                                {window(15, 13, 18, kNow)}, 25, watch));
}

TEST(Alerts, SlowDownloadIsThePolicysSetupWatchJudgement) {
  auto rec = instance(InstanceState::FetchingParams, kNow - 3600);
  rec.params_total_bytes = 47e9;
  rec.params_done_bytes = 1e9;
  rec.params_rate_bps = 100e3;  // 0.8 Mb/s: days left
  PolicyConfig cfg;
  cfg.scoring.economics.revenue_per_proof_usd = 0.012;
  const FleetKnowledge none = learn_fleet({}, cfg.predictor);
  const Prediction pred = predict_offer(rec.offer, none, cfg.predictor);
  const auto judged = judge_download(rec, pred, 0, 0, kNow, cfg);
  const auto alert = download_alert(rec, judged);
  ASSERT_TRUE(alert);
  EXPECT_EQ(alert->kind, AlertKind::SlowDownload);
  EXPECT_TRUE(alert->drop_warranted);
  EXPECT_THAT(alert->reason, HasSubstr("download at 1 Mb/s"));
  ASSERT_TRUE(alert->strike);
  EXPECT_EQ(alert->strike->kind, StrikeKind::SlowDownload);
  // Fast enough, or judged too early: nothing.
  rec.params_rate_bps = 100e6;
  EXPECT_FALSE(download_alert(rec, judge_download(rec, pred, 0, 0, kNow, cfg)));
  rec.params_rate_bps = 100e3;
  rec.state_since = kNow - 60;
  EXPECT_FALSE(download_alert(rec, judge_download(rec, pred, 0, 0, kNow, cfg)));
}

TEST(Alerts, StallNeedsAHeardAgentAndQuietForFactorIntervalsOrTheMinimum) {
  auto rec = instance(InstanceState::Proving, kNow - 20000);
  rec.last_heartbeat_at = kNow - 5;
  StallConfig cfg;  // 4 intervals, at least 30 min
  // At 60/hr a proof is due every minute: the minimum (30 min) rules.
  EXPECT_FALSE(stall_alert(rec, kNow - 29 * 60, 60, kNow, 30, true, cfg));
  const auto stalled = stall_alert(rec, kNow - 31 * 60, 60, kNow, 30, true, cfg);
  ASSERT_TRUE(stalled);
  EXPECT_EQ(stalled->kind, AlertKind::Stall);
  EXPECT_TRUE(stalled->drop_warranted);
  EXPECT_THAT(stalled->reason, HasSubstr("no proof for 31 min"));
  // At 4/hr a proof is due every 15 min: 4 intervals = 60 min.
  EXPECT_FALSE(stall_alert(rec, kNow - 50 * 60, 4, kNow, 30, true, cfg));
  EXPECT_TRUE(stall_alert(rec, kNow - 61 * 60, 4, kNow, 30, true, cfg));
  // A silent agent is the lifecycle's to judge (heartbeat lost), not a stall.
  rec.last_heartbeat_at = kNow - 120;
  EXPECT_FALSE(stall_alert(rec, kNow - 3 * 3600, 60, kNow, 30, true, cfg));
  // An accepted instance with no job to prove is idle, not stalled.
  rec.last_heartbeat_at = kNow - 5;
  EXPECT_FALSE(stall_alert(rec, kNow - 3 * 3600, 60, kNow, 30, false, cfg));
  // Only proving instances stall here (the benchmark has its own stall rule).
  rec.last_heartbeat_at = kNow - 5;
  rec.state = InstanceState::Benchmarking;
  EXPECT_FALSE(stall_alert(rec, kNow - 3 * 3600, 60, kNow, 30, true, cfg));
}

TEST(Alerts, StallIsJudgedAtTheLatestWindowOfThisStateElseTheVerdict) {
  auto rec = instance(InstanceState::Proving, kNow - 3600);
  EXPECT_EQ(stall_reference_rate(rec, {}), 0);
  rec.verdict = Verdict{};
  rec.verdict->rate = 12;
  EXPECT_EQ(stall_reference_rate(rec, {}), 12);
  // A window from before the instance entered its state says nothing of it now.
  EXPECT_EQ(stall_reference_rate(rec, {window(30, 25, 35, kNow - 7200)}), 12);
  // The latest window of this state rules, whatever the order given.
  EXPECT_EQ(stall_reference_rate(rec, {window(8, 6, 10, kNow - 60), window(9, 7, 11, kNow - 600)}),
            8);
}

TEST(Alerts, TheManagerActsOnlyOnWarrantedDropsForTheOriginsItWasLetActOn) {
  Alert a;
  a.drop_warranted = true;
  AlertConfig cfg;  // defaults: alert only for hand-deployed, act for the autopilot's
  EXPECT_FALSE(alert_acts(a, "deploy", cfg));
  EXPECT_FALSE(alert_acts(a, "adopted", cfg));
  EXPECT_TRUE(alert_acts(a, "autopilot", cfg));
  cfg.act_on_hand_deployed = true;
  EXPECT_TRUE(alert_acts(a, "deploy", cfg));
  cfg.act_on_autopilot_rented = false;
  EXPECT_FALSE(alert_acts(a, "autopilot", cfg));
  a.drop_warranted = false;  // a warning never closes anything
  EXPECT_FALSE(alert_acts(a, "deploy", cfg));
}

TEST(Alerts, ChangesAnnounceNewEscalatedAndClearedAlertsOnce) {
  Alert warn;
  warn.instance_id = 1;
  warn.kind = AlertKind::ProductionDrift;
  Alert stall;
  stall.instance_id = 2;
  stall.kind = AlertKind::Stall;
  stall.drop_warranted = true;
  auto first = alert_changes({}, {warn, stall});
  EXPECT_EQ(first.raised.size(), 2u);
  EXPECT_TRUE(first.cleared.empty());
  // The same again: nothing new.
  auto same = alert_changes({warn, stall}, {warn, stall});
  EXPECT_TRUE(same.raised.empty());
  EXPECT_TRUE(same.cleared.empty());
  // The warning escalates; the stall clears.
  Alert drop = warn;
  drop.drop_warranted = true;
  auto next = alert_changes({warn, stall}, {drop});
  ASSERT_EQ(next.raised.size(), 1u);
  EXPECT_TRUE(next.raised[0].drop_warranted);
  ASSERT_EQ(next.cleared.size(), 1u);
  EXPECT_EQ(next.cleared[0].instance_id, 2);
}

TEST(Alerts, BudgetAndMissedDeadlines) {
  AlertConfig cfg;
  EXPECT_FALSE(budget_alert(1000, 1e6, cfg));  // no budget set
  cfg.budget_dollars_per_hour = 5;
  cfg.budget_usd = 100;
  EXPECT_FALSE(budget_alert(4.9, 99, cfg));
  EXPECT_THAT(*budget_alert(5.5, 10, cfg), HasSubstr("$5.50/hr, over the budget of $5.00/hr"));
  EXPECT_THAT(*budget_alert(1, 120, cfg), HasSubstr("spent $120.00, over the budget of $100.00"));
  EXPECT_FALSE(deadline_alert(0, 3, 3600));
  EXPECT_EQ(*deadline_alert(2, 5, 3600), "2 jobs missed the deadline (5 in the last 60 min)");
}

}  // namespace
}  // namespace pf::core
