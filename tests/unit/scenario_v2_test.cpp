// Scenario format /2 (spec: /work/shared/spec/scenario.md, second half): the parser (both
// versions, /2's keys optional except demand, bounded, every problem named) and the policy
// simulator's /2 physics (jobs with deadlines, price changes, machine memory and warm-up truth,
// silent throttles), on one-offer scenarios whose right answers are known.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "scenario/bid_market.h"
#include "scenario/scenario.h"
#include "scenario/truth_model.h"
#include "sim/des_engine.h"
#include "sim/des_policies.h"
#include "support/rent_all_once.h"
#include "support/scenario_doc.h"

namespace pf::scenario {
namespace {

using nlohmann::json;
using test::good_truth;
using test::one_offer_doc;
using ::testing::HasSubstr;

// The one-offer scenario as /2, with `arrivals_per_hour` jobs all along and a deadline.
json v2_doc(double arrivals_per_hour, double deadline_min = 45, json truth = good_truth()) {
  json doc = one_offer_doc(truth);
  doc["format"] = kScenarioFormatV2;
  doc["economics"].erase("demand_proofs_per_hour");
  doc["demand"] = {
      {"arrivals", {{{"from_h", 0}, {"to_h", 10}, {"proofs_per_hour", arrivals_per_hour}}}},
      {"deadline_min", deadline_min}};
  return doc;
}

Scenario parsed(const json& doc) {
  auto s = parse_scenario(doc);
  if (!s) throw std::runtime_error(s.error());
  return *s;
}

std::string v2_error_of(const json& doc) {
  auto s = parse_scenario(doc);
  return s ? std::string("(parsed)") : s.error();
}

// --- parsing ------------------------------------------------------------------------------------

TEST(ScenarioV2Parse, TheBundledScenariosLoad) {
  for (const char* name : {"demo-small-v2.json", "market-72h-v2.json"}) {
    auto s = load_scenario(std::string(PF_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->format_version, 2);
    ASSERT_TRUE(s->demand);
    EXPECT_FALSE(s->demand->arrivals.empty());
    EXPECT_GT(s->demand->deadline_min, 0);
  }
  auto v1 = load_scenario(std::string(PF_SOURCE_DIR) + "/scenarios/market-72h.json");
  ASSERT_TRUE(v1) << v1.error();
  EXPECT_EQ(v1->format_version, 1);
  EXPECT_FALSE(v1->demand);
  // The /3 markets: every offer takes bids, some hosts' contracts end, rivals outbid.
  for (const char* name : {"demo-small-v3.json", "market-72h-v3.json"}) {
    auto s = load_scenario(std::string(PF_SOURCE_DIR) + "/scenarios/" + name);
    ASSERT_TRUE(s) << s.error();
    EXPECT_EQ(s->format_version, 3);
    std::size_t ending = 0, rivalled = 0;
    for (const auto& o : s->offers) {
      ASSERT_TRUE(o.bid_market) << name << " offer " << o.offer.id;
      ending += o.contract_end_h ? 1 : 0;
      rivalled += o.bid_market->rivals.empty() ? 0 : 1;
    }
    EXPECT_GT(ending, 0u) << name;
    EXPECT_GT(rivalled, s->offers.size() / 2) << name;
  }
}

TEST(ScenarioV2Parse, AddedKeysAreOptionalWithTheV1Defaults) {
  const Scenario s = parsed(v2_doc(30));
  const Truth& t = s.offers[0].truth;
  EXPECT_DOUBLE_EQ(t.mem_base_gib, 70);
  EXPECT_DOUBLE_EQ(t.mem_per_partition_gib, 14);
  EXPECT_EQ(t.warmup_proofs, 1);
  EXPECT_TRUE(s.offers[0].dph_changes.empty());
  EXPECT_FALSE(s.economics.demand_proofs_per_hour);
  EXPECT_DOUBLE_EQ(s.demand->deadline_min, 45);

  json doc = v2_doc(30);
  doc["offers"][0]["truth"]["mem_base_gib"] = 72.5;
  doc["offers"][0]["truth"]["mem_per_partition_gib"] = 15;
  doc["offers"][0]["truth"]["warmup_proofs"] = 3;
  doc["offers"][0]["truth"]["throttle"] = {{"after_h", 1}, {"factor", 0.5}, {"reported", false}};
  doc["offers"][0]["dph_changes"] = {{{"at_h", 2}, {"dph_total", 0.4}}};
  const Scenario full = parsed(doc);
  const Truth& ft = full.offers[0].truth;
  EXPECT_DOUBLE_EQ(ft.mem_base_gib, 72.5);
  EXPECT_EQ(ft.warmup_proofs, 3);
  ASSERT_TRUE(ft.throttle);
  EXPECT_FALSE(ft.throttle->reported);
  ASSERT_EQ(full.offers[0].dph_changes.size(), 1u);
  EXPECT_DOUBLE_EQ(full.offers[0].dph_changes[0].dph_total, 0.4);
  // The visible offer stays vast's: no dph_changes in what a client is served.
  EXPECT_FALSE(full.offers[0].vast_json.contains("dph_changes"));
}

TEST(ScenarioV2Parse, DemandIsRequiredInV2AndV2KeysAreUnknownInV1) {
  json doc = v2_doc(30);
  doc.erase("demand");
  EXPECT_EQ(v2_error_of(doc), "missing top-level key \"demand\"");

  json v1 = one_offer_doc(good_truth());
  v1["offers"][0]["truth"]["warmup_proofs"] = 2;
  v1["offers"][0]["dph_changes"] = json::array();
  v1["demand"] = v2_doc(1)["demand"];
  const std::string e = v2_error_of(v1);
  EXPECT_THAT(e, HasSubstr("unknown top-level key \"demand\""));
  EXPECT_THAT(e, HasSubstr("offers[0]: unknown key \"dph_changes\""));
  EXPECT_THAT(e, HasSubstr("offers[0].truth: unknown key \"warmup_proofs\""));
}

TEST(ScenarioV2Parse, EveryBadV2ValueIsNamed) {
  json doc = v2_doc(30);
  doc["demand"]["arrivals"].push_back({{"from_h", 5}, {"to_h", 12}, {"proofs_per_hour", 1}});
  doc["demand"]["arrivals"].push_back({{"from_h", 13}, {"to_h", 13}, {"proofs_per_hour", 1}});
  doc["demand"]["deadline_min"] = 0;
  doc["offers"][0]["dph_changes"] = {{{"at_h", 3}, {"dph_total", 0.4}},
                                     {{"at_h", 2}, {"dph_total", 0.5}},
                                     {{"at", 4}, {"dph_total", 0.5}}};
  doc["offers"][0]["truth"]["warmup_proofs"] = 1.5;
  doc["offers"][0]["truth"]["throttle"] = {{"after_h", 1}, {"factor", 0.5}, {"reported", "no"}};
  const std::string e = v2_error_of(doc);
  EXPECT_THAT(e, HasSubstr("demand.deadline_min: must be in (0, 1e+06], got 0"));
  EXPECT_THAT(e, HasSubstr("demand.arrivals[1].from_h: must not be before the previous"));
  EXPECT_THAT(e, HasSubstr("demand.arrivals[2]: from_h (13) must be < to_h (13)"));
  EXPECT_THAT(e, HasSubstr("offers[0].dph_changes[1].at_h: must be after the previous change's"));
  EXPECT_THAT(e,
              HasSubstr("offers[0].dph_changes[2]: unknown key \"at\" (did you mean \"at_h\"?)"));
  EXPECT_THAT(e, HasSubstr("offers[0].truth.warmup_proofs: expected an integer, got 1.5"));
  EXPECT_THAT(e, HasSubstr("offers[0].truth.throttle.reported: expected true or false"));
}

// The one-offer scenario as /3: a contract ending at 6 h and a bid market from $0.20/hr with
// a $0.50 rival bid over [1, 2) h and a $0.30 one from 1.5 h until `second_rival_until_h`.
json v3_doc(double second_rival_until_h) {
  json doc = v2_doc(30);
  doc["format"] = kScenarioFormatV3;
  doc["offers"][0]["contract_end_h"] = 6;
  doc["offers"][0]["bid_market"] = {
      {"min_bid", 0.2},
      {"rivals",
       {{{"from_h", 1}, {"to_h", 2}, {"price", 0.5}},
        {{"from_h", 1.5}, {"to_h", second_rival_until_h}, {"price", 0.3}}}}};
  return doc;
}

// /3 = /2 plus, per offer, the host's contract end and an interruptible market.
TEST(ScenarioV3Parse, ContractEndsAndBidMarketsAreReadAndUnknownBeforeV3) {
  json doc = v3_doc(9);
  doc["offers"][0]["inet_up_cost"] = 0.05;
  const Scenario s = parsed(doc);
  EXPECT_EQ(s.format_version, 3);
  // A visible field, as vast lists it ($/GB uploaded).
  EXPECT_DOUBLE_EQ(s.offers[0].offer.inet_up_cost_per_gb, 0.05);
  EXPECT_DOUBLE_EQ(s.offers[0].vast_json.at("inet_up_cost").get<double>(), 0.05);
  ASSERT_TRUE(s.offers[0].contract_end_h);
  EXPECT_DOUBLE_EQ(*s.offers[0].contract_end_h, 6);
  ASSERT_TRUE(s.offers[0].bid_market);
  EXPECT_DOUBLE_EQ(s.offers[0].bid_market->min_bid, 0.2);
  ASSERT_EQ(s.offers[0].bid_market->rivals.size(), 2u);
  EXPECT_DOUBLE_EQ(s.offers[0].bid_market->rivals[1].price, 0.3);
  // Not visible fields: market-sim shows them as vast does (end_date, min_bid), not as written.
  EXPECT_FALSE(s.offers[0].vast_json.contains("contract_end_h"));
  EXPECT_FALSE(s.offers[0].vast_json.contains("bid_market"));
  // A bid market without rivals: only min_bid.
  doc["offers"][0]["bid_market"].erase("rivals");
  EXPECT_TRUE(parsed(doc).offers[0].bid_market->rivals.empty());

  json v2 = doc;
  v2["format"] = kScenarioFormatV2;
  const std::string e = v2_error_of(v2);
  EXPECT_THAT(e, HasSubstr("offers[0]: unknown key \"contract_end_h\""));
  EXPECT_THAT(e, HasSubstr("offers[0]: unknown key \"bid_market\""));
  EXPECT_THAT(e, HasSubstr("offers[0]: unknown key \"inet_up_cost\""));
}

// The market's stops of one rental (scenario/bid_market.h), as market-sim serves them.
TEST(ScenarioV3Market, ABidRunsWhileOnTopAndEveryRentalStopsForGoodAtTheContractEnd) {
  const json doc = v3_doc(3);
  const Scenario s = parsed(doc);
  const ScenarioOffer& offer = s.offers[0];
  const double inf = std::numeric_limits<double>::infinity();
  using Periods = std::vector<std::pair<double, double>>;
  // On-demand: only the contract's end.
  EXPECT_EQ(market_stop_periods(offer, {}, 0, 10), (Periods{{6, inf}}));
  EXPECT_FALSE(market_stop_at(offer, {}, 1.5));
  EXPECT_EQ(market_stop_at(offer, {}, 6), MarketStop::ContractEnded);
  // A bid of 0.3: outbid by the 0.5 from 1 h and by the 0.3 (as much, and first) until 3 h.
  const BidHistory at_03 = {{0, 0.3}};
  EXPECT_EQ(market_stop_periods(offer, at_03, 0, 10), (Periods{{1, 3}, {6, inf}}));
  EXPECT_EQ(market_stop_at(offer, at_03, 2.5), MarketStop::Outbid);
  // Raised to 0.6 at 1.25 h: on top again from then.
  const BidHistory raised = {{0, 0.3}, {1.25, 0.6}};
  EXPECT_DOUBLE_EQ(bid_at(raised, 1.0), 0.3);
  EXPECT_DOUBLE_EQ(bid_at(raised, 2.0), 0.6);
  EXPECT_EQ(market_stop_periods(offer, raised, 0, 10), (Periods{{1, 1.25}, {6, inf}}));
  // Below min_bid: stopped from its creation. Created after a stop began: counted from then.
  EXPECT_EQ(market_stop_periods(offer, {{4, 0.1}}, 4, 10), (Periods{{4, inf}}));
  EXPECT_EQ(market_stop_periods(offer, at_03, 2, 10), (Periods{{2, 3}, {6, inf}}));
  // Nothing at or after `until`.
  EXPECT_EQ(market_stop_periods(offer, at_03, 0, 1), (Periods{}));
}

// The simulator plays /3's market on a rental (sim/des_engine.cpp, scenario/bid_market.h).
TEST(ScenarioV3Engine, AContractEndClosesTheRentalAndAnOutbidBidStopsThenResumes) {
  json doc = v2_doc(30);
  doc["format"] = kScenarioFormatV3;
  doc["offers"][0]["contract_end_h"] = 6;
  {
    const Scenario s = parsed(doc);
    const auto r = test::run_rent_all_once(s);
    ASSERT_EQ(r.instances.size(), 1u);
    EXPECT_EQ(r.bid_rentals, 0);
    EXPECT_EQ(r.preemptions, 0);  // a contract's end is not a preemption
    ASSERT_TRUE(r.instances[0].closed_h);
    EXPECT_DOUBLE_EQ(*r.instances[0].closed_h, 6);
    EXPECT_THAT(r.instances[0].close_reason, HasSubstr("contract ended"));
  }
  // On-demand for the whole horizon, against a bid outbid for 6 minutes (under the lifecycle's
  // grace for a market stop): it stops, resumes, and pays its bid for compute.
  doc["offers"][0].erase("contract_end_h");
  const auto on_demand = test::run_rent_all_once(parsed(doc));
  doc["offers"][0]["bid_market"] = {{"min_bid", 0.1},
                                    {"rivals", {{{"from_h", 2}, {"to_h", 2.1}, {"price", 0.2}}}}};
  const Scenario bid_market = parsed(doc);
  test::RentAllOnce bidding;
  bidding.bid_config.enabled = true;
  bidding.predicted_rate = 30;
  const auto bid = test::run_rent_all_once(bid_market, &bidding);
  ASSERT_EQ(bid.instances.size(), 1u);
  EXPECT_EQ(bid.bid_rentals, 1);
  EXPECT_EQ(bid.preemptions, 1);
  EXPECT_FALSE(bid.instances[0].closed_h) << bid.instances[0].close_reason;
  EXPECT_GT(bid.instances[0].proofs_paid, 0);
  EXPECT_LT(bid.spend_usd, on_demand.spend_usd * 0.7);
  // Bids off (the default): the same market rents on-demand.
  const auto off = test::run_rent_all_once(bid_market);
  EXPECT_EQ(off.bid_rentals, 0);
  EXPECT_EQ(off.preemptions, 0);
}

// The default policy's changes of bid in the simulator (core/bid_change.h, as the manager's
// tick makes them): outbid from 2 h to 9 h by a rival under the terms' ceiling, an accepted bid
// rental is raised after 2 min instead of waiting its stop out, goes back to its own bid after
// 3 h of running, is stopped again by the rival still there, and is raised again.
TEST(ScenarioV3Engine, AnOutbidAcceptedRentalIsRaisedAndLoweredInsteadOfWaitingItsStopOut) {
  json doc = v2_doc(30);
  doc["format"] = kScenarioFormatV3;
  // Compute $0.273/hr: the ceiling is 85 % of it, $0.232; the rental's own bid 0.13.
  doc["offers"][0]["bid_market"] = {{"min_bid", 0.1},
                                    {"rivals", {{{"from_h", 2}, {"to_h", 9}, {"price", 0.2}}}}};
  const Scenario s = parsed(doc);
  sim::DefaultPolicyConfig live = sim::serve_defaults();
  live.bids.enabled = true;
  auto run = [&](double raise_after_s) {
    sim::DefaultPolicyConfig c = live;
    c.bids.raise_stopped_after_s = raise_after_s;
    auto policy = sim::make_policy("default", s, c);
    sim::DesOptions options;
    options.details = true;
    return sim::run_des(s, *policy, options);
  };
  const sim::DesReport raising = run(120);
  ASSERT_FALSE(raising.instances.empty());
  EXPECT_EQ(raising.bid_rentals, 1);
  EXPECT_FALSE(raising.instances[0].closed_h) << raising.instances[0].close_reason;
  EXPECT_EQ(raising.bid_raises, 3);
  EXPECT_EQ(raising.bid_lowerings, 2);
  EXPECT_EQ(raising.preemptions, 3);
  const sim::DesReport waiting = run(0);
  EXPECT_EQ(waiting.bid_raises, 0);
  ASSERT_FALSE(waiting.instances.empty());
  ASSERT_TRUE(waiting.instances[0].closed_h);
  EXPECT_THAT(waiting.instances[0].close_reason, HasSubstr("did not resume"));
  EXPECT_GT(raising.jobs_served_on_time, waiting.jobs_served_on_time);
  EXPECT_GT(raising.profit_usd, waiting.profit_usd);
}

TEST(ScenarioV3Parse, EveryBadV3ValueIsNamed) {
  json doc = v2_doc(30);
  doc["format"] = kScenarioFormatV3;
  doc["offers"][0]["listed_from_h"] = 2;
  doc["offers"][0]["contract_end_h"] = 2;
  doc["offers"][0]["inet_up_cost"] = -0.01;
  doc["offers"][0]["bid_market"] = {{"min_bid", -1},
                                    {"rivals",
                                     {{{"from_h", 3}, {"to_h", 3}, {"price", 0.5}},
                                      {{"from_h", 4}, {"to_h", 5}, {"price", 0.5}},
                                      {{"from_h", 1}, {"to_h", 5}, {"price", 0.5}},
                                      {{"from_h", 6}, {"to_h", 7}, {"bid", 0.5}}}}};
  const std::string e = v2_error_of(doc);
  EXPECT_THAT(e, HasSubstr("offers[0].contract_end_h: must be after listed_from_h (2)"));
  EXPECT_THAT(e, HasSubstr("offers[0].inet_up_cost: must be"));
  EXPECT_THAT(e, HasSubstr("offers[0].bid_market.min_bid: must be in [0, 1e+06], got -1"));
  EXPECT_THAT(e, HasSubstr("offers[0].bid_market.rivals[0]: from_h (3) must be < to_h (3)"));
  EXPECT_THAT(e, HasSubstr("offers[0].bid_market.rivals[2].from_h: must not be before the "
                           "previous rival's (4)"));
  EXPECT_THAT(e, HasSubstr("offers[0].bid_market.rivals[3]: unknown key \"bid\""));
}

TEST(ScenarioV2Parse, TheJobsAreBoundedSoTheSimulationIs) {
  json doc = v2_doc(1e6);
  doc["hours"] = 8760;
  doc["demand"]["arrivals"][0]["to_h"] = 8760;
  EXPECT_THAT(v2_error_of(doc),
              HasSubstr("demand.arrivals: 8.76e+09 jobs expected over the horizon"));
  json segments = v2_doc(1);
  segments["demand"]["arrivals"] = json::array();
  for (int i = 0; i < 100'001; ++i) {
    segments["demand"]["arrivals"].push_back(
        {{"from_h", i * 1e-5}, {"to_h", (i + 1) * 1e-5}, {"proofs_per_hour", 1}});
  }
  EXPECT_THAT(v2_error_of(segments), HasSubstr("demand.arrivals: 100001 entries, at most 100000"));
}

TEST(ScenarioV2Parse, FailuresBelongToTheMachine) {
  json doc = v2_doc(30);
  json second = doc["offers"][0];
  second["id"] = 1002;
  second["truth"]["failure"] = {{"kind", "crash"}, {"after_h", 3}};
  doc["offers"].push_back(second);
  EXPECT_EQ(v2_error_of(doc),
            "offers[1].truth.failure: must equal offers[0]'s (same machine_id 501): in /2 "
            "failures belong to the machine");
  doc["offers"][0]["truth"]["failure"] = {{"kind", "crash"}, {"after_h", 3}};
  EXPECT_EQ(v2_error_of(doc), "(parsed)");
}

// --- the simulator's /2 physics -----------------------------------------------------------------

// Capacity (60/h) twice the arrivals (30/h) and a 45 min deadline: every job that arrives is
// served on time, except the few still in the queue or in flight at the end; the instance
// waits about half of its time.
TEST(ScenarioV2Engine, JobsArePaidOnlyWhenDeliveredOnTime) {
  const Scenario s = parsed(v2_doc(30));
  const sim::DesReport r = test::run_rent_all_once(s);
  EXPECT_NEAR(static_cast<double>(r.jobs_arrived), 300, 4 * std::sqrt(300.0));
  EXPECT_GE(r.jobs_served_on_time, r.jobs_arrived - 3);
  EXPECT_EQ(r.jobs_late, 0);
  EXPECT_EQ(r.jobs_arrived, r.jobs_served_on_time + r.jobs_late + r.jobs_unserved);
  EXPECT_EQ(r.proofs, r.jobs_served_on_time);
  EXPECT_NEAR(r.revenue_usd, 0.012 * static_cast<double>(r.jobs_served_on_time), 1e-9);
  // The jobs of the first ~20 min wait for the instance to be ready; then barely any wait.
  EXPECT_LT(r.queue_wait_p95_min, 25);
  // ~9.7 h accepted, half of it without a job.
  EXPECT_GT(r.idle_instance_hours, 3.5);
  EXPECT_LT(r.idle_instance_hours, 6.5);
  const json j = sim::report_json(r);
  for (const char* key : {"jobs_arrived", "jobs_served_on_time", "jobs_late", "jobs_unserved",
                          "queue_wait_p95_min", "idle_instance_hours"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_THAT(sim::report_text(r), HasSubstr("served on time"));
  // /1 reports carry none of it.
  EXPECT_FALSE(sim::report_json(test::run_rent_all_once(parsed(one_offer_doc(good_truth()))))
                   .contains("jobs_arrived"));
}

// Proofs take ~1 min (CV 0.1) and the deadline is 1 min: about half are delivered late, and
// earn nothing.
TEST(ScenarioV2Engine, LateDeliveriesEarnNothing) {
  const Scenario s = parsed(v2_doc(20, 1));
  const sim::DesReport r = test::run_rent_all_once(s);
  EXPECT_GT(r.jobs_late, r.jobs_arrived / 5);
  EXPECT_GT(r.jobs_served_on_time, r.jobs_arrived / 5);
  EXPECT_EQ(r.proofs, r.jobs_served_on_time);
  // Unpaid: the late ones, and (with no benchmark) the first measured proof, which began
  // before the instance was accepted and so proved no job.
  EXPECT_GE(r.proofs_unpaid, r.jobs_late);
  EXPECT_LE(r.proofs_unpaid, r.jobs_late + 1);
  EXPECT_NEAR(r.revenue_usd, 0.012 * static_cast<double>(r.jobs_served_on_time), 1e-9);
}

// Three times the capacity arrives: the queue overflows and jobs expire unserved at their
// deadline. Placement (core/job_schedule) serves first the oldest jobs that can still be on
// time and holds back those no instance can finish by their deadline (served only by a slot
// no on-time job wants), so most deliveries are on time; strict oldest-first spent every slot
// on late proofs and made the jobs behind them late too. Never idle once ready.
TEST(ScenarioV2Engine, AnOverloadedQueueServesOnTimeFirstAndLeavesJobsUnserved) {
  const Scenario s = parsed(v2_doc(180));
  const sim::DesReport r = test::run_rent_all_once(s);
  EXPECT_GT(r.jobs_unserved, r.jobs_arrived / 2);
  EXPECT_LT(r.idle_instance_hours, 0.1);
  EXPECT_NEAR(static_cast<double>(r.jobs_served_on_time + r.jobs_late), 60 * 9.6, 60 * 9.6 * 0.06);
  EXPECT_GT(r.jobs_served_on_time, 5 * r.jobs_late);
  EXPECT_LE(r.queue_wait_p95_min, 45);
  EXPECT_GT(r.queue_wait_p95_min, 40);
}

// Every job an instance takes is billed its input down (51 MB, core::kPorepC2InputBytes) and,
// once proved (on time or late), its proof up (1,920 bytes), at the offer's prices, beside the
// parameters' one download: bandwidth as serve's bill counts it (issue 26). The one job taken
// but not proved at the horizon has paid its input only.
TEST(ScenarioV3Engine, EveryJobProvedPaysItsInputDownAndItsProofUp) {
  json doc = v2_doc(30);
  doc["format"] = kScenarioFormatV3;
  doc["offers"][0]["inet_down_cost"] = 0.02;
  doc["offers"][0]["inet_up_cost"] = 3.0;  // dear, so that the proofs' few bytes show
  const Scenario s = parsed(doc);
  const sim::DesReport r = test::run_rent_all_once(s);
  const double params = 47 * 0.02;
  const double input = 51e6 / 1e9 * 0.02;
  const double proof = 1920 / 1e9 * 3.0;
  const auto proved = static_cast<double>(r.jobs_served_on_time + r.jobs_late);
  ASSERT_GT(proved, 200);
  EXPECT_GE(r.bandwidth_usd, params + proved * (input + proof) - 1e-9);
  EXPECT_LE(r.bandwidth_usd, params + (proved + 1) * input + proved * proof + 1e-9);
  // The same market with free transfer bills nothing for it.
  doc["offers"][0]["inet_down_cost"] = 0;
  doc["offers"][0]["inet_up_cost"] = 0;
  EXPECT_EQ(test::run_rent_all_once(parsed(doc)).bandwidth_usd, 0);
  // /1 has no jobs: only the parameters are downloaded.
  json v1 = one_offer_doc(good_truth());
  v1["offers"][0]["inet_down_cost"] = 0.02;
  EXPECT_NEAR(test::run_rent_all_once(parsed(v1)).bandwidth_usd, params, 1e-9);
}

// Hedged proving (core/job_hedge.h) in the simulator: two machines prove 60/hr each for jobs
// arriving at 55/hr with a 10-minute deadline; after 3 h of proving the second one's GPU
// silently slows to a tenth (10 min a proof against the 1 min it was accepted at). Until the
// production watch has seen enough to close it, its proofs run overdue while the first one
// often waits for work: with hedging each overdue job is started there too and the first proof
// wins. The holder's abandoned proof still counts for the watch (at least as long as it ran), so
// the slow host is not kept longer for having had its proofs beaten.
TEST(ScenarioV3Engine, AnOverdueProofIsHedgedOnASpareProverAndTheFirstProofWins) {
  json doc = v2_doc(55, 10);
  doc["format"] = kScenarioFormatV3;
  json second = doc["offers"][0];
  second["id"] = 1002;
  second["machine_id"] = 502;
  second["host_id"] = 7502;
  second["truth"]["throttle"] = {{"after_h", 3}, {"factor", 0.1}, {"reported", false}};
  doc["offers"].push_back(second);
  const Scenario s = parsed(doc);
  auto run = [&](bool hedging) {
    sim::DefaultPolicyConfig c = sim::serve_defaults();
    c.hedging.enabled = hedging;
    c.policy.surplus_keep_share = 0;  // keeps both: the second is slow, not worthless
    auto policy = sim::make_policy("default", s, c);
    sim::DesOptions options;
    options.details = true;
    return sim::run_des(s, *policy, options);
  };
  const sim::DesReport plain = run(false);
  const sim::DesReport hedged = run(true);
  EXPECT_EQ(plain.hedges, 0);
  EXPECT_GT(hedged.hedges, 0);
  EXPECT_GT(hedged.hedges_won_on_time, 0);
  EXPECT_LE(hedged.hedges_won_on_time, hedged.hedges_won);
  EXPECT_LE(hedged.hedges_won, hedged.hedges);
  EXPECT_GT(hedged.hedge_usd, 0);
  // Measured: 7 hedges, all won on time; $1.98 against $1.96 (the runs' draws part ways).
  EXPECT_GE(hedged.jobs_served_on_time, plain.jobs_served_on_time);
  EXPECT_LE(hedged.jobs_late, plain.jobs_late);
  EXPECT_GE(hedged.profit_usd, plain.profit_usd);
  // Every job counted once: served, late or unserved.
  EXPECT_EQ(hedged.jobs_arrived,
            hedged.jobs_served_on_time + hedged.jobs_late + hedged.jobs_unserved);
  // The slow host is closed by the production watch no later than without hedges.
  const auto closed_at = [](const sim::DesReport& r) {
    for (const auto& i : r.instances) {
      if (i.offer_id == 1002 && i.closed_h) return *i.closed_h;
    }
    return std::numeric_limits<double>::infinity();
  };
  EXPECT_LE(closed_at(hedged), closed_at(plain));
  EXPECT_LT(closed_at(plain), 6);
  EXPECT_THAT(sim::report_text(hedged), HasSubstr("finished first"));
}

// The host raises its price at 1 h: the rental made at 0 keeps paying $0.30 for its life.
TEST(ScenarioV2Engine, ARentalPaysThePriceListedWhenItWasCreated) {
  json doc = v2_doc(30);
  doc["offers"][0]["dph_changes"] = {{{"at_h", 1}, {"dph_total", 0.9}}};
  const sim::DesReport r = test::run_rent_all_once(parsed(doc));
  ASSERT_EQ(r.instances.size(), 1u);
  EXPECT_DOUBLE_EQ(r.instances[0].dph, 0.3);
  EXPECT_NEAR(r.spend_usd, (10 - 5.0 / 60) * 0.3, 0.01);

  // Listed only from 2 h: the rental pays the new price.
  doc["offers"][0]["listed_from_h"] = 2;
  const sim::DesReport later = test::run_rent_all_once(parsed(doc));
  ASSERT_EQ(later.instances.size(), 1u);
  EXPECT_DOUBLE_EQ(later.instances[0].dph, 0.9);
}

// The planner's model (70 + 14·p) fits 12 partitions in 256 GiB; this machine needs
// 70 + 16·p, so the plan OOMs and the agent must learn a smaller one.
TEST(ScenarioV2Engine, TheMachinesMemoryTruthOomsACarefulPlan) {
  json truth = good_truth();
  truth["mem_per_partition_gib"] = 16;
  const sim::DesReport r = test::run_rent_all_once(parsed(v2_doc(30, 45, truth)));
  EXPECT_GE(r.ooms, 1);
  ASSERT_EQ(r.instances.size(), 1u);
  EXPECT_LE(70 + 16 * r.instances[0].partitions, 256);
  const sim::DesReport planner = test::run_rent_all_once(parsed(v2_doc(30)));
  EXPECT_EQ(planner.ooms, 0);
}

// Four slow proofs after the start (30, 15, 7.5, 3.75 min extra) instead of one: ~26 fewer
// proofs at 60/h when every proof pays (the /1 physics of the same scenario).
TEST(ScenarioV2Engine, WarmupProofsAfterAStartAreSlowByHalves) {
  json truth = good_truth();
  truth["warmup_min"] = 30;
  json one = one_offer_doc(truth);
  one["format"] = kScenarioFormatV2;
  one["economics"]["demand_proofs_per_hour"] = nullptr;
  one["demand"] = {{"arrivals", {{{"from_h", 0}, {"to_h", 10}, {"proofs_per_hour", 600}}}},
                   {"deadline_min", 600}};
  const sim::DesReport single = test::run_rent_all_once(parsed(one));
  one["offers"][0]["truth"]["warmup_proofs"] = 4;
  const sim::DesReport four = test::run_rent_all_once(parsed(one));
  const double fewer = static_cast<double>(single.jobs_served_on_time - four.jobs_served_on_time);
  EXPECT_NEAR(fewer, (15 + 7.5 + 3.75) / 60 * 60, 8);
}

// A silent throttle slows the proofs as much as a reported one, but no measurement says it was
// throttled; a reported one marks the production windows that saw it.
TEST(ScenarioV2Engine, ASilentThrottleOnlySlowsTheProofs) {
  json truth = good_truth();
  truth["throttle"] = {{"after_h", 2}, {"factor", 0.5}, {"reported", true}};
  test::RentAllOnce reported_policy;
  const sim::DesReport reported =
      test::run_rent_all_once(parsed(v2_doc(600, 600, truth)), &reported_policy);
  truth["throttle"]["reported"] = false;
  test::RentAllOnce silent_policy;
  const sim::DesReport silent =
      test::run_rent_all_once(parsed(v2_doc(600, 600, truth)), &silent_policy);
  EXPECT_EQ(silent.jobs_served_on_time, reported.jobs_served_on_time);  // same physics, same draws
  const auto throttled_runs = [](const test::RentAllOnce& p) {
    return std::count_if(p.history().begin(), p.history().end(),
                         [](const core::Measurement& m) { return m.run.throttled; });
  };
  EXPECT_GT(throttled_runs(reported_policy), 0);
  EXPECT_EQ(throttled_runs(silent_policy), 0);
  EXPECT_FALSE(silent_policy.history().empty());
}

}  // namespace
}  // namespace pf::scenario
