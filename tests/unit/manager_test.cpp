// The manager's lifecycle over an in-memory store and a scripted FakeMarket, with a manual
// clock: every path from rent to destroy, and the money-safety rules.
#include "manager/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/fake_market.h"

namespace pf::manager {
namespace {

using ::testing::HasSubstr;
using S = core::InstanceState;

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);  // break-even 50/hr at $0.008
    market_.add_offer(102, 12, 0.20);
    market_.add_offer(103, 11, 0.40);  // same machine as 101
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.params = {{"a.params", "http://x/a", 1000000000, "00"}};
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  }

  core::InstanceRecord get(std::int64_t id) { return *store_->instance(id); }

  // Deploys offer and registers its agent using the secret passed in the create's env.
  std::pair<std::int64_t, std::string> deploy_and_register(std::int64_t offer) {
    auto rec = manager_->deploy(offer, "test");
    EXPECT_TRUE(rec) << rec.error().message;
    const auto& env = market_.create_requests.back().env;
    RegisterRequest req{env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
    auto reg = manager_->agent_register(req);
    EXPECT_TRUE(reg) << reg.error().message;
    return {rec->id, reg->token};
  }

  AgentEvent proof(std::int64_t seq, double at, const std::string& phase = "measured") {
    AgentEvent e;
    e.seq = seq;
    e.type = "proof_done";
    e.at = at;
    e.seconds = 60;
    e.phase = phase;
    return e;
  }

  // Walks an instance to benchmarking with one warm-up proof ending at t0.
  void to_benchmarking(std::int64_t id, double t0) {
    Heartbeat hb;
    hb.phase = "fetching_params";
    hb.params_total = 1e9;
    ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
    AgentEvent started;
    started.seq = 1;
    started.type = "prover_started";
    started.data = {{"plan", {{"partitions", 12}}}};
    ASSERT_TRUE(manager_->agent_events(id, {started}));
    ASSERT_TRUE(manager_->agent_events(id, {proof(2, t0, "warmup")}));
  }

  double now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
};

TEST_F(ManagerTest, DeployRecordsIntentCreatesWithLabelAndEnv) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->state, S::Booting);
  ASSERT_TRUE(rec->market_id);
  ASSERT_EQ(market_.create_requests.size(), 1u);
  const auto& req = market_.create_requests[0];
  EXPECT_EQ(req.label, "proverfleet:" + rec->deployment_id);
  EXPECT_EQ(req.env.at("PROVERFLEET_DEPLOYMENT"), rec->deployment_id);
  EXPECT_FALSE(req.env.at("PROVERFLEET_SECRET").empty());
  EXPECT_EQ(req.env.at("PROVERFLEET_MANAGER"), manager_->config().public_url);
  // The secret itself is never stored, only its hash.
  EXPECT_NE(rec->secret_hash, req.env.at("PROVERFLEET_SECRET"));
  auto events = store_->events(rec->id, 0);
  ASSERT_GE(events.size(), 2u);
  EXPECT_THAT(events[0].message, HasSubstr("renting offer 101"));
}

TEST_F(ManagerTest, SameOfferIsNeverRentedTwice) {
  ASSERT_TRUE(manager_->deploy(101, "operator"));
  auto again = manager_->deploy(101, "operator");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().status, 409);
  EXPECT_EQ(market_.creates, 1);
}

TEST_F(ManagerTest, UnlistedOfferIsRefusedWithoutCreate) {
  auto r = manager_->deploy(999, "operator");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 404);
  EXPECT_EQ(market_.creates, 0);
  EXPECT_TRUE(store_->instances(true).empty());
}

TEST_F(ManagerTest, BadHostIsRefused) {
  core::BadHost b;
  b.machine_id = 11;
  b.reason = "slow";
  b.added_at = now_;
  store_->put_bad_host(b);
  auto r = manager_->deploy(101, "operator");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("bad-host"));
  EXPECT_EQ(market_.creates, 0);
}

TEST_F(ManagerTest, OfferGoneAtCreateClosesRowWithoutDestroy) {
  market_.create_errors.push_back({market::ErrorKind::OfferGone, 404, "no_such_ask", "taken"});
  auto r = manager_->deploy(101, "operator");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 409);
  auto rows = store_->instances(true);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, S::Destroyed);
  EXPECT_EQ(market_.destroys, 0);
}

TEST_F(ManagerTest, LostCreateReplyIsAdoptedByReconciliationNotRecreated) {
  market_.create_executes_despite_error = true;
  market_.create_errors.push_back({market::ErrorKind::CreateUnknown, 0, "", "reply lost"});
  auto r = manager_->deploy(101, "operator");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, S::Renting);
  EXPECT_FALSE(r->market_id);
  manager_->reconcile();
  auto rec = get(r->id);
  EXPECT_EQ(rec.state, S::Booting);
  ASSERT_TRUE(rec.market_id);
  EXPECT_EQ(market_.instances.count(*rec.market_id), 1u);
  EXPECT_EQ(market_.creates, 1);
  EXPECT_EQ(market_.instances.size(), 1u);
}

TEST_F(ManagerTest, CreateThatNeverAppearsIsClosedAfterDeadline) {
  market_.create_errors.push_back({market::ErrorKind::CreateUnknown, 0, "", "reply lost"});
  auto r = manager_->deploy(101, "operator");
  ASSERT_TRUE(r);
  manager_->reconcile();
  EXPECT_EQ(get(r->id).state, S::Renting);
  now_ += manager_->config().lifecycle.renting_max_s + 1;
  manager_->reconcile();
  EXPECT_EQ(get(r->id).state, S::Destroyed);
}

TEST_F(ManagerTest, RegisterChecksSecretAndReRegisterReturnsSameInstance) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec);
  const auto& env = market_.create_requests.back().env;
  auto bad = manager_->agent_register({env.at("PROVERFLEET_DEPLOYMENT"), "wrong", {}, "t"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().status, 401);
  auto unknown = manager_->agent_register({"nope", env.at("PROVERFLEET_SECRET"), {}, "t"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, bad.error().message);  // no probing which exists
  auto first = manager_->agent_register(
      {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"});
  ASSERT_TRUE(first);
  EXPECT_EQ(get(rec->id).state, S::Registered);
  EXPECT_EQ(first->body["params"].size(), 1u);
  EXPECT_EQ(manager_->authenticate_agent(first->token), rec->id);
  auto second = manager_->agent_register(
      {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"});
  ASSERT_TRUE(second);
  EXPECT_EQ(second->instance_id, first->instance_id);
  EXPECT_FALSE(manager_->authenticate_agent(first->token));  // rotated
  EXPECT_EQ(manager_->authenticate_agent(second->token), rec->id);
  EXPECT_FALSE(manager_->authenticate_agent(""));
}

TEST_F(ManagerTest, FastHostIsAcceptedAndProves) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  EXPECT_EQ(get(id).state, S::WarmingUp);
  std::vector<AgentEvent> evs;
  for (int i = 0; i < 8; ++i) evs.push_back(proof(10 + i, t += 36 + (i % 3)));  // ~95/hr
  auto r = manager_->agent_events(id, evs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->accepted, 8);
  auto rec = get(id);
  EXPECT_EQ(rec.state, S::Proving);
  ASSERT_TRUE(rec.verdict);
  EXPECT_EQ(rec.verdict->decision, core::Verdict::Decision::Accept);
  EXPECT_GT(rec.verdict->rate, 80);
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].host.machine_id, 11);
  EXPECT_EQ(nlohmann::json::parse(runs[0].plan_json)["partitions"], 12);
  EXPECT_FALSE(runs[0].contended);
  // Later proofs count as production.
  ASSERT_TRUE(manager_->agent_events(id, {proof(40, t + 40)}));
  EXPECT_EQ(get(id).proofs_production, 1);
  auto s = manager_->summary();
  EXPECT_EQ(s.by_state["proving"], 1);
  EXPECT_GT(s.proofs_per_hour, 80);
  ASSERT_TRUE(s.cost_per_proof);
  EXPECT_LT(*s.cost_per_proof, 0.40 / 80);
}

TEST_F(ManagerTest, DuplicateEventsAreIgnored) {
  auto [id, token] = deploy_and_register(101);
  to_benchmarking(id, now_);
  auto first = manager_->agent_events(id, {proof(10, now_ + 40), proof(11, now_ + 80)});
  auto again = manager_->agent_events(id, {proof(10, now_ + 40), proof(11, now_ + 80)});
  ASSERT_TRUE(first && again);
  EXPECT_EQ(first->accepted, 2);
  EXPECT_EQ(again->accepted, 0);
  EXPECT_EQ(again->duplicates, 2);
  EXPECT_EQ(get(id).proofs_benchmark, 2);
}

TEST_F(ManagerTest, SlowHostIsRejectedDestroyedAndConfirmed) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  std::vector<AgentEvent> evs;
  for (int i = 0; i < 8; ++i) evs.push_back(proof(10 + i, t += 180 + 5 * (i % 2)));  // ~20/hr
  ASSERT_TRUE(manager_->agent_events(id, evs));
  auto rec = get(id);
  EXPECT_EQ(rec.state, S::Destroying);
  EXPECT_THAT(rec.destroy_reason, HasSubstr("rejected"));
  manager_->tick();
  EXPECT_EQ(get(id).state, S::Destroyed);
  EXPECT_EQ(market_.destroyed.size(), 1u);
  EXPECT_TRUE(market_.instances.empty());
  // The stopped agent is told so.
  auto cmds = manager_->agent_heartbeat(id, {});
  ASSERT_TRUE(cmds);
  EXPECT_THAT(*cmds, ::testing::ElementsAre("stop"));
}

TEST_F(ManagerTest, DestroyIsRetriedUntilConfirmed) {
  auto [id, token] = deploy_and_register(101);
  market_.destroy_failures = 3;
  auto r = manager_->request_destroy(id, "operator request");
  ASSERT_TRUE(r);
  EXPECT_EQ(get(id).state, S::Destroying);
  manager_->tick();
  manager_->tick();
  EXPECT_EQ(get(id).state, S::Destroying);
  manager_->tick();
  EXPECT_EQ(get(id).state, S::Destroyed);
  EXPECT_EQ(market_.destroys, 4);
  // Idempotent: destroying again changes nothing and sends nothing.
  ASSERT_TRUE(manager_->request_destroy(id, "again"));
  EXPECT_EQ(market_.destroys, 4);
}

TEST_F(ManagerTest, DeadlineAndLostHeartbeatDestroy) {
  auto [id, token] = deploy_and_register(101);
  auto [id2, token2] = deploy_and_register(102);
  // id sits in registered past its deadline; id2 keeps heart-beating but in fetching.
  Heartbeat hb;
  hb.phase = "fetching_params";
  hb.params_total = 1e9;
  ASSERT_TRUE(manager_->agent_heartbeat(id2, hb));
  now_ += manager_->config().lifecycle.registered_max_s + 1;
  ASSERT_TRUE(manager_->agent_heartbeat(id, {}));  // alive, but stuck
  ASSERT_TRUE(manager_->agent_heartbeat(id2, hb));
  manager_->tick();
  EXPECT_THAT(get(id).destroy_reason, HasSubstr("deadline passed in registered"));
  EXPECT_EQ(get(id2).state, S::FetchingParams);
  now_ += manager_->config().lifecycle.heartbeat_timeout_s + 1;
  manager_->tick();
  EXPECT_THAT(get(id2).destroy_reason, HasSubstr("heartbeat lost"));
  EXPECT_EQ(get(id2).state, S::Destroyed);
}

TEST_F(ManagerTest, MarketExitedDestroys) {
  auto [id, token] = deploy_and_register(101);
  market_.set_status(*get(id).market_id, "exited");
  manager_->reconcile();
  EXPECT_EQ(get(id).market_status, "exited");
  manager_->tick();
  EXPECT_THAT(get(id).destroy_reason, HasSubstr("exited"));
  EXPECT_EQ(get(id).state, S::Destroyed);
}

TEST_F(ManagerTest, OrphansWithOurLabelAreDestroyedOthersLeftAlone) {
  auto orphan = market_.inject("proverfleet:feedface");
  auto foreign = market_.inject("someone-else");
  manager_->reconcile();
  manager_->tick();
  EXPECT_EQ(market_.instances.count(orphan), 0u);
  EXPECT_EQ(market_.instances.count(foreign), 1u);
  auto rows = store_->instances(true);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].origin, "orphan");
  EXPECT_EQ(rows[0].state, S::Destroyed);
}

TEST_F(ManagerTest, VanishedInstanceIsClosedAfterGrace) {
  auto [id, token] = deploy_and_register(101);
  market_.instances.clear();  // gone behind our back
  manager_->reconcile();
  EXPECT_EQ(get(id).state, S::Registered);  // too young to judge
  now_ += manager_->config().vanish_grace_s + 1;
  ASSERT_TRUE(manager_->agent_heartbeat(id, {}));
  manager_->reconcile();
  EXPECT_EQ(get(id).state, S::Destroyed);
  EXPECT_THAT(get(id).destroy_reason, HasSubstr("vanished"));
}

TEST_F(ManagerTest, IncompleteMarketListClosesNothing) {
  auto [id, token] = deploy_and_register(101);
  market_.list_fails = true;
  now_ += 3600;
  manager_->reconcile();
  EXPECT_EQ(get(id).state, S::Registered);
  EXPECT_EQ(manager_->last_reconcile_error(), "down");
}

TEST_F(ManagerTest, SpendAccruesWhileRunningPlusBandwidth) {
  // Lifecycle limits out of the way: this test is about money only.
  ManagerConfig cfg = manager_->config();
  cfg.lifecycle.heartbeat_timeout_s = 1e9;
  cfg.lifecycle.registered_max_s = 1e9;
  manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  auto [id, token] = deploy_and_register(101);
  auto mid = *get(id).market_id;
  manager_->reconcile();  // status loading: not billed
  now_ += 3600;
  manager_->tick();
  EXPECT_NEAR(get(id).spend_usd, 0, 1e-9);
  market_.set_status(mid, "running");
  manager_->reconcile();
  now_ += 1800;
  manager_->tick();
  EXPECT_NEAR(get(id).spend_usd, 0.20, 1e-9);
  Heartbeat hb;
  hb.phase = "fetching_params";
  hb.params_done = 1e9;
  hb.params_total = 1e9;
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  EXPECT_NEAR(get(id).spend_usd, 0.20 + 0.001, 1e-9);
}

TEST_F(ManagerTest, ContendedBenchmarkIsMarked) {
  auto [a, ta] = deploy_and_register(101);
  auto [b, tb] = deploy_and_register(103);  // same machine 11
  double t = now_;
  to_benchmarking(b, t);
  std::vector<AgentEvent> evs;
  for (int i = 0; i < 8; ++i) evs.push_back(proof(10 + i, t += 36));
  ASSERT_TRUE(manager_->agent_events(b, evs));
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].contended);
  (void)a;
}

TEST_F(ManagerTest, LogsAreBoundedRing) {
  auto [id, token] = deploy_and_register(101);
  std::string chunk(100 * 1024, 'x');
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(manager_->agent_logs(id, chunk));
  EXPECT_LE(manager_->logs(id).size(), manager_->config().log_ring_bytes);
  EXPECT_FALSE(manager_->agent_logs(424242, "x"));
}

}  // namespace
}  // namespace pf::manager
