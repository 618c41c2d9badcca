#include "market_sim/market_sim.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/params.h"
#include "agent/probe.h"
#include "agent/prover_sim.h"
#include "market_sim/agent_spawner.h"
#include "market_sim/faults.h"
#include "market_sim/param_stand_ins.h"

namespace pf::market_sim {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// tests/fixtures/scenarios/tiny.json (hours 10):
//   1001 machine 501, listed [0,10), boot 6 min,  healthy,            $1.00/h
//   1002 machine 501, listed [2,5),  boot 12 min, crash after 1 h,    $0.50/h
//   1003 machine 502, listed [0,10), never boots,                     $2.00/h
//   1004 machine 503, listed [0,10), boot 30 min, offline after 2 h,  $0.25/h
json tiny_doc() {
  std::ifstream in(std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/tiny.json");
  return json::parse(in);
}

Scenario scenario_from(const json& doc) {
  auto s = scenario::parse_scenario(doc);
  if (!s) throw std::runtime_error(s.error());
  return *s;
}

Scenario tiny() {
  return scenario_from(tiny_doc());
}

// `n` copies of the healthy offer 1001 with ids 3000, 3001, ...
Scenario many_offers(int n) {
  json doc = tiny_doc();
  json offer = doc["offers"][0];
  doc["offers"] = json::array();
  for (int i = 0; i < n; ++i) {
    offer["id"] = 3000 + i;
    doc["offers"].push_back(offer);
  }
  return scenario_from(doc);
}

const json kCreate = {{"image", "ghcr.io/proverfleet/agent:1"}, {"disk", 100}};

std::vector<std::int64_t> listed_ids(const MarketSim& sim, double t) {
  std::vector<std::int64_t> ids;
  for (const auto& o : sim.listed_offers(t)) ids.push_back(o.at("id").get<std::int64_t>());
  return ids;
}

std::int64_t create(MarketSim& sim, std::int64_t ask, double t, json body = kCreate) {
  auto r = sim.create_instance(ask, body, t);
  if (!r) throw std::runtime_error("create failed: " + r.error().msg);
  return r->at("new_contract").get<std::int64_t>();
}

std::string status_at(const MarketSim& sim, std::int64_t id, double t) {
  return sim.show_instance(id, t).at("instances").at("actual_status").get<std::string>();
}

ApiResult<json> list(const MarketSim& sim, std::map<std::string, std::string> params, double t) {
  return sim.list_instances(params, t);
}

std::vector<std::int64_t> ids_of(const json& page) {
  std::vector<std::int64_t> ids;
  for (const auto& i : page.at("instances")) ids.push_back(i.at("id").get<std::int64_t>());
  return ids;
}

TEST(MarketSimListingTest, OffersAreListedInsideTheirHalfOpenWindow) {
  MarketSim sim(tiny());
  EXPECT_THAT(listed_ids(sim, 0), ElementsAre(1001, 1003, 1004));
  EXPECT_THAT(listed_ids(sim, 1.99), ElementsAre(1001, 1003, 1004));
  EXPECT_THAT(listed_ids(sim, 2), ElementsAre(1001, 1002, 1003, 1004));
  EXPECT_THAT(listed_ids(sim, 4.99), ElementsAre(1001, 1002, 1003, 1004));
  EXPECT_THAT(listed_ids(sim, 5), ElementsAre(1001, 1003, 1004));
  EXPECT_TRUE(listed_ids(sim, 10).empty());
}

TEST(MarketSimListingTest, ListedOffersCarryVastFlagsAndNoTruth) {
  MarketSim sim(tiny());
  auto offers = sim.listed_offers(0);
  ASSERT_FALSE(offers.empty());
  const json& o = offers[0];
  EXPECT_EQ(o.at("id"), 1001);
  EXPECT_EQ(o.at("ask_contract_id"), 1001);
  EXPECT_EQ(o.at("rentable"), true);
  EXPECT_EQ(o.at("rented"), false);
  EXPECT_EQ(o.at("external"), false);
  EXPECT_EQ(o.at("verification"), "verified");
  EXPECT_DOUBLE_EQ(o.at("reliability").get<double>(), 0.99);
  EXPECT_EQ(o.at("gpu_ram"), 24576);  // vast units (MiB), as the scenario wrote them
  EXPECT_FALSE(o.contains("truth"));
  EXPECT_FALSE(o.contains("listed_from_h"));
}

TEST(MarketSimListingTest, CreateTakesTheOfferOutAndDestroyPutsItBack) {
  MarketSim sim(tiny());
  auto id = create(sim, 1001, 1.0);
  EXPECT_THAT(listed_ids(sim, 1.0), ElementsAre(1003, 1004));

  auto again = sim.create_instance(1001, kCreate, 1.5);
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().http_status, 404);
  EXPECT_EQ(again.error().code, "no_such_ask");
  EXPECT_EQ(again.error().msg,
            "error 404/3603: no_such_ask Instance type by id 1001 is not available.");

  ASSERT_TRUE(sim.destroy_instance(id, 2.0));
  EXPECT_THAT(listed_ids(sim, 2.0), ElementsAre(1001, 1002, 1003, 1004));
  auto second = create(sim, 1001, 2.5);
  EXPECT_NE(second, id);
}

TEST(MarketSimListingTest, DestroyAfterTheWindowDoesNotRelist) {
  MarketSim sim(tiny());
  auto id = create(sim, 1002, 3.0);
  ASSERT_TRUE(sim.destroy_instance(id, 6.0));
  EXPECT_THAT(listed_ids(sim, 6.0), ElementsAre(1001, 1003, 1004));
}

TEST(MarketSimCreateTest, UnknownOrUnlistedAskIsNoSuchAsk) {
  MarketSim sim(tiny());
  for (auto [ask, t] : {std::pair<std::int64_t, double>{9999, 1.0}, {1002, 1.0}, {1002, 5.0}}) {
    auto r = sim.create_instance(ask, kCreate, t);
    ASSERT_FALSE(r) << ask << " at " << t;
    EXPECT_EQ(r.error().http_status, 404);
    EXPECT_EQ(r.error().code, "no_such_ask");
    EXPECT_EQ(r.error().body(),
              (json{{"success", false}, {"error", "no_such_ask"}, {"msg", r.error().msg}}));
  }
}

TEST(MarketSimCreateTest, ReplyCarriesTheInstanceIdAndAKey) {
  MarketSim sim(tiny());
  auto r = sim.create_instance(1001, kCreate, 0);
  ASSERT_TRUE(r) << r.error().msg;
  EXPECT_EQ(r->at("success"), true);
  EXPECT_EQ(r->at("new_contract"), 90000001);
  const std::string key = r->at("instance_api_key").get<std::string>();
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(create(sim, 1003, 0), 90000002);
}

struct BadCreate {
  json body;
  std::string code;
  std::string field;
};

TEST(MarketSimCreateTest, InvalidBodiesAreRejectedNamingTheFieldAndChangeNothing) {
  const std::vector<BadCreate> cases = {
      {json::array(), "invalid_args", "request body must be a JSON object"},
      {json{{"disk", 50}}, "invalid_args", "image: required"},
      {json{{"image", ""}}, "invalid_args", "image: expected a non-empty string"},
      {json{{"image", "x"}, {"env", "-e A=1"}}, "invalid_args", "env: expected a JSON object"},
      {json{{"image", "x"}, {"env", {{"A", 1}}}}, "invalid_args", "env.A: expected a string"},
      {json{{"image", "x"}, {"label", std::string(257, 'l')}}, "invalid_args",
       "label: longer than 256 characters (257)"},
      {json{{"image", "x"}, {"label", 5}}, "invalid_args", "label: expected a string"},
      {json{{"image", "x"}, {"disk", 4}}, "invalid_args", "disk: must be >= 8"},
      {json{{"image", "x"}, {"disk", "big"}}, "invalid_args", "disk: expected a number"},
      {json{{"image", "x"}, {"disk", 201}}, "invalid_args", "exceeds the offer's disk_space"},
      {json{{"image", "x"}, {"runtype", "ssh telnet"}}, "invalid_args",
       "runtype: unknown run type \"telnet\""},
      {json{{"image", "x"}, {"onstart", std::string(4097, 'x')}}, "invalid_args",
       "longer than 4096 characters"},
      {json{{"image", "x"}, {"price", 500}}, "invalid_price", "price: must be a number"},
      {json{{"image", "x"}, {"target_state", "paused"}}, "invalid_args", "target_state"},
  };
  MarketSim sim(tiny());
  for (const auto& c : cases) {
    auto r = sim.create_instance(1001, c.body, 1.0);
    ASSERT_FALSE(r) << c.body.dump();
    EXPECT_EQ(r.error().http_status, 400) << c.body.dump();
    EXPECT_EQ(r.error().code, c.code) << c.body.dump();
    EXPECT_THAT(r.error().msg, HasSubstr(c.field)) << c.body.dump();
  }
  EXPECT_EQ(sim.instances_created(), 0u);
  EXPECT_THAT(listed_ids(sim, 1.0), ElementsAre(1001, 1003, 1004));
}

TEST(MarketSimCreateTest, AcceptsWhatVastClientsSend) {
  MarketSim sim(tiny());
  json body = {{"client_id", "me"},
               {"image", "img"},
               {"disk", 200},
               {"label", "pf-a"},
               {"env", {{"-p 8000:8000", "1"}, {"PF_TOKEN", "t"}}},
               {"onstart", "echo hi"},
               {"runtype", "ssh_direc ssh_proxy"},
               {"price", nullptr},
               {"cancel_unavail", true}};
  auto r = sim.create_instance(1001, body, 0);
  ASSERT_TRUE(r) << r.error().msg;
}

TEST(MarketSimInstanceTest, RecordHasVastShape) {
  MarketSimOptions options;
  options.epoch_at_zero_s = 1'000'000;
  options.epoch_s_per_h = 60;
  MarketSim sim(tiny(), options);
  json body = kCreate;
  body["label"] = "pf-x";
  body["env"] = {{"B", "2"}, {"A", "1"}};
  body["onstart"] = "/start.sh";
  auto id = create(sim, 1001, 2.0, body);

  json shown = sim.show_instance(id, 2.5);
  ASSERT_TRUE(shown.at("instances").is_object());
  const json& i = shown["instances"];
  EXPECT_EQ(i.at("id"), id);
  EXPECT_EQ(i.at("machine_id"), 501);
  EXPECT_EQ(i.at("host_id"), 7501);
  EXPECT_EQ(i.at("label"), "pf-x");
  EXPECT_EQ(i.at("actual_status"), "running");
  EXPECT_EQ(i.at("intended_status"), "running");
  EXPECT_EQ(i.at("cur_state"), "running");
  EXPECT_EQ(i.at("next_state"), "running");
  EXPECT_EQ(i.at("status_msg"), "success, running ghcr.io/proverfleet/agent:1");
  EXPECT_EQ(i.at("gpu_name"), "RTX 4090");
  EXPECT_EQ(i.at("num_gpus"), 1);
  EXPECT_EQ(i.at("gpu_ram"), 24576);
  EXPECT_EQ(i.at("cpu_ram"), 131072);
  EXPECT_EQ(i.at("cpu_cores"), 64);
  EXPECT_DOUBLE_EQ(i.at("cpu_cores_effective").get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(i.at("dph_total").get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(i.at("disk_space").get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(i.at("start_date").get<double>(), 1'000'000 + 2.0 * 60);
  EXPECT_EQ(i.at("geolocation"), "Texas, US");
  EXPECT_EQ(i.at("extra_env"), json::parse(R"([["A","1"],["B","2"]])"));
  EXPECT_EQ(i.at("onstart"), "/start.sh");
  EXPECT_EQ(i.at("image_uuid"), "ghcr.io/proverfleet/agent:1");
  EXPECT_EQ(i.at("image_runtype"), "ssh");
  EXPECT_DOUBLE_EQ(i.at("uptime_mins").get<double>(), 24.0);  // booted at 2.1 h
}

TEST(MarketSimInstanceTest, UnknownAndDestroyedInstancesShowNull) {
  MarketSim sim(tiny());
  EXPECT_EQ(sim.show_instance(12345, 0), (json{{"instances", nullptr}}));
  auto id = create(sim, 1001, 0);
  ASSERT_TRUE(sim.destroy_instance(id, 1));
  EXPECT_EQ(sim.show_instance(id, 1), (json{{"instances", nullptr}}));
}

TEST(MarketSimStatusTest, HealthyInstanceLoadsThenRuns) {
  MarketSim sim(tiny());
  auto id = create(sim, 1001, 1.0);
  EXPECT_EQ(status_at(sim, id, 1.0), "loading");
  EXPECT_EQ(status_at(sim, id, 1.09), "loading");
  EXPECT_EQ(status_at(sim, id, 1.1), "running");
  EXPECT_EQ(status_at(sim, id, 9.9), "running");
}

// The parameters (47 GB at 400 Mb/s) take 940 s; the prover starts then.
constexpr double kTinyDownloadH = 47e9 / (400e6 / 8) / 3600;

TEST(MarketSimStatusTest, CrashExitsAfterItsHoursOfProving) {
  MarketSim sim(tiny());
  // Boots at 2.2, downloads the parameters, crashes after 1 h of proving (the spec; it used to
  // count from boot, which disagreed with the policy simulator).
  auto id = create(sim, 1002, 2.0);
  const double crash_h = 2.2 + kTinyDownloadH + 1;
  EXPECT_EQ(status_at(sim, id, 2.1), "loading");
  EXPECT_EQ(status_at(sim, id, 3.3), "running");  // 1 h after boot: still proving
  EXPECT_EQ(status_at(sim, id, crash_h - 0.01), "running");
  EXPECT_EQ(status_at(sim, id, crash_h + 1e-9), "exited");
  EXPECT_EQ(sim.show_instance(id, crash_h + 0.1)["instances"]["status_msg"],
            "container exited with status 1");
}

TEST(MarketSimStatusTest, NeverBootsStaysLoading) {
  MarketSim sim(tiny());
  auto id = create(sim, 1003, 0);
  EXPECT_EQ(status_at(sim, id, 0.01), "loading");
  EXPECT_EQ(status_at(sim, id, 9.99), "loading");
  EXPECT_EQ(status_at(sim, id, 500), "loading");
}

TEST(MarketSimStatusTest, OfflineHostGoesOffline) {
  MarketSim sim(tiny());
  auto id = create(sim, 1004, 0);  // boots at 0.5, offline 2 h later
  EXPECT_EQ(status_at(sim, id, 0.49), "loading");
  EXPECT_EQ(status_at(sim, id, 0.5), "running");
  EXPECT_EQ(status_at(sim, id, 2.49), "running");
  EXPECT_EQ(status_at(sim, id, 2.5), "offline");
  EXPECT_EQ(status_at(sim, id, 9), "offline");
}

// vast's billing (core/billing.h): compute (the listed dph_total less the rented disk's
// storage) while running; storage of the rented disk from creation until destroy in every
// state but offline. kCreate rents 100 GB; tiny.json's storage_cost is $0.1/GB/month.
constexpr double kStorage = 100 * 0.1 / 720;  // $/hour

TEST(MarketSimBillingTest, ComputeFromBootStorageFromCreationUntilDestroy) {
  MarketSim sim(tiny());
  auto id = create(sim, 1001, 0);  // $1/h listed, running from 0.1 h
  EXPECT_NEAR(sim.spent_usd(0.1), 0.1 * kStorage, 1e-9);
  EXPECT_NEAR(sim.spent_usd(2.1), 2.0 * (1 - kStorage) + 2.1 * kStorage, 1e-9);
  ASSERT_TRUE(sim.destroy_instance(id, 3.1));
  const double spent = 3.0 * (1 - kStorage) + 3.1 * kStorage;
  EXPECT_NEAR(sim.spent_usd(3.1), spent, 1e-9);
  EXPECT_NEAR(sim.spent_usd(8.0), spent, 1e-9);  // destroy stops all billing
  EXPECT_NEAR(sim.balance_usd(8.0), 1000 - spent, 1e-9);
}

TEST(MarketSimBillingTest, LoadingPaysStorageOnlyOfflinePaysNothingExitedPaysBoth) {
  MarketSim sim(tiny());
  create(sim, 1003, 0);                 // never boots: storage only, all the way
  create(sim, 1004, 0);                 // $0.25/h running from 0.5 to 2.5, then offline
  auto crash = create(sim, 1002, 2.0);  // $0.5/h running from 2.2, exited from 3.2: still billed
  const double never_booted = 9.0 * kStorage;
  const double went_offline = 2.0 * (0.25 - kStorage) + 2.5 * kStorage;
  EXPECT_NEAR(sim.spent_usd(9.0),
              never_booted + went_offline + 6.8 * (0.5 - kStorage) + 7.0 * kStorage, 1e-9);
  ASSERT_TRUE(sim.destroy_instance(crash, 4.2));
  EXPECT_NEAR(sim.spent_usd(9.0),
              never_booted + went_offline + 2.0 * (0.5 - kStorage) + 2.2 * kStorage, 1e-9);
}

TEST(MarketSimBillingTest, BalanceAndCreditReflectCharges) {
  MarketSimOptions options;
  options.start_balance_usd = 50;
  MarketSim sim(tiny(), options);
  create(sim, 1001, 0);
  json user = sim.current_user(5.1);
  const double left = 50 - 5.0 * (1 - kStorage) - 5.1 * kStorage;
  EXPECT_NEAR(user.at("balance").get<double>(), left, 1e-9);
  EXPECT_NEAR(user.at("credit").get<double>(), left, 1e-9);
  EXPECT_EQ(user.at("id"), 1);
  EXPECT_TRUE(user.at("username").is_string());
  EXPECT_TRUE(user.at("email").is_string());
}

TEST(MarketSimBillingTest, AStoppedInstancePaysStorageOnly) {
  MarketSim sim(tiny());
  auto id = create(sim, 1001, 0);  // running from 0.1
  ASSERT_TRUE(sim.update_instance(id, {{"state", "stopped"}}, 1.1));
  EXPECT_EQ(status_at(sim, id, 1.5), "stopped");
  EXPECT_EQ(sim.show_instance(id, 1.5)["instances"]["intended_status"], "stopped");
  EXPECT_NEAR(sim.spent_usd(2.1), 1.0 * (1 - kStorage) + 2.1 * kStorage, 1e-9);
  ASSERT_TRUE(sim.update_instance(id, {{"state", "running"}}, 2.1));
  EXPECT_EQ(status_at(sim, id, 2.2), "running");
  EXPECT_NEAR(sim.spent_usd(3.1), 2.0 * (1 - kStorage) + 3.1 * kStorage, 1e-9);
}

TEST(MarketSimBillingTest, CreatedStoppedPaysStorageUntilStarted) {
  MarketSim sim(tiny());
  json body = kCreate;
  body["target_state"] = "stopped";
  auto id = create(sim, 1001, 0, body);
  EXPECT_EQ(status_at(sim, id, 1), "stopped");
  EXPECT_NEAR(sim.spent_usd(1), 1 * kStorage, 1e-9);
}

// An interruptible rental (a create with `price`) is billed its bid for compute, storage as any
// other; a changed bid counts from when it was changed (PUT /api/v0/instances/bid_price/{id}/).
TEST(MarketSimBillingTest, ABidIsBilledForComputeFromWhenItStood) {
  MarketSim sim(tiny());
  json body = kCreate;
  body["price"] = 0.4;
  auto id = create(sim, 1001, 0, body);  // listed $1/h, running from 0.1
  EXPECT_EQ(sim.show_instance(id, 1)["instances"]["is_bid"], true);
  EXPECT_NEAR(sim.spent_usd(2.1), 2.0 * 0.4 + 2.1 * kStorage, 1e-9);
  ASSERT_TRUE(sim.change_bid(id, {{"client_id", "me"}, {"price", 0.6}}, 2.1));
  EXPECT_NEAR(sim.spent_usd(3.1), 2.0 * 0.4 + 1.0 * 0.6 + 3.1 * kStorage, 1e-9);
  const auto bad = sim.change_bid(id, {{"price", 500}}, 3.1);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "invalid_price");
  auto on_demand = create(sim, 1004, 3.1);
  const auto not_a_bid = sim.change_bid(on_demand, {{"price", 0.2}}, 3.2);
  ASSERT_FALSE(not_a_bid);
  EXPECT_EQ(not_a_bid.error().http_status, 400);
  EXPECT_EQ(sim.change_bid(99999, {{"price", 0.2}}, 3.2).error().http_status, 404);
}

// /3 (docs/scenario-format.md): tiny.json with offer 1001's contract ending at `contract_end_h`
// and `bid_market` on it.
Scenario tiny_v3(std::optional<double> contract_end_h, json bid_market = nullptr) {
  json doc = tiny_doc();
  doc["format"] = "proverfleet-scenario/3";
  doc["economics"].erase("demand_proofs_per_hour");
  doc["demand"] = {{"arrivals", {{{"from_h", 0}, {"to_h", 10}, {"proofs_per_hour", 1}}}},
                   {"deadline_min", 60}};
  doc["offers"][1]["machine_id"] = 504;  // from /2 on, failures belong to the machine
  if (contract_end_h) doc["offers"][0]["contract_end_h"] = *contract_end_h;
  if (!bid_market.is_null()) doc["offers"][0]["bid_market"] = bid_market;
  return scenario_from(doc);
}

TEST(MarketStopsTest, AContractEndUnlistsTheOfferAndStopsItsRentalForGood) {
  MarketSim sim(tiny_v3(3.0));
  const double end_epoch = 1'750'000'000 + 3 * 3600;
  const auto listed = sim.listed_offers(2.9);
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.front().at("id"), 1001);
  EXPECT_DOUBLE_EQ(listed.front().at("end_date").get<double>(), end_epoch);
  EXPECT_THAT(listed_ids(sim, 3.0), Not(::testing::Contains(1001)));

  auto id = create(sim, 1001, 0);  // running from 0.1
  EXPECT_EQ(status_at(sim, id, 2.9), "running");
  const json shown = sim.show_instance(id, 3.5)["instances"];
  EXPECT_EQ(shown["actual_status"], "stopped");
  EXPECT_EQ(shown["intended_status"], "stopped");
  EXPECT_DOUBLE_EQ(shown["end_date"].get<double>(), end_epoch);
  EXPECT_THAT(shown["status_msg"].get<std::string>(), HasSubstr("contract"));
  // Compute until the contract ended; storage until destroyed.
  EXPECT_NEAR(sim.spent_usd(4.1), 2.9 * (1 - kStorage) + 4.1 * kStorage, 1e-9);
  EXPECT_EQ(status_at(sim, id, 9), "stopped");
}

TEST(MarketStopsTest, AnOutbidRentalStopsWithoutComputeAndResumesWhenItsBidIsTopAgain) {
  MarketSim sim(
      tiny_v3(std::nullopt,
              {{"min_bid", 0.1}, {"rivals", {{{"from_h", 1}, {"to_h", 2}, {"price", 0.5}}}}}));
  EXPECT_DOUBLE_EQ(sim.listed_offers(0).front().at("min_bid").get<double>(), 0.1);
  json body = kCreate;
  body["price"] = 0.4;
  auto id = create(sim, 1001, 0);
  sim.destroy_instance(id, 0);
  auto bid = create(sim, 1001, 0, body);
  EXPECT_EQ(status_at(sim, bid, 0.5), "running");
  const json outbid = sim.show_instance(bid, 1.5)["instances"];
  for (const char* state : {"actual_status", "intended_status", "cur_state", "next_state"}) {
    EXPECT_EQ(outbid[state], "stopped") << state;
  }
  EXPECT_THAT(outbid["status_msg"].get<std::string>(), HasSubstr("outbid"));
  EXPECT_EQ(status_at(sim, bid, 2.5), "running");
  // Its bid for compute while it ran (0.1 to 1, 2 to 3.1), storage all along; the on-demand
  // rental destroyed at once paid nothing.
  EXPECT_NEAR(sim.spent_usd(3.1), (0.9 + 1.1) * 0.4 + 3.1 * kStorage, 1e-9);

  // A bid raised above the rival takes the machine back at once.
  MarketSim raised(
      tiny_v3(std::nullopt,
              {{"min_bid", 0.1}, {"rivals", {{{"from_h", 1}, {"to_h", 2}, {"price", 0.5}}}}}));
  auto again = create(raised, 1001, 0, body);
  EXPECT_EQ(status_at(raised, again, 1.2), "stopped");
  ASSERT_TRUE(raised.change_bid(again, {{"client_id", "me"}, {"price", 0.6}}, 1.3));
  EXPECT_EQ(status_at(raised, again, 1.4), "running");
}

TEST(MarketStopsTest, ABidUnderMinBidIsCreatedStoppedAndTheFailureNamesItsContract) {
  MarketSim sim(tiny_v3(std::nullopt, {{"min_bid", 0.3}}));
  json body = kCreate;
  body["price"] = 0.2;
  auto reply = sim.create_instance(1001, body, 0);
  ASSERT_TRUE(reply);
  EXPECT_EQ((*reply)["success"], false);
  EXPECT_EQ((*reply)["error"], "bid_too_low");
  const auto id = (*reply)["new_contract"].get<std::int64_t>();
  EXPECT_EQ(status_at(sim, id, 1), "stopped");
  EXPECT_NEAR(sim.spent_usd(1), 1 * kStorage, 1e-9);  // storage only, as vast bills it
}

TEST(MarketSimUpdateTest, LabelIsSetAndValidated) {
  MarketSim sim(tiny());
  auto id = create(sim, 1001, 0);
  auto ok = sim.update_instance(id, {{"label", "pf-new"}}, 0.2);
  ASSERT_TRUE(ok);
  EXPECT_EQ(*ok, (json{{"success", true}}));
  EXPECT_EQ(sim.show_instance(id, 0.2)["instances"]["label"], "pf-new");

  auto too_long = sim.update_instance(id, {{"label", std::string(257, 'x')}}, 0.2);
  ASSERT_FALSE(too_long);
  EXPECT_EQ(too_long.error().http_status, 400);
  EXPECT_EQ(too_long.error().code, "label_too_long");
  EXPECT_EQ(sim.show_instance(id, 0.2)["instances"]["label"], "pf-new");

  auto bad_state = sim.update_instance(id, {{"state", "frozen"}}, 0.2);
  ASSERT_FALSE(bad_state);
  EXPECT_EQ(bad_state.error().code, "invalid_args");
  EXPECT_THAT(bad_state.error().msg, HasSubstr("state"));

  auto empty = sim.update_instance(id, json::object(), 0.2);
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, "invalid_args");
}

TEST(MarketSimUpdateTest, UnknownOrDestroyedInstanceIsNoSuchInstance) {
  MarketSim sim(tiny());
  auto missing = sim.update_instance(777, {{"label", "x"}}, 0);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().http_status, 404);
  EXPECT_EQ(missing.error().code, "no_such_instance");

  auto id = create(sim, 1001, 0);
  ASSERT_TRUE(sim.destroy_instance(id, 1));
  auto twice = sim.destroy_instance(id, 1);
  ASSERT_FALSE(twice);
  EXPECT_EQ(twice.error().http_status, 404);
  EXPECT_EQ(twice.error().code, "no_such_instance");
  EXPECT_FALSE(sim.update_instance(id, {{"label", "x"}}, 1));
  EXPECT_FALSE(sim.destroy_instance(424242, 1));
}

TEST(MarketSimListTest, PagesOf25WithNextTokenUntilNull) {
  MarketSim sim(many_offers(30));
  std::vector<std::int64_t> created;
  for (int i = 0; i < 30; ++i) created.push_back(create(sim, 3000 + i, 0));

  auto first = list(sim, {}, 1);
  ASSERT_TRUE(first) << first.error().msg;
  EXPECT_EQ(first->at("success"), true);
  EXPECT_EQ(first->at("instances_found"), 25);
  EXPECT_EQ(first->at("total_instances"), 30);
  ASSERT_TRUE(first->at("next_token").is_string());

  auto second = list(sim, {{"after_token", first->at("next_token").get<std::string>()}}, 1);
  ASSERT_TRUE(second) << second.error().msg;
  EXPECT_EQ(second->at("instances_found"), 5);
  EXPECT_TRUE(second->at("next_token").is_null());

  std::vector<std::int64_t> seen = ids_of(*first);
  for (auto id : ids_of(*second)) seen.push_back(id);
  EXPECT_EQ(seen, created);  // ascending by id, each once
}

TEST(MarketSimListTest, SmallerLimitsPageFurtherAndLargerAreCapped) {
  MarketSim sim(many_offers(30));
  for (int i = 0; i < 30; ++i) create(sim, 3000 + i, 0);

  std::vector<std::int64_t> seen;
  std::map<std::string, std::string> params{{"limit", "10"}};
  int pages = 0;
  while (true) {
    auto page = list(sim, params, 1);
    ASSERT_TRUE(page) << page.error().msg;
    ++pages;
    for (auto id : ids_of(*page)) seen.push_back(id);
    if (page->at("next_token").is_null()) break;
    params["after_token"] = page->at("next_token").dump();  // JSON-encoded, as vast takes it
    ASSERT_LT(pages, 10);
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(std::set<std::int64_t>(seen.begin(), seen.end()).size(), 30u);

  auto capped = list(sim, {{"limit", "100"}}, 1);
  ASSERT_TRUE(capped);
  EXPECT_EQ(capped->at("instances_found"), 25);
}

TEST(MarketSimListTest, DescendingOrderPagesBackwards) {
  MarketSim sim(many_offers(3));
  for (int i = 0; i < 3; ++i) create(sim, 3000 + i, 0);
  auto page = list(sim, {{"order_by", R"([{"col":"id","dir":"desc"}])"}, {"limit", "2"}}, 1);
  ASSERT_TRUE(page) << page.error().msg;
  EXPECT_THAT(ids_of(*page), ElementsAre(90000003, 90000002));
  auto rest = list(sim,
                   {{"order_by", R"([{"col":"id","dir":"desc"}])"},
                    {"after_token", page->at("next_token").get<std::string>()}},
                   1);
  ASSERT_TRUE(rest);
  EXPECT_THAT(ids_of(*rest), ElementsAre(90000001));
}

TEST(MarketSimListTest, BadParametersAre400) {
  MarketSim sim(tiny());
  create(sim, 1001, 0);
  const std::vector<std::map<std::string, std::string>> bad = {
      {{"limit", "0"}},
      {{"limit", "many"}},
      {{"after_token", "not-a-token"}},
      {{"order_by", R"([{"col":"dph_total","dir":"asc"}])"}},
      {{"select_filters", "[1]"}},
      {{"select_filters", R"({"label":"x"})"}},
      {{"select_filters", R"({"label":{"like":"x"}})"}},
      {{"select_filters", R"({"label":{"in":"x"}})"}},
  };
  for (const auto& params : bad) {
    auto r = list(sim, params, 1);
    ASSERT_FALSE(r) << params.begin()->first << "=" << params.begin()->second;
    EXPECT_EQ(r.error().http_status, 400);
    EXPECT_EQ(r.error().code, "invalid_args");
    EXPECT_THAT(r.error().msg, HasSubstr(params.begin()->first));
  }
}

TEST(MarketSimListTest, LabelFilterAndCounts) {
  MarketSim sim(tiny());
  json a = kCreate, b = kCreate;
  a["label"] = "fleet-a";
  b["label"] = "fleet-b";
  auto a1 = create(sim, 1001, 0, a);
  auto a2 = create(sim, 1003, 0, a);
  create(sim, 1004, 0, b);

  auto page = list(sim, {{"select_filters", R"({"label":{"eq":"fleet-a"}})"}}, 1);
  ASSERT_TRUE(page) << page.error().msg;
  EXPECT_THAT(ids_of(*page), ElementsAre(a1, a2));
  EXPECT_EQ(page->at("total_instances"), 2);
  EXPECT_EQ(page->at("label_counts"), (json{{"fleet-a", 2}, {"fleet-b", 1}}));

  auto in = list(sim, {{"select_filters", R"({"label":{"in":["fleet-b","zzz"]}})"}}, 1);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->at("instances_found"), 1);

  auto by_status = list(sim, {{"select_filters", R"({"actual_status":{"eq":"loading"}})"}}, 0.2);
  ASSERT_TRUE(by_status);
  EXPECT_THAT(ids_of(*by_status), UnorderedElementsAre(a2, a2 + 1));  // 1003 and 1004 load

  auto none = list(sim, {{"select_filters", R"({"label":{"eq":"nobody"}})"}}, 1);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->at("instances_found"), 0);
  EXPECT_TRUE(none->at("next_token").is_null());
}

TEST(MarketSimListTest, ComputedColumnsCannotBeFiltered) {
  MarketSim sim(tiny());
  for (const char* column : {"dph_total", "num_gpus"}) {
    auto r = list(sim, {{"select_filters", std::string(R"({")") + column + R"(":{"lt":1}})"}}, 0);
    ASSERT_FALSE(r) << column;
    EXPECT_EQ(r.error().http_status, 400);
    EXPECT_THAT(r.error().msg, HasSubstr(std::string("cannot filter on \"") + column + "\""));
  }
}

TEST(MarketSimListTest, DestroyedInstancesAreNotListed) {
  MarketSim sim(tiny());
  auto gone = create(sim, 1001, 0);
  auto kept = create(sim, 1003, 0);
  ASSERT_TRUE(sim.destroy_instance(gone, 1));
  auto page = list(sim, {}, 1);
  ASSERT_TRUE(page);
  EXPECT_THAT(ids_of(*page), ElementsAre(kept));
  EXPECT_EQ(sim.live_instances(), 1u);
  EXPECT_EQ(sim.instances_created(), 2u);
}

TEST(MarketSimSearchTest, SearchesOnlyListedOffers) {
  MarketSim sim(tiny());
  auto all = sim.search_offers(json::object(), 3);
  ASSERT_TRUE(all) << all.error().msg;
  EXPECT_EQ(all->at("offers").size(), 4u);

  create(sim, 1004, 3);
  auto h100 = sim.search_offers(json{{"gpu_name", {{"eq", "H100 SXM"}}}}, 3);
  ASSERT_TRUE(h100);
  EXPECT_TRUE(h100->at("offers").empty());  // rented by us

  auto cheap = sim.search_offers(
      json{{"dph_total", {{"lte", 1.0}}}, {"order", json::parse(R"([["dph_total","asc"]])")}}, 3);
  ASSERT_TRUE(cheap);
  ASSERT_EQ(cheap->at("offers").size(), 2u);
  EXPECT_EQ(cheap->at("offers")[0].at("id"), 1002);
  EXPECT_EQ(cheap->at("offers")[1].at("id"), 1001);
}

TEST(MarketSimSearchTest, MalformedQueryIs400) {
  MarketSim sim(tiny());
  auto not_object = sim.search_offers(json::array(), 0);
  ASSERT_FALSE(not_object);
  EXPECT_EQ(not_object.error().http_status, 400);
  auto bad_filter = sim.search_offers(json{{"num_gpus", {{"like", 2}}}}, 0);
  ASSERT_FALSE(bad_filter);
  EXPECT_EQ(bad_filter.error().http_status, 400);
  EXPECT_EQ(bad_filter.error().code, "invalid_args");
  EXPECT_THAT(bad_filter.error().msg, HasSubstr("like"));
}

TEST(FaultSpecTest, ParsesEveryFault) {
  auto spec = parse_fault_spec("429=0.2, 500=0.05,drop_create_reply=1,slow_ms=300");
  ASSERT_TRUE(spec) << spec.error();
  EXPECT_DOUBLE_EQ(spec->rate_limit_p, 0.2);
  EXPECT_DOUBLE_EQ(spec->server_error_p, 0.05);
  EXPECT_DOUBLE_EQ(spec->drop_create_reply_p, 1.0);
  EXPECT_EQ(spec->slow_ms, 300);
  EXPECT_TRUE(spec->any());
  EXPECT_EQ(spec->to_string(), "429=0.2,500=0.05,drop_create_reply=1,slow_ms=300");
}

TEST(FaultSpecTest, EmptyMeansNoFaults) {
  auto spec = parse_fault_spec("");
  ASSERT_TRUE(spec);
  EXPECT_FALSE(spec->any());
  EXPECT_EQ(spec->to_string(), "none");
}

TEST(FaultSpecTest, ErrorsNameTheEntry) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"503=0.1", "unknown fault \"503\""},
      {"429=1.5", "probability of \"429\" must be a number in [0, 1]"},
      {"500=-0.1", "probability of \"500\" must be a number in [0, 1]"},
      {"429=often", "probability of \"429\""},
      {"429", "\"429\": expected name=value"},
      {"429=0.1,429=0.2", "\"429\" given twice"},
      {"slow_ms=-5", "slow_ms must be an integer"},
      {"slow_ms=1.5", "slow_ms must be an integer"},
      {"429=0.1,", "empty entry"},
  };
  for (const auto& [text, expected] : cases) {
    auto spec = parse_fault_spec(text);
    ASSERT_FALSE(spec) << text;
    EXPECT_THAT(spec.error(), HasSubstr(expected)) << text;
  }
}

TEST(FaultInjectorTest, CertainAndImpossibleFaults) {
  FaultInjector always(FaultSpec{1, 0, 1, 0}, 1);
  FaultInjector never(FaultSpec{0, 0, 0, 0}, 1);
  FaultInjector errors(FaultSpec{0, 1, 0, 0}, 1);
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(always.before_request(), FaultAction::RateLimit);
    EXPECT_TRUE(always.drop_create_reply());
    EXPECT_EQ(never.before_request(), FaultAction::None);
    EXPECT_FALSE(never.drop_create_reply());
    EXPECT_EQ(errors.before_request(), FaultAction::ServerError);
  }
}

TEST(FaultInjectorTest, SameSeedSameDraws) {
  FaultInjector a(FaultSpec{0.5, 0, 0, 0}, 42);
  FaultInjector b(FaultSpec{0.5, 0, 0, 0}, 42);
  int limited = 0;
  for (int i = 0; i < 200; ++i) {
    auto x = a.before_request();
    EXPECT_EQ(x, b.before_request());
    limited += x == FaultAction::RateLimit;
  }
  EXPECT_GT(limited, 60);  // both outcomes occur at p = 0.5
  EXPECT_LT(limited, 140);
}

// --- what market-sim --spawn-agents needs (launch, probe tree, truth, env, stand-ins) --------

TEST(MarketSimLaunchTest, BootAndFailureTimesFollowTheTruth) {
  MarketSim sim(tiny());
  const auto healthy = create(sim, 1001, 1.0);
  auto l = sim.launch(healthy);
  ASSERT_TRUE(l);
  EXPECT_EQ(l->id, healthy);
  EXPECT_EQ(sim.scenario().offers[l->offer_index].offer.id, 1001);
  EXPECT_DOUBLE_EQ(l->created_h, 1.0);
  EXPECT_DOUBLE_EQ(l->boot_h, 1.1);  // boot 6 min
  EXPECT_TRUE(std::isinf(l->failure_h));

  const auto crashing = create(sim, 1002, 2.0);
  EXPECT_DOUBLE_EQ(sim.launch(crashing)->boot_h, 2.2);
  // crash after 1 h of proving, which starts once the parameters are down
  EXPECT_DOUBLE_EQ(sim.launch(crashing)->failure_h, 2.2 + kTinyDownloadH + 1);

  const auto never = create(sim, 1003, 2.0);
  EXPECT_TRUE(std::isinf(sim.launch(never)->boot_h));

  const auto offline = create(sim, 1004, 2.0);
  EXPECT_DOUBLE_EQ(sim.launch(offline)->boot_h, 2.5);
  EXPECT_DOUBLE_EQ(sim.launch(offline)->failure_h, 4.5);  // offline 2 h after boot

  ASSERT_TRUE(sim.destroy_instance(healthy, 3.0));
  EXPECT_FALSE(sim.launch(healthy));
  EXPECT_FALSE(sim.launch(123456));
}

TEST(MarketSimLaunchTest, CarriesTheCreatesOnstartEnvAndNeighbours) {
  MarketSim sim(tiny());
  json body = kCreate;
  body["onstart"] = "proverfleet agent";
  body["env"] = {{"PROVERFLEET_SECRET", "s3"}, {"-p 8000:8000", "1"}};
  const auto first = create(sim, 1001, 2.0, body);
  EXPECT_EQ(sim.launch(first)->onstart, "proverfleet agent");
  EXPECT_EQ(sim.launch(first)->env, body["env"]);
  EXPECT_EQ(sim.launch(first)->co_tenants, 0);
  const auto second = create(sim, 1002, 2.5);  // same machine 501
  EXPECT_EQ(sim.launch(second)->co_tenants, 1);
  EXPECT_EQ(sim.co_tenants(first), 1);  // now: the second came later
  EXPECT_EQ(sim.co_tenants(second), 1);
  EXPECT_THAT(sim.rented_offer_indices(), ElementsAre(0u, 1u));
  ASSERT_TRUE(sim.destroy_instance(first, 3.0));
  EXPECT_THAT(sim.rented_offer_indices(), ElementsAre(1u));
  EXPECT_EQ(sim.co_tenants(second), 0);  // contention is not frozen at create
}

TEST(WallSecondsTest, ScenarioHoursBecomeScaledWallSeconds) {
  EXPECT_DOUBLE_EQ(wall_seconds_until(1.5, 1.0, 60), 30);  // half an hour at 60x
  EXPECT_DOUBLE_EQ(wall_seconds_until(2.0, 1.0, 1), 3600);
  EXPECT_DOUBLE_EQ(wall_seconds_until(1.0, 2.0, 60), 0);  // already past
  EXPECT_TRUE(std::isinf(wall_seconds_until(std::numeric_limits<double>::infinity(), 1, 60)));
}

class ProbeTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("pf-probe-tree-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void write(const std::map<std::string, std::string>& files) {
    for (const auto& [rel, content] : files) {
      std::filesystem::create_directories((root_ / rel).parent_path());
      std::ofstream(root_ / rel) << content;
    }
  }

  std::filesystem::path root_;
};

// The agent's own probe, pointed at the tree, must see what the truth says.
TEST_F(ProbeTreeTest, AgentProbeSeesTheTruthsLimits) {
  const Scenario s = tiny();
  const ScenarioOffer& offer = s.offers[0];  // 1001: 128 GiB visible, 16 of 64 cores, 1 GPU
  write(probe_tree_files(offer));
  const auto probe = agent::probe_machine({root_.string(), "nvidia-smi", ""});
  EXPECT_TRUE(probe.warnings.empty()) << probe.warnings.front();
  EXPECT_EQ(probe.memory.cgroup_version, "v2");
  EXPECT_DOUBLE_EQ(probe.memory.usable_gib, 128);
  // The host: 128 GiB advertised for a 16-of-64-core slice.
  ASSERT_TRUE(probe.memory.meminfo_total_gib);
  EXPECT_DOUBLE_EQ(*probe.memory.meminfo_total_gib, 512);
  EXPECT_EQ(probe.cpu.affinity_cpus, 64);
  EXPECT_DOUBLE_EQ(probe.cpu.usable, 16);
  EXPECT_EQ(probe.cpu.usable_source, "cgroup cpu quota");
  ASSERT_EQ(probe.gpus.size(), 1u);
  EXPECT_EQ(probe.gpus[0].name, "RTX 4090");
  EXPECT_DOUBLE_EQ(probe.gpus[0].memory_total_mib, 24576);
  EXPECT_EQ(probe.gpus[0].pcie_gen, 4);
  EXPECT_TRUE(probe.gpus[0].throttle.empty());
  EXPECT_EQ(agent::read_oom_kills(root_.string()), 0);
}

TEST_F(ProbeTreeTest, OneLinePerGpuAndRamNeverBelowTheVisible) {
  json doc = tiny_doc();
  doc["offers"][1]["cpu_ram"] = 65536;  // 64 GiB advertised, 256 GiB visible: odd, but possible
  doc["offers"][1]["cpu_cores_effective"] = 64;
  const Scenario s = scenario_from(doc);
  write(probe_tree_files(s.offers[1]));  // 1002: 2 GPUs
  const auto probe = agent::probe_machine({root_.string(), "nvidia-smi", ""});
  ASSERT_EQ(probe.gpus.size(), 2u);
  EXPECT_EQ(probe.gpus[1].index, 1);
  EXPECT_DOUBLE_EQ(*probe.memory.meminfo_total_gib, 256);
  EXPECT_DOUBLE_EQ(probe.memory.usable_gib, 256);
  EXPECT_DOUBLE_EQ(probe.cpu.usable, 32);
}

TEST(SimTruthJsonTest, TheAgentsSimProverReadsItBack) {
  const Scenario s = tiny();
  const Truth& truth = s.offers[3].truth;  // 1004: throttle and offline failure
  const json j = sim_truth_json(truth, 2, 99);
  auto parsed = agent::parse_sim_truth(j);
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_DOUBLE_EQ(parsed->truth.rate_full, 40);
  EXPECT_EQ(parsed->truth.partitions_full, 10);
  EXPECT_DOUBLE_EQ(parsed->truth.ram_visible_gib, 128);
  EXPECT_DOUBLE_EQ(parsed->truth.warmup_min, 5);
  EXPECT_DOUBLE_EQ(parsed->truth.proof_time_cv, 0.1);
  ASSERT_TRUE(parsed->truth.throttle);
  EXPECT_DOUBLE_EQ(parsed->truth.throttle->after_h, 1);
  EXPECT_DOUBLE_EQ(parsed->truth.throttle->factor, 0.8);
  EXPECT_TRUE(parsed->truth.throttle->reported);
  EXPECT_EQ(parsed->truth.failure.kind, scenario::FailureKind::Offline);
  EXPECT_DOUBLE_EQ(parsed->truth.failure.after_h, 2);
  EXPECT_EQ(parsed->co_tenants, 2);  // two neighbours on the machine at create
  EXPECT_DOUBLE_EQ(parsed->truth.contention, truth.contention);
  EXPECT_DOUBLE_EQ(parsed->truth.mem_base_gib, 70);
  EXPECT_EQ(parsed->truth.warmup_proofs, 1);
  EXPECT_DOUBLE_EQ(parsed->rate_multiplier, 1);
  EXPECT_EQ(parsed->seed, 99u);

  auto alone = agent::parse_sim_truth(sim_truth_json(s.offers[0].truth, 0, 1));
  ASSERT_TRUE(alone) << alone.error();
  EXPECT_EQ(alone->co_tenants, 0);
  EXPECT_FALSE(alone->truth.throttle);
}

TEST(SimTruthJsonTest, AZeroRateHostStillParses) {
  json doc = tiny_doc();
  doc["offers"][0]["truth"]["rate_full"] = 0;
  const Scenario s = scenario_from(doc);
  auto parsed = agent::parse_sim_truth(sim_truth_json(s.offers[0].truth, 0, 1));
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_LT(parsed->truth.rate_full, 1e-3);
}

TEST(LaunchEnvironmentTest, CreateEnvUnderOursWithDockerFlagsSkipped) {
  const json create_env = {{"PROVERFLEET_MANAGER", "http://127.0.0.1:1"},
                           {"PROVERFLEET_SECRET", "s3cret"},
                           {"PROVERFLEET_PROVER", "cuzk"},
                           {"-p 8000:8000", "1"},
                           {"2BAD", "x"},
                           {"NUMBER", 5}};
  const auto env = launch_environment(create_env, {{"PROVERFLEET_PROVER", "sim"}, {"PATH", "/b"}});
  EXPECT_EQ(env.env.at("PROVERFLEET_MANAGER"), "http://127.0.0.1:1");
  EXPECT_EQ(env.env.at("PROVERFLEET_SECRET"), "s3cret");
  EXPECT_EQ(env.env.at("PROVERFLEET_PROVER"), "sim");
  EXPECT_EQ(env.env.at("PATH"), "/b");
  EXPECT_EQ(env.env.count("-p 8000:8000"), 0u);
  EXPECT_EQ(env.env.count("2BAD"), 0u);
  EXPECT_EQ(env.env.count("NUMBER"), 0u);
  EXPECT_EQ(env.env.size(), 4u);
  ASSERT_EQ(env.notes.size(), 4u);
  std::string all;
  for (const auto& n : env.notes) all += n + "\n";
  EXPECT_THAT(all, HasSubstr("\"-p 8000:8000\" skipped: not a variable name"));
  EXPECT_THAT(all, HasSubstr("NUMBER skipped: its value is not a string"));
  EXPECT_THAT(all, HasSubstr("PROVERFLEET_PROVER from the create replaced"));
}

TEST(ParamStandInsTest, TwoDeterministicFilesWithTheDigestTheAgentChecks) {
  ParamStandInOptions o;
  o.total_mib = 2;
  auto a = ParamStandIns::make(o);
  auto b = ParamStandIns::make(o);
  ASSERT_TRUE(a) << a.error();
  ASSERT_EQ(a->files().size(), 2u);
  EXPECT_EQ(a->total_bytes(), 2u << 20);
  EXPECT_EQ(a->files()[0].content.size(), 3u << 19);  // 3/4
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(a->files()[i].digest, agent::param_digest_of(a->files()[i].content));
    EXPECT_EQ(a->files()[i].content, b->files()[i].content);
  }
  EXPECT_NE(a->files()[0].content.substr(0, 4096), a->files()[1].content.substr(0, 4096));
  EXPECT_EQ(a->find(a->files()[1].name), &a->files()[1]);
  EXPECT_EQ(a->find("nope"), nullptr);
}

TEST(ParamStandInsTest, ManifestIsWhatTheAgentParses) {
  ParamStandInOptions o;
  o.total_mib = 1;
  auto p = ParamStandIns::make(o);
  ASSERT_TRUE(p);
  const json manifest = p->manifest("http://127.0.0.1:8700/proverfleet-sim/params/");
  auto files = agent::parse_param_manifest(manifest);
  ASSERT_TRUE(files) << files.error();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].name, p->files()[0].name);
  EXPECT_EQ((*files)[0].url, "http://127.0.0.1:8700/proverfleet-sim/params/" + p->files()[0].name);
  EXPECT_EQ((*files)[0].bytes, p->files()[0].content.size());
  EXPECT_EQ((*files)[1].digest, p->files()[1].digest);

  o.total_mib = 0;
  auto none = ParamStandIns::make(o);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->manifest("http://x/"), json::array());
}

TEST(ParamStandInsTest, RateMakesStandInsTakeTheScaledRealTime) {
  ParamStandInOptions o;
  o.total_mib = 4;
  o.real_bytes = 47e9;
  o.time_scale = 60;
  o.min_bytes_per_s = 1024;
  auto p = ParamStandIns::make(o);
  ASSERT_TRUE(p);
  // 47 GB at 100 Mb/s: 3760 s of scenario time, 62.67 s of wall time at 60x.
  const double wall_s = static_cast<double>(p->total_bytes()) / p->bytes_per_s(100);
  EXPECT_NEAR(wall_s, 47e9 * 8 / 100e6 / 60, 1e-6);
  // Twice the link, half the time.
  EXPECT_NEAR(p->bytes_per_s(200), 2 * p->bytes_per_s(100), 1e-6);
  // The floor.
  EXPECT_DOUBLE_EQ(p->bytes_per_s(0.0001), 1024);
  EXPECT_DOUBLE_EQ(p->bytes_per_s(0), 1024);
}

TEST(ParamStandInsTest, BadOptionsAreNamed) {
  ParamStandInOptions o;
  o.total_mib = -1;
  auto neg = ParamStandIns::make(o);
  ASSERT_FALSE(neg);
  EXPECT_THAT(neg.error(), HasSubstr("stand-in size must be in [0, 1024] MiB"));
  o.total_mib = 1;
  o.min_bytes_per_s = 0;
  auto floor = ParamStandIns::make(o);
  ASSERT_FALSE(floor);
  EXPECT_THAT(floor.error(), HasSubstr("minimum download rate"));
  o.min_bytes_per_s = 1;
  o.time_scale = std::nan("");
  auto scale = ParamStandIns::make(o);
  ASSERT_FALSE(scale);
  EXPECT_THAT(scale.error(), HasSubstr("time scale"));
}

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_FALSE(median({}));
}

}  // namespace
}  // namespace pf::market_sim
