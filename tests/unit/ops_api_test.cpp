// The operator's hands-on routes over loopback (HttpApi on the HTTP front, a real Manager on an
// in-memory store and the FakeMarket): POST /api/v1/instances/{id}/tune (auth, bounds, unknown
// keys, delivery with the next heartbeat), GET /api/v1/alerts and "alerts" in the fleet, and
// the instance detail's live report, SSH command and kept logs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "manager/http_api.h"
#include "manager/views.h"
#include "support/fake_market.h"
#include "support/front_serving.h"
#include "support/manager_fixture.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kOperatorToken = "operator-token-5e1a77c2f093";

class OpsApiTest : public pf::test::ManagerFixture {
 protected:
  void SetUp() override {
    ManagerConfig cfg = default_config();
    cfg.lifecycle.destroy_retry_s = 0;
    cfg.log_ring_bytes = 64;
    start_manager(cfg);
    ApiOptions options;
    options.operator_token_hash = hash_token(kOperatorToken);
    options.clock = [this] { return now_.load(); };
    api_ = std::make_unique<HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", serving_->port());
  }

  httplib::Headers op() { return {{"Authorization", std::string("Bearer ") + kOperatorToken}}; }
  httplib::Headers agent() { return {{"Authorization", "Bearer " + token_}}; }

  std::int64_t deploy_and_register() {
    auto rec = manager_->deploy(101, "deploy");
    EXPECT_TRUE(rec);
    const auto& env = market_.create_requests.back().env;
    auto reg = manager_->agent_register(
        {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"});
    EXPECT_TRUE(reg);
    token_ = reg->token;
    return rec->id;
  }

  json ok(const httplib::Result& r, int status = 200) {
    EXPECT_TRUE(r);
    if (!r) return json();
    EXPECT_EQ(r->status, status) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  std::string token_;
  std::unique_ptr<HttpApi> api_;
  net::HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(OpsApiTest, TuneIsOperatorOnlyBoundedAndReachesTheAgentWithItsNextHeartbeat) {
  const auto id = deploy_and_register();
  const std::string path = "/api/v1/instances/" + std::to_string(id) + "/tune";
  const std::string body = json{{"concurrency", 3}, {"partitions", 6}}.dump();
  EXPECT_EQ(client_->Post(path, body, "application/json")->status, 401);
  EXPECT_EQ(client_->Post(path, agent(), body, "application/json")->status, 401);
  for (const auto& bad :
       {json{{"concurrency", 0}}, json{{"concurrency", 257}}, json{{"partitions", 641}},
        json{{"concurrency", "3"}}, json{{"threads", 2}}, json::object()}) {
    const auto r = client_->Post(path, op(), bad.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << bad.dump() << " → " << r->body;
  }
  EXPECT_EQ(client_->Post("/api/v1/instances/999/tune", op(), body, "application/json")->status,
            404);
  EXPECT_TRUE(manager_->pending_commands(id).empty());

  const json reply = ok(client_->Post(path, op(), body, "application/json"));
  EXPECT_EQ(reply["commands"], json::array({"replan:6", "set_concurrency:3"}));
  const json detail = ok(client_->Get("/api/v1/instances/" + std::to_string(id), op()));
  EXPECT_EQ(detail["pending_commands"], json::array({"replan:6", "set_concurrency:3"}));

  const json hb = ok(client_->Post("/api/v1/agent/heartbeat", agent(),
                                   json{{"phase", "fetching_params"}}.dump(), "application/json"));
  EXPECT_EQ(hb["commands"], json::array({"replan:6", "set_concurrency:3"}));
  const json again =
      ok(client_->Post("/api/v1/agent/heartbeat", agent(),
                       json{{"phase", "fetching_params"}}.dump(), "application/json"));
  EXPECT_TRUE(again["commands"].empty());
}

TEST_F(OpsApiTest, InstanceDetailCarriesTheLiveReportSshAndLogsKeptInTheStore) {
  const auto id = deploy_and_register();
  const json before = ok(client_->Get("/api/v1/instances/" + std::to_string(id), op()));
  EXPECT_TRUE(before["live"].is_null());
  EXPECT_TRUE(before["ssh"].is_null());
  EXPECT_TRUE(before["alerts"].empty());

  const json heartbeat = {
      {"phase", "proving"},
      {"prover",
       {{"kind", "cuzk"}, {"in_flight", 2}, {"status", {{"queue_depth", 4}, {"pipelines", 2}}}}},
      {"gpus", json::array({{{"util", 88}, {"memory_used_mib", 18000}, {"temp_c", 66}}})}};
  ok(client_->Post("/api/v1/agent/heartbeat", agent(), heartbeat.dump(), "application/json"));
  const auto market_id = *store_->instance(id)->market_id;
  market_.instances.at(market_id).ssh_host = "ssh7.vast.ai";
  market_.instances.at(market_id).ssh_port = 41000;
  manager_->reconcile();
  for (int i = 0; i < 20; ++i) {
    ok(client_->Post("/api/v1/agent/logs", agent(), "line " + std::to_string(i) + "\n",
                     "text/plain"));
  }

  const json detail = ok(client_->Get("/api/v1/instances/" + std::to_string(id), op()));
  EXPECT_EQ(detail["live"]["prover"]["status"]["queue_depth"], 4);
  EXPECT_EQ(detail["live"]["gpus"][0]["util"], 88);
  EXPECT_EQ(detail["ssh"]["commands"], json::array({"ssh -p 41000 root@ssh7.vast.ai"}));
  // 64 bytes kept per instance (cfg.log_ring_bytes): the newest lines, whole chunks.
  const std::string logs = detail["logs"];
  EXPECT_LE(logs.size(), 64u);
  EXPECT_THAT(logs, HasSubstr("line 19\n"));
  EXPECT_THAT(logs, ::testing::Not(HasSubstr("line 0\n")));
  EXPECT_EQ(store_->agent_log(id), logs);  // served from the store
}

TEST_F(OpsApiTest, AlertsAreServedAloneAndInTheFleet) {
  core::AlertsView view;
  view.checked_at = now_;
  core::Alert a;
  a.instance_id = 3;
  a.kind = core::AlertKind::Stall;
  a.drop_warranted = true;
  a.reason = "no proof for 40 min";
  view.instances.push_back(a);
  view.fleet.push_back({"spend", "over budget", now_});
  manager_->set_alerts(view);
  EXPECT_EQ(client_->Get("/api/v1/alerts")->status, 401);
  const json alerts = ok(client_->Get("/api/v1/alerts", op()));
  ASSERT_EQ(alerts["instances"].size(), 1u);
  EXPECT_EQ(alerts["instances"][0]["kind"], "stall");
  EXPECT_EQ(alerts["fleet"][0]["kind"], "spend");
  const json fleet = ok(client_->Get("/api/v1/fleet", op()));
  EXPECT_EQ(fleet["alerts"], alerts);
}

}  // namespace
}  // namespace pf::manager
