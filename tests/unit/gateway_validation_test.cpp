// The gateway's request checks, reply mapping, allow-list and listen policy: no network, no
// queue.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "gateway/client_allow.h"
#include "gateway/client_tokens.h"
#include "gateway/gateway_metrics.h"
#include "gateway/listen_exposure.h"
#include "gateway/local_cuzk.h"
#include "gateway/relay_identity.h"
#include "gateway/reply_mapping.h"
#include "gateway/request_check.h"

namespace pf::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr std::int64_t kLimit = 1 << 20;

cuzk::v1::SubmitProofRequest porep() {
  cuzk::v1::SubmitProofRequest r;
  r.set_request_id("porep-1000-7");
  r.set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  r.set_sector_size(32ULL << 30);
  r.set_registered_proof(8);
  r.set_vanilla_proof(R"({"SectorNum":7,"Phase1Out":"eyJ9","SectorSize":34359738368})");
  r.set_sector_number(7);
  r.set_miner_id(1000);
  return r;
}

cuzk::v1::SubmitProofRequest snap() {
  cuzk::v1::SubmitProofRequest r;
  r.set_request_id("snap-1000-7");
  r.set_proof_kind(cuzk::v1::SNAP_DEALS_UPDATE);
  for (int i = 0; i < 16; ++i) r.add_vanilla_proofs("partition-proof-" + std::to_string(i));
  r.set_comm_r_old(std::string(32, 'a'));
  r.set_comm_r_new(std::string(32, 'b'));
  r.set_comm_d_new(std::string(32, 'c'));
  return r;
}

cuzk::v1::SubmitProofRequest post(cuzk::v1::ProofKind kind) {
  cuzk::v1::SubmitProofRequest r;
  r.set_request_id("wdpost-1000-0");
  r.set_proof_kind(kind);
  r.add_vanilla_proofs("sector-proof");
  r.set_randomness(std::string(32, '\x07'));
  r.set_partition_index(2);
  return r;
}

// The refusal of `r`: its code and message.
RequestError refusal(const cuzk::v1::SubmitProofRequest& r, std::int64_t limit = kLimit) {
  auto checked = check_submit(r, limit);
  EXPECT_FALSE(checked) << "accepted";
  return checked ? RequestError{} : checked.error();
}

TEST(GatewayRequestCheck, JobInputIsTheRequestWithoutItsRequestId) {
  const auto request = porep();
  auto checked = check_submit(request, kLimit);
  ASSERT_TRUE(checked) << checked.error().message;
  EXPECT_EQ(checked->kind, core::JobKind::PorepC2);
  cuzk::v1::SubmitProofRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(checked->input));
  EXPECT_EQ(parsed.request_id(), "");
  auto expected = request;
  expected.clear_request_id();
  EXPECT_EQ(parsed.SerializeAsString(), expected.SerializeAsString());
  EXPECT_EQ(parsed.vanilla_proof(), request.vanilla_proof());
  EXPECT_EQ(parsed.miner_id(), 1000u);
}

TEST(GatewayRequestCheck, SameProofUnderTwoRequestIdsIsOneInput) {
  auto a = porep();
  auto b = porep();
  b.set_request_id("ps-porep-1000-7-99");
  EXPECT_EQ(check_submit(a, kLimit)->input, check_submit(b, kLimit)->input);
}

TEST(GatewayRequestCheck, EveryKindWithItsFieldsIsAccepted) {
  EXPECT_EQ(check_submit(snap(), kLimit)->kind, core::JobKind::SnapUpdate);
  EXPECT_EQ(check_submit(post(cuzk::v1::WINDOW_POST_PARTITION), kLimit)->kind,
            core::JobKind::WindowPost);
  EXPECT_EQ(check_submit(post(cuzk::v1::WINNING_POST), kLimit)->kind, core::JobKind::WinningPost);
}

TEST(GatewayRequestCheck, UnspecifiedOrUnknownKindNamesProofKind) {
  auto r = porep();
  r.set_proof_kind(cuzk::v1::PROOF_KIND_UNSPECIFIED);
  auto e = refusal(r);
  EXPECT_EQ(e.code, grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(e.message, StartsWith("proof_kind:"));
  r.set_proof_kind(static_cast<cuzk::v1::ProofKind>(9));
  EXPECT_THAT(refusal(r).message, StartsWith("proof_kind: 9"));
}

TEST(GatewayRequestCheck, RequestIdTooLongOrNotPrintableIsRefused) {
  auto r = porep();
  r.set_request_id(std::string(kMaxRequestIdBytes, 'x'));
  EXPECT_TRUE(check_submit(r, kLimit));
  r.set_request_id(std::string(kMaxRequestIdBytes + 1, 'x'));
  EXPECT_THAT(refusal(r).message, StartsWith("request_id: at most 256 bytes"));
  r.set_request_id(std::string("porep\n1000"));
  EXPECT_THAT(refusal(r).message, StartsWith("request_id: only printable"));
  r.set_request_id(std::string("por\0ep", 6));
  EXPECT_THAT(refusal(r).message, HasSubstr("byte 3"));
  EXPECT_FALSE(check_request_id("", "job_id"));
  EXPECT_THAT(check_request_id("", "job_id").error().message, StartsWith("job_id: empty"));
}

TEST(GatewayRequestCheck, EmptyRequestIdIsLeftToTheCaller) {
  auto r = porep();
  r.clear_request_id();
  EXPECT_TRUE(check_submit(r, kLimit));
}

TEST(GatewayRequestCheck, PorepNeedsTheC1Envelope) {
  auto r = porep();
  r.clear_vanilla_proof();
  EXPECT_THAT(refusal(r).message, StartsWith("vanilla_proof: PoRep C2 needs the C1 output"));
  r.set_vanilla_proof("\x00\x01 binary", 9);
  EXPECT_THAT(refusal(r).message, HasSubstr("JSON object"));
  r.set_vanilla_proof("  \n{\"SectorNum\":1}");
  EXPECT_TRUE(check_submit(r, kLimit));
}

TEST(GatewayRequestCheck, SectorSizeMustBeAFilecoinSize) {
  auto r = porep();
  r.set_sector_size(34359738369ULL);
  EXPECT_THAT(refusal(r).message, StartsWith("sector_size: 34359738369"));
  r.set_sector_size(64ULL << 30);
  EXPECT_TRUE(check_submit(r, kLimit));
  r.set_sector_size(0);  // not given: the prover reads it from the C1 output
  EXPECT_TRUE(check_submit(r, kLimit));
  r.set_sector_size(2048);
  EXPECT_TRUE(check_submit(r, kLimit));
}

TEST(GatewayRequestCheck, SnapNeedsPartitionProofsAndThreeCommitments) {
  auto r = snap();
  r.set_comm_r_old(std::string(31, 'a'));
  EXPECT_THAT(refusal(r).message, StartsWith("comm_r_old: SnapDeals needs 32 bytes, got 31"));
  r = snap();
  r.clear_comm_d_new();
  EXPECT_THAT(refusal(r).message, StartsWith("comm_d_new:"));
  r = snap();
  r.clear_vanilla_proofs();
  EXPECT_THAT(refusal(r).message, StartsWith("vanilla_proofs: SnapDeals needs one vanilla proof"));
  r = snap();
  r.set_vanilla_proofs(3, "");
  EXPECT_THAT(refusal(r).message, StartsWith("vanilla_proofs[3]: empty"));
}

TEST(GatewayRequestCheck, PostNeedsSectorProofsAndRandomness) {
  auto r = post(cuzk::v1::WINDOW_POST_PARTITION);
  r.clear_randomness();
  EXPECT_THAT(refusal(r).message, StartsWith("randomness: WindowPoSt needs 32 bytes, got 0"));
  r = post(cuzk::v1::WINNING_POST);
  r.clear_vanilla_proofs();
  EXPECT_THAT(refusal(r).message, StartsWith("vanilla_proofs: WinningPoSt"));
}

TEST(GatewayRequestCheck, UnknownPriorityIsRefused) {
  auto r = porep();
  r.set_priority(cuzk::v1::CRITICAL);
  EXPECT_EQ(check_submit(r, kLimit)->priority, 4);
  r.set_priority(static_cast<cuzk::v1::Priority>(17));
  EXPECT_THAT(refusal(r).message, StartsWith("priority: 17"));
}

TEST(GatewayRequestCheck, InputOverTheLimitIsResourceExhaustedWithItsSize) {
  auto r = porep();
  r.set_vanilla_proof("{" + std::string(5000, 'x') + "}");
  auto without_id = r;
  without_id.clear_request_id();
  const auto size = static_cast<std::int64_t>(without_id.ByteSizeLong());
  // The limit applies to the job input, which leaves the request_id out.
  auto at_limit = check_submit(r, size);
  ASSERT_TRUE(at_limit) << at_limit.error().message;
  EXPECT_EQ(static_cast<std::int64_t>(at_limit->input.size()), size);
  const auto e = refusal(r, size - 1);
  EXPECT_EQ(e.code, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(e.message, HasSubstr(std::to_string(size) + " bytes"));
  EXPECT_THAT(e.message, HasSubstr(std::to_string(size - 1) + " bytes"));
}

TEST(GatewayRequestCheck, GeneratedRequestIdsAreValidAndDistinct) {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    const auto id = generate_request_id();
    EXPECT_THAT(id, StartsWith("pf-"));
    EXPECT_EQ(id.size(), 3u + 36u);
    EXPECT_TRUE(check_request_id(id, "request_id"));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

TEST(GatewayRequestCheck, KindsMapBothWays) {
  for (auto kind : {core::JobKind::PorepC2, core::JobKind::SnapUpdate, core::JobKind::WindowPost,
                    core::JobKind::WinningPost}) {
    EXPECT_EQ(job_kind(proof_kind(kind)), kind);
  }
  EXPECT_FALSE(job_kind(cuzk::v1::PROOF_KIND_UNSPECIFIED));
}

// --- replies ---------------------------------------------------------------------------------

jobs::Finished finished(core::JobState state) {
  jobs::Finished f;
  f.job.state = state;
  f.job.request_id = "porep-1000-7";
  f.job.submitted_at = 1000.0;
  f.job.assigned_at = 1002.0;
  f.job.started_at = 1003.0;
  f.job.finished_at = 1063.5;
  f.job.gpu_ms = 37500;
  f.job.queue_ms = 12;
  f.job.prove_ms = 60000;
  return f;
}

TEST(GatewayReplies, DoneIsCompletedWithProofAndTimings) {
  auto f = finished(core::JobState::Done);
  f.proof = std::string(1920, '\x01');
  cuzk::v1::AwaitProofResponse out;
  fill_result(f, "porep-1000-7", out);
  EXPECT_EQ(out.status(), cuzk::v1::AwaitProofResponse::COMPLETED);
  EXPECT_EQ(out.job_id(), "porep-1000-7");
  EXPECT_EQ(out.proof(), f.proof);
  EXPECT_EQ(out.queue_wait_ms(), 3000u + 12u);  // fleet queue until started + agent's queue
  EXPECT_EQ(out.gpu_compute_ms(), 37500u);
  EXPECT_EQ(out.total_ms(), 63500u);
}

TEST(GatewayReplies, QueueWaitFallsBackToLeaseTimeWhenStartIsUnknown) {
  auto f = finished(core::JobState::Done);
  f.job.started_at = 0;
  cuzk::v1::AwaitProofResponse out;
  fill_result(f, "x", out);
  EXPECT_EQ(out.queue_wait_ms(), 2000u + 12u);
}

TEST(GatewayReplies, FailedAndCancelledAreReportedInTheReplyWithoutTimings) {
  auto f = finished(core::JobState::Failed);
  f.job.error = "proof self-verification failed on 3 machines";
  cuzk::v1::AwaitProofResponse failed;
  fill_result(f, "x", failed);
  EXPECT_EQ(failed.status(), cuzk::v1::AwaitProofResponse::FAILED);
  EXPECT_EQ(failed.error_message(), f.job.error);
  EXPECT_EQ(failed.total_ms(), 0u);
  EXPECT_TRUE(failed.proof().empty());
  cuzk::v1::AwaitProofResponse cancelled;
  fill_result(finished(core::JobState::Cancelled), "x", cancelled);
  EXPECT_EQ(cancelled.status(), cuzk::v1::AwaitProofResponse::CANCELLED);
}

TEST(GatewayReplies, QueueErrorsBecomeTheirGrpcCodes) {
  using Code = jobs::JobError::Code;
  EXPECT_EQ(to_status({Code::InvalidArgument, "m"}).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(to_status({Code::ResourceExhausted, "m"}).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(to_status({Code::NotFound, "m"}).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(to_status({Code::FailedPrecondition, "m"}).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  const auto unavailable = to_status({Code::Unavailable, "store locked"});
  EXPECT_EQ(unavailable.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(unavailable.error_message(), "store locked");
}

TEST(GatewayReplies, StatusListsEveryKindUnderTheDaemonsNames) {
  jobs::QueueStatus status;
  status.by_kind[core::JobKind::PorepC2] = {3, 5};
  status.by_kind[core::JobKind::SnapUpdate] = {0, 1};
  status.completed = 40;
  status.failed = 2;
  cuzk::v1::GetStatusResponse out;
  fill_status(status, 77, out);
  ASSERT_EQ(out.queues_size(), 4);
  EXPECT_EQ(out.queues(0).proof_kind(), "porep-c2");
  EXPECT_EQ(out.queues(0).pending(), 3u);
  EXPECT_EQ(out.queues(0).in_progress(), 5u);
  EXPECT_EQ(out.queues(1).proof_kind(), "snap-update");
  EXPECT_EQ(out.queues(1).in_progress(), 1u);
  EXPECT_EQ(out.queues(2).proof_kind(), "window-post");
  EXPECT_EQ(out.queues(3).proof_kind(), "winning-post");
  EXPECT_EQ(out.queues(3).pending(), 0u);
  EXPECT_EQ(out.total_proofs_completed(), 40u);
  EXPECT_EQ(out.total_proofs_failed(), 2u);
  EXPECT_EQ(out.uptime_seconds(), 77u);
  EXPECT_EQ(out.gpus_size(), 0);
}

TEST(GatewayReplies, MetricsCountCallsByMethodAndCode) {
  GatewayMetrics metrics;
  metrics.count_call("Prove", grpc::StatusCode::OK);
  metrics.count_call("Prove", grpc::StatusCode::OK);
  metrics.count_call("Prove", grpc::StatusCode::INVALID_ARGUMENT);
  metrics.count_denied();
  jobs::QueueStatus status;
  status.by_kind[core::JobKind::PorepC2] = {4, 2};
  status.completed = 9;
  const auto text = metrics.prometheus_text(status, 5);
  EXPECT_THAT(text,
              HasSubstr("proverfleet_gateway_requests_total{method=\"Prove\",code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("{method=\"Prove\",code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_gateway_denied_total 1\n"));
  EXPECT_THAT(text, HasSubstr("cuzk_proofs_completed_total 9\n"));
  EXPECT_THAT(text, HasSubstr("cuzk_queue_depth 4\n"));
  EXPECT_THAT(text, HasSubstr("cuzk_running_jobs 2\n"));
  EXPECT_EQ(metrics.calls("Prove", grpc::StatusCode::OK), 2u);
}

// --- who may call ----------------------------------------------------------------------------

std::vector<AddressBlock> allow_list(const std::vector<std::string>& entries) {
  auto list = parse_allow_list(entries);
  EXPECT_TRUE(list) << list.error();
  return list ? *list : std::vector<AddressBlock>{};
}

TEST(GatewayAllowList, PeersParseFromGrpcPeerStrings) {
  EXPECT_EQ(to_string(*peer_ip("ipv4:127.0.0.1:5432")), "127.0.0.1");
  EXPECT_EQ(to_string(*peer_ip("ipv6:[::1]:5432")), "::1");
  EXPECT_EQ(to_string(*peer_ip("ipv6:%5B2001:db8::7%5D:443")), "2001:db8::7");
  EXPECT_EQ(to_string(*peer_ip("ipv6:[::ffff:10.1.2.3]:80")), "10.1.2.3");
  EXPECT_EQ(to_string(*peer_ip("ipv6:[fe80::1%25eth0]:80")), "fe80::1");
  EXPECT_FALSE(peer_ip("unix:/run/curio/cuzk.sock"));
  EXPECT_FALSE(peer_ip("ipv4:not-an-ip:1"));
  EXPECT_FALSE(peer_ip(""));
}

TEST(GatewayAllowList, AddressesAndBlocksOfBothFamiliesMatch) {
  const auto allow = allow_list({"10.0.0.0/8", "192.168.1.7", "fd00::/8", "::1"});
  EXPECT_TRUE(allowed(allow, peer_ip("ipv4:10.200.3.4:1")));
  EXPECT_TRUE(allowed(allow, peer_ip("ipv4:192.168.1.7:1")));
  EXPECT_FALSE(allowed(allow, peer_ip("ipv4:192.168.1.8:1")));
  EXPECT_FALSE(allowed(allow, peer_ip("ipv4:11.0.0.1:1")));
  EXPECT_TRUE(allowed(allow, peer_ip("ipv6:[fd12:3456::1]:1")));
  EXPECT_FALSE(allowed(allow, peer_ip("ipv6:[fe80::1]:1")));
  EXPECT_TRUE(allowed(allow, peer_ip("ipv6:[::1]:1")));
  // An IPv4 client on a dual-stack socket is judged as IPv4.
  EXPECT_TRUE(allowed(allow, peer_ip("ipv6:[::ffff:10.9.9.9]:1")));
  EXPECT_FALSE(allowed(allow, peer_ip("unix:/tmp/s")));
}

TEST(GatewayAllowList, PrefixBoundariesAreExact) {
  const auto allow = allow_list({"172.16.0.0/12", "2001:db8:80::/41"});
  EXPECT_TRUE(allowed(allow, peer_ip("ipv4:172.31.255.255:1")));
  EXPECT_FALSE(allowed(allow, peer_ip("ipv4:172.32.0.0:1")));
  EXPECT_TRUE(allowed(allow, peer_ip("ipv6:[2001:db8:ff::1]:1")));
  EXPECT_FALSE(allowed(allow, peer_ip("ipv6:[2001:db8:7f::1]:1")));
  EXPECT_TRUE(allowed(allow_list({"0.0.0.0/0"}), peer_ip("ipv4:8.8.8.8:1")));
  EXPECT_FALSE(allowed(allow_list({"0.0.0.0/0"}), peer_ip("ipv6:[2001:db8::1]:1")));
}

TEST(GatewayAllowList, EmptyListAllowsAnyone) {
  EXPECT_TRUE(allowed({}, peer_ip("ipv4:8.8.8.8:1")));
  EXPECT_TRUE(allowed({}, std::nullopt));
}

TEST(GatewayAllowList, BadEntriesAreNamed) {
  EXPECT_THAT(parse_allow_list({"10.0.0.1", "10.0.0.300"}).error(), HasSubstr("'10.0.0.300'"));
  EXPECT_THAT(parse_address_block("10.0.0.0/33").error(), HasSubstr("0..32"));
  EXPECT_THAT(parse_address_block("::/129").error(), HasSubstr("0..128"));
  EXPECT_THAT(parse_address_block("10.0.0.0/").error(), HasSubstr("prefix length"));
  EXPECT_THAT(parse_address_block("10.0.0.0/x").error(), HasSubstr("prefix length"));
  EXPECT_FALSE(parse_address_block("curio.example.com"));
  EXPECT_FALSE(parse_address_block(""));
  EXPECT_FALSE(parse_address_block(std::string(1000, '1')));
}

TEST(GatewayListen, NonLoopbackNeedsAnAllowListTlsOrTheOperatorsWord) {
  EXPECT_FALSE(exposure_refusal("127.0.0.1", false, false, false));
  EXPECT_FALSE(exposure_refusal("127.3.0.1", false, false, false));
  EXPECT_FALSE(exposure_refusal("::1", false, false, false));
  EXPECT_FALSE(exposure_refusal("localhost", false, false, false));
  const auto refusal = exposure_refusal("0.0.0.0", false, false, false);
  ASSERT_TRUE(refusal);
  EXPECT_THAT(*refusal, HasSubstr("no credentials"));
  EXPECT_THAT(*refusal, HasSubstr("--grpc-allow-any"));
  EXPECT_TRUE(exposure_refusal("::", false, false, false));
  EXPECT_TRUE(exposure_refusal("10.0.0.5", false, false, false));
  EXPECT_FALSE(exposure_refusal("0.0.0.0", true, false, false));
  EXPECT_FALSE(exposure_refusal("0.0.0.0", false, true, false));
  EXPECT_FALSE(exposure_refusal("0.0.0.0", false, false, true));
}

TEST(GatewayListen, HostIsTakenFromListenAddresses) {
  EXPECT_EQ(listen_host("127.0.0.1:9820"), "127.0.0.1");
  EXPECT_EQ(listen_host("[::1]:9820"), "::1");
  EXPECT_EQ(listen_host("0.0.0.0:0"), "0.0.0.0");
  EXPECT_FALSE(listen_host("9820"));
  EXPECT_FALSE(listen_host(":9820"));
  EXPECT_FALSE(listen_host("host:"));
}

// --- who a call is for (relay_identity.h) -------------------------------------------------------

TEST(GatewayCaller, ADirectCallerIsItsAddress) {
  EXPECT_EQ(direct_client("ipv4:10.0.0.7:51234"), "10.0.0.7");
  EXPECT_EQ(direct_client("ipv4:10.0.0.7:1"), direct_client("ipv6:[::ffff:10.0.0.7]:2"));
  EXPECT_EQ(direct_client("ipv6:[fd00::7]:1"), "fd00::7");
  EXPECT_EQ(direct_client("unix:/run/curio.sock"), "unix:/run/curio.sock");
  EXPECT_EQ(direct_client(std::string(1000, 'x')).size(), kMaxClientIdentityBytes);
  EXPECT_EQ(direct_client("unix:a b\nc"), "unix:a?b?c");
  EXPECT_EQ(direct_client(""), "unknown");
}

TEST(GatewayCaller, OnlyAReplicaWithTheTokenNamesTheClient) {
  const std::string token(64, 'a');
  using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;
  const auto caller = [&](const Metadata& metadata, const std::string& ours) {
    return identify_caller(metadata, ours);
  };
  // No relay metadata and no client token: the operator's own cluster, whatever the address.
  auto direct = caller({}, token);
  ASSERT_TRUE(direct);
  EXPECT_EQ(direct->client, kDefaultClient);
  EXPECT_FALSE(direct->relayed);
  // A replica's relay with the token: the client it names.
  auto relayed =
      caller({{kReplicaTokenMetadata, token}, {kRelayedClientMetadata, "10.0.0.7"}}, token);
  ASSERT_TRUE(relayed);
  EXPECT_EQ(relayed->client, "10.0.0.7");
  EXPECT_TRUE(relayed->relayed);
  // Everything else is refused, naming why.
  EXPECT_THAT(caller({{kRelayedClientMetadata, "10.0.0.7"}}, token).error(),
              HasSubstr("without a replica's token"));
  EXPECT_THAT(
      caller({{kReplicaTokenMetadata, std::string(64, 'b')}, {kRelayedClientMetadata, "10.0.0.7"}},
             token)
          .error(),
      HasSubstr("does not match"));
  EXPECT_THAT(
      caller({{kReplicaTokenMetadata, token.substr(1)}, {kRelayedClientMetadata, "10.0.0.7"}},
             token)
          .error(),
      HasSubstr("does not match"));
  EXPECT_THAT(
      caller({{kReplicaTokenMetadata, token}, {kRelayedClientMetadata, "10.0.0.7"}}, "").error(),
      HasSubstr("without replicas"));
  EXPECT_THAT(
      caller({{kReplicaTokenMetadata, ""}, {kRelayedClientMetadata, "10.0.0.7"}}, "").error(),
      HasSubstr("without replicas"));
  EXPECT_THAT(caller({{kReplicaTokenMetadata, token}}, token).error(), HasSubstr("must name"));
  const std::string long_client(kMaxClientIdentityBytes + 1, 'c');
  EXPECT_THAT(caller({{kReplicaTokenMetadata, token}, {kRelayedClientMetadata, long_client}}, token)
                  .error(),
              HasSubstr("must name"));
  EXPECT_THAT(
      caller({{kReplicaTokenMetadata, token}, {kRelayedClientMetadata, "a b"}}, token).error(),
      HasSubstr("must name"));
}

// Issue 25: a client is a cluster, named by an operator-issued token; Curio sends none, so every
// Curio node is the default client and a task retried on another node joins its job.
TEST(GatewayCaller, AClientTokenNamesTheClientAndAnUnknownOneIsRefused) {
  using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;
  ClientAuth auth;
  auth.tokens = {{"bench-rig", "0123456789abcdef0123"}, {"lab", "fedcba9876543210fedc"}};
  const std::string bearer = "Bearer 0123456789abcdef0123";
  auto named = identify_caller(Metadata{{kClientTokenMetadata, bearer}}, "", auth);
  ASSERT_TRUE(named) << named.error();
  EXPECT_EQ(named->client, "bench-rig");
  const std::string lab = "Bearer fedcba9876543210fedc";
  EXPECT_EQ(identify_caller(Metadata{{kClientTokenMetadata, lab}}, "", auth)->client, "lab");
  EXPECT_EQ(identify_caller(Metadata{}, "", auth)->client, kDefaultClient);
  // A wrong token is refused, never taken as the default (and never echoed).
  const std::string wrong = "Bearer 0123456789abcdef0124";
  const auto refused = identify_caller(Metadata{{kClientTokenMetadata, wrong}}, "", auth);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error(), HasSubstr("client_tokens_file"));
  EXPECT_THAT(refused.error(), ::testing::Not(HasSubstr("0124")));
  const std::string no_scheme = "0123456789abcdef0123";
  EXPECT_FALSE(identify_caller(Metadata{{kClientTokenMetadata, no_scheme}}, "", auth));
  // Required: a call without a token is refused.
  auth.require_token = true;
  EXPECT_THAT(identify_caller(Metadata{}, "", auth).error(), HasSubstr("require_client_token"));
  EXPECT_TRUE(identify_caller(Metadata{{kClientTokenMetadata, bearer}}, "", auth));
}

TEST(GatewayClientTokens, TheFileIsParsedStrictlyNamingTheLine) {
  auto ok =
      parse_client_tokens("# comment\n\nrig-1  0123456789abcdef0123\r\nlab.b\tabcdefghijklmnop\n");
  ASSERT_TRUE(ok) << ok.error();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0].client, "rig-1");
  EXPECT_EQ((*ok)[0].token, "0123456789abcdef0123");
  EXPECT_EQ((*ok)[1].client, "lab.b");
  const auto error = [](std::string_view text) {
    auto parsed = parse_client_tokens(text);
    EXPECT_FALSE(parsed) << text;
    return parsed ? std::string() : parsed.error();
  };
  EXPECT_THAT(error("lonely\n"), HasSubstr("line 1"));
  EXPECT_THAT(error("a short\n"), HasSubstr("16 to 256"));
  EXPECT_THAT(error("# x\nbad/name 0123456789abcdef0123\n"), HasSubstr("line 2"));
  EXPECT_THAT(error("default 0123456789abcdef0123\n"), HasSubstr("calls without a token"));
  EXPECT_THAT(error("a 0123456789abcdef0123\na 0123456789abcdef9999\n"), HasSubstr("twice"));
  EXPECT_THAT(error("a 0123456789abcdef0123\nb 0123456789abcdef0123\n"), HasSubstr("its own"));
  EXPECT_THAT(error(std::string(kMaxClientTokensFileBytes + 1, '#')), HasSubstr("bytes"));
  // The token never appears in an error.
  EXPECT_THAT(error("a 0123456789abcdef0123 extra\n"), ::testing::Not(HasSubstr("0123456789")));
}

// Issue 25: PoSt never goes to a rented machine; keep_local adds kinds.
TEST(GatewayRouting, PostKindsAreAlwaysLocalAndKeepLocalAddsKinds) {
  EXPECT_TRUE(proved_locally(cuzk::v1::WINNING_POST, {}));
  EXPECT_TRUE(proved_locally(cuzk::v1::WINDOW_POST_PARTITION, {}));
  EXPECT_FALSE(proved_locally(cuzk::v1::POREP_SEAL_COMMIT, {}));
  EXPECT_FALSE(proved_locally(cuzk::v1::SNAP_DEALS_UPDATE, {}));
  EXPECT_TRUE(proved_locally(cuzk::v1::SNAP_DEALS_UPDATE, {core::JobKind::SnapUpdate}));
  EXPECT_FALSE(proved_locally(cuzk::v1::PROOF_KIND_UNSPECIFIED, {}));
  const auto refusal = no_local_cuzk(cuzk::v1::WINNING_POST);
  EXPECT_EQ(refusal.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refusal.error_message(), HasSubstr("winning-post"));
  EXPECT_THAT(refusal.error_message(), HasSubstr("local_cuzk"));
  EXPECT_TRUE(check_local_cuzk_address("127.0.0.1:9821"));
  EXPECT_TRUE(check_local_cuzk_address("[::1]:9821"));
  EXPECT_TRUE(check_local_cuzk_address("unix:///run/curio/cuzk.sock"));
  EXPECT_FALSE(check_local_cuzk_address("unix:cuzk.sock"));
  EXPECT_FALSE(check_local_cuzk_address("cuzk"));
}

// cuzk's daemon decodes at most 128 MiB a message: a larger input could reach no prover, so it is
// refused at the gateway even where [jobs] max_input_mib would take it.
TEST(GatewayRequest, AnInputOverCuzksMessageLimitIsRefusedNamingIt) {
  cuzk::v1::SubmitProofRequest request;
  request.set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  request.set_vanilla_proof("{" + std::string(static_cast<std::size_t>(kCuzkMaxInputBytes), ' ') +
                            "}");
  const auto refused = check_submit(request, 1000LL << 20);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error().message, HasSubstr("128 MiB"));
  request.set_vanilla_proof("{" + std::string(1000, ' ') + "}");
  EXPECT_TRUE(check_submit(request, 1000LL << 20));
}

}  // namespace
}  // namespace pf::gateway
