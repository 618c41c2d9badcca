// The operator's hands-on tools in the Manager: remote tuning (set_concurrency / replan on the
// next heartbeat reply), the agent's live prover and GPU report, SSH endpoints from the
// market's list, and the webhook events the lifecycle sends.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "manager/hands_on.h"
#include "manager/manager.h"
#include "manager/webhooks.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf::manager {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using S = core::InstanceState;
using nlohmann::json;

class ManagerOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.rank.economics.target_cost_per_proof_usd = 0.008;
    cfg.rank.economics.revenue_per_proof_usd = 0.008;
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
    manager_->set_notifier([this](const std::string& event, json data) {
      sent_.push_back({event, data});
    });
  }

  std::int64_t deploy_and_register() {
    auto rec = manager_->deploy(101, "deploy");
    EXPECT_TRUE(rec) << rec.error().message;
    const auto& env = market_.create_requests.back().env;
    RegisterRequest req{env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
    auto reg = manager_->agent_register(req);
    EXPECT_TRUE(reg) << reg.error().message;
    return rec->id;
  }

  std::vector<std::string> events_named(const std::string& name) {
    std::vector<std::string> out;
    for (const auto& [event, data] : sent_)
      if (event == name) out.push_back(data.dump());
    return out;
  }

  double now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
  std::vector<std::pair<std::string, json>> sent_;
};

TEST_F(ManagerOpsTest, TuneQueuesCommandsForTheNextHeartbeatOnceAndRecordsEvents) {
  const auto id = deploy_and_register();
  auto queued = manager_->tune(id, {3, 6, "operator via CLI"});
  ASSERT_TRUE(queued) << queued.error().message;
  EXPECT_THAT(*queued, ElementsAre("replan:6", "set_concurrency:3"));
  // A newer concurrency replaces the queued one.
  ASSERT_TRUE(manager_->tune(id, {4, std::nullopt, "operator"}));
  EXPECT_THAT(manager_->pending_commands(id), ElementsAre("replan:6", "set_concurrency:4"));

  Heartbeat hb;
  hb.phase = "fetching_params";
  auto reply = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(reply);
  EXPECT_THAT(reply->commands, ElementsAre("replan:6", "set_concurrency:4"));
  reply = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->commands.empty());  // sent once

  std::vector<std::string> trail;
  for (const auto& e : store_->events(id, 0))
    if (e.kind == "operator" && (e.message.find("tuning") != std::string::npos ||
                                 e.message.find("sent to the agent") != std::string::npos)) {
      trail.push_back(e.message);
    }
  ASSERT_EQ(trail.size(), 3u);
  EXPECT_THAT(trail[0], HasSubstr("proofs in flight 3"));
  EXPECT_THAT(trail[0], HasSubstr("at most 6 partitions"));
  EXPECT_THAT(trail[0], HasSubstr("operator via CLI"));
  EXPECT_THAT(trail[2], HasSubstr("sent to the agent: replan:6, set_concurrency:4"));
}

// A tune acknowledged is the operator's request (issue 29): a restarted manager, or a replica
// that takes over, still sends it; once sent, or once the instance is gone, it is not sent again.
TEST_F(ManagerOpsTest, TuneCommandsSurviveARestartAndAreSentOnce) {
  const auto id = deploy_and_register();
  ASSERT_TRUE(manager_->tune(id, {3, 6, "operator"}));
  ManagerConfig cfg;
  manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  EXPECT_THAT(manager_->pending_commands(id), ElementsAre("replan:6", "set_concurrency:3"));
  Heartbeat hb;
  hb.phase = "fetching_params";
  auto reply = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(reply);
  EXPECT_THAT(reply->commands, ElementsAre("replan:6", "set_concurrency:3"));
  manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  EXPECT_TRUE(manager_->pending_commands(id).empty());  // sent: not again after a restart
  reply = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(reply);
  EXPECT_TRUE(reply->commands.empty());

  // Another replica's term queued one: this one reads it when its own term begins.
  ASSERT_TRUE(manager_->tune(id, {2, std::nullopt, "operator"}));
  Manager other(*store_, market_, cfg, [this] { return now_; });
  EXPECT_THAT(other.pending_commands(id), ElementsAre("set_concurrency:2"));
  other.instances_written();
  EXPECT_THAT(other.pending_commands(id), ElementsAre("set_concurrency:2"));

  // A hand-edited setting is read for what it holds and no more.
  store_->put_setting(kPendingCommandsSetting,
                      R"({"x": ["a"], "7": "no", "8": [1, "set_concurrency:5", ""], "-1": ["b"]})");
  manager_->instances_written();
  EXPECT_THAT(manager_->pending_commands(8), ElementsAre("set_concurrency:5"));
  EXPECT_TRUE(manager_->pending_commands(id).empty());
  store_->put_setting(kPendingCommandsSetting, "not json");
  manager_->instances_written();
  EXPECT_TRUE(manager_->pending_commands(8).empty());
}

TEST_F(ManagerOpsTest, TuneRefusesOutOfRangeNothingAskedUnknownAndUnregistered) {
  const auto id = deploy_and_register();
  EXPECT_EQ(manager_->tune(id, {0, std::nullopt, "o"}).error().status, 400);
  EXPECT_EQ(manager_->tune(id, {kMaxTuneConcurrency + 1, std::nullopt, "o"}).error().status, 400);
  EXPECT_EQ(manager_->tune(id, {std::nullopt, 0, "o"}).error().status, 400);
  EXPECT_EQ(manager_->tune(id, {std::nullopt, kMaxTunePartitions + 1, "o"}).error().status, 400);
  EXPECT_EQ(manager_->tune(id, {std::nullopt, std::nullopt, "o"}).error().status, 400);
  EXPECT_EQ(manager_->tune(999, {2, std::nullopt, "o"}).error().status, 404);
  EXPECT_TRUE(manager_->pending_commands(id).empty());

  market_.add_offer(102, 12, 0.2);
  auto unregistered = manager_->deploy(102, "deploy");
  ASSERT_TRUE(unregistered);
  EXPECT_EQ(manager_->tune(unregistered->id, {2, std::nullopt, "o"}).error().status, 409);

  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));
  EXPECT_EQ(manager_->tune(id, {2, std::nullopt, "o"}).error().status, 409);
}

TEST_F(ManagerOpsTest, HeartbeatKeepsTheProverStatusAndGpuTableBounded) {
  const auto id = deploy_and_register();
  EXPECT_FALSE(manager_->live_status(id));
  Heartbeat hb;
  hb.phase = "proving";
  json gpus = json::array();
  for (int i = 0; i < 80; ++i) {
    gpus.push_back({{"util", 97},
                    {"memory_used_mib", 20000 + i},
                    {"temp_c", 70},
                    {"sm_clock_mhz", 2500},
                    {"throttle", json::array({"hw_slowdown"})}});
  }
  hb.raw = {{"phase", "proving"},
            {"prover",
             {{"kind", "cuzk"},
              {"in_flight", 3},
              {"partitions", 8},
              {"status",
               {{"queue_depth", 5},
                {"pipelines", 2},
                {"memory_used_gib", 140.5},
                {"note", std::string(5000, 'x')},
                {"deep", {{"deeper", {{"deepest", 1}}}}}}}}},
            {"gpus", gpus}};
  now_ += 5;
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  const auto live = manager_->live_status(id);
  ASSERT_TRUE(live);
  EXPECT_EQ(live->at, now_);
  EXPECT_EQ(live->prover["kind"], "cuzk");
  EXPECT_EQ(live->prover["status"]["queue_depth"], 5);
  EXPECT_EQ(live->prover["status"]["pipelines"], 2);
  EXPECT_EQ(live->prover["status"]["note"].get<std::string>().size(), 200u);
  EXPECT_FALSE(live->prover["status"]["deep"].contains("deeper"));  // one level of objects only
  ASSERT_EQ(live->gpus.size(), kMaxLiveGpus);
  EXPECT_EQ(live->gpus[1]["memory_used_mib"], 20001);
  EXPECT_EQ(live->gpus[1]["throttle"][0], "hw_slowdown");

  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));
  EXPECT_FALSE(manager_->live_status(id));  // destroyed: forgotten
}

TEST_F(ManagerOpsTest, SshEndpointsComeFromTheMarketListAndOnlyPlainHostsMakeCommands) {
  const auto id = deploy_and_register();
  const auto market_id = *store_->instance(id)->market_id;
  market_.instances.at(market_id).ssh_host = "ssh5.vast.ai";
  market_.instances.at(market_id).ssh_port = 31234;
  market_.instances.at(market_id).public_ip = "203.0.113.7";
  market_.instances.at(market_id).direct_ssh_port = 40022;
  manager_->reconcile();
  const auto ssh = manager_->ssh_endpoints(id);
  ASSERT_TRUE(ssh);
  EXPECT_THAT(core::ssh_commands(*ssh),
              ElementsAre("ssh -p 31234 root@ssh5.vast.ai", "ssh -p 40022 root@203.0.113.7"));
  EXPECT_TRUE(core::ssh_commands({"evil; rm -rf /", 22, "-oProxyCommand=x", 22}).empty());
  EXPECT_TRUE(core::ssh_commands({"ssh5.vast.ai", 0, "", 0}).empty());
}

TEST_F(ManagerOpsTest, LifecycleSendsAcceptedCrashedAndDestroyedWebhooks) {
  const auto id = deploy_and_register();
  AgentEvent crash;
  crash.seq = 1;
  crash.type = "prover_crashed";
  crash.message = "transport error";
  ASSERT_TRUE(manager_->agent_events(id, {crash}));
  ASSERT_EQ(events_named(kWebhookInstanceCrashed).size(), 1u);
  EXPECT_THAT(events_named(kWebhookInstanceCrashed)[0], HasSubstr("transport error"));

  // Market says exited: closed as crashed, then destroyed once the market confirms.
  market_.set_status(*store_->instance(id)->market_id, "exited");
  manager_->reconcile();
  manager_->tick();
  manager_->tick();
  EXPECT_EQ(store_->instance(id)->state, S::Destroyed);
  EXPECT_EQ(events_named(kWebhookInstanceCrashed).size(), 2u);
  ASSERT_EQ(events_named(kWebhookInstanceDestroyed).size(), 1u);
  const json destroyed = json::parse(events_named(kWebhookInstanceDestroyed)[0]);
  EXPECT_EQ(destroyed["instance_id"], id);
  EXPECT_EQ(destroyed["machine_id"], 11);
  EXPECT_EQ(destroyed["origin"], "deploy");
}

// Walks the instance through warm-up and a benchmark whose proofs come `gap_s` apart.
void benchmark(Manager& manager, std::int64_t id, double t, double gap_s) {
  Heartbeat hb;
  hb.phase = "fetching_params";
  hb.params_total = 1e9;
  ASSERT_TRUE(manager.agent_heartbeat(id, hb));
  AgentEvent started;
  started.seq = 1;
  started.type = "prover_started";
  ASSERT_TRUE(manager.agent_events(id, {started}));
  std::vector<AgentEvent> proofs;
  for (int i = 0; i < 40; ++i) {
    AgentEvent p;
    p.seq = 2 + i;
    p.type = "proof_done";
    p.at = t += gap_s + (i % 3);
    p.seconds = gap_s;
    p.phase = i == 0 ? "warmup" : "measured";
    proofs.push_back(p);
  }
  ASSERT_TRUE(manager.agent_events(id, proofs));
}

TEST_F(ManagerOpsTest, VerdictsSendAcceptedAndRejectedWebhooks) {
  const auto fast = deploy_and_register();  // break-even 50/hr at $0.40 and $0.008/proof
  benchmark(*manager_, fast, now_, 36);     // ~95/hr
  ASSERT_EQ(store_->instance(fast)->state, S::Proving);
  ASSERT_EQ(events_named(kWebhookInstanceAccepted).size(), 1u);
  const json accepted = json::parse(events_named(kWebhookInstanceAccepted)[0]);
  EXPECT_EQ(accepted["instance_id"], fast);
  EXPECT_GT(accepted["rate"].get<double>(), 80);

  market_.add_offer(102, 12, 0.40);
  auto slow = manager_->deploy(102, "deploy");
  ASSERT_TRUE(slow);
  const auto& env = market_.create_requests.back().env;
  ASSERT_TRUE(manager_->agent_register(
      {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"}));
  benchmark(*manager_, slow->id, now_, 360);  // ~10/hr
  EXPECT_NE(store_->instance(slow->id)->state, S::Proving);
  ASSERT_EQ(events_named(kWebhookInstanceRejected).size(), 1u);
  EXPECT_EQ(json::parse(events_named(kWebhookInstanceRejected)[0])["cause"], "rejected");
}

}  // namespace
}  // namespace pf::manager
