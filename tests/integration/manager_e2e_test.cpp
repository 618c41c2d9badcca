// The manager end to end, with real processes over loopback: market-sim (vast test double),
// `proverfleet serve` on a SQLite file and on a PostgreSQL database, the fleet CLI, and a scripted
// agent speaking the agent API. Covers deploy → register → params → warm-up → samples → accept →
// proving, the reject and operator-destroy paths, and a SIGKILL of the manager mid-flight.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cuzk/v1/proving.grpc.pb.h"
#include "market/http_client.h"
#include "support/eventually.h"
#include "support/porep_request.h"
#include "support/proverfleet_cli.h"
#include "support/serve_process.h"
#include "support/subprocess.h"

namespace {

using pf::test::eventually;

using nlohmann::json;
using pf::test::Subprocess;
using pf::test::Url;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kVastKey = "e2e-vast-key";

class ManagerE2E : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  void SetUp() override {
    dir_ = db_.dir();
    // Short lifecycle limits so the failure paths run in seconds.
    std::ofstream(dir_ / "proverfleet.toml") << R"(
[jobs]
proof_check = "sim"  # market-sim's agents run the sim prover
[lifecycle]
heartbeat_timeout_s = 4
destroy_retry_s = 0.5
[acceptance]
min_samples = 6
max_samples = 12
)";
    auto sim = pf::test::start_market_sim(kVastKey);
    sim_.emplace(std::move(sim.process));
    sim_url_ = sim.url;
    start_manager();
  }

  void TearDown() override {
    manager_.reset();
    sim_.reset();
  }

  void start_manager() {
    manager_.reset();
    auto manager = pf::test::start_serve({.db = &db_,
                                          .config = dir_ / "proverfleet.toml",
                                          .vast_url = sim_url_,
                                          .vast_key = kVastKey,
                                          .grpc_listen = "127.0.0.1:0",
                                          .wait_leading = true});
    manager_.emplace(std::move(manager.process));
    mgr_url_ = manager.url;
    token_ = pf::test::read_operator_token(db_.dir());
    ASSERT_FALSE(token_.empty());
  }

  // Runs a CLI command against the manager; returns (exit code, stdout then stderr).
  std::pair<int, std::string> cli(std::vector<std::string> args) {
    auto run = pf::test::run_cli(std::move(args), mgr_url_, token_);
    return {run.code, run.out + run.err};
  }

  json api(const std::string& method, const std::string& path, const json& body = nullptr) {
    return pf::test::operator_api(mgr_url_, token_, method, path, body);
  }

  json instance(std::int64_t id) { return api("GET", "/api/v1/instances/" + std::to_string(id)); }

  std::string state_of(std::int64_t id) {
    auto j = instance(id);
    return j.contains("instance") ? j["instance"]["state"].get<std::string>()
                                  : j["state"].get<std::string>();
  }

  bool wait_state(std::int64_t id, const std::string& state, std::chrono::seconds limit) {
    return eventually([&] { return state_of(id) == state; }, limit);
  }

  // The market-side record (what vast would show), including the env the create passed.
  json market_instance(std::int64_t market_id) {
    httplib::Client c(sim_url_.host, sim_url_.port);
    c.set_bearer_token_auth(kVastKey.c_str());
    auto r = c.Get(("/api/v0/instances/" + std::to_string(market_id) + "/").c_str());
    if (!r) throw std::runtime_error("market-sim unreachable");
    return json::parse(r->body)["instances"];
  }

  // Our labelled instances at the market.
  int market_instances_with_our_label() {
    httplib::Client c(sim_url_.host, sim_url_.port);
    c.set_bearer_token_auth(kVastKey.c_str());
    int n = 0;
    std::string token;
    for (int page = 0; page < 100; ++page) {
      std::string path = "/api/v1/instances/?limit=25";
      if (!token.empty()) path += "&after_token=" + pf::market::url_encode(token);
      auto r = c.Get(path.c_str());
      if (!r) throw std::runtime_error("market-sim unreachable");
      auto j = json::parse(r->body);
      for (const auto& i : j["instances"]) {
        if (i.value("label", "").rfind("proverfleet:", 0) == 0) ++n;
      }
      if (j["next_token"].is_null()) break;
      token = j["next_token"].get<std::string>();
    }
    return n;
  }

  std::int64_t deploy_cheapest(int skip = 0) {
    auto offers = api("GET", "/api/v1/offers?limit=50");
    EXPECT_TRUE(offers.is_array()) << offers.dump();
    std::int64_t offer = offers.at(skip)["id"].get<std::int64_t>();
    auto [code, out] = cli({"deploy", std::to_string(offer), "--json"});
    EXPECT_EQ(code, 0) << out;
    auto j = json::parse(out.substr(0, out.rfind('}') + 1));
    return j.contains("instance") ? j["instance"]["id"].get<std::int64_t>()
                                  : j["id"].get<std::int64_t>();
  }

  // A scripted agent: registers with the secret the create put into the instance's env.
  struct Agent {
    std::string token;
    std::int64_t id = 0;
    std::int64_t seq = 0;
  };

  Agent register_agent(std::int64_t id) {
    auto rec = instance(id);
    auto inst = rec.contains("instance") ? rec["instance"] : rec;
    EXPECT_TRUE(inst["market_id"].is_number()) << rec.dump();
    auto market = market_instance(inst["market_id"].get<std::int64_t>());
    std::map<std::string, std::string> env;
    for (const auto& kv : market["extra_env"]) env[kv[0]] = kv[1];
    httplib::Client c(mgr_url_.host, mgr_url_.port);
    json body = {{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                 {"secret", env.at("PROVERFLEET_SECRET")},
                 {"hardware", {{"gpus", 1}}},
                 {"agent_version", "e2e"}};
    EXPECT_EQ(env.at("PROVERFLEET_MANAGER").rfind("http://", 0), 0u);
    auto r = c.Post("/api/v1/agent/register", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
    auto j = json::parse(r->body);
    return {j["token"].get<std::string>(), j["instance_id"].get<std::int64_t>(), 0};
  }

  json agent_post(Agent& a, const std::string& path, const json& body) {
    httplib::Client c(mgr_url_.host, mgr_url_.port);
    c.set_bearer_token_auth(a.token.c_str());
    auto r = c.Post(path.c_str(), body.dump(), "application/json");
    if (!r) throw std::runtime_error("manager unreachable");
    return json::parse(r->body);
  }

  void heartbeat(Agent& a, const std::string& phase, double done = 0) {
    agent_post(a, "/api/v1/agent/heartbeat",
               {{"phase", phase},
                {"params", {{"done", done}, {"total", 47e9}, {"bytes_per_s", 1e8}}},
                {"prover", {{"in_flight", 1}, {"completed", 0}, {"failed", 0}}},
                {"gpus", json::array({{{"util", 97}}})}});
  }

  void events(Agent& a, json evs) { agent_post(a, "/api/v1/agent/events", {{"events", evs}}); }

  // Warm-up then `n` measured proofs `gap_s` apart (agent clock).
  void prove(Agent& a, int n, double gap_s) {
    double t = 1.7e9;
    events(a, json::array({{{"seq", ++a.seq}, {"type", "params_done"}},
                           {{"seq", ++a.seq}, {"type", "prover_started"}},
                           {{"seq", ++a.seq},
                            {"type", "proof_done"},
                            {"phase", "warmup"},
                            {"at", t},
                            {"seconds", 300}}}));
    json batch = json::array();
    for (int i = 0; i < n; ++i) {
      t += gap_s * (1 + 0.03 * (i % 3));
      batch.push_back({{"seq", ++a.seq},
                       {"type", "proof_done"},
                       {"phase", "measured"},
                       {"at", t},
                       {"seconds", gap_s},
                       {"gpu_ms", 20000},
                       {"queue_ms", 5}});
    }
    events(a, batch);
  }

  pf::test::ServeDatabase db_{GetParam()};
  fs::path dir_;  // the database's directory: the config, serve's working directory
  std::optional<Subprocess> sim_, manager_;
  Url sim_url_, mgr_url_;
  std::string token_;
};

INSTANTIATE_TEST_SUITE_P(Db, ManagerE2E, pf::testing::kStoreBackends, pf::testing::backend_name);

TEST_P(ManagerE2E, InstanceWalksToProvingAndIsDestroyedOnRequest) {
  std::int64_t id = deploy_cheapest();
  EXPECT_EQ(state_of(id), "booting");
  Agent a = register_agent(id);
  EXPECT_EQ(a.id, id);
  EXPECT_EQ(state_of(id), "registered");
  heartbeat(a, "fetching_params", 1e9);
  EXPECT_EQ(state_of(id), "fetching_params");
  heartbeat(a, "warming_up", 47e9);
  prove(a, 8, 20);  // 180/hr: clears any break-even in the demo market
  EXPECT_EQ(state_of(id), "proving");

  auto [code, out] = cli({"instances", "--json"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("\"proving\""));
  auto detail = instance(id);
  EXPECT_GE(detail["samples"].size(), 9u) << detail.dump();
  EXPECT_GE(detail["events"].size(), 5u);

  auto [dcode, dout] = cli({"destroy", std::to_string(id)});
  ASSERT_EQ(dcode, 0) << dout;
  ASSERT_TRUE(wait_state(id, "destroyed", 20s));
  auto mid = instance(id);
  auto market_id =
      (mid.contains("instance") ? mid["instance"] : mid)["market_id"].get<std::int64_t>();
  EXPECT_TRUE(market_instance(market_id).is_null());  // the market confirms it is gone
}

// Market stops are not host faults (issue 26): the host's contract for the machine ends
// (a /3 market: tests/fixtures/scenarios/tiny.json with offer 1001's contract ending at hour
// 0.15, 9 s at market-sim's time scale 60); market-sim stops the rental for good, and serve
// closes it as the market's doing, striking and blocking no one.
TEST_P(ManagerE2E, AContractEndClosesTheRentalBlamingNoHost) {
  std::ifstream in(std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/tiny.json");
  json doc = json::parse(in);
  doc["format"] = "proverfleet-scenario/3";
  doc["economics"].erase("demand_proofs_per_hour");
  doc["demand"] = {{"arrivals", {{{"from_h", 0}, {"to_h", 10}, {"proofs_per_hour", 1}}}},
                   {"deadline_min", 60}};
  doc["offers"][1]["machine_id"] = 504;  // from /2 on, failures belong to the machine
  doc["offers"][0]["contract_end_h"] = 0.15;
  const fs::path scenario = dir_ / "contract-end.json";
  std::ofstream(scenario) << doc.dump();
  manager_.reset();
  sim_.reset();
  auto sim = pf::test::start_market_sim(kVastKey, {}, scenario.string());
  sim_.emplace(std::move(sim.process));
  sim_url_ = sim.url;
  start_manager();

  auto [code, out] = cli({"deploy", "1001", "--json"});
  ASSERT_EQ(code, 0) << out;
  auto j = json::parse(out.substr(0, out.rfind('}') + 1));
  const std::int64_t id = j.contains("instance") ? j["instance"]["id"].get<std::int64_t>()
                                                 : j["id"].get<std::int64_t>();
  ASSERT_TRUE(wait_state(id, "destroyed", 60s)) << state_of(id);
  auto closed = instance(id);
  auto inst = closed.contains("instance") ? closed["instance"] : closed;
  EXPECT_THAT(inst["destroy_reason"].get<std::string>(), ::testing::HasSubstr("contract"))
      << inst.dump();
  EXPECT_EQ(market_instances_with_our_label(), 0);
  const json bad = api("GET", "/api/v1/bad-hosts");
  EXPECT_THAT(bad.dump(), ::testing::Not(::testing::HasSubstr("501"))) << bad.dump();
  EXPECT_EQ(inst.value("strikes", 0), 0) << inst.dump();
}

TEST_P(ManagerE2E, SlowHostIsRejectedAndDestroyed) {
  std::int64_t id = deploy_cheapest();
  Agent a = register_agent(id);
  heartbeat(a, "warming_up", 47e9);
  prove(a, 8, 1200);  // 3/hr: below any break-even
  ASSERT_TRUE(wait_state(id, "destroyed", 20s));
  auto j = instance(id);
  auto inst = j.contains("instance") ? j["instance"] : j;
  EXPECT_THAT(inst["destroy_reason"].get<std::string>(), ::testing::HasSubstr("rejected"));
  EXPECT_EQ(market_instances_with_our_label(), 0);
}

TEST_P(ManagerE2E, LostHeartbeatDestroys) {
  std::int64_t id = deploy_cheapest();
  Agent a = register_agent(id);
  heartbeat(a, "fetching_params", 1e9);
  ASSERT_TRUE(wait_state(id, "destroyed", 30s));  // heartbeat_timeout_s = 4
  EXPECT_EQ(market_instances_with_our_label(), 0);
}

TEST_P(ManagerE2E, ManagerKilledMidFlightLosesNothingAndRentsNothingTwice) {
  std::int64_t a_id = deploy_cheapest(0);
  std::int64_t b_id = deploy_cheapest(1);
  Agent a = register_agent(a_id);
  heartbeat(a, "fetching_params", 2e9);
  ASSERT_EQ(::kill(manager_->pid(), SIGKILL), 0);
  ASSERT_TRUE(manager_->wait_exit(10s));
  start_manager();  // same database
  EXPECT_EQ(state_of(a_id), "fetching_params");
  EXPECT_EQ(state_of(b_id), "booting");
  // The restarted manager serves the same agent token and keeps every instance accounted for.
  heartbeat(a, "fetching_params", 3e9);
  std::this_thread::sleep_for(1500ms);  // a few reconcile cycles
  auto list = api("GET", "/api/v1/instances");
  int live = 0;
  for (const auto& i : list) {
    if (i["state"] != "destroyed") ++live;
  }
  EXPECT_EQ(live, 2);
  EXPECT_EQ(market_instances_with_our_label(), 2);
}

// The operator's jobs command against the real serve (issue 12 item 6): an empty gateway lists no
// jobs, a bad state is named, and status says which revenue its profit counts.
TEST_P(ManagerE2E, JobsCommandListsTheGatewaysJobsAndNamesABadState) {
  auto [code, out] = cli({"jobs"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("no jobs"));
  auto [jcode, jout] = cli({"jobs", "--json", "--state", "queued,done", "--limit", "5"});
  ASSERT_EQ(jcode, 0) << jout;
  EXPECT_THAT(jout, ::testing::HasSubstr("[]"));
  auto [bcode, bout] = cli({"jobs", "--state", "finished"});
  EXPECT_EQ(bcode, 1);
  EXPECT_THAT(bout, ::testing::HasSubstr("'state'"));
  auto [scode, sout] = cli({"status"});
  ASSERT_EQ(scode, 0) << sout;
  EXPECT_THAT(sout, ::testing::HasSubstr("no gateway jobs yet"));
  EXPECT_THAT(sout, ::testing::HasSubstr("jobs:       0 queued"));
  const json fleet = api("GET", "/api/v1/fleet");
  EXPECT_EQ(fleet["profit_basis"], "proofs_measured");
  EXPECT_EQ(fleet["jobs"]["has_jobs"], false);
}

// The jobs listing pages through the CLI (GET /api/v1/jobs?cursor=): a full page ends with the
// command for the older jobs, which lists them; --json prints each page's array; a job carries
// the client that sent it.
TEST_P(ManagerE2E, JobsCommandPagesWithACursor) {
  const std::string grpc = api("GET", "/api/v1/fleet")["replica"].value("grpc", "");
  ASSERT_FALSE(grpc.empty());
  auto stub = cuzk::v1::ProvingEngine::NewStub(
      grpc::CreateChannel(grpc, grpc::InsecureChannelCredentials()));
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::SubmitProofResponse reply;
    const auto status = stub->SubmitProof(
        &ctx, pf::test::porep_request("page-" + std::to_string(i), static_cast<unsigned>(i)),
        &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  auto [code, out] = cli({"jobs", "--limit", "2"});
  ASSERT_EQ(code, 0) << out;
  EXPECT_THAT(out, ::testing::HasSubstr("page-2"));
  EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr("page-0")));
  std::smatch next;
  ASSERT_TRUE(
      std::regex_search(out, next, std::regex("proverfleet jobs --limit 2 --cursor ([0-9]+)")))
      << out;
  auto older = pf::test::run_cli({"jobs", "--json", "--limit", "2", "--cursor", next[1].str()},
                                 mgr_url_, token_);
  ASSERT_EQ(older.code, 0) << older.out << older.err;
  const json rows = json::parse(older.out);
  ASSERT_EQ(rows.size(), 1u) << older.out;
  EXPECT_EQ(rows[0]["request_id"], "page-0");
  EXPECT_EQ(rows[0]["client"], "default");  // the operator's cluster: no client token
  auto [bad_code, bad_out] = cli({"jobs", "--cursor", "0"});
  EXPECT_NE(bad_code, 0) << bad_out;

  // Filters (issue 36): a request id's start, and a bad kind named by the manager.
  auto by_request = pf::test::run_cli({"jobs", "--json", "--request", "page-1"}, mgr_url_, token_);
  ASSERT_EQ(by_request.code, 0) << by_request.out << by_request.err;
  const json matched = json::parse(by_request.out);
  ASSERT_EQ(matched.size(), 1u) << by_request.out;
  EXPECT_EQ(matched[0]["request_id"], "page-1");
  auto [kind_code, kind_out] = cli({"jobs", "--kind", "porep"});
  EXPECT_EQ(kind_code, 1);
  EXPECT_THAT(kind_out, ::testing::HasSubstr("'kind'"));
  // One job by its request id: its facts and timeline.
  auto [one_code, one_out] = cli({"jobs", "page-1"});
  ASSERT_EQ(one_code, 0) << one_out;
  EXPECT_THAT(one_out, ::testing::HasSubstr("request page-1"));
  EXPECT_THAT(one_out, ::testing::HasSubstr("recorded"));
  auto [none_code, none_out] = cli({"jobs", "no-such-request"});
  EXPECT_EQ(none_code, 1);
  EXPECT_THAT(none_out, ::testing::HasSubstr("unknown job"));
}

}  // namespace
