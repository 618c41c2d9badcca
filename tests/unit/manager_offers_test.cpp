// Issue 13, the operator's day by hand: the offers the manager ranks carry each machine's
// history and the verdicts' break-even, and the agents' memory reports teach the next plan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/economics.h"
#include "manager/manager.h"
#include "manager/views.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using S = core::InstanceState;

class ManagerOffersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);
    market_.add_offer(102, 12, 0.40);  // another machine, same GPU model
    market_.add_offer(103, 11, 0.40);  // machine 11 again
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    // A proof earns $0.012; the operator's target is $0.008: break-even 33.3/hr (revenue)
    // against 50/hr (target) at $0.40/hr.
    cfg.rank.economics.revenue_per_proof_usd = 0.012;
    cfg.rank.economics.target_cost_per_proof_usd = 0.008;
    cfg.profit_objective = true;
    cfg.params = {{"a.params", "http://x/a", 1000000000, "00"}};
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  }

  std::int64_t deploy_and_register(std::int64_t offer, json* reply = nullptr) {
    auto rec = manager_->deploy(offer, "test");
    EXPECT_TRUE(rec) << rec.error().message;
    const auto& env = market_.create_requests.back().env;
    auto reg = manager_->agent_register(
        {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"});
    EXPECT_TRUE(reg) << reg.error().message;
    if (reply && reg) *reply = reg->body;
    return rec->id;
  }

  AgentEvent event(std::int64_t seq, const std::string& type, json data, double at = 0,
                   const std::string& phase = "") {
    AgentEvent e;
    e.seq = seq;
    e.type = type;
    e.at = at;
    e.seconds = 60;
    e.phase = phase;
    e.data = std::move(data);
    return e;
  }

  json row_of(const std::vector<core::RankedOffer>& ranked, std::int64_t offer) {
    for (const auto& r : ranked)
      if (r.offer.id == offer) return to_json(r);
    ADD_FAILURE() << "offer " << offer << " not ranked";
    return json::object();
  }

  double now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
};

TEST_F(ManagerOffersTest, AMachineThatFailedShowsItsHistoryAndIsPredictedFromItsRuns) {
  const auto id = deploy_and_register(101);  // machine 11
  Heartbeat hb;
  hb.phase = "fetching_params";
  hb.params_total = 1e9;
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  ASSERT_TRUE(
      manager_->agent_events(id, {event(1, "prover_started", {{"plan", {{"partitions", 12}}}})}));
  double t = now_;
  ASSERT_TRUE(manager_->agent_events(id, {event(2, "proof_done", json::object(), t, "warmup")}));
  // ~12 proofs/hour against a 33.3/hr break-even: rejected.
  std::int64_t seq = 3;
  for (int i = 0; i < 24 && store_->instance(id)->state <= S::Benchmarking; ++i) {
    t += 300 + (i % 3) * 10;
    now_ = t;
    ASSERT_TRUE(
        manager_->agent_events(id, {event(seq++, "proof_done", json::object(), t, "measured")}));
  }
  const auto rec = *store_->instance(id);
  ASSERT_TRUE(rec.verdict.has_value());
  ASSERT_EQ(rec.verdict->decision, core::Verdict::Decision::Reject);

  auto ranked = manager_->rank_offers(json::object(), 50, core::RankOrder::Cost);
  ASSERT_TRUE(ranked) << ranked.error().message;
  const json again = row_of(*ranked, 103);  // machine 11's other offer
  const json& h = again.at("history");
  EXPECT_EQ(h.at("rentals"), 1);
  EXPECT_EQ(h.at("runs"), 1);
  EXPECT_NEAR(h.at("median_rate").get<double>(), rec.verdict->rate, 1e-9);
  EXPECT_EQ(h.at("last_verdict"), "reject");
  ASSERT_TRUE(h.at("bad_host").is_object());  // the rejection's automatic strike
  EXPECT_EQ(h.at("bad_host").at("source"), "auto");
  EXPECT_FALSE(h.at("bad_host").at("reason").get<std::string>().empty());
  // The prediction is the machine's own measurement, not the 4090 prior.
  EXPECT_EQ(again.at("prediction_source"), "host");
  EXPECT_NEAR(again.at("predicted_rate").get<double>(), rec.verdict->rate, 1e-9);
  // One break-even: the row's is the one the verdict was judged against.
  EXPECT_NEAR(again.at("break_even_rate").get<double>(), rec.verdict->break_even_rate, 1e-9);
  // Each proof's job input comes down at the fake market's $0.001/GB (core/economics.h).
  const double transfer = core::kPorepC2InputBytes / 1e9 * 0.001;
  EXPECT_NEAR(again.at("min_rate").get<double>(), 0.40 / (0.012 - transfer), 1e-9);
  EXPECT_NEAR(again.at("target_break_even_rate").get<double>(), 0.40 / (0.008 - transfer), 1e-9);
  EXPECT_EQ(again.at("break_even_objective"), "revenue");
  EXPECT_TRUE(again.at("break_evens_differ").get<bool>());

  const json fresh = row_of(*ranked, 102);  // never rented
  EXPECT_EQ(fresh.at("history").at("rentals"), 0);
  EXPECT_TRUE(fresh.at("history").at("bad_host").is_null());
  EXPECT_EQ(fresh.at("prediction_source"), "model");  // the 4090's fleet data
}

TEST_F(ManagerOffersTest, AMemoryCheckTeachesTheNextPlanOnTheMachineAndItsModel) {
  json first;
  const auto id = deploy_and_register(101, &first);
  EXPECT_EQ(first["machine"]["memory_model"]["source"], "configured");
  EXPECT_DOUBLE_EQ(first["machine"]["memory_model"]["per_partition_gib"].get<double>(), 14);
  // 20 partitions peaked at 390 GiB: 16 GiB per partition, not the model's 14.
  ASSERT_TRUE(manager_->agent_events(
      id, {event(1, "memory_check",
                 {{"partitions", 20},
                  {"observed_peak_gib", 390.0},
                  {"model_peak_gib", 350.0},
                  {"usable_ram_gib", 400.0},
                  {"ratio", 390.0 / 350}}),
           event(2, "memory_check", {{"partitions", "twenty"}, {"observed_peak_gib", 1e9}}),
           event(3, "memory_check", {{"partitions", 20}})}));  // no reading: nothing learned
  EXPECT_EQ(store_->memory_observations(11, "RTX 4090").size(), 1u);
  EXPECT_FALSE(store_->events(id, 0).empty());  // still in the audit trail
  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));

  json same_machine;
  deploy_and_register(103, &same_machine);
  const json& mm = same_machine["machine"]["memory_model"];
  EXPECT_EQ(mm["source"], "machine");
  EXPECT_DOUBLE_EQ(mm["per_partition_gib"].get<double>(), 16);
  EXPECT_THAT(mm["reason"].get<std::string>(), HasSubstr("16.0 GiB per partition"));

  json same_model;
  deploy_and_register(102, &same_model);
  EXPECT_EQ(same_model["machine"]["memory_model"]["source"], "model");
  const double blended = same_model["machine"]["memory_model"]["per_partition_gib"].get<double>();
  EXPECT_GT(blended, 14);
  EXPECT_LT(blended, 16);

  // A manager restarted on the same store knows it too (nothing is kept in memory).
  Manager restarted(*store_, market_, ManagerConfig{}, [this] { return now_; });
  market_.add_offer(104, 11, 0.40);
  auto rec = restarted.deploy(104, "test");
  ASSERT_TRUE(rec) << rec.error().message;
  const auto& env = market_.create_requests.back().env;
  auto reg = restarted.agent_register(
      {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"});
  ASSERT_TRUE(reg) << reg.error().message;
  EXPECT_DOUBLE_EQ(reg->body["machine"]["memory_model"]["per_partition_gib"].get<double>(), 16);
}

TEST_F(ManagerOffersTest, AnOomIsStoredAsAMemoryObservation) {
  const auto id = deploy_and_register(101);
  ASSERT_TRUE(manager_->agent_events(
      id,
      {event(1, "oom", {{"partitions", 24}, {"usable_ram_gib", 400.0}, {"next_partitions", 18}})}));
  const auto seen = store_->memory_observations(11, "RTX 4090");
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_TRUE(seen[0].oom);
  EXPECT_EQ(seen[0].partitions, 24);
  EXPECT_EQ(store_->instance(id)->oom_partitions, 24);  // the OOM back-off still applies
}

}  // namespace
}  // namespace pf::manager
