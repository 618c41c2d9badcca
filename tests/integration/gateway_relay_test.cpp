// A replica's gateway in one process (gateway/gateway_front.h, gateway/leader_proxy.h): while it
// serves no queue it relays each call to the leader's gateway, answers UNAVAILABLE with a retry
// hint when no leader is known, never relays a call twice, and keeps its own client allow-list.
// A relayed job is its client's (gateway/relay_identity.h): request ids are per client, on both
// stores, and the relay runs over TLS too. The leader is a replica's gateway over a real
// JobQueue.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/gateway_metrics.h"
#include "gateway/gateway_server.h"
#include "gateway/leader_proxy.h"
#include "gateway/relay_identity.h"
#include "jobs/job_queue.h"
#include "store/store.h"
#include "support/eventually.h"
#include "support/other_host_forwarder.h"
#include "support/porep_request.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"
#include "support/test_certs.h"

namespace pf::gateway {
namespace {

using pf::test::eventually;

using ::testing::HasSubstr;
using namespace std::chrono_literals;

// The replicas' shared secret in these tests (serve reads it from the store).
constexpr const char* kReplicaToken =
    "5a1d0c0ffee5a1d0c0ffee5a1d0c0ffee5a1d0c0ffee5a1d0c0ffee5a1d0c0ff";

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A client the operator issued a token to (every replica reads the same tokens file).
constexpr const char* kRigToken = "0123456789abcdef0123";

GatewayConfig loopback(std::vector<std::string> allow = {}) {
  GatewayConfig c;
  c.listen = "127.0.0.1:0";
  c.allow = std::move(allow);
  c.max_pending_window = 4;
  c.max_input_bytes = 64 * 1024;
  c.client_auth.tokens = {{"rig", kRigToken}};
  c.failover_hold_s = 0;  // answer at once (the hold has its own tests)
  return c;
}

void as_rig(grpc::ClientContext& ctx) {
  ctx.AddMetadata(kClientTokenMetadata, std::string("Bearer ") + kRigToken);
}

GatewayConfig with_tls(GatewayConfig c, const pf::test::CertFiles& files, std::string ca = "") {
  c.tls_cert = files.cert;
  c.tls_key = files.key;
  c.tls_ca = std::move(ca);
  return c;
}

std::string address_of(const GatewayServer& gateway) {
  return "127.0.0.1:" + std::to_string(gateway.port());
}

using Stub = std::unique_ptr<cuzk::v1::ProvingEngine::Stub>;

Stub stub_to(const std::string& address, std::string tls_root_pem = "") {
  auto credentials = grpc::InsecureChannelCredentials();
  if (!tls_root_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = std::move(tls_root_pem);
    credentials = grpc::SslCredentials(tls);
  }
  return cuzk::v1::ProvingEngine::NewStub(grpc::CreateChannel(address, credentials));
}

grpc::Status submit_to(cuzk::v1::ProvingEngine::Stub& stub, const std::string& request_id,
                       cuzk::v1::SubmitProofResponse& reply, grpc::ClientContext& ctx,
                       int sector = 3) {
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  return stub.SubmitProof(&ctx, pf::test::porep_request(request_id, sector), &reply);
}

class GatewayRelay : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  void SetUp() override {
    store_ = db_.open();
    jobs::JobQueueConfig config;
    config.data_dir = db_.dir().path();
    config.max_input_bytes = 64 * 1024;
    queue_ = std::make_unique<jobs::JobQueue>(*store_, config, jobs::JobQueueHooks{}, epoch_now);
    start_leader(loopback());
  }
  void TearDown() override {
    if (follower_) follower_->shutdown();
    if (leader_) leader_->shutdown();
    queue_->shutdown();
  }

  // The leading replica's gateway: it answers from the queue (its term) and shares the token.
  void start_leader(GatewayConfig config) {
    if (leader_) leader_->shutdown();
    ReplicaGatewayOptions replica;
    replica.replica_id = "leader-1";
    replica.leader = []() -> tl::expected<std::string, std::string> {
      return tl::unexpected(std::string("this replica's term is starting"));
    };
    replica.replica_token = kReplicaToken;
    auto started = start_replica_gateway(config, replica);
    ASSERT_TRUE(started) << started.error();
    leader_ = std::move(*started);
    leader_->serve_queue(*queue_);
  }

  // A follower whose lease row names `leader` (or, when it says why not, nobody).
  void start_follower(GatewayConfig config = loopback(), std::string tls_root_pem = "") {
    ReplicaGatewayOptions replica;
    replica.replica_id = "follower-1";
    replica.leader = [this]() -> tl::expected<std::string, std::string> {
      std::lock_guard lock(mu_);
      return leader_address_;
    };
    replica.replica_token = kReplicaToken;
    auto started = start_replica_gateway(config, replica);
    ASSERT_TRUE(started) << started.error();
    follower_ = std::move(*started);
    stub_ = stub_to(address_of(*follower_), std::move(tls_root_pem));
  }
  void set_leader(tl::expected<std::string, std::string> address) {
    std::lock_guard lock(mu_);
    leader_address_ = std::move(address);
  }

  grpc::Status submit(const std::string& request_id, cuzk::v1::SubmitProofResponse& reply,
                      grpc::ClientContext& ctx) {
    return submit_to(*stub_, request_id, reply, ctx);
  }
  std::vector<core::Job> all_jobs() { return queue_->list({}, 100); }

  pf::testing::TestDatabase db_{GetParam()};
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<jobs::JobQueue> queue_;
  std::unique_ptr<GatewayServer> leader_, follower_;
  Stub stub_;
  std::mutex mu_;
  tl::expected<std::string, std::string> leader_address_ = tl::unexpected(std::string("unset"));
};

INSTANTIATE_TEST_SUITE_P(Db, GatewayRelay, pf::testing::kStoreBackends, pf::testing::backend_name);

TEST_P(GatewayRelay, AFollowerRelaysToTheLeadersQueueAndARetriedRequestIdIsOneJob) {
  set_leader(address_of(*leader_));
  start_follower();
  for (int i = 0; i < 2; ++i) {  // the second is Curio's retry: the same job
    grpc::ClientContext ctx;
    cuzk::v1::SubmitProofResponse reply;
    const grpc::Status status = submit("relay-1", reply, ctx);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(reply.job_id(), "relay-1");
  }
  EXPECT_EQ(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).size(), 1u);
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

TEST_P(GatewayRelay, NoLeaderKnownIsUnavailableWithARetryHint) {
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
  EXPECT_TRUE(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).empty());
}

// A failover takes seconds and Curio fails a task on any error (SnapDeals has 3 tries, no wait):
// a replica holds a call while no leader is known and answers it once one is.
TEST_P(GatewayRelay, ACallIsHeldThroughAFailoverAndAnsweredByTheNewLeader) {
  set_leader(tl::unexpected(std::string("no replica leads at the moment")));
  auto config = loopback();
  config.failover_hold_s = 60;
  start_follower(config);
  std::promise<grpc::Status> done;
  auto answered = done.get_future();
  std::thread caller([&] {
    grpc::ClientContext ctx;
    cuzk::v1::SubmitProofResponse reply;
    done.set_value(submit("held-1", reply, ctx));
  });
  // Held, not answered: no leader yet.
  EXPECT_EQ(answered.wait_for(1500ms), std::future_status::timeout);
  set_leader(address_of(*leader_));  // the new leader is known
  ASSERT_EQ(answered.wait_for(30s), std::future_status::ready);
  caller.join();
  const grpc::Status status = answered.get();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(all_jobs().size(), 1u);
  EXPECT_EQ(follower_->metrics().held(), 1u);
  // This replica becoming the leader itself answers a held call from its own queue.
  set_leader(tl::unexpected(std::string("no replica leads at the moment")));
  std::promise<grpc::Status> second;
  auto second_answer = second.get_future();
  std::thread again([&] {
    grpc::ClientContext ctx;
    cuzk::v1::SubmitProofResponse reply;
    second.set_value(submit("held-2", reply, ctx));
  });
  EXPECT_EQ(second_answer.wait_for(1000ms), std::future_status::timeout);
  follower_->serve_queue(*queue_);
  ASSERT_EQ(second_answer.wait_for(30s), std::future_status::ready);
  again.join();
  EXPECT_TRUE(second_answer.get().ok());
  EXPECT_EQ(all_jobs().size(), 2u);
}

TEST_P(GatewayRelay, ALeaderThatDoesNotAnswerIsUnavailableNamingIt) {
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

TEST_P(GatewayRelay, ACallIsNeverRelayedTwice) {
  // Two followers that each take the other for the leader answer UNAVAILABLE, not loop.
  ReplicaGatewayOptions other;
  other.replica_id = "follower-2";
  other.replica_token = kReplicaToken;
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

// A process that shares its listening socket with a successor (a takeover) may relay to that
// address and be accepted by itself: the relay is recognised, not answered as someone else's,
// and the next try goes over a new connection.
TEST_P(GatewayRelay, ARelayThatReachesItsOwnReplicaIsToldApart) {
  start_follower();
  set_leader(address_of(*follower_));  // the leader's address is this replica's own socket
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  const grpc::Status status = submit("relay-self", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("relay reached itself"));
  EXPECT_EQ(follower_->relayed(), 1u);
  EXPECT_TRUE(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).empty());
  // Once the address is the leader's alone, the same follower relays there.
  set_leader(address_of(*leader_));
  grpc::ClientContext again;
  ASSERT_TRUE(submit("relay-self", reply, again).ok());
  EXPECT_EQ(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).size(), 1u);
}

TEST_P(GatewayRelay, TheFollowersAllowListRefusesBeforeRelaying) {
  set_leader(address_of(*leader_));
  start_follower(loopback({"10.0.0.0/8"}));
  grpc::ClientContext ctx;
  cuzk::v1::SubmitProofResponse reply;
  const grpc::Status status = submit("relay-5", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(follower_->relayed(), 0u);
  EXPECT_EQ(follower_->metrics().denied(), 1u);
  EXPECT_TRUE(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).empty());
}

TEST_P(GatewayRelay, AFollowerThatStartsLeadingAnswersFromItsQueueAndEndsRelayedCalls) {
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
  eventually([&] {
    return !queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).empty();
  });
  ASSERT_EQ(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).size(), 1u);
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
  EXPECT_EQ(queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).size(), 1u);
}

// A takeover or a lost lease ends a term while Curio's Prove waits on that replica's queue: the
// call is not failed (it would cost Curio a try) but waits for its job at the next leader, and
// answers what that leader answers, for the client that made it.
TEST_P(GatewayRelay, AProveWhoseTermEndsUnderItIsAnsweredByTheNextLeader) {
  auto config = loopback();
  config.failover_hold_s = 60;
  start_follower(config);  // the leader (term ending) in this test
  follower_->serve_queue(*queue_);
  set_leader(tl::unexpected(std::string("no replica leads at the moment")));
  pf::test::OtherHostForwarder to_old(follower_->port());
  const Stub rig = stub_to(to_old.address());
  auto waiting = std::async(std::launch::async, [&] {
    grpc::ClientContext ctx;
    as_rig(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + 60s);
    cuzk::v1::ProveRequest call;
    *call.mutable_submit() = pf::test::porep_request("handed-1", 3);
    cuzk::v1::ProveResponse reply;
    const grpc::Status status = rig->Prove(&ctx, call, &reply);
    return std::make_pair(status, reply);
  });
  eventually([&] {
    return !queue_->list(store::JobFilter::in_states({core::JobState::Queued}), 100).empty();
  });
  follower_->stop_serving_queue();  // its term ends: the call is held, not failed
  EXPECT_EQ(waiting.wait_for(1500ms), std::future_status::timeout);
  set_leader(address_of(*leader_));  // the next leader, over the same store
  const auto jobs = all_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].client, "rig");
  // The job ends at the new leader (cancelled there, as no agent proves in this test); the call
  // made to the old one gets that answer.
  ASSERT_TRUE(queue_->cancel(jobs[0].id));
  ASSERT_EQ(waiting.wait_for(30s), std::future_status::ready);
  const auto [status, reply] = waiting.get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(reply.result().job_id(), "handed-1");
  EXPECT_EQ(reply.result().status(), cuzk::v1::AwaitProofResponse::CANCELLED);
  EXPECT_EQ(follower_->metrics().held(), 1u);
  EXPECT_EQ(leader_->metrics().calls("AwaitProof", grpc::StatusCode::OK), 1u);
  EXPECT_EQ(all_jobs().size(), 1u);
}

// The job a follower relays is the client's: the leader records the client the follower names
// (its token's, or the default cluster), so the same request sent straight to the leader by that
// client joins it, from any address (Curio retries a task on any node), and another client's
// equal request_id is its own job.
TEST_P(GatewayRelay, ARelayedJobIsItsClientsAndTheLeaderJoinsItForThatClientOnly) {
  set_leader(address_of(*leader_));
  start_follower();
  pf::test::OtherHostForwarder to_follower(follower_->port());
  const Stub client_via_follower = stub_to(to_follower.address());  // from 127.0.0.2
  const Stub client_to_leader = stub_to(address_of(*leader_));      // from 127.0.0.1

  cuzk::v1::SubmitProofResponse reply;
  {
    grpc::ClientContext ctx;
    as_rig(ctx);
    ASSERT_TRUE(submit_to(*client_via_follower, "same-1", reply, ctx).ok());
  }
  ASSERT_EQ(all_jobs().size(), 1u);
  EXPECT_EQ(all_jobs()[0].client, "rig");
  EXPECT_EQ(follower_->relayed(), 1u);
  {
    grpc::ClientContext ctx;  // the same client, straight to the leader: the same job
    as_rig(ctx);
    ASSERT_TRUE(submit_to(*client_to_leader, "same-1", reply, ctx).ok());
  }
  EXPECT_EQ(leader_->metrics().joined(), 1u);
  ASSERT_EQ(all_jobs().size(), 1u);
  {
    grpc::ClientContext ctx;  // the default cluster's equal request_id: another job
    ASSERT_TRUE(submit_to(*client_via_follower, "same-1", reply, ctx, 4).ok());
  }
  {
    grpc::ClientContext ctx;  // ...which a Curio node at another address joins
    ASSERT_TRUE(submit_to(*client_to_leader, "same-1", reply, ctx, 4).ok());
  }
  const auto jobs = all_jobs();
  ASSERT_EQ(jobs.size(), 2u);
  std::set<std::string> clients;
  for (const auto& j : jobs) clients.insert(j.client);
  EXPECT_EQ(clients, (std::set<std::string>{kDefaultClient, "rig"}));
  EXPECT_NE(jobs[0].input_digest, jobs[1].input_digest);  // each its own client's input
  EXPECT_EQ(leader_->metrics().joined(), 2u);
}

// AwaitProof and CancelProof name a job by its request_id: a client reaches only its own.
TEST_P(GatewayRelay, AnotherClientCanNeitherAwaitNorCancelAClientsJob) {
  set_leader(address_of(*leader_));
  start_follower();
  pf::test::OtherHostForwarder to_follower(follower_->port());
  const Stub owner = stub_to(to_follower.address());
  cuzk::v1::SubmitProofResponse reply;
  {
    grpc::ClientContext ctx;
    as_rig(ctx);
    ASSERT_TRUE(submit_to(*owner, "mine-1", reply, ctx).ok());
  }
  {
    grpc::ClientContext ctx;  // another client (the default cluster), through the same follower
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::CancelProofRequest cancel;
    cancel.set_job_id("mine-1");
    cuzk::v1::CancelProofResponse cancelled;
    ASSERT_TRUE(stub_->CancelProof(&ctx, cancel, &cancelled).ok());
    EXPECT_FALSE(cancelled.was_running());
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::AwaitProofRequest await;
    await.set_job_id("mine-1");
    await.set_timeout_ms(100);
    cuzk::v1::AwaitProofResponse awaited;
    EXPECT_EQ(stub_->AwaitProof(&ctx, await, &awaited).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  ASSERT_EQ(all_jobs().size(), 1u);
  EXPECT_EQ(all_jobs()[0].state, core::JobState::Queued);
  {
    grpc::ClientContext ctx;  // its owner may
    as_rig(ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::CancelProofRequest cancel;
    cancel.set_job_id("mine-1");
    cuzk::v1::CancelProofResponse cancelled;
    ASSERT_TRUE(owner->CancelProof(&ctx, cancel, &cancelled).ok());
  }
  EXPECT_EQ(all_jobs()[0].state, core::JobState::Cancelled);
}

// The follower checked its own allow-list: the leader's need not list the replicas.
TEST_P(GatewayRelay, TheLeaderTakesAReplicasRelayWithoutListingIt) {
  start_leader(loopback({"10.0.0.0/8"}));
  set_leader(address_of(*leader_));
  start_follower();
  cuzk::v1::SubmitProofResponse reply;
  grpc::ClientContext relayed;
  const grpc::Status status = submit("relay-allow", reply, relayed);
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::ClientContext direct;
  EXPECT_EQ(submit_to(*stub_to(address_of(*leader_)), "direct", reply, direct).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_EQ(all_jobs().size(), 1u);
  EXPECT_EQ(all_jobs()[0].request_id, "relay-allow");
}

// Only a replica may name a client: a caller that names one without the replicas' token, or
// with a wrong one, is refused and nothing is recorded; a lone gateway takes no relays at all.
TEST_P(GatewayRelay, ACallerThatNamesAClientWithoutTheReplicasTokenIsRefused) {
  const Stub direct = stub_to(address_of(*leader_));
  const auto try_as = [&](std::optional<std::string> token) {
    grpc::ClientContext ctx;
    ctx.AddMetadata(kRelayedClientMetadata, "10.9.9.9");
    if (token) ctx.AddMetadata(kReplicaTokenMetadata, *token);
    cuzk::v1::SubmitProofResponse reply;
    return submit_to(*direct, "impostor", reply, ctx);
  };
  grpc::Status status = try_as(std::nullopt);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("without a replica's token"));
  status = try_as(std::string(std::string(kReplicaToken).size(), '0'));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("does not match"));
  EXPECT_EQ(leader_->metrics().denied(), 2u);
  EXPECT_TRUE(all_jobs().empty());

  auto lone = start_gateway(*queue_, loopback());
  ASSERT_TRUE(lone) << lone.error();
  grpc::ClientContext ctx;
  ctx.AddMetadata(kRelayedClientMetadata, "10.9.9.9");
  ctx.AddMetadata(kReplicaTokenMetadata, kReplicaToken);
  cuzk::v1::SubmitProofResponse reply;
  status = submit_to(*stub_to(address_of(**lone)), "impostor", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("without replicas"));
  (*lone)->shutdown();
  EXPECT_TRUE(all_jobs().empty());
}

// --- the relay over TLS -------------------------------------------------------------------------

// Replicas sharing one certificate: the follower trusts it for the leader's gateway.
TEST_P(GatewayRelay, TheRelayRunsOverTlsWithTheReplicasSharedCertificate) {
  const pf::test::TestCert shared("proverfleet replicas", nullptr, false);
  const auto files = shared.write(db_.dir().path(), "shared");
  start_leader(with_tls(loopback(), files));
  set_leader(address_of(*leader_));
  start_follower(with_tls(loopback(), files), shared.pem_cert());
  pf::test::OtherHostForwarder to_follower(follower_->port());
  const Stub client = stub_to(to_follower.address(), shared.pem_cert());
  cuzk::v1::SubmitProofResponse reply;
  grpc::ClientContext ctx;
  as_rig(ctx);
  const grpc::Status status = submit_to(*client, "tls-1", reply, ctx);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(all_jobs().size(), 1u);
  EXPECT_EQ(all_jobs()[0].client, "rig");  // the tokens travelled inside TLS
  EXPECT_EQ(follower_->relayed(), 1u);
}

// Replicas with their own certificates from one CA: tls_ca is what a follower trusts.
TEST_P(GatewayRelay, ReplicasWithTheirOwnCertificatesTrustTheirCa) {
  const pf::test::TestCert ca("fleet CA", nullptr, true);
  const pf::test::TestCert leader_cert("leader", &ca, false);
  const pf::test::TestCert follower_cert("follower", &ca, false);
  const std::string dir = db_.dir().path();
  const auto ca_files = ca.write(dir, "ca");
  start_leader(with_tls(loopback(), leader_cert.write(dir, "leader"), ca_files.cert));
  set_leader(address_of(*leader_));
  start_follower(with_tls(loopback(), follower_cert.write(dir, "follower"), ca_files.cert),
                 ca.pem_cert());
  cuzk::v1::SubmitProofResponse reply;
  grpc::ClientContext ctx;
  const grpc::Status status = submit("tls-ca", reply, ctx);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(all_jobs().size(), 1u);
}

// A leader whose certificate the follower cannot verify: the client hears which check failed,
// against what, and that it may retry; nothing is recorded.
TEST_P(GatewayRelay, ALeaderCertificateThatDoesNotVerifyIsAClearFailure) {
  const pf::test::TestCert leader_cert("someone else", nullptr, false);
  const pf::test::TestCert follower_cert("follower", nullptr, false);
  const std::string dir = db_.dir().path();
  start_leader(with_tls(loopback(), leader_cert.write(dir, "leader")));
  set_leader(address_of(*leader_));
  const auto follower_files = follower_cert.write(dir, "follower");
  start_follower(with_tls(loopback(), follower_files), follower_cert.pem_cert());
  cuzk::v1::SubmitProofResponse reply;
  grpc::ClientContext ctx;
  const grpc::Status status = submit("tls-bad", reply, ctx);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("the leader's gateway at " + address_of(*leader_) +
                                                " failed the TLS check"));
  EXPECT_THAT(status.error_message(), HasSubstr(follower_files.cert));
  EXPECT_THAT(status.error_message(), HasSubstr("tls_ca"));
  EXPECT_TRUE(all_jobs().empty());
}

// tls_ca is checked at start like the other TLS files.
TEST(GatewayTlsCa, IsCheckedAtStart) {
  pf::testing::TempDir dir;
  const pf::test::TestCert cert("replica", nullptr, false);
  const auto files = cert.write(dir.path(), "replica");
  GatewayConfig config = with_tls(loopback(), files, dir.file("missing-ca.pem"));
  EXPECT_THAT(check_gateway_config(config).error(), HasSubstr("missing-ca.pem"));
  std::ofstream(dir.file("junk.pem")) << "not a certificate\n";
  config.tls_ca = dir.file("junk.pem");
  EXPECT_THAT(check_gateway_config(config).error(), HasSubstr("not a PEM certificate"));
  config = loopback();
  config.tls_ca = files.cert;
  EXPECT_THAT(check_gateway_config(config).error(), HasSubstr("needs tls_cert"));
  EXPECT_TRUE(check_gateway_config(with_tls(loopback(), files, files.cert)));
}

}  // namespace
}  // namespace pf::gateway
