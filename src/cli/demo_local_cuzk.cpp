#include "cli/demo_local_cuzk.h"

#include <chrono>

#include "agent/prover_sim.h"
#include "cli/commands.h"

namespace pf::cli {

DemoLocalCuzk::DemoLocalCuzk() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(128 << 20);  // the daemon's limit (cuzk-daemon main.rs:243)
  builder.RegisterService(this);
  server_ = builder.BuildAndStart();
  if (!server_ || port_ == 0) {
    throw CommandFailed("demo: cannot start the stand-in for the operator's cuzk");
  }
}

DemoLocalCuzk::~DemoLocalCuzk() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

grpc::Status DemoLocalCuzk::Prove(grpc::ServerContext* /*ctx*/,
                                  const cuzk::v1::ProveRequest* request,
                                  cuzk::v1::ProveResponse* reply) {
  if (!request->has_submit()) return {grpc::StatusCode::INVALID_ARGUMENT, "missing submit"};
  cuzk::v1::SubmitProofRequest input = request->submit();
  input.clear_request_id();
  auto* result = reply->mutable_result();
  result->set_job_id(request->submit().request_id());
  result->set_status(cuzk::v1::AwaitProofResponse::COMPLETED);
  result->set_proof(agent::sim_proof_of(input.SerializeAsString()));
  ++proved_;
  return grpc::Status::OK;
}

grpc::Status DemoLocalCuzk::CancelProof(grpc::ServerContext* /*ctx*/,
                                        const cuzk::v1::CancelProofRequest* /*request*/,
                                        cuzk::v1::CancelProofResponse* reply) {
  reply->set_was_running(false);
  return grpc::Status::OK;
}

grpc::Status DemoLocalCuzk::GetStatus(grpc::ServerContext* /*ctx*/,
                                      const cuzk::v1::GetStatusRequest* /*request*/,
                                      cuzk::v1::GetStatusResponse* reply) {
  reply->set_total_proofs_completed(proved_);
  return grpc::Status::OK;
}

}  // namespace pf::cli
