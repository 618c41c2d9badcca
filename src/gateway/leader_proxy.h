// A follower replica's gRPC answers (issue 14: every replica serves the gRPC API, so Curio may
// point at any of them): each cuzk.v1.ProvingEngine call is relayed to the leader's gateway (its
// address from the lease row) with the generated stub, the client's deadline and cancellation
// carried over, and the leader's reply or status returned unchanged. The leader keeps the one job
// queue; a Prove relayed here is the same job as one sent to the leader, and its request_id (the
// idempotency key) is resolved there.
//
//  - No live leader (a failover in progress, or this replica's own term is only starting):
//    UNAVAILABLE with a retry hint (trailing metadata `retry-after-ms`), as Curio retries.
//  - The leader is unavailable (it died, or answered UNAVAILABLE): UNAVAILABLE naming it;
//    Curio's retry with the same request_id joins the job the next leader reloads from the
//    store.
//  - A call another replica relayed already (metadata kRelayedByMetadata) is never relayed again:
//    two replicas that each think the other leads answer UNAVAILABLE rather than loop.
//  - When this replica starts leading, calls still relayed to the former leader are cancelled
//    (UNAVAILABLE: retry), so a client whose leader was paused, not dead, comes back here.
//
// The client allow-list is checked by the gateway's front (gateway_front.h) before a call gets
// here. The relayed call names the client it is for and carries the replicas' token
// (relay_identity.h), so the leader records the job as that client's (request ids are per
// client: the same request sent to the leader directly is the same job) and does not hold the
// follower to its own allow-list.
//
// TLS: when the gateway serves TLS, the follower verifies the leader's certificate against
// [gateway] tls_ca (default: the replica's own certificate, for replicas that share one) and
// the address the lease row advertises; a certificate that does not verify ends the call
// UNAVAILABLE naming the leader, the CA file and the TLS failure.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tl/expected.hpp>

#include "cuzk/v1/proving.grpc.pb.h"

namespace pf::gateway {

// The metadata a relayed call carries: the relaying replica's id.
inline constexpr const char* kRelayedByMetadata = "x-proverfleet-relayed-by";
// The trailing metadata of an UNAVAILABLE "no leader" answer: when to try again.
inline constexpr const char* kRetryAfterMetadata = "retry-after-ms";
inline constexpr int kRetryAfterMs = 2000;

struct LeaderProxyOptions {
  std::string replica_id;  // this replica, named to the leader in kRelayedByMetadata
  // The leader's gateway address (HOST:PORT) now, or why there is none ("no replica leads …").
  std::function<tl::expected<std::string, std::string>()> leader;
  // The replicas' shared secret, sent with each relayed call so the leader believes the client
  // it names (relay_identity.h). Empty: the leader records the follower as the client.
  std::string replica_token;
  // PEM certificates to trust when the gateway serves TLS; empty: plaintext. `tls_root_source`
  // names where they came from, for errors.
  std::string tls_root_pem;
  std::string tls_root_source;
  int max_message_bytes = 4 << 20;  // the largest reply accepted from the leader
};

class LeaderProxy final {
 public:
  explicit LeaderProxy(LeaderProxyOptions options);
  ~LeaderProxy();

  grpc::Status SubmitProof(grpc::ServerContext* ctx, const std::string& client,
                           const cuzk::v1::SubmitProofRequest* request,
                           cuzk::v1::SubmitProofResponse* reply);
  grpc::Status AwaitProof(grpc::ServerContext* ctx, const std::string& client,
                          const cuzk::v1::AwaitProofRequest* request,
                          cuzk::v1::AwaitProofResponse* reply);
  grpc::Status Prove(grpc::ServerContext* ctx, const std::string& client,
                     const cuzk::v1::ProveRequest* request, cuzk::v1::ProveResponse* reply);
  grpc::Status CancelProof(grpc::ServerContext* ctx, const std::string& client,
                           const cuzk::v1::CancelProofRequest* request,
                           cuzk::v1::CancelProofResponse* reply);
  grpc::Status GetStatus(grpc::ServerContext* ctx, const std::string& client,
                         const cuzk::v1::GetStatusRequest* request,
                         cuzk::v1::GetStatusResponse* reply);
  grpc::Status GetMetrics(grpc::ServerContext* ctx, const std::string& client,
                          const cuzk::v1::GetMetricsRequest* request,
                          cuzk::v1::GetMetricsResponse* reply);
  grpc::Status PreloadSRS(grpc::ServerContext* ctx, const std::string& client,
                          const cuzk::v1::PreloadSrsRequest* request,
                          cuzk::v1::PreloadSrsResponse* reply);
  grpc::Status EvictSRS(grpc::ServerContext* ctx, const std::string& client,
                        const cuzk::v1::EvictSrsRequest* request,
                        cuzk::v1::EvictSrsResponse* reply);

  // Cancels every call being relayed now; they answer UNAVAILABLE (retry). For a new term here.
  void cancel_relayed(const std::string& why);
  // Relays from now on go over a new connection. A process that handed its listening socket to
  // a successor shares the leader's address with it, so a connection this process opened while
  // it still accepted there may lead back to itself; once it stops accepting, only the
  // successor answers a new one.
  void reconnect();
  // Calls relayed so far (tests, logs).
  std::uint64_t relayed() const;

 private:
  template <typename Request, typename Reply, typename Call>
  grpc::Status relay(grpc::ServerContext* ctx, const std::string& client, const Request& request,
                     Reply* reply, Call call);
  // The stub for `address`, made once per address (a new leader: a new channel).
  std::shared_ptr<cuzk::v1::ProvingEngine::Stub> stub_for(const std::string& address);

  const LeaderProxyOptions options_;
  mutable std::mutex mu_;  // guards everything below
  std::string address_;
  std::shared_ptr<cuzk::v1::ProvingEngine::Stub> stub_;
  // Calls in flight to the leader, each with why cancel_relayed() cancelled it (empty: it did
  // not).
  std::map<grpc::ClientContext*, std::string> in_flight_;
  std::uint64_t relayed_ = 0;
  std::string tls_failure_logged_for_;  // the leader whose TLS failure was logged last (once)
};

}  // namespace pf::gateway
