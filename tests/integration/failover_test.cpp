// The failover test (issue 14 item 4): two `serve` replicas on one database (a SQLite file, and
// a PostgreSQL database), market-sim with spawned agents (every host healthy:
// tests/fixtures/scenarios/chaos-healthy.json) and gateway jobs sent like Curio (Prove, retried
// with the same request_id on UNAVAILABLE). The leader is SIGKILLed while jobs are in flight; the
// follower must lead within the failover bound, and afterwards: 0 duplicate rentals, 0 leaked
// instances, 0 lost or duplicated jobs (every request_id answered COMPLETED exactly once, one
// job each), no healthy instance destroyed for silence or a deadline and no host struck.
//
// Topology: agents are told the follower's URL (it forwards to the leader while there is one,
// and leads itself after the failover), and Curio's clients call the follower's gRPC port (it
// relays to the leader's gateway, then answers from its own queue once it leads).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cuzk/v1/proving.grpc.pb.h"
#include "reliability/fleet.h"
#include "reliability/fleet_checks.h"
#include "support/eventually.h"
#include "support/free_port.h"
#include "support/porep_request.h"
#include "support/store_backends.h"

namespace {

using pf::test::eventually;

using namespace pf::reliability;
using nlohmann::json;
using namespace std::chrono_literals;

const std::string kBinary = PF_BINARY;
const std::string kSource = PF_SOURCE_DIR;
constexpr double kTtlS = 6;  // a dead leader is replaced within 8 s
constexpr int kJobs = 12;

// What each client call ended with.
struct JobOutcome {
  int completed = 0;  // COMPLETED replies (must end at exactly 1)
  int retries = 0;    // UNAVAILABLE / DEADLINE_EXCEEDED / no connection, retried
  std::string last_error;
};

class Failover : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  void SetUp() override {
    dir_.emplace("failover");
    std::ofstream(dir_->path() / "proverfleet.toml")
        << "[jobs]\nproof_check = \"sim\"\n\n"  // market-sim's agents run the sim prover
           "[deploy]\nheartbeat_s = 2\n\n"
           "[autopilot]\nenabled = true\ninterval_s = 5\nmax_instances = 3\n"
           "max_concurrent_benchmarks = 3\nmax_rents_per_decision = 2\n\n"
           "[lifecycle]\nboot_loading_max_s = 60\nboot_register_grace_s = 60\n"
           "heartbeat_timeout_s = 30\nmarket_unknown_grace_s = 30\ndestroy_retry_s = 3\n\n"
           "[replicas]\nlease_ttl_s = "
        << kTtlS << "\n";
    market_key_ = "failover-market-key";
    pf::test::SpawnOptions sim_env;
    sim_env.env["PROVERFLEET_MARKET_SIM_API_KEY"] = market_key_;
    sim_.emplace(start_service({kBinary, "market-sim", "--scenario",
                                kSource + "/tests/fixtures/scenarios/chaos-healthy.json",
                                "--listen", "127.0.0.1:0", "--time-scale", "60", "--spawn-agents",
                                "--work-dir", (dir_->path() / "market-sim").string()},
                               sim_env, "market-sim listening on"));
    market_.emplace(sim_->url, market_key_);
    follower_port_ = pf::test::free_port();
    leader_port_ = pf::test::free_port();
    leader_grpc_port_ = pf::test::free_port();
    follower_grpc_port_ = pf::test::free_port();
  }

  void TearDown() override {
    for (auto* s : {&a_, &b_}) {
      if (*s) (*s)->process.terminate();
      s->reset();
    }
    sim_.reset();
    dir_.reset();
  }

  // The database's directory is every replica's working directory: job inputs and (PostgreSQL)
  // the operator token lie there.
  Service start_replica(int port, int grpc_port) {
    pf::test::SpawnOptions opt;
    opt.env["VAST_API_KEY"] = market_key_;
    opt.env["PROVERFLEET_TOKEN"] = std::nullopt;
    opt.env["PROVERFLEET_DB"] = std::nullopt;
    opt.working_dir = db_.dir().path();
    return start_service({kBinary,
                          "serve",
                          "--config",
                          (dir_->path() / "proverfleet.toml").string(),
                          "--listen",
                          "127.0.0.1:" + std::to_string(port),
                          "--public-url",
                          "http://127.0.0.1:" + std::to_string(follower_port_),
                          "--grpc-listen",
                          "127.0.0.1:" + std::to_string(grpc_port),
                          "--db",
                          db_url_,
                          "--vast-url",
                          sim_->url.str(),
                          "--params-manifest",
                          sim_->url.str() + "/proverfleet-sim/params.json",
                          "--autopilot",
                          "true",
                          "--reconcile-interval",
                          "2",
                          "--tick-interval",
                          "1"},
                         opt, "proverfleet serve listening on");
  }

  static bool leads(const Url& url) {
    httplib::Client c(url.host, url.port);
    c.set_connection_timeout(2);
    c.set_read_timeout(5);
    auto r = c.Get("/healthz/leader");
    return r && r->status == 200;
  }

  // Rows first, then the market (fleet_checks.h): duplicate rentals, destroyed-but-billing.
  void observe() {
    auto rows = api_->call("GET", "/api/v1/instances?all=true");
    if (!rows || rows->first != 200) return;
    std::vector<json> listed;
    try {
      listed = market_->instances();
    } catch (const std::exception&) {
      return;
    }
    for (const auto& f : check_observation(rows->second, listed)) findings_.insert(f.what);
  }

  // One client's Prove, retried with the same request_id as Curio retries: until COMPLETED or
  // a non-retryable error, within `limit`.
  JobOutcome prove_until_done(int i, std::chrono::seconds limit) {
    JobOutcome out;
    const auto request =
        pf::test::porep_request("porep-2000-" + std::to_string(i), static_cast<std::uint64_t>(i));
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(follower_grpc_port_),
                                         grpc::InsecureChannelCredentials());
      auto stub = cuzk::v1::ProvingEngine::NewStub(channel);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + 60s);
      cuzk::v1::ProveRequest call;
      *call.mutable_submit() = request;
      cuzk::v1::ProveResponse reply;
      const grpc::Status status = stub->Prove(&ctx, call, &reply);
      if (status.ok() && reply.result().status() == cuzk::v1::AwaitProofResponse::COMPLETED) {
        ++out.completed;
        return out;
      }
      out.last_error = status.ok() ? "status " + std::to_string(reply.result().status())
                                   : status.error_message();
      const bool retry =
          !status.ok() && (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
      if (!retry) return out;
      ++out.retries;
      std::this_thread::sleep_for(1s);
    }
    return out;
  }

  pf::testing::TestDatabase db_{GetParam()};
  // SQLite: a file in the database's directory; PostgreSQL: the database's URL.
  const std::string db_url_ =
      db_.is_postgres() ? db_.url() : (fs::path(db_.dir().path()) / "pf.db").string();
  std::optional<RunDir> dir_;
  Figures figures_;
  std::string market_key_;
  int follower_port_ = 0, leader_port_ = 0, leader_grpc_port_ = 0, follower_grpc_port_ = 0;
  std::optional<Service> sim_, a_, b_;
  std::optional<MarketView> market_;
  std::optional<OperatorApi> api_;
  std::set<std::string> findings_;
};

INSTANTIATE_TEST_SUITE_P(Db, Failover, pf::testing::kStoreBackends, pf::testing::backend_name);

TEST_P(Failover, LeaderKilledMidRunLosesNoJobAndRentsNothingTwice) {
  a_.emplace(start_replica(leader_port_, leader_grpc_port_));
  ASSERT_TRUE(eventually([&] { return leads(a_->url); })) << a_->process.stderr_text();
  b_.emplace(start_replica(follower_port_, follower_grpc_port_));
  api_.emplace(figures_, b_->url, read_operator_token(db_.dir().path()));
  EXPECT_FALSE(leads(b_->url));

  // The autopilot rents; agents (told b's URL) register and prove through b's forwarding.
  const auto proving_by = std::chrono::steady_clock::now() + 150s;
  int proving = 0;
  while (proving == 0 && std::chrono::steady_clock::now() < proving_by) {
    observe();
    const json fleet = api_->get("/api/v1/fleet");
    proving = fleet.value("by_state", json::object()).value("proving", 0);
    std::this_thread::sleep_for(2s);
  }
  ASSERT_GT(proving, 0) << "no instance reached proving\n" << all_output(a_->process);

  // Jobs from four clients; the leader dies while they are in flight.
  std::vector<std::future<JobOutcome>> calls;
  std::atomic<int> next{0};
  std::vector<JobOutcome> outcomes(kJobs);
  std::mutex outcomes_mu;
  for (int c = 0; c < 4; ++c) {
    calls.push_back(std::async(std::launch::async, [&] {
      JobOutcome none;
      for (int i = next++; i < kJobs; i = next++) {
        JobOutcome o = prove_until_done(i, 180s);
        std::lock_guard lock(outcomes_mu);
        outcomes[static_cast<std::size_t>(i)] = o;
      }
      return none;
    }));
  }
  std::this_thread::sleep_for(4s);
  observe();
  ASSERT_EQ(::kill(a_->process.pid(), SIGKILL), 0);
  const auto killed_at = std::chrono::steady_clock::now();
  eventually([&] { return leads(b_->url); }, 60s);
  const double failover_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  ASSERT_TRUE(leads(b_->url)) << all_output(b_->process);
  std::cout << "failover: the follower led " << failover_s << " s after SIGKILL (bound "
            << kTtlS * 4 / 3 << " s)\n";
  EXPECT_LT(failover_s, 30);

  for (auto& call : calls) {
    while (call.wait_for(3s) != std::future_status::ready) observe();
  }
  int completed = 0, retried = 0;
  for (int i = 0; i < kJobs; ++i) {
    const auto& o = outcomes[static_cast<std::size_t>(i)];
    EXPECT_EQ(o.completed, 1) << "job " << i << ": " << o.last_error;
    completed += o.completed;
    retried += o.retries;
  }
  std::cout << "jobs: " << completed << " of " << kJobs << " proved, " << retried
            << " client retries across the failover\n";
  // One job per request_id, each done once: nothing lost, nothing duplicated.
  const json jobs = api_->get("/api/v1/jobs?limit=1000");
  ASSERT_TRUE(jobs.is_array()) << jobs.dump();
  std::map<std::string, int> by_request;
  for (const auto& job : jobs) {
    ++by_request[job.value("request_id", "")];
    EXPECT_EQ(job.value("state", ""), "done") << job.dump();
  }
  EXPECT_EQ(by_request.size(), static_cast<std::size_t>(kJobs));
  for (const auto& [request, n] : by_request) EXPECT_EQ(n, 1) << request;

  // Clean up through the operator API on the new leader, then the market's figures.
  api_->call("POST", "/api/v1/autopilot", json{{"paused", true}});
  const auto clean_by = std::chrono::steady_clock::now() + 90s;
  std::set<std::int64_t> asked;
  while (std::chrono::steady_clock::now() < clean_by) {
    const json rows = api_->get("/api/v1/instances?all=true");
    int live = 0;
    for (const auto& row : rows) {
      if (row.value("state", "") == "destroyed") continue;
      ++live;
      const auto id = row.value("id", std::int64_t{0});
      if (row.value("state", "") != "destroying" && asked.insert(id).second) {
        api_->call("DELETE", "/api/v1/instances/" + std::to_string(id));
      }
    }
    const auto listed = market_->instances();
    if (live == 0 && std::count_if(listed.begin(), listed.end(), ours) == 0) break;
    std::this_thread::sleep_for(2s);
  }
  const json rows = api_->get("/api/v1/instances?all=true");
  const auto listed = market_->instances();
  for (const auto& f : check_observation(rows, listed)) findings_.insert(f.what);
  for (const auto& f : leaked_instances(rows, listed)) findings_.insert(f.what);
  for (const auto& f : false_destroys(rows, api_->get("/api/v1/bad-hosts"))) {
    findings_.insert(f.what);
  }
  for (const auto& f : findings_) ADD_FAILURE() << f;
  EXPECT_TRUE(findings_.empty());
  std::cout << "rentals: " << rows.size() << ", findings: " << findings_.size() << "\n";
}

}  // namespace
