// The one cuzk.v1.ProvingEngine service a gateway's gRPC server registers: who may call (the
// client allow-list, PERMISSION_DENIED otherwise), what is counted (GatewayMetrics, by method and
// code), and who answers:
//  - the job queue of this replica's current term (ProvingService) while it leads;
//  - otherwise, on a replica's gateway, the leader, through LeaderProxy (leader_proxy.h);
//  - otherwise UNAVAILABLE (retry).
// Each call is for a client (relay_identity.h): the client its token names or the operator's
// default cluster, or, for a call a follower relayed with the replicas' token, the client that
// follower names; a relayed call is not held to this gateway's allow-list (the follower checked
// its own).
// Routing by proof kind (local_cuzk.h): PoSt kinds and [gateway] keep_local never reach the job
// queue: Prove and SubmitProof of those go to the operator's own cuzk, or are refused at once
// when none is configured. Every replica routes them itself (never through the leader).
// The port stays open across terms: a follower that becomes leader starts answering from its new
// queue at once, and one that steps down starts relaying.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/client_allow.h"
#include "gateway/gateway_metrics.h"
#include "gateway/leader_proxy.h"
#include "gateway/local_cuzk.h"
#include "gateway/proving_service.h"
#include "gateway/relay_identity.h"

namespace pf::gateway {

// Who may call and where each kind goes, beside the replicas' relay.
struct FrontRules {
  ClientAuth auth;                        // operator-issued client tokens
  std::unique_ptr<LocalCuzk> local_cuzk;  // nullptr: local kinds are refused
  std::vector<core::JobKind> keep_local;  // beside the PoSt kinds
  // A replica's gateway holds a call a failover would fail (UNAVAILABLE from the relay: no
  // leader known, the leader unreachable or replaced) and tries it again, at the leader or from
  // its own queue once it leads, until another answer, the client's deadline or this many
  // seconds: Curio fails a task on any error and has few tries (SnapDeals 3, WinningPoSt 1, no
  // wait between them), a failover takes seconds. A Prove or AwaitProof waiting on this replica's
  // own queue when its term ends (a takeover by a successor, a lost lease) is held the same way and
  // waits for its job (kept in the store) at the next leader with AwaitProof, as Curio's retry
  // would, so that Curio spends no try on the handover. 0: answer UNAVAILABLE at once.
  double failover_hold_s = 0;
};

class GatewayFront final : public cuzk::v1::ProvingEngine::Service {
 public:
  // `proxy`: where calls go while no queue is served here (nullptr: a lone gateway).
  // `replica_token`: the replicas' shared secret ("" : relayed calls are refused).
  GatewayFront(std::vector<AddressBlock> allow, std::unique_ptr<LeaderProxy> proxy,
               std::string replica_token = {}, FrontRules rules = {});

  grpc::Status SubmitProof(grpc::ServerContext* ctx, const cuzk::v1::SubmitProofRequest* request,
                           cuzk::v1::SubmitProofResponse* reply) override;
  grpc::Status AwaitProof(grpc::ServerContext* ctx, const cuzk::v1::AwaitProofRequest* request,
                          cuzk::v1::AwaitProofResponse* reply) override;
  grpc::Status Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* request,
                     cuzk::v1::ProveResponse* reply) override;
  grpc::Status CancelProof(grpc::ServerContext* ctx, const cuzk::v1::CancelProofRequest* request,
                           cuzk::v1::CancelProofResponse* reply) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const cuzk::v1::GetStatusRequest* request,
                         cuzk::v1::GetStatusResponse* reply) override;
  grpc::Status GetMetrics(grpc::ServerContext* ctx, const cuzk::v1::GetMetricsRequest* request,
                          cuzk::v1::GetMetricsResponse* reply) override;
  grpc::Status PreloadSRS(grpc::ServerContext* ctx, const cuzk::v1::PreloadSrsRequest* request,
                          cuzk::v1::PreloadSrsResponse* reply) override;
  grpc::Status EvictSRS(grpc::ServerContext* ctx, const cuzk::v1::EvictSrsRequest* request,
                        cuzk::v1::EvictSrsResponse* reply) override;

  // Answers from `local` from now on (a term began here); calls still relayed to the former
  // leader are cancelled (UNAVAILABLE: retry here). nullptr: stop answering locally (the term
  // ended): the current service is stopped, and its waiting Prove and AwaitProof calls wait for
  // their jobs at the next leader (FrontRules::failover_hold_s; UNAVAILABLE without one).
  void serve(std::shared_ptr<ProvingService> local);
  // Refuses every new call (UNAVAILABLE) and stops the local service: the server is stopping.
  void stop();
  GatewayMetrics& metrics() { return metrics_; }
  LeaderProxy* proxy() { return proxy_.get(); }
  // Calls whose handlers run now (a process that handed over waits for them to end).
  int open_calls() const { return open_calls_.load(); }

 private:
  // `call(target, client)` on the local service or the proxy, once the caller is admitted.
  template <typename Call>
  grpc::Status dispatch(const char* method, grpc::ServerContext* ctx, Call&& call);
  // A call for a local kind: relayed to the operator's cuzk, or refused without one.
  template <typename Call>
  grpc::Status dispatch_local(const char* method, grpc::ServerContext* ctx,
                              cuzk::v1::ProofKind kind, Call&& call);
  // Whether a call that ended `status` is held for another try (FrontRules::failover_hold_s),
  // after waiting `pause`.
  bool held_through_failover(grpc::ServerContext* ctx, const grpc::Status& status,
                             std::chrono::steady_clock::time_point held_since,
                             std::chrono::milliseconds pause);
  // A call whose job this replica's queue kept when its term ended under it (`ended`, with the
  // job's id): waits for the job at the next leader (or this replica's next term) while
  // failover_hold_s allows, and answers what that leader answers.
  grpc::Status follow_kept_job(grpc::ServerContext* ctx, const std::string& client,
                               const std::string& job_id,
                               std::optional<std::chrono::milliseconds> timeout,
                               cuzk::v1::AwaitProofResponse* reply, grpc::Status ended);
  // Who the call is for, or the refusal (PERMISSION_DENIED) to answer.
  tl::expected<Caller, grpc::Status> admitted(grpc::ServerContext* ctx, const char* method);
  void count_refusal(const std::string& peer, const char* method, const std::string& why);

  const std::vector<AddressBlock> allow_;  // empty: any client that reaches the port
  const std::unique_ptr<LeaderProxy> proxy_;
  const std::string replica_token_;
  const FrontRules rules_;
  GatewayMetrics metrics_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> open_calls_{0};
  std::mutex mu_;  // guards local_
  std::shared_ptr<ProvingService> local_;
  std::condition_variable hold_cv_;  // held calls wait on it (with mu_); stop() wakes them
  std::mutex denied_mutex_;          // guards denied_by_address_
  std::map<std::string, std::uint64_t> denied_by_address_;  // for logging, bounded
};

}  // namespace pf::gateway
