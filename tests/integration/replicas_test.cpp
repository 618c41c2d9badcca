// Replicas (issue 14) with real processes: two `proverfleet serve` on one database (a SQLite
// file, which WAL lets several processes on one host share, and a PostgreSQL database) and
// market-sim. One leads and the other follows, forwarding operator changes and relaying gRPC
// calls to it; SIGKILL the leader and the other leads within the stated bound, and a request_id
// submitted through the follower before the kill is the same one job after it; a leader paused
// past its lease (SIGSTOP, SIGCONT) in the middle of a deploy has its create refused by the
// fence when it wakes, the market sees nothing, and a Prove the follower was relaying to it is
// held through the failover and goes on from the follower's own queue, the same one job.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/leader_proxy.h"
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
using pf::testing::Backend;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kVastKey = "replicas-vast-key";
// The lease the test runs with: a dead leader is replaced within 5 × 4/3 ≈ 6.7 s.
constexpr double kTtlS = 5;

struct Replica {
  std::optional<Subprocess> process;
  Url url;
  std::string id;
  std::string grpc;  // where its gateway listens
};

class Replicas : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    dir_ = db_.dir();
    std::ofstream(dir_ / "proverfleet.toml") << "[jobs]\nproof_check = \"sim\"\n"
                                             << "[replicas]\nlease_ttl_s = " << kTtlS << "\n"
                                             << R"(
[autopilot]
interval_s = 0.2
max_instances = 6
max_rents_per_decision = 1
max_concurrent_benchmarks = 6
)";
  }

  void TearDown() override {
    for (auto& r : replicas_) r.process.reset();
    sim_.reset();
  }

  void start_market(const std::vector<std::string>& extra = {}) {
    auto sim = pf::test::start_market_sim(kVastKey, extra);
    sim_.emplace(std::move(sim.process));
    sim_url_ = sim.url;
  }

  // A replica with its own gRPC port (each relays to the leader's).
  Replica& start_replica(bool autopilot) {
    Replica& r = replicas_.emplace_back();
    auto serve = pf::test::start_serve({.db = &db_,
                                        .config = dir_ / "proverfleet.toml",
                                        .vast_url = sim_url_,
                                        .vast_key = kVastKey,
                                        .grpc_listen = "127.0.0.1:0",
                                        .extra = {"--autopilot", autopilot ? "true" : "false"}});
    r.process.emplace(std::move(serve.process));
    r.url = serve.url;
    token_ = pf::test::read_operator_token(dir_);
    const json replica = fleet(r)["replica"];
    r.id = replica["replica_id"].get<std::string>();
    r.grpc = replica.value("grpc", "");
    return r;
  }

  // Submits one PoRep job with `request_id` through r's gRPC port, as Curio does; it must be
  // acknowledged under that id.
  static void submit_job_through(const Replica& r, const std::string& request_id) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    cuzk::v1::SubmitProofResponse reply;
    const grpc::Status status =
        stub(r)->SubmitProof(&ctx, pf::test::porep_request(request_id, 1), &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.job_id(), request_id);
  }

  static std::unique_ptr<cuzk::v1::ProvingEngine::Stub> stub(const Replica& r) {
    return cuzk::v1::ProvingEngine::NewStub(
        grpc::CreateChannel(r.grpc, grpc::InsecureChannelCredentials()));
  }

  // Jobs recorded under `request_id` (any replica answers from the store).
  int jobs_with_request(const Replica& r, const std::string& request_id) {
    int n = 0;
    for (const auto& job : api(r, "GET", "/api/v1/jobs?limit=1000")) {
      if (job.value("request_id", "") == request_id) ++n;
    }
    return n;
  }

  json api(const Replica& r, const std::string& method, const std::string& path,
           const json& body = nullptr) {
    return pf::test::operator_api(r.url, token_, method, path, body);
  }
  json fleet(const Replica& r) { return api(r, "GET", "/api/v1/fleet"); }

  // GET /healthz/leader: 200 on the leader, 503 on a follower; 0 when it does not answer.
  int leader_check(const Replica& r) {
    httplib::Client c(r.url.host, r.url.port);
    c.set_connection_timeout(2);
    c.set_read_timeout(5);
    auto res = c.Get("/healthz/leader");
    return res ? res->status : 0;
  }

  // Waits until `r` leads; returns how long it took, or nullopt after `limit`.
  std::optional<double> wait_leading(const Replica& r, std::chrono::seconds limit) {
    const auto start = std::chrono::steady_clock::now();
    if (!eventually([&] { return leader_check(r) == 200; }, limit)) return std::nullopt;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // Market mutations market-sim answered so far (its request log: creates are PUT /asks/ID,
  // destroys DELETE /instances/ID).
  std::pair<int, int> market_mutations() {
    static const std::regex create(R"(PUT /api/v0/asks/\d+/? -> 2\d\d)");
    static const std::regex destroy(R"(DELETE /api/v0/instances/\d+/? -> 2\d\d)");
    const std::string log = sim_->stderr_text();
    const auto count = [&](const std::regex& re) {
      return static_cast<int>(
          std::distance(std::sregex_iterator(log.begin(), log.end(), re), std::sregex_iterator()));
    };
    return {count(create), count(destroy)};
  }

  pf::test::ServeDatabase db_{GetParam()};
  fs::path dir_;
  std::optional<Subprocess> sim_;
  Url sim_url_;
  std::deque<Replica> replicas_;
  std::string token_;
};

INSTANTIATE_TEST_SUITE_P(Db, Replicas, pf::testing::kStoreBackends, pf::testing::backend_name);

TEST_P(Replicas, OneLeadsTheFollowerForwardsAndTakesOverWithinTheBoundAfterSigkill) {
  start_market();
  Replica& a = start_replica(false);
  ASSERT_TRUE(wait_leading(a, 30s)) << a.process->stderr_text();
  Replica& b = start_replica(false);
  // b follows and names a as the leader.
  const json seen = fleet(b)["replica"];
  EXPECT_EQ(seen["role"], "follower") << seen.dump();
  EXPECT_EQ(seen["leader"]["replica_id"], a.id) << seen.dump();
  EXPECT_EQ(leader_check(b), 503);
  // /metrics of each says which it is.
  httplib::Client metrics(b.url.host, b.url.port);
  auto text = metrics.Get("/metrics");
  ASSERT_TRUE(text);
  EXPECT_NE(text->body.find("proverfleet_leader 0\n"), std::string::npos);

  // An operator deploy sent to the follower is forwarded to the leader, which rents.
  auto offers = api(b, "GET", "/api/v1/offers?limit=5");
  ASSERT_TRUE(offers.is_array() && !offers.empty()) << offers.dump();
  const json deployed = api(b, "POST", "/api/v1/instances", {{"offer_id", offers.at(0)["id"]}});
  ASSERT_TRUE(deployed.contains("id") || deployed.contains("instance")) << deployed.dump();
  // market-sim logs a request after answering it.
  eventually([&] { return market_mutations().first >= 1; });
  EXPECT_EQ(market_mutations().first, 1);

  // Curio may point at any replica: the follower's gateway relays to the leader's (its address
  // from the lease row), which answers from its queue.
  ASSERT_FALSE(b.grpc.empty()) << fleet(b).dump();
  EXPECT_EQ(seen["leader"]["grpc"], a.grpc) << seen.dump();
  ASSERT_NO_FATAL_FAILURE(submit_job_through(b, "replicas-1"));
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::AwaitProofRequest await;
    await.set_job_id("replicas-1");
    await.set_timeout_ms(100);
    cuzk::v1::AwaitProofResponse reply;
    const grpc::Status status = stub(b)->AwaitProof(&ctx, await, &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.status(), cuzk::v1::AwaitProofResponse::TIMEOUT);  // no machine proves yet
  }
  EXPECT_EQ(jobs_with_request(a, "replicas-1"), 1);

  // SIGKILL the leader: b leads within the failover bound (ttl × 4/3), measured here with
  // generous slack for a loaded machine; the issue's ceiling is 30 s.
  ASSERT_EQ(::kill(a.process->pid(), SIGKILL), 0);
  const auto took = wait_leading(b, 60s);
  ASSERT_TRUE(took) << b.process->stderr_text();
  std::cout << "failover: the follower led " << *took << " s after SIGKILL (bound " << kTtlS * 4 / 3
            << " s at lease_ttl_s " << kTtlS << ")\n";
  EXPECT_LT(*took, 30);
  const json now_leads = fleet(b)["replica"];
  EXPECT_EQ(now_leads["leader"]["replica_id"], b.id);
  // At least one take after a's (a's own term may have lapsed and been retaken on a loaded
  // machine, which moves the counter too).
  EXPECT_GE(now_leads["leader"]["epoch"].get<int>(), 2);
  // The new leader adopts what the old one rented: nothing destroyed, nothing rented twice.
  std::this_thread::sleep_for(3s);
  int live = 0;
  for (const auto& i : api(b, "GET", "/api/v1/instances")) {
    if (i["state"] != "destroyed") ++live;
  }
  EXPECT_EQ(live, 1);
  EXPECT_EQ(market_mutations(), std::make_pair(1, 0));
  // The same request_id sent again (Curio's retry after the failover) is the job submitted
  // through the follower before it: joined, not a second one.
  ASSERT_NO_FATAL_FAILURE(submit_job_through(b, "replicas-1"));
  EXPECT_EQ(jobs_with_request(b, "replicas-1"), 1);
  auto [code, out] = [&] {
    auto run = pf::test::run_cli({"status"}, b.url, token_);
    return std::make_pair(run.code, run.out + run.err);
  }();
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("(leader)"), std::string::npos) << out;
  EXPECT_NE(out.find("leader:     " + b.id), std::string::npos) << out;
}

TEST_P(Replicas, APausedExLeaderRentsNothingOnceItWakes) {
  // Every market call takes 3 s, so a deploy sent to the leader is still re-checking its offer
  // when the leader is paused, and goes on to the create when it wakes.
  start_market({"--faults", "slow_ms=3000"});
  Replica& a = start_replica(false);
  ASSERT_TRUE(wait_leading(a, 30s)) << a.process->stderr_text();
  Replica& b = start_replica(false);
  auto offers = api(b, "GET", "/api/v1/offers?limit=5");
  ASSERT_TRUE(offers.is_array() && !offers.empty()) << offers.dump();
  const auto offer = offers.at(0)["id"].get<std::int64_t>();

  std::future<std::pair<int, std::string>> deploy = std::async(std::launch::async, [&] {
    httplib::Client c(a.url.host, a.url.port);
    c.set_read_timeout(120);
    c.set_bearer_token_auth(token_.c_str());
    auto r = c.Post("/api/v1/instances", json{{"offer_id", offer}}.dump(), "application/json");
    return r ? std::make_pair(r->status, r->body) : std::make_pair(0, std::string("no reply"));
  });
  // A Prove relayed by the follower to the leader waits there (no machine proves).
  auto relayed_ctx = std::make_shared<grpc::ClientContext>();
  relayed_ctx->set_deadline(std::chrono::system_clock::now() + 120s);
  std::future<grpc::Status> relayed = std::async(std::launch::async, [&, relayed_ctx] {
    cuzk::v1::ProveRequest call;
    *call.mutable_submit() = pf::test::porep_request("replicas-paused", 7);
    cuzk::v1::ProveResponse reply;
    return stub(b)->Prove(relayed_ctx.get(), call, &reply);
  });
  std::this_thread::sleep_for(1s);  // inside the 3 s offer re-check
  eventually([&] { return jobs_with_request(b, "replicas-paused") != 0; });
  ASSERT_EQ(jobs_with_request(b, "replicas-paused"), 1);
  ASSERT_EQ(::kill(a.process->pid(), SIGSTOP), 0);
  const auto before = market_mutations();
  // A stopped leader is alive: the follower waits out its lease (no shortcut) and takes it.
  const auto took = wait_leading(b, 60s);
  ASSERT_TRUE(took) << b.process->stderr_text();
  std::cout << "failover by lease expiry: the follower led " << *took << " s after SIGSTOP (bound "
            << kTtlS * 4 / 3 << " s at lease_ttl_s " << kTtlS << ")\n";
  EXPECT_LT(*took, 30);
  // The follower, leading now, ended the relay to the stopped leader and held the client's
  // call through the failover ([gateway] failover_hold_s): the call goes on here, on the same
  // job, and Curio never sees an error (it would have cost one of its tries).
  EXPECT_EQ(relayed.wait_for(3s), std::future_status::timeout);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::SubmitProofResponse reply;
    const grpc::Status status =
        stub(b)->SubmitProof(&ctx, pf::test::porep_request("replicas-paused", 7), &reply);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  EXPECT_EQ(jobs_with_request(b, "replicas-paused"), 1);
  EXPECT_EQ(relayed.wait_for(0s), std::future_status::timeout);  // still waiting on b's queue
  relayed_ctx->TryCancel();
  ASSERT_EQ(relayed.wait_for(30s), std::future_status::ready);
  EXPECT_EQ(relayed.get().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_EQ(::kill(a.process->pid(), SIGCONT), 0);

  // a carries on with the deploy it was making: its fence refuses the create, nothing is sent.
  ASSERT_EQ(deploy.wait_for(90s), std::future_status::ready);
  const auto [status, body] = deploy.get();
  EXPECT_EQ(status, 503) << body;
  EXPECT_NE(body.find("not_leader"), std::string::npos) << body;
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(market_mutations(), before) << "a mutation reached the market after the pause";
  EXPECT_EQ(before, std::make_pair(0, 0));
  const std::string a_log = a.process->stderr_text();
  EXPECT_NE(a_log.find("fence: create of offer " + std::to_string(offer) + " refused"),
            std::string::npos)
      << a_log;
  EXPECT_NE(a_log.find("stepping down"), std::string::npos) << a_log;
  EXPECT_EQ(leader_check(a), 503);
  EXPECT_EQ(leader_check(b), 200);
  // The refused create left no live row: nothing was rented.
  for (const auto& i : api(b, "GET", "/api/v1/instances")) {
    ADD_FAILURE() << "live row after a refused create: " << i.dump();
  }
}

}  // namespace
