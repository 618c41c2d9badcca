// Agents pull work (issue 12 item 3), end to end over loopback: the real Manager, JobQueue and
// HttpApi (on the HTTP front) in-process, real `proverfleet agent` processes with the sim
// prover. Jobs submitted to the queue are leased, their inputs fetched in 206 chunks, proved
// and answered with the proof derived from each job's own input; an agent SIGKILLed mid-proof
// loses its job back to the queue within the lease bound and another agent finishes it; the
// dead agent's late result is acknowledged and ignored; and heartbeats and /healthz keep being
// answered while 50 lease long-polls are parked; a job cancelled while an agent proves it is
// cancelled in that agent's prover, whose slot then takes new work at once.
// A job stuck on a prover that slowed down is hedged: a second agent proves a copy and the
// first cancels its own (core/job_hedge.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/prover_sim.h"
#include "core/predictor.h"
#include "jobs/job_queue.h"
#include "manager/http_api.h"
#include "manager/manager.h"
#include "net/http_server.h"
#include "store/store.h"
#include "support/eventually.h"
#include "support/fake_market.h"
#include "support/front_serving.h"
#include "support/param_server.h"
#include "support/subprocess.h"
#include "util/base64.h"
#include "util/sha256.h"

namespace pf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using pf::test::eventually;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr double kLeaseS = 4;
constexpr const char* kOperatorToken = "operator-token-agent-jobs";

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string probe_fixture(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/probe/" + name;
}

class AgentJobs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pf-agent-jobs-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    store_ = store::open_store((dir_ / "pf.db").string());
    for (std::int64_t offer = 101; offer <= 104; ++offer)
      market_.add_offer(offer, offer - 90, 0.40);
    manager::ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.heartbeat_s = 0.5;
    manager_ = std::make_unique<manager::Manager>(*store_, market_, cfg, epoch_now);

    jobs::JobQueueConfig qc;
    qc.data_dir = (dir_ / "data").string();
    qc.lease_s = kLeaseS;
    qc.hedging = hedging_;
    // The Manager's hooks, except that a proving instance must also be heard from: the queue
    // places each job on the earliest finisher among the workers, and a killed instance stays
    // "proving" until heartbeat_timeout_s (minutes), holding its share of placements.
    jobs::JobQueueHooks hooks = manager_->job_hooks();
    hooks.workers = [this] {
      std::vector<core::WorkerView> heard;
      const double now = epoch_now();
      for (const auto& w : manager_->job_workers()) {
        auto rec = store_->instance(w.instance_id);
        if (rec && now - rec->last_heartbeat_at <= 3) heard.push_back(w);
      }
      return heard;
    };
    queue_ = std::make_unique<jobs::JobQueue>(*store_, qc, hooks, epoch_now);
    manager_->attach_jobs(*queue_);  // the Manager ticks it and returns closed instances' jobs

    manager::ApiOptions options;
    options.operator_token_hash = manager::hash_token(kOperatorToken);
    options.max_input_chunk_bytes = 64u << 10;  // inputs come in several 206 replies
    options.lease_lane_threads = 16;
    options.lease_lane_queue = 64;
    options.http.max_connections_per_address = 256;  // 50 long-polls from one test address
    api_ = std::make_unique<manager::HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    url_ = "http://127.0.0.1:" + std::to_string(serving_->port());
    ticker_ = std::thread([this] {
      while (!stop_ticker_) {
        manager_->tick();
        std::this_thread::sleep_for(200ms);
      }
    });
  }

  void TearDown() override {
    agents_.clear();  // kills what is still running
    stop_ticker_ = true;
    if (ticker_.joinable()) ticker_.join();
    queue_->shutdown();
    serving_.reset();
    fs::remove_all(dir_);
  }

  struct RunningAgent {
    std::int64_t instance_id = 0;
    std::string state_dir;
    std::optional<test::Subprocess> process;
  };

  // Rents `offer` and starts a real agent for it; `slow_file` holds the sim prover's
  // co-tenant count: "1" makes its proofs 1/contention times slower (50× by default).
  RunningAgent& spawn_agent(std::int64_t offer, const std::string& name,
                            const std::string& slow_file, double contention = 0.02) {
    std::ofstream(slow_file) << "0\n";
    auto rec = manager_->deploy(offer, "test");
    EXPECT_TRUE(rec) << (rec ? "" : rec.error().message);
    const auto& env = market_.create_requests.back().env;
    const json truth = {{"rate_full", 3600},
                        {"partitions_full", 10},
                        {"ram_visible_gib", 256},
                        {"proof_time_cv", 0.1},
                        {"warmup_min", 0.01},
                        {"contention", contention},
                        {"co_tenants_file", slow_file},
                        {"seed", offer}};
    test::SpawnOptions spawn;
    spawn.env = {{"PROVERFLEET_MANAGER", url_},
                 {"PROVERFLEET_DEPLOYMENT", env.at("PROVERFLEET_DEPLOYMENT")},
                 {"PROVERFLEET_SECRET", env.at("PROVERFLEET_SECRET")}};
    auto& agent = agents_.emplace_back();
    agent.instance_id = rec ? rec->id : 0;
    agent.state_dir = (dir_ / name).string();
    agent.process.emplace(test::Subprocess::spawn(
        {PF_BINARY, "agent", "--state-dir", agent.state_dir, "--probe-root",
         probe_fixture("cgroup-v2"), "--prover", "sim", "--sim-truth", truth.dump(), "--time-scale",
         "1", "--concurrency", "2", "--no-progress", "--exit-on-failure"},
        spawn));
    return agent;
  }

  core::InstanceState state_of(std::int64_t id) {
    auto rec = store_->instance(id);
    return rec ? rec->state : core::InstanceState::Destroyed;
  }

  std::int64_t submit(const std::string& request_id, const std::string& input) {
    jobs::SubmitRequest req;
    req.request_id = request_id;
    req.input = input;
    req.client = "test";
    auto r = queue_->submit(req);
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return r ? r->job.id : 0;
  }

  // The finished job's proof, or a description of why there is none.
  std::string proof_of(std::int64_t job_id, std::chrono::milliseconds timeout) {
    auto r = queue_->await(job_id, timeout);
    if (!r) return "error: " + r.error().message;
    if (!*r) return "not finished in time";
    if ((*r)->job.state != core::JobState::Done) {
      return std::string("finished ") + core::to_string((*r)->job.state) + ": " + (*r)->job.error;
    }
    return (*r)->proof;
  }

  std::string agent_logs(const RunningAgent& agent) {
    return agent.process ? agent.process->stderr_text() : std::string();
  }

  fs::path dir_;
  std::unique_ptr<store::Store> store_;
  pf::testing::FakeMarket market_;
  std::unique_ptr<manager::Manager> manager_;
  std::unique_ptr<jobs::JobQueue> queue_;
  std::unique_ptr<manager::HttpApi> api_;
  net::HttpServer server_;
  std::optional<test::FrontServing> serving_;
  std::string url_;
  std::atomic<bool> stop_ticker_{false};
  std::thread ticker_;
  std::deque<RunningAgent> agents_;
  core::HedgeConfig hedging_;  // serve's defaults unless a test's fixture changes them
};

// Hedging with a short floor, so that a proof is overdue within seconds, not minutes.
class AgentJobsHedging : public AgentJobs {
 protected:
  AgentJobsHedging() { hedging_.overdue_min_s = 5; }
};

TEST_F(AgentJobs, JobsAreProvedWithTheirOwnInputsAndALostAgentsJobIsFinishedElsewhere) {
  const std::string slow_a = (dir_ / "slow-a").string();
  RunningAgent& a = spawn_agent(101, "a", slow_a);
  ASSERT_TRUE(
      eventually([&] { return state_of(a.instance_id) == core::InstanceState::Proving; }, 120s))
      << agent_logs(a);

  // Each job comes back with the proof of its own input (inputs > one 64 KiB reply).
  std::vector<std::pair<std::int64_t, std::string>> submitted;
  for (int i = 0; i < 4; ++i) {
    const std::string input = test::ParamServer::random_bytes(150 * 1024 + 7 * i, 100 + i);
    submitted.emplace_back(submit("req-" + std::to_string(i), input), input);
  }
  for (const auto& [id, input] : submitted) {
    EXPECT_EQ(proof_of(id, 60s), agent::sim_proof_of(input)) << "job " << id << "\n"
                                                             << agent_logs(a);
    EXPECT_EQ(queue_->job(id)->instance_id, a.instance_id);
  }

  // A's prover turns slow; its next job is mid-proof when A is killed.
  std::ofstream(slow_a) << "1\n";
  const std::string input = test::ParamServer::random_bytes(90 * 1024, 7);
  const std::int64_t lost = submit("req-lost", input);
  ASSERT_TRUE(eventually(
      [&] {
        auto job = queue_->job(lost);
        return job && job->state == core::JobState::Proving && job->instance_id == a.instance_id;
      },
      60s))
      << agent_logs(a);
  const int lost_attempt = queue_->job(lost)->attempts;
  std::string token;
  std::getline(std::ifstream(a.state_dir + "/agent-token"), token);
  ::kill(a.process->pid(), SIGKILL);
  EXPECT_EQ(a.process->wait_exit(10s), 128 + SIGKILL);
  const auto killed_at = Clock::now();

  // The lease nobody renews returns the job to the queue within lease_s (plus a tick).
  ASSERT_TRUE(eventually(
      [&] {
        auto job = queue_->job(lost);
        return job && (job->state == core::JobState::Queued || job->instance_id != a.instance_id);
      },
      60s));
  const double returned_after_s = std::chrono::duration<double>(Clock::now() - killed_at).count();
  EXPECT_LE(returned_after_s, kLeaseS + 5) << "the lease bound is lease_s after the last renewal";

  RunningAgent& b = spawn_agent(102, "b", (dir_ / "slow-b").string());
  EXPECT_EQ(proof_of(lost, 180s), agent::sim_proof_of(input)) << agent_logs(b);
  const auto finished = queue_->job(lost);
  ASSERT_TRUE(finished);
  EXPECT_EQ(finished->instance_id, b.instance_id);
  EXPECT_GT(finished->attempts, lost_attempt);

  // A's late result (its process died before it could send one; this is what it would have
  // sent) is acknowledged and changes nothing.
  httplib::Client client("127.0.0.1", serving_->port());
  const json late = {{"attempt", lost_attempt},
                     {"ok", true},
                     {"proof_b64", util::base64_encode("forged by a lost agent")},
                     {"prove_ms", 1}};
  auto r = client.Post(("/api/v1/agent/jobs/" + std::to_string(lost) + "/result").c_str(),
                       httplib::Headers{{"Authorization", "Bearer " + token}}, late.dump(),
                       "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body).value("applied", true), false) << r->body;
  EXPECT_EQ(queue_->job(lost)->proof_digest, util::sha256_hex(agent::sim_proof_of(input)));
  EXPECT_EQ(queue_->job(lost)->state, core::JobState::Done);
}

TEST_F(AgentJobs, HeartbeatsAndHealthzAreAnsweredWhileFiftyLongPollsAreParked) {
  // An instance that registered but proves nothing: its long-polls wait their whole wait.
  auto rec = manager_->deploy(103, "test");
  ASSERT_TRUE(rec);
  const auto& env = market_.create_requests.back().env;
  httplib::Client client("127.0.0.1", serving_->port());
  auto reg = client.Post("/api/v1/agent/register",
                         json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                              {"secret", env.at("PROVERFLEET_SECRET")}}
                             .dump(),
                         "application/json");
  ASSERT_TRUE(reg);
  ASSERT_EQ(reg->status, 200) << reg->body;
  const std::string token = json::parse(reg->body)["token"].get<std::string>();
  const httplib::Headers auth{{"Authorization", "Bearer " + token}};

  constexpr int kPolls = 50;
  std::vector<int> statuses(kPolls, 0);
  std::vector<std::thread> polls;
  const auto started = Clock::now();
  for (int i = 0; i < kPolls; ++i) {
    polls.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", serving_->port());
      c.set_read_timeout(120, 0);
      auto res = c.Post("/api/v1/agent/jobs/lease", auth,
                        json{{"max_jobs", 1}, {"wait_ms", 3000}}.dump(), "application/json");
      statuses[static_cast<std::size_t>(i)] = res ? res->status : -1;
    });
  }
  std::this_thread::sleep_for(500ms);  // the lease lane's threads are all parked by now
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    auto hb = client.Post("/api/v1/agent/heartbeat", auth, R"({"phase": "fetching_params"})",
                          "application/json");
    const double hb_s = std::chrono::duration<double>(Clock::now() - t0).count();
    // No ASSERT while the long-poll threads run: a failure must still join them.
    if (!hb) {
      ADD_FAILURE() << "no reply to a heartbeat: " << httplib::to_string(hb.error());
      continue;
    }
    EXPECT_EQ(hb->status, 200) << hb->body;
    EXPECT_LT(hb_s, 2.0) << "a heartbeat waited behind the long-polls";
    const auto t1 = Clock::now();
    auto health = client.Get("/healthz");
    EXPECT_TRUE(health && health->status == 200);
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t1).count(), 2.0);
    std::this_thread::sleep_for(200ms);
  }
  for (auto& t : polls) t.join();
  // Every long-poll was answered (the lane's queue held those beyond its threads), none
  // refused.
  for (int i = 0; i < kPolls; ++i) EXPECT_EQ(statuses[static_cast<std::size_t>(i)], 200) << i;
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - started).count(), 60.0);
}

// A client cancels a job an agent is proving (the gateway's CancelProof calls JobQueue::cancel):
// the next heartbeat's drop_jobs reaches the agent, which cancels the proof in its prover. The
// sim prover runs one proof at a time, so the next job finishing within a minute, while the
// cancelled proof had 1,000 s to go, shows the prover let go of it.
TEST_F(AgentJobs, ACancelledJobIsStoppedInTheAgentsProverAndItsSlotTakesNewWork) {
  const std::string slow = (dir_ / "slow").string();
  RunningAgent& a = spawn_agent(101, "a", slow, 0.001);
  ASSERT_TRUE(
      eventually([&] { return state_of(a.instance_id) == core::InstanceState::Proving; }, 120s))
      << agent_logs(a);
  std::ofstream(slow) << "1\n";  // proofs from now take 1,000 s
  const std::int64_t doomed = submit("req-doomed", test::ParamServer::random_bytes(30 * 1024, 3));
  ASSERT_TRUE(eventually(
      [&] {
        auto job = queue_->job(doomed);
        return job && job->state == core::JobState::Proving;
      },
      60s))
      << agent_logs(a);
  const int attempt = queue_->job(doomed)->attempts;
  const auto was_running = queue_->cancel(doomed);
  ASSERT_TRUE(was_running.has_value()) << was_running.error().message;
  EXPECT_TRUE(*was_running);
  ASSERT_TRUE(eventually(
      [&] {
        return agent_logs(a).find("cancelled the proof of job " + std::to_string(doomed)) !=
               std::string::npos;
      },
      30s))
      << agent_logs(a);

  std::ofstream(slow) << "0\n";
  const std::string input = test::ParamServer::random_bytes(40 * 1024, 4);
  const std::int64_t next = submit("req-next", input);
  EXPECT_EQ(proof_of(next, 60s), agent::sim_proof_of(input)) << agent_logs(a);
  EXPECT_EQ(queue_->job(doomed)->state, core::JobState::Cancelled);

  // A late result for the cancelled job is acknowledged and changes nothing.
  std::string token;
  std::getline(std::ifstream(a.state_dir + "/agent-token"), token);
  httplib::Client client("127.0.0.1", serving_->port());
  const json late = {{"attempt", attempt},
                     {"ok", true},
                     {"proof_b64", util::base64_encode("too late")},
                     {"prove_ms", 1}};
  auto r = client.Post(("/api/v1/agent/jobs/" + std::to_string(doomed) + "/result").c_str(),
                       httplib::Headers{{"Authorization", "Bearer " + token}}, late.dump(),
                       "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body).value("applied", true), false) << r->body;
  EXPECT_EQ(queue_->job(doomed)->state, core::JobState::Cancelled);
  EXPECT_TRUE(queue_->job(doomed)->proof_digest.empty());
}

// Hedged proving end to end (core/job_hedge.h, docs/gateway.md): agent a's prover slows to a
// thousandth of the rate it was accepted at while it proves job J (its agent heartbeats and
// renews the lease all along: the lease alone would wait for cuzk's 30-minute timeout). Agent
// b, with nothing queued, is given a copy of the same attempt, proves it in seconds, and the
// client gets b's proof of its own input; a is told to drop J at its next heartbeat and cancels
// the proof in its prover.
TEST_F(AgentJobsHedging, AJobStuckOnASlowedProverIsProvedByASecondAgent) {
  const std::string slow = (dir_ / "slow").string();
  RunningAgent& a = spawn_agent(101, "a", slow, 0.001);
  ASSERT_TRUE(
      eventually([&] { return state_of(a.instance_id) == core::InstanceState::Proving; }, 120s))
      << agent_logs(a);
  std::ofstream(slow) << "1\n";  // a's proofs from now take 1,000 s
  const std::string input = test::ParamServer::random_bytes(30 * 1024, 5);
  const std::int64_t stuck = submit("req-stuck", input);
  ASSERT_TRUE(eventually(
      [&] {
        auto job = queue_->job(stuck);
        return job && job->state == core::JobState::Proving;
      },
      60s))
      << agent_logs(a);
  EXPECT_EQ(queue_->job(stuck)->instance_id, a.instance_id);
  RunningAgent& b = spawn_agent(102, "b", (dir_ / "b-speed").string());
  EXPECT_EQ(proof_of(stuck, 180s), agent::sim_proof_of(input)) << agent_logs(b);
  const auto done = queue_->job(stuck);
  EXPECT_EQ(done->instance_id, b.instance_id);  // the maker: b
  EXPECT_EQ(done->attempts, 1);                 // one attempt, two copies
  bool hedged = false;
  for (const auto& step : queue_->timeline(stuck, 0)) {
    if (step.kind == core::JobEventKind::Hedged) {
      hedged = true;
      EXPECT_EQ(step.instance_id, b.instance_id);
      EXPECT_THAT(step.detail, ::testing::HasSubstr("has run"));
    }
  }
  EXPECT_TRUE(hedged);
  ASSERT_TRUE(eventually(
      [&] {
        return agent_logs(a).find("cancelled the proof of job " + std::to_string(stuck)) !=
               std::string::npos;
      },
      30s))
      << agent_logs(a);
}

}  // namespace
}  // namespace pf
