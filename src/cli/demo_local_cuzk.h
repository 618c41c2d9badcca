// `proverfleet demo`'s stand-in for the operator's own cuzk daemon (the machine with the
// operator's GPU and parameters that proves WindowPoSt and WinningPoSt, [gateway] local_cuzk):
// a test double, clearly that. It answers Prove as the real daemon's service does (COMPLETED
// with a proof, the request id as job id; cuzk-server/src/service.rs:55-103 at the pinned curio
// commit) with the sim prover's proof of the request (agent::sim_proof_of over the request
// serialized with request_id cleared), CancelProof with was_running = false (service.rs:173-183)
// and GetStatus with its counts. Nothing in the product uses it.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "cuzk/v1/proving.grpc.pb.h"

namespace pf::cli {

class DemoLocalCuzk final : public cuzk::v1::ProvingEngine::Service {
 public:
  // Listens on a free loopback port; throws CommandFailed when it cannot.
  DemoLocalCuzk();
  ~DemoLocalCuzk() override;

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  std::uint64_t proved() const { return proved_; }

  grpc::Status Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* request,
                     cuzk::v1::ProveResponse* reply) override;
  grpc::Status CancelProof(grpc::ServerContext* ctx, const cuzk::v1::CancelProofRequest* request,
                           cuzk::v1::CancelProofResponse* reply) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const cuzk::v1::GetStatusRequest* request,
                         cuzk::v1::GetStatusResponse* reply) override;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<std::uint64_t> proved_{0};
};

}  // namespace pf::cli
