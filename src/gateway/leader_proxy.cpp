#include "gateway/leader_proxy.h"

#include <grpc/grpc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <utility>

#include "gateway/relay_identity.h"

namespace pf::gateway {
namespace {

using Stub = cuzk::v1::ProvingEngine::Stub;

// The leader's gateway lets keepalive pings through every 10 s (gateway_server.cpp); one every
// 20 s, answered within 10 s, tells a relayed Prove that the leader's host is gone well before
// Curio's own deadline.
constexpr int kKeepaliveMs = 20'000;
constexpr int kKeepaliveTimeoutMs = 10'000;

grpc::Status unavailable(grpc::ServerContext* ctx, const std::string& message) {
  ctx->AddTrailingMetadata(kRetryAfterMetadata, std::to_string(kRetryAfterMs));
  return {grpc::StatusCode::UNAVAILABLE, message};
}

// gRPC reports a handshake the client refused as UNAVAILABLE, like a dead host; its message
// names the TLS failure.
bool tls_refused(const std::string& message) {
  for (const char* sign : {"handshake", "Handshake", "CERTIFICATE_VERIFY_FAILED", "SSL_ERROR",
                           "certificate", "Peer name"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

LeaderProxy::LeaderProxy(LeaderProxyOptions options) : options_(std::move(options)) {}

LeaderProxy::~LeaderProxy() = default;

std::shared_ptr<Stub> LeaderProxy::stub_for(const std::string& address) {
  std::lock_guard lock(mu_);
  if (stub_ && address_ == address) return stub_;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options_.max_message_bytes);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // a Prove may wait 30 minutes
  // Its own connection, not one from gRPC's process-wide pool: reconnect() must really
  // reconnect.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options_.tls_root_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = options_.tls_root_pem;
    credentials = grpc::SslCredentials(tls);
  }
  address_ = address;
  stub_ = cuzk::v1::ProvingEngine::NewStub(grpc::CreateCustomChannel(address, credentials, args));
  return stub_;
}

void LeaderProxy::reconnect() {
  std::lock_guard lock(mu_);
  stub_.reset();  // calls in flight keep the old channel until they end
  address_.clear();
}

template <typename Request, typename Reply, typename Call>
grpc::Status LeaderProxy::relay(grpc::ServerContext* ctx, const std::string& client,
                                const Request& request, Reply* reply, Call call) {
  const auto& metadata = ctx->client_metadata();
  if (const auto by = metadata.find(kRelayedByMetadata); by != metadata.end()) {
    const std::string_view relayed_by(by->second.data(), by->second.size());
    if (relayed_by == options_.replica_id) {
      // Our own relay came back here: this process shares its listening socket with a successor
      // (a takeover) and a relay connection it opened was accepted by itself. The next try goes
      // over a new connection, which only the successor accepts once this process stops.
      reconnect();
      return unavailable(ctx,
                         "this replica's relay reached itself (its socket is shared with a "
                         "successor taking over): retry");
    }
    return unavailable(
        ctx, "this replica (" + options_.replica_id +
                 ") does not lead, and the call was relayed here already by " +
                 std::string(by->second.data(), std::min<std::size_t>(by->second.size(), 128)) +
                 ": retry");
  }
  const auto leader = options_.leader();
  if (!leader) return unavailable(ctx, leader.error() + ": retry");
  const auto stub = stub_for(*leader);
  // Carries the client's deadline and cancellation to the leader's call.
  const std::unique_ptr<grpc::ClientContext> upstream =
      grpc::ClientContext::FromServerContext(*ctx);
  upstream->AddMetadata(kRelayedByMetadata, options_.replica_id);
  if (!options_.replica_token.empty()) {
    upstream->AddMetadata(kReplicaTokenMetadata, options_.replica_token);
    upstream->AddMetadata(kRelayedClientMetadata, client);
  }
  {
    std::lock_guard lock(mu_);
    in_flight_[upstream.get()] = "";
    ++relayed_;
  }
  const grpc::Status status = call(*stub, upstream.get(), request, reply);
  std::string cancelled;
  {
    std::lock_guard lock(mu_);
    cancelled = std::move(in_flight_[upstream.get()]);
    in_flight_.erase(upstream.get());
  }
  if (!cancelled.empty()) {
    return unavailable(ctx, "the call to the former leader at " + *leader +
                                " was cancelled: " + cancelled + "; retry");
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    if (!options_.tls_root_pem.empty() && tls_refused(status.error_message())) {
      const std::string why = "the leader's gateway at " + *leader +
                              " failed the TLS check: its certificate does not verify against " +
                              options_.tls_root_source + " for that address (" +
                              status.error_message() + ")";
      bool first = false;
      {
        std::lock_guard lock(mu_);
        first = std::exchange(tls_failure_logged_for_, *leader) != *leader;
      }
      if (first) spdlog::error("gateway: relaying to the leader: {}", why);
      return unavailable(ctx, why + ": retry");
    }
    return unavailable(ctx, "the leader's gateway at " + *leader + " is unavailable (" +
                                status.error_message() + "): retry");
  }
  return status;
}

void LeaderProxy::cancel_relayed(const std::string& why) {
  std::lock_guard lock(mu_);
  for (auto& [call, reason] : in_flight_) {
    reason = why.empty() ? std::string("the leader changed") : why;
    call->TryCancel();
  }
}

std::uint64_t LeaderProxy::relayed() const {
  std::lock_guard lock(mu_);
  return relayed_;
}

grpc::Status LeaderProxy::SubmitProof(grpc::ServerContext* ctx, const std::string& client,
                                      const cuzk::v1::SubmitProofRequest* request,
                                      cuzk::v1::SubmitProofResponse* reply) {
  return relay(ctx, client, *request, reply,
               [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) {
                 return s.SubmitProof(c, r, o);
               });
}

grpc::Status LeaderProxy::AwaitProof(grpc::ServerContext* ctx, const std::string& client,
                                     const cuzk::v1::AwaitProofRequest* request,
                                     cuzk::v1::AwaitProofResponse* reply) {
  return relay(ctx, client, *request, reply,
               [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) {
                 return s.AwaitProof(c, r, o);
               });
}

grpc::Status LeaderProxy::Prove(grpc::ServerContext* ctx, const std::string& client,
                                const cuzk::v1::ProveRequest* request,
                                cuzk::v1::ProveResponse* reply) {
  return relay(
      ctx, client, *request, reply,
      [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) { return s.Prove(c, r, o); });
}

grpc::Status LeaderProxy::CancelProof(grpc::ServerContext* ctx, const std::string& client,
                                      const cuzk::v1::CancelProofRequest* request,
                                      cuzk::v1::CancelProofResponse* reply) {
  return relay(ctx, client, *request, reply,
               [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) {
                 return s.CancelProof(c, r, o);
               });
}

grpc::Status LeaderProxy::GetStatus(grpc::ServerContext* ctx, const std::string& client,
                                    const cuzk::v1::GetStatusRequest* request,
                                    cuzk::v1::GetStatusResponse* reply) {
  return relay(
      ctx, client, *request, reply,
      [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) { return s.GetStatus(c, r, o); });
}

grpc::Status LeaderProxy::GetMetrics(grpc::ServerContext* ctx, const std::string& client,
                                     const cuzk::v1::GetMetricsRequest* request,
                                     cuzk::v1::GetMetricsResponse* reply) {
  return relay(ctx, client, *request, reply,
               [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) {
                 return s.GetMetrics(c, r, o);
               });
}

grpc::Status LeaderProxy::PreloadSRS(grpc::ServerContext* ctx, const std::string& client,
                                     const cuzk::v1::PreloadSrsRequest* request,
                                     cuzk::v1::PreloadSrsResponse* reply) {
  return relay(ctx, client, *request, reply,
               [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) {
                 return s.PreloadSRS(c, r, o);
               });
}

grpc::Status LeaderProxy::EvictSRS(grpc::ServerContext* ctx, const std::string& client,
                                   const cuzk::v1::EvictSrsRequest* request,
                                   cuzk::v1::EvictSrsResponse* reply) {
  return relay(
      ctx, client, *request, reply,
      [](Stub& s, grpc::ClientContext* c, const auto& r, auto* o) { return s.EvictSRS(c, r, o); });
}

}  // namespace pf::gateway
