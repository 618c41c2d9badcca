// A replica's gateway in one process (gateway/gateway_front.h, gateway/leader_proxy.h): while it
// serves no queue it relays each call to the leader's gateway, answers UNAVAILABLE with a retry
// hint when no leader is known, never relays a call twice, and keeps its own client allow-list.
// The leader here is a lone gateway over a real JobQueue (SQLite store in a temp dir).
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/gateway_metrics.h"
#include "gateway/gateway_server.h"
#include "gateway/leader_proxy.h"
#include "jobs/job_queue.h"
#include "store/store.h"
#include "support/porep_request.h"
#include "support/temp_dir.h"

namespace pf::gateway {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

GatewayConfig loopback(std::vector<std::string> allow = {}) {
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.allow = std::move(allow);
  c.max_pending_window = 4;
  c.max_input_bytes = 64 * 1024;
  return c;
}

std::string address_of(const GatewayServer& gateway) {
  return "127.0.0.1:" + std::to_string(gateway.port());
}

class GatewayRelay : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(dir_.file("pf.db"));
    jobs::JobQueueConfig config;
    config.data_dir = dir_.path();
    config.max_input_bytes = 64 * 1024;
    queue_ = std::make_unique<jobs::JobQueue>(*store_, config, jobs::JobQueueHooks{}, epoch_now);
    auto leader = start_gateway(*queue_, loopback());
    ASSERT_TRUE(leader) << leader.error();
    leader_ = std::move(*leader);
  }
  void TearDown() override {
    if (follower_) follower_->shutdown();
    leader_->shutdown();
    queue_->shutdown();
  }

  // A follower whose lease row names `leader` (or, when it says why not, nobody).
  void start_follower(GatewayConfig config = loopback()) {
    ReplicaGatewayOptions replica;
    replica.replica_id = "follower-1";
    replica.leader = [this]() -> tl::expected<std::string, std::string> {
      std::lock_guard lock(mu_);
      return leader_address_;
    };
    auto started = start_replica_gateway(config, replica);
    ASSERT_TRUE(started) << started.error();
    follower_ = std::move(*started);
    stub_ = cuzk::v1::ProvingEngine::NewStub(
        grpc::CreateChannel(address_of(*follower_), grpc::InsecureChannelCredentials()));
  }
  void set_leader(tl::expected<std::string, std::string> address) {
    std::lock_guard lock(mu_);
    leader_address_ = std::move(address);
  }

  grpc::Status submit(const std::string& request_id, cuzk::v1::SubmitProofResponse& reply,
                      grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    return stub_->SubmitProof(&ctx, pf::test::porep_request(request_id, 3), &reply);
  }

  pf::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<jobs::JobQueue> queue_;
  std::unique_ptr<GatewayServer> leader_, follower_;
  std::unique_ptr<cuzk::v1::ProvingEngine::Stub> stub_;
  std::mutex mu_;
  tl::expected<std::string, std::string> leader_address_ = tl::unexpected(std::string("unset"));
};

TEST_F(GatewayRelay, AFollowerRelaysToTheLeadersQueueAndARetriedRequestIdIsOneJob) {
  set_leader(address_of(*leader_));
  start_follower();
  for (int i = 0; i < 2; ++i) {  // the second is Curio's retry: the same job
    grpc::ClientContext ctx;
    cuzk::v1::SubmitProofResponse reply;
    const grpc::Status status = submit("relay-1", reply, ctx);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.job_id(), "relay-1");
  }
  EXPECT_EQ(queue_->list({core::JobState::Queued}, 100).size(), 1u);
  EXPECT_EQ(follower_->relayed(), 2u);
  EXPECT_EQ(leader_->metrics().joined(), 1u);
  // Counted on both sides: the follower's front and the leader's.
  EXPECT_EQ(follower_->metrics().calls("SubmitProof", grpc::StatusCode::OK), 2u);
  EXPECT_EQ(leader_->metrics().calls("SubmitProof", grpc::StatusCode::OK), 2u);

  // GetStatus through the follower is the leader's queue.
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  cuzk::v1::GetStatusResponse status_reply;
  ASSERT_TRUE(stub_->GetStatus(&ctx, {}, &status_reply).ok());
  std::uint64_t pending = 0;
  for (const auto& q : status_reply.queues()) pending += q.pending();
  EXPECT_EQ(pending, 1u);
}

TEST_F(GatewayRelay, NoLeaderKnownIsUnavailableWithARetryHint) {
  set_leader(tl::unexpected(std::string("no replica leads at the moment")));
  start_follower();
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  const grpc::Status status = submit("relay-2", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("no replica leads at the moment: retry"));
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto hint = trailers.find(kRetryAfterMetadata);
  ASSERT_NE(hint, trailers.end());
  EXPECT_EQ(std::string(hint->second.data(), hint->second.size()), "2000");
  EXPECT_TRUE(queue_->list({core::JobState::Queued}, 100).empty());
}

TEST_F(GatewayRelay, ALeaderThatDoesNotAnswerIsUnavailableNamingIt) {
  const std::string gone = address_of(*leader_);
  leader_->shutdown();
  set_leader(gone);
  start_follower();
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  const grpc::Status status = submit("relay-3", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("the leader's gateway at " + gone));
}

TEST_F(GatewayRelay, ACallIsNeverRelayedTwice) {
  // Two followers that each take the other for the leader answer UNAVAILABLE, not loop.
  ReplicaGatewayOptions other;
  other.replica_id = "follower-2";
  other.leader = [this]() -> tl::expected<std::string, std::string> {
    return address_of(*follower_);
  };
  auto second = start_replica_gateway(loopback(), other);
  ASSERT_TRUE(second) << second.error();
  set_leader(address_of(**second));
  start_follower();
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  const grpc::Status status = submit("relay-4", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("relayed here already by follower-1"));
  EXPECT_EQ((*second)->relayed(), 0u);
  (*second)->shutdown();
}

TEST_F(GatewayRelay, TheFollowersAllowListRefusesBeforeRelaying) {
  set_leader(address_of(*leader_));
  start_follower(loopback({"10.0.0.0/8"}));
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  const grpc::Status status = submit("relay-5", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(follower_->relayed(), 0u);
  EXPECT_EQ(follower_->metrics().denied(), 1u);
  EXPECT_TRUE(queue_->list({core::JobState::Queued}, 100).empty());
}

TEST_F(GatewayRelay, AFollowerThatStartsLeadingAnswersFromItsQueueAndEndsRelayedCalls) {
  // The "leader" here never finishes the job (no agent), so a relayed Prove waits there until
  // the follower's own term begins.
  set_leader(address_of(*leader_));
  start_follower();
  auto waiting = std::async(std::launch::async, [this] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    cuzk::v1::ProveRequest call;
    *call.mutable_submit() = pf::test::porep_request("relay-6", 3);
    cuzk::v1::ProveResponse reply;
    return stub_->Prove(&ctx, call, &reply);
  });
  const auto by = std::chrono::steady_clock::now() + 30s;
  while (queue_->list({core::JobState::Queued}, 100).empty() &&
         std::chrono::steady_clock::now() < by) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(queue_->list({core::JobState::Queued}, 100).size(), 1u);
  follower_->serve_queue(*queue_);  // its term: the same store, so the same job
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready);
  const grpc::Status ended = waiting.get();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(ended.error_message(), HasSubstr("this replica leads now"));
  // The retry is answered here, from the queue, joining the job.
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  ASSERT_TRUE(submit("relay-6", reply, ctx).ok());
  EXPECT_EQ(follower_->relayed(), 1u);
  EXPECT_EQ(queue_->list({core::JobState::Queued}, 100).size(), 1u);
}

}  // namespace
}  // namespace pf::gateway
