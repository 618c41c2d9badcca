// The gateway end to end in one process: a real gRPC server on a free port over a real JobQueue
// (on SQLite and on PostgreSQL, inputs in a temp dir), clients speaking cuzk.v1.ProvingEngine, and
// a thread acting as the agent through the queue's lease / read_input / report. The agent's proof
// is derived from the input it read (the sim prover's rule), so every test can check that a client
// got the proof of its own input.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "cli/prove_request.h"
#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/client_tokens.h"
#include "gateway/gateway_metrics.h"
#include "gateway/gateway_server.h"
#include "jobs/job_queue.h"
#include "store/store.h"
#include "support/eventually.h"
#include "support/fake_cuzk.h"
#include "support/other_host_forwarder.h"
#include "support/proverfleet_cli.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"

namespace pf::gateway {
namespace {

using pf::test::eventually;
using pf::testing::TempDir;

using ::testing::HasSubstr;
using ::testing::StartsWith;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr std::int64_t kMaxInput = 64 * 1024;
constexpr std::int64_t kInstance = 7;

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : digest) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 0xf]);
  }
  return out;
}

// The sim prover's proof of an input (contract): what a client of that input must get back.
std::string proof_of_input(const std::string& input) {
  return sha256_hex("pf-sim-proof:" + input);
}

std::string proof_of(cuzk::v1::SubmitProofRequest request) {
  request.clear_request_id();
  return proof_of_input(request.SerializeAsString());
}

cuzk::v1::SubmitProofRequest porep(const std::string& request_id, std::uint64_t sector) {
  cuzk::v1::SubmitProofRequest r;
  r.set_request_id(request_id);
  r.set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  r.set_sector_size(32ULL << 30);
  r.set_sector_number(sector);
  r.set_miner_id(1000);
  r.set_vanilla_proof(R"({"SectorNum":)" + std::to_string(sector) +
                      R"(,"Phase1Out":"c2VjdG9y","SectorSize":34359738368})");
  return r;
}

// Takes jobs from the queue as instance kInstance would: lease, read the input, prove, report.
// While `holding`, leased jobs are kept unanswered (they count as in progress).
class FakeAgent {
 public:
  explicit FakeAgent(jobs::JobQueue& queue) : queue_(queue), thread_([this] { run(); }) {}
  ~FakeAgent() { stop(); }
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::atomic<bool> holding{false};
  std::atomic<int> leases{0};
  std::atomic<int> reports{0};

 private:
  void run() {
    std::vector<jobs::Lease> held;
    while (!stopping_) {
      auto leased = queue_.lease(kInstance, 4, 100ms);
      if (leased) {
        leases += static_cast<int>(leased->size());
        for (auto& lease : *leased) held.push_back(std::move(lease));
      } else {
        std::this_thread::sleep_for(20ms);
      }
      if (holding) continue;
      for (const auto& lease : held) prove(lease);
      held.clear();
    }
  }

  void prove(const jobs::Lease& lease) {
    const int attempt = lease.job.attempts;
    std::string input;
    while (true) {
      auto chunk = queue_.read_input(kInstance, lease.job.id, attempt,
                                     static_cast<std::int64_t>(input.size()), 16 * 1024);
      if (!chunk) return;  // cancelled or re-leased meanwhile
      input += chunk->bytes;
      if (chunk->bytes.empty() || static_cast<std::int64_t>(input.size()) >= chunk->total) break;
    }
    (void)queue_.started(kInstance, lease.job.id, attempt);
    jobs::ProofReport report;
    report.job_id = lease.job.id;
    report.attempt = attempt;
    report.ok = true;
    report.proof = proof_of_input(input);
    report.prove_ms = 50;
    report.gpu_ms = 30;
    report.queue_ms = 1;
    if (queue_.report(kInstance, report)) ++reports;
  }

  jobs::JobQueue& queue_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

double gateway_epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class GatewayTest : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  void SetUp() override {
    store_ = db_.open();
    jobs::JobQueueConfig config;
    config.data_dir = dir_.path();
    config.max_input_bytes = kMaxInput;
    jobs::JobQueueHooks hooks;
    hooks.workers = [this] {
      std::vector<core::WorkerView> workers;
      if (fleet_up_) workers.push_back({kInstance, 1.0, 4, 0, -1});
      return workers;
    };
    queue_ = std::make_unique<jobs::JobQueue>(*store_, config, hooks, gateway_epoch_now);
  }
  void TearDown() override {
    if (gateway_) gateway_->shutdown();
    if (agent_) agent_->stop();
    queue_->shutdown();
  }

  GatewayConfig config(std::vector<std::string> allow = {}) const {
    GatewayConfig c;
    c.listen = "127.0.0.1:0";
    c.allow = std::move(allow);
    c.max_input_bytes = kMaxInput;
    c.max_pending_window = 8;
    return c;
  }
  void start(GatewayConfig c) {
    auto started = start_gateway(*queue_, c);
    ASSERT_TRUE(started) << started.error();
    gateway_ = std::move(*started);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(gateway_->port()),
                                   grpc::InsecureChannelCredentials());
    stub_ = cuzk::v1::ProvingEngine::NewStub(channel_);
  }
  void start() { start(config()); }
  void start_agent() { agent_ = std::make_unique<FakeAgent>(*queue_); }

  grpc::Status prove(const cuzk::v1::SubmitProofRequest& request, cuzk::v1::ProveResponse& reply,
                     std::chrono::milliseconds deadline = 60s) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + deadline);
    cuzk::v1::ProveRequest prove_request;
    *prove_request.mutable_submit() = request;
    return stub_->Prove(&ctx, prove_request, &reply);
  }
  cuzk::v1::GetStatusResponse status() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    cuzk::v1::GetStatusResponse reply;
    EXPECT_TRUE(stub_->GetStatus(&ctx, {}, &reply).ok());
    return reply;
  }
  // A client's retry of a job the fleet has not taken yet: made while the fleet is down, and the
  // fleet brought back only once the retry has joined the job. Brought back first, the fleet
  // could prove and deliver the job before the retry arrived, and a retry after delivery is
  // proved again (a loaded machine did exactly that).
  template <typename Call>
  grpc::Status retry_then_bring_fleet_up(Call call) {
    const auto joined_before = gateway_->metrics().joined();
    grpc::Status status;
    std::thread retry([&] { status = call(); });
    const bool joined = eventually([&] { return gateway_->metrics().joined() > joined_before; });
    fleet_up_ = true;
    retry.join();
    EXPECT_TRUE(joined) << "the retry never joined the queued job";
    return status;
  }
  TempDir dir_;
  pf::testing::TestDatabase db_{GetParam()};
  std::atomic<bool> fleet_up_{true};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<jobs::JobQueue> queue_;
  std::unique_ptr<GatewayServer> gateway_;
  std::unique_ptr<FakeAgent> agent_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<cuzk::v1::ProvingEngine::Stub> stub_;
};

INSTANTIATE_TEST_SUITE_P(Db, GatewayTest, pf::testing::kStoreBackends, pf::testing::backend_name);

TEST_P(GatewayTest, ProveReturnsTheProofOfEachClientsOwnInput) {
  start();
  start_agent();
  std::vector<std::future<std::pair<grpc::Status, cuzk::v1::ProveResponse>>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(std::async(std::launch::async, [this, i] {
      cuzk::v1::ProveResponse reply;
      auto status =
          prove(porep("porep-1000-" + std::to_string(i), static_cast<std::uint64_t>(i)), reply);
      return std::make_pair(status, reply);
    }));
  }
  for (int i = 0; i < 6; ++i) {
    auto [status, reply] = calls[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    const auto& result = reply.result();
    EXPECT_EQ(result.status(), cuzk::v1::AwaitProofResponse::COMPLETED);
    EXPECT_EQ(result.job_id(), "porep-1000-" + std::to_string(i));
    EXPECT_EQ(result.proof(), proof_of(porep("x", static_cast<std::uint64_t>(i))));
    EXPECT_EQ(result.gpu_compute_ms(), 30u);
    EXPECT_GE(result.queue_wait_ms(), 1u);  // the agent's own queue time is included
  }
}

TEST_P(GatewayTest, TwoCallsOfOneClientWithOneRequestIdShareOneJob) {
  start();
  start_agent();
  agent_->holding = true;
  const auto request = porep("porep-1000-42", 42);
  auto first = std::async(std::launch::async, [&] {
    cuzk::v1::ProveResponse reply;
    return std::make_pair(prove(request, reply), reply);
  });
  ASSERT_TRUE(eventually([&] { return agent_->leases.load() == 1; }));
  auto second = std::async(std::launch::async, [&] {
    cuzk::v1::ProveResponse reply;
    return std::make_pair(prove(request, reply), reply);
  });
  // The second call joins the job the agent already holds (the same row, no second lease).
  ASSERT_TRUE(eventually([&] { return gateway_->metrics().joined() == 1; }));
  agent_->holding = false;
  for (auto* call : {&first, &second}) {
    auto [status, reply] = call->get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.result().status(), cuzk::v1::AwaitProofResponse::COMPLETED);
    EXPECT_EQ(reply.result().proof(), proof_of(request));
  }
  EXPECT_EQ(queue_->list({}, 10).size(), 1u);
  EXPECT_EQ(agent_->leases.load(), 1);
  // The report completes the job (and wakes both calls) before the stand-in agent counts it.
  EXPECT_TRUE(eventually([&] { return agent_->reports.load() == 1; }));
  EXPECT_EQ(agent_->reports.load(), 1);
}

TEST_P(GatewayTest, SubmitThenAwaitHonoursTimeoutAndDeliversTheProof) {
  fleet_up_ = false;  // nobody takes the job yet
  start();
  start_agent();
  const auto request = porep("porep-1000-9", 9);
  cuzk::v1::SubmitProofResponse submitted;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->SubmitProof(&ctx, request, &submitted).ok());
  }
  EXPECT_EQ(submitted.job_id(), "porep-1000-9");
  EXPECT_EQ(submitted.queue_position(), 1u);
  {
    grpc::ClientContext ctx;
    cuzk::v1::AwaitProofRequest await;
    await.set_job_id("porep-1000-9");
    await.set_timeout_ms(300);
    cuzk::v1::AwaitProofResponse reply;
    ASSERT_TRUE(stub_->AwaitProof(&ctx, await, &reply).ok());
    EXPECT_EQ(reply.status(), cuzk::v1::AwaitProofResponse::TIMEOUT);
  }
  fleet_up_ = true;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 60s);
  cuzk::v1::AwaitProofRequest await;
  await.set_job_id("porep-1000-9");
  cuzk::v1::AwaitProofResponse reply;
  const auto status = stub_->AwaitProof(&ctx, await, &reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.status(), cuzk::v1::AwaitProofResponse::COMPLETED);
  EXPECT_EQ(reply.job_id(), "porep-1000-9");
  EXPECT_EQ(reply.proof(), proof_of(request));
}

TEST_P(GatewayTest, EmptyRequestIdGetsAGeneratedJobId) {
  fleet_up_ = false;
  start();
  cuzk::v1::SubmitProofResponse submitted;
  grpc::ClientContext ctx;
  ASSERT_TRUE(stub_->SubmitProof(&ctx, porep("", 3), &submitted).ok());
  EXPECT_THAT(submitted.job_id(), StartsWith("pf-"));
  const auto job = queue_->job_by_request(submitted.job_id());
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, core::JobState::Queued);
}

TEST_P(GatewayTest, AwaitOfAnUnknownJobIsNotFound) {
  start();
  grpc::ClientContext ctx;
  cuzk::v1::AwaitProofRequest await;
  await.set_job_id("never-submitted");
  cuzk::v1::AwaitProofResponse reply;
  EXPECT_EQ(stub_->AwaitProof(&ctx, await, &reply).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_P(GatewayTest, CancelProofCancelsQueuedAndRunningJobs) {
  fleet_up_ = false;
  start();
  start_agent();
  const auto cancel = [this](const std::string& id) {
    grpc::ClientContext ctx;
    cuzk::v1::CancelProofRequest request;
    request.set_job_id(id);
    cuzk::v1::CancelProofResponse reply;
    EXPECT_TRUE(stub_->CancelProof(&ctx, request, &reply).ok());
    return reply.was_running();
  };
  cuzk::v1::SubmitProofResponse submitted;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->SubmitProof(&ctx, porep("queued-1", 1), &submitted).ok());
  }
  EXPECT_FALSE(cancel("queued-1"));
  {
    grpc::ClientContext ctx;
    cuzk::v1::AwaitProofRequest await;
    await.set_job_id("queued-1");
    cuzk::v1::AwaitProofResponse reply;
    ASSERT_TRUE(stub_->AwaitProof(&ctx, await, &reply).ok());
    EXPECT_EQ(reply.status(), cuzk::v1::AwaitProofResponse::CANCELLED);
  }

  agent_->holding = true;
  fleet_up_ = true;
  auto running = std::async(std::launch::async, [this] {
    cuzk::v1::ProveResponse reply;
    return std::make_pair(prove(porep("running-2", 2), reply), reply);
  });
  ASSERT_TRUE(eventually([&] { return agent_->leases.load() == 1; }));
  EXPECT_TRUE(cancel("running-2"));
  auto [status, reply] = running.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.result().status(), cuzk::v1::AwaitProofResponse::CANCELLED);
  EXPECT_FALSE(cancel("no-such-job"));  // as the daemon answers
}

TEST_P(GatewayTest, GetStatusCountsPendingAndInProgressPerKind) {
  fleet_up_ = false;
  start();
  start_agent();
  for (int i = 0; i < 2; ++i) {
    grpc::ClientContext ctx;
    cuzk::v1::SubmitProofResponse submitted;
    ASSERT_TRUE(stub_->SubmitProof(&ctx, porep("p-" + std::to_string(i), 1), &submitted).ok());
  }
  cuzk::v1::SubmitProofRequest snap;
  snap.set_request_id("snap-1");
  snap.set_proof_kind(cuzk::v1::SNAP_DEALS_UPDATE);
  snap.add_vanilla_proofs("partition");
  snap.set_comm_r_old(std::string(32, 'a'));
  snap.set_comm_r_new(std::string(32, 'b'));
  snap.set_comm_d_new(std::string(32, 'c'));
  {
    grpc::ClientContext ctx;
    cuzk::v1::SubmitProofResponse submitted;
    ASSERT_TRUE(stub_->SubmitProof(&ctx, snap, &submitted).ok());
  }
  auto reply = status();
  ASSERT_EQ(reply.queues_size(), 4);
  EXPECT_EQ(reply.queues(0).proof_kind(), "porep-c2");
  EXPECT_EQ(reply.queues(0).pending(), 2u);
  EXPECT_EQ(reply.queues(0).in_progress(), 0u);
  EXPECT_EQ(reply.queues(1).proof_kind(), "snap-update");
  EXPECT_EQ(reply.queues(1).pending(), 1u);

  // The agent takes all three and holds them: in progress, nothing pending.
  agent_->holding = true;
  fleet_up_ = true;
  ASSERT_TRUE(eventually([&] { return agent_->leases.load() == 3; }));
  reply = status();
  EXPECT_EQ(reply.queues(0).pending(), 0u);
  EXPECT_EQ(reply.queues(0).in_progress(), 2u);
  EXPECT_EQ(reply.queues(1).in_progress(), 1u);
  agent_->holding = false;
  ASSERT_TRUE(eventually([&] { return status().total_proofs_completed() == 3; }));
}

TEST_P(GatewayTest, InvalidArgumentNamesTheField) {
  start();
  auto request = porep("porep-1000-1", 1);
  request.clear_vanilla_proof();
  cuzk::v1::ProveResponse reply;
  auto status = prove(request, reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), StartsWith("vanilla_proof:"));

  request = porep(std::string(300, 'r'), 1);
  status = prove(request, reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), StartsWith("request_id:"));

  grpc::ClientContext ctx;
  EXPECT_EQ(stub_->Prove(&ctx, cuzk::v1::ProveRequest{}, &reply).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(queue_->list({}, 10).empty());
  EXPECT_EQ(gateway_->metrics().calls("Prove", grpc::StatusCode::INVALID_ARGUMENT), 3u);
}

TEST_P(GatewayTest, OversizeInputIsResourceExhaustedWithItsSize) {
  start();
  auto request = porep("big-1", 1);
  request.set_vanilla_proof("{" + std::string(kMaxInput, 'x') + "}");
  cuzk::v1::ProveResponse reply;
  auto status = prove(request, reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr(std::to_string(kMaxInput) + " bytes"));
  // Far beyond: refused by gRPC before the message is read.
  request.set_vanilla_proof("{" + std::string(kMaxInput + kMessageMargin + 1024, 'x') + "}");
  status = prove(request, reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(queue_->list({}, 10).empty());
}

TEST_P(GatewayTest, AllowListDeniesOtherClients) {
  start(config({"10.0.0.0/8", "fd00::/8"}));
  grpc::ClientContext ctx;
  cuzk::v1::GetStatusResponse reply;
  const auto status = stub_->GetStatus(&ctx, {}, &reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  cuzk::v1::ProveResponse prove_reply;
  EXPECT_EQ(prove(porep("denied-1", 1), prove_reply).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(queue_->list({}, 10).empty());
  EXPECT_EQ(gateway_->metrics().denied(), 2u);
}

TEST_P(GatewayTest, AllowListAdmitsListedClients) {
  start(config({"127.0.0.0/8"}));
  EXPECT_EQ(status().queues_size(), 4);
}

TEST_P(GatewayTest, ClientDeadlineDoesNotCancelTheJobAndTheRetryJoinsIt) {
  fleet_up_ = false;
  start();
  start_agent();
  const auto request = porep("porep-1000-77", 77);
  cuzk::v1::ProveResponse reply;
  const auto status = prove(request, reply, 1500ms);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  auto job = queue_->job_by_request("porep-1000-77");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, core::JobState::Queued);

  const auto retried = retry_then_bring_fleet_up([&] { return prove(request, reply); });
  ASSERT_TRUE(retried.ok()) << retried.error_message();
  EXPECT_EQ(reply.result().status(), cuzk::v1::AwaitProofResponse::COMPLETED);
  EXPECT_EQ(reply.result().proof(), proof_of(request));
  EXPECT_EQ(queue_->list({}, 10).size(), 1u);
  EXPECT_EQ(agent_->leases.load(), 1);
}

// --- Curio as it really behaves (issue 25; docs/gateway.md, "What real Curio and cuzk do") ----

cuzk::v1::SubmitProofRequest winning_post(const std::string& request_id) {
  cuzk::v1::SubmitProofRequest r;
  r.set_request_id(request_id);
  r.set_proof_kind(cuzk::v1::WINNING_POST);
  r.set_sector_size(32ULL << 30);
  r.set_priority(cuzk::v1::CRITICAL);
  r.set_miner_id(1000);
  r.add_vanilla_proofs("vanilla proof of sector 1");
  r.set_randomness(std::string(32, '\x07'));
  return r;
}

grpc::Status prove_on(cuzk::v1::ProvingEngine::Stub& stub,
                      const cuzk::v1::SubmitProofRequest& request, cuzk::v1::ProveResponse& reply,
                      const std::string& bearer = "") {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 60s);
  if (!bearer.empty()) ctx.AddMetadata(kClientTokenMetadata, "Bearer " + bearer);
  cuzk::v1::ProveRequest prove_request;
  *prove_request.mutable_submit() = request;
  return stub.Prove(&ctx, prove_request, &reply);
}

// A WinningPoSt (one try in Curio, a chain deadline of seconds) is refused at once when no local
// cuzk is configured, and never becomes a job.
TEST_P(GatewayTest, AWinningPostNeverEntersTheQueueAndIsRefusedAtOnceWithoutALocalCuzk) {
  start();
  start_agent();
  cuzk::v1::ProveResponse reply;
  const auto started = std::chrono::steady_clock::now();
  const auto status = prove(winning_post("winpost-1000-0a0b0c0d"), reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("local_cuzk"));
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  EXPECT_TRUE(queue_->list({}, 10).empty());
  EXPECT_EQ(agent_->leases.load(), 0);
  EXPECT_EQ(gateway_->metrics().local(cuzk::v1::WINNING_POST, false), 1u);
}

// With [gateway] local_cuzk, PoSt (and keep_local kinds) go to the operator's own daemon as they
// came, unqueued; PoRep still goes to the fleet.
TEST_P(GatewayTest, PostAndKeepLocalKindsAreRelayedToTheLocalCuzkUnqueued) {
  pf::test::FakeCuzk local;
  auto c = config();
  c.local_cuzk = local.address();
  c.keep_local = {core::JobKind::SnapUpdate};
  start(c);
  start_agent();
  cuzk::v1::ProveResponse reply;
  auto status = prove(winning_post("winpost-1000-0a0b0c0d"), reply);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.result().status(), cuzk::v1::AwaitProofResponse::COMPLETED);
  EXPECT_EQ(reply.result().job_id(), "winpost-1000-0a0b0c0d");
  cuzk::v1::SubmitProofRequest snap;
  snap.set_request_id("snap-1000-4");
  snap.set_proof_kind(cuzk::v1::SNAP_DEALS_UPDATE);
  snap.add_vanilla_proofs("partition 0");
  snap.set_comm_r_old(std::string(32, 'a'));
  snap.set_comm_r_new(std::string(32, 'b'));
  snap.set_comm_d_new(std::string(32, 'c'));
  ASSERT_TRUE(prove(snap, reply).ok());
  const auto relayed = local.requests();
  ASSERT_EQ(relayed.size(), 2u);
  EXPECT_EQ(relayed[0].request_id(), "winpost-1000-0a0b0c0d");
  EXPECT_EQ(relayed[0].randomness(), std::string(32, '\x07'));
  EXPECT_EQ(relayed[1].request_id(), "snap-1000-4");
  EXPECT_TRUE(queue_->list({}, 10).empty());  // neither became a job
  const auto request = porep("porep-1000-5", 5);
  ASSERT_TRUE(prove(request, reply).ok());
  EXPECT_EQ(reply.result().proof(), proof_of(request));
  EXPECT_EQ(local.requests().size(), 2u);
  EXPECT_EQ(queue_->list({}, 10).size(), 1u);
  EXPECT_EQ(gateway_->metrics().local(cuzk::v1::WINNING_POST, true), 1u);
  // The local daemon gone: Curio hears UNAVAILABLE naming it, and still nothing is queued.
  local.shutdown();
  status = prove(winning_post("winpost-1000-0e0f"), reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("local_cuzk"));
  EXPECT_EQ(queue_->list({}, 10).size(), 1u);
}

// Curio retries a failed task on whichever node claims it next, with the same request_id: two
// Curio nodes at different addresses are one client, so the retry joins the job.
TEST_P(GatewayTest, ARetryFromAnotherCurioNodeJoinsTheJob) {
  fleet_up_ = false;
  start();
  start_agent();
  pf::test::OtherHostForwarder other_node(gateway_->port());  // calls from 127.0.0.2
  const auto other = cuzk::v1::ProvingEngine::NewStub(
      grpc::CreateChannel(other_node.address(), grpc::InsecureChannelCredentials()));
  const auto request = porep("porep-1000-8", 8);
  cuzk::v1::ProveResponse reply;
  EXPECT_EQ(prove(request, reply, 1000ms).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const auto status = retry_then_bring_fleet_up([&] { return prove_on(*other, request, reply); });
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.result().proof(), proof_of(request));
  const auto jobs = queue_->list({}, 10);
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].client, kDefaultClient);
  EXPECT_EQ(gateway_->metrics().joined(), 1u);
}

// A client the operator issued a token to has request ids of its own; a wrong token is refused;
// one request_id with another input is refused and changes nothing.
TEST_P(GatewayTest, ClientTokensSeparateRequestIdsAndAnotherInputIsRefused) {
  auto c = config();
  c.client_auth.tokens = {{"bench-rig", "0123456789abcdef0123"}};
  start(c);
  start_agent();
  const auto mine = porep("porep-1000-9", 9);
  auto theirs = porep("porep-1000-9", 10);  // the same id, another input
  cuzk::v1::ProveResponse reply;
  ASSERT_TRUE(prove(mine, reply).ok());
  EXPECT_EQ(reply.result().proof(), proof_of(mine));
  auto status = prove_on(*stub_, theirs, reply, "0123456789abcdef0123");
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.result().proof(), proof_of(theirs));
  std::set<std::string> clients;
  for (const auto& j : queue_->list({}, 10)) clients.insert(j.client);
  EXPECT_EQ(clients, (std::set<std::string>{kDefaultClient, "bench-rig"}));
  status = prove_on(*stub_, theirs, reply, "0123456789abcdef0999");
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);

  fleet_up_ = false;  // an open job, then the same id with another input
  const auto open = porep("porep-1000-11", 11);
  EXPECT_EQ(prove(open, reply, 500ms).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  status = prove(porep("porep-1000-11", 12), reply);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(status.error_message(), HasSubstr("porep-1000-11"));
  const auto job = queue_->job_by_request("porep-1000-11");
  ASSERT_TRUE(job);
  fleet_up_ = true;
  ASSERT_TRUE(prove(open, reply).ok());
  EXPECT_EQ(reply.result().proof(), proof_of(open));
  EXPECT_EQ(queue_->list({}, 10).size(), 3u);
}

// Curio never reads GetStatus: it holds up to MaxPending calls per node whatever the fleet does.
// Calls beyond the window are jobs that wait in the queue, not RESOURCE_EXHAUSTED (which would
// burn one of Curio's few tries).
TEST_P(GatewayTest, CallsBeyondTheWindowWaitInTheQueue) {
  fleet_up_ = false;
  auto c = config();
  c.curio_nodes = 2;
  c.curio_max_pending = 4;  // window 8, threads 2 × 8 + headroom
  c.max_pending_window = 0;
  start(c);
  start_agent();
  constexpr int kCalls = 20;
  std::vector<std::future<std::pair<grpc::Status, std::string>>> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.push_back(std::async(std::launch::async, [this, i] {
      cuzk::v1::ProveResponse reply;
      auto status = prove(porep("porep-1000-" + std::to_string(100 + i), 100 + i), reply, 120s);
      return std::make_pair(status, reply.result().proof());
    }));
  }
  ASSERT_TRUE(eventually([&] { return queue_->list({}, 100).size() == kCalls; }));
  fleet_up_ = true;
  for (int i = 0; i < kCalls; ++i) {
    auto [status, proof] = calls[static_cast<std::size_t>(i)].get();
    ASSERT_TRUE(status.ok()) << i << ": " << status.error_message();
    EXPECT_EQ(proof, proof_of(porep("porep-1000-" + std::to_string(100 + i), 100 + i)));
  }
  EXPECT_EQ(gateway_->metrics().calls("Prove", grpc::StatusCode::RESOURCE_EXHAUSTED), 0u);
}

TEST_P(GatewayTest, MetricsAndSrsCallsAreAnswered) {
  start();
  {
    grpc::ClientContext ctx;
    cuzk::v1::PreloadSrsRequest request;
    request.set_circuit_id("porep-32g");
    cuzk::v1::PreloadSrsResponse reply;
    ASSERT_TRUE(stub_->PreloadSRS(&ctx, request, &reply).ok());
    EXPECT_TRUE(reply.already_loaded());
  }
  {
    grpc::ClientContext ctx;
    cuzk::v1::EvictSrsResponse reply;
    ASSERT_TRUE(stub_->EvictSRS(&ctx, {}, &reply).ok());
    EXPECT_FALSE(reply.was_loaded());
  }
  grpc::ClientContext ctx;
  cuzk::v1::GetMetricsResponse reply;
  ASSERT_TRUE(stub_->GetMetrics(&ctx, {}, &reply).ok());
  EXPECT_THAT(reply.prometheus_text(),
              HasSubstr("proverfleet_gateway_requests_total{method=\"PreloadSRS\",code=\"OK\"} 1"));
  EXPECT_THAT(reply.prometheus_text(), HasSubstr("cuzk_proofs_completed_total 0"));
}

TEST_P(GatewayTest, ShutdownEndsWaitingCallsAndKeepsTheirJobs) {
  fleet_up_ = false;
  start();
  auto waiting = std::async(std::launch::async, [this] {
    cuzk::v1::ProveResponse reply;
    return prove(porep("kept-1", 1), reply);
  });
  ASSERT_TRUE(eventually([&] { return queue_->job_by_request("kept-1").has_value(); }));
  gateway_->shutdown();
  const auto status = waiting.get();
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(queue_->job_by_request("kept-1")->state, core::JobState::Queued);
}

// `proverfleet prove` as a client: the proof of the C1 file it sent lands in --out.
TEST_P(GatewayTest, ProveCommandWritesTheProofOfItsInput) {
  start();
  start_agent();
  const std::string c1 = R"({"SectorNum":5,"Phase1Out":"YWJjZA==","SectorSize":34359738368})";
  std::ofstream(dir_.file("c1.json")) << c1;
  auto run = test::Subprocess::spawn({PF_BINARY, "prove", "--input", dir_.file("c1.json"),
                                      "--gateway", "127.0.0.1:" + std::to_string(gateway_->port()),
                                      "--request-id", "cli-porep-1", "--miner", "1000", "--json",
                                      "--out", dir_.file("proof.bin")});
  const auto code = run.wait_exit(120s);
  ASSERT_EQ(code, 0) << run.stderr_text();
  std::string out;
  for (const auto& line : run.stdout_lines()) out += line + "\n";
  const auto reply = nlohmann::json::parse(out);
  EXPECT_EQ(reply["job_id"], "cli-porep-1");
  EXPECT_EQ(reply["status"], "COMPLETED");

  cli::ProveInputs inputs;
  inputs.request_id = "cli-porep-1";
  inputs.miner = 1000;
  const auto sent = cli::build_prove_request(inputs, c1);
  ASSERT_TRUE(sent) << sent.error();
  EXPECT_EQ(sent->sector_number(), 5u);  // from the envelope
  std::ifstream proof_file(dir_.file("proof.bin"), std::ios::binary);
  const std::string proof((std::istreambuf_iterator<char>(proof_file)),
                          std::istreambuf_iterator<char>());
  EXPECT_EQ(proof, proof_of(*sent));
  const auto job = queue_->job_by_request("cli-porep-1");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, core::JobState::Done);
}

// `prove --client-token-file` calls as the client the token names (gateway/client_tokens.h); a
// token file other users may read is refused before anything is sent.
TEST_P(GatewayTest, ProveCommandCallsAsTheClientItsTokenNames) {
  auto c = config();
  c.client_auth.tokens = {{"bench-rig", "0123456789abcdef0123"}};
  start(c);
  start_agent();
  std::ofstream(dir_.file("c1.json"))
      << R"({"SectorNum":6,"Phase1Out":"YWJjZA==","SectorSize":34359738368})";
  std::ofstream(dir_.file("token")) << "0123456789abcdef0123\n";
  ::chmod(dir_.file("token").c_str(), 0644);
  const std::vector<std::string> args = {PF_BINARY,
                                         "prove",
                                         "--input",
                                         dir_.file("c1.json"),
                                         "--gateway",
                                         "127.0.0.1:" + std::to_string(gateway_->port()),
                                         "--request-id",
                                         "cli-token-1",
                                         "--client-token-file",
                                         dir_.file("token")};
  auto refused = test::Subprocess::spawn(args);
  EXPECT_NE(refused.wait_exit(60s), 0);
  EXPECT_THAT(refused.stderr_text(), HasSubstr("chmod 600"));
  EXPECT_FALSE(queue_->job_by_request("cli-token-1"));
  ::chmod(dir_.file("token").c_str(), 0600);
  auto run = test::Subprocess::spawn(args);
  ASSERT_EQ(run.wait_exit(120s), 0) << run.stderr_text();
  const auto job = queue_->job_by_request("cli-token-1");
  ASSERT_TRUE(job);
  EXPECT_EQ(job->client, "bench-rig");
  EXPECT_EQ(job->state, core::JobState::Done);
}

TEST_P(GatewayTest, ProveCommandNamesAnUnreachableGatewayAndABadInput) {
  start();
  const std::string address = "127.0.0.1:" + std::to_string(gateway_->port());
  gateway_->shutdown();
  std::ofstream(dir_.file("c1.json")) << R"({"SectorNum":5,"Phase1Out":"YWJj"})";
  auto unreachable = test::Subprocess::spawn({PF_BINARY, "prove", "--input", dir_.file("c1.json"),
                                              "--gateway", address, "--timeout", "20"});
  EXPECT_EQ(unreachable.wait_exit(60s), 1);
  EXPECT_THAT(unreachable.stderr_text(), HasSubstr("cannot reach the gateway at " + address));

  std::ofstream(dir_.file("bad.json")) << "not json";
  auto bad = test::Subprocess::spawn(
      {PF_BINARY, "prove", "--input", dir_.file("bad.json"), "--gateway", address});
  EXPECT_EQ(bad.wait_exit(60s), 1);
  EXPECT_THAT(bad.stderr_text(), HasSubstr("--input: a PoRep C2 input is the C1 output envelope"));
}

TEST(GatewayStart, RefusesAnExposedListenWithoutAllowListOrTls) {
  TempDir dir;
  auto store = store::open_store(dir.file("pf.db"));
  jobs::JobQueueConfig config;
  config.data_dir = dir.path();
  jobs::JobQueue queue(*store, config, {}, gateway_epoch_now);
  GatewayConfig exposed;
  exposed.listen = "0.0.0.0:0";
  auto refused = start_gateway(queue, exposed);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error(), HasSubstr("no credentials"));
  exposed.allow_any = true;
  auto started = start_gateway(queue, exposed);
  ASSERT_TRUE(started) << started.error();
  EXPECT_GT((*started)->port(), 0);
  (*started)->shutdown();
  queue.shutdown();
}

TEST(GatewayStart, BadTlsFilesAreAClearStartupError) {
  TempDir dir;
  auto store = store::open_store(dir.file("pf.db"));
  jobs::JobQueueConfig config;
  config.data_dir = dir.path();
  jobs::JobQueue queue(*store, config, {}, gateway_epoch_now);
  std::ofstream(dir.file("cert.pem")) << "not a certificate\n";
  std::ofstream(dir.file("key.pem")) << "not a key\n";
  GatewayConfig tls;
  tls.listen = "127.0.0.1:0";
  tls.tls_cert = dir.file("cert.pem");
  tls.tls_key = dir.file("key.pem");
  auto refused = start_gateway(queue, tls);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error(), HasSubstr("cert.pem"));
  EXPECT_THAT(refused.error(), HasSubstr("not a PEM certificate"));
  tls.tls_cert = dir.file("missing.pem");
  refused = start_gateway(queue, tls);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error(), HasSubstr("missing.pem"));
  tls.tls_key = "";
  EXPECT_THAT(start_gateway(queue, tls).error(), HasSubstr("both or neither"));
  queue.shutdown();
}

TEST(GatewayStart, TakenPortIsAClearStartupError) {
  TempDir dir;
  auto store = store::open_store(dir.file("pf.db"));
  jobs::JobQueueConfig config;
  config.data_dir = dir.path();
  jobs::JobQueue queue(*store, config, {}, gateway_epoch_now);
  GatewayConfig first;
  first.listen = "127.0.0.1:0";
  auto one = start_gateway(queue, first);
  ASSERT_TRUE(one) << one.error();
  GatewayConfig second = first;
  second.listen = "127.0.0.1:" + std::to_string((*one)->port());
  auto two = start_gateway(queue, second);
  ASSERT_FALSE(two);
  EXPECT_THAT(two.error(), HasSubstr("cannot listen on 127.0.0.1:"));
  (*one)->shutdown();
  queue.shutdown();
}

}  // namespace
}  // namespace pf::gateway
