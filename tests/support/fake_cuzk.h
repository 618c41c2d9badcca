// Test double: a fake cuzk daemon speaking the ProvingEngine gRPC contract
// (proto/cuzk/v1/proving.proto) in-process. It proves nothing; each Prove answers as scripted
// (COMPLETED after a delay, FAILED, or a gRPC error) and records the request. Header-only.
#pragma once

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cuzk/v1/proving.grpc.pb.h"
#include "support/groth16_stand_in.h"

namespace pf::test {

class FakeCuzk final : public cuzk::v1::ProvingEngine::Service {
 public:
  // Complete: a proof shaped as cuzk's (groth16_stand_in.h) for the request's kind;
  // Corrupt: the same with one partition's bytes garbled (a host returning a bad proof).
  enum class Mode { Complete, Failed, Internal, Corrupt };

  FakeCuzk() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.SetMaxReceiveMessageSize(128 << 20);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~FakeCuzk() override { shutdown(); }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  // Ends the server; in-flight calls are cancelled (what a daemon crash looks like).
  void shutdown() {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
      server_.reset();
    }
  }

  std::atomic<Mode> mode{Mode::Complete};
  std::atomic<int> delay_ms{0};
  std::atomic<int> max_concurrent{0};
  std::atomic<int> proves{0};

  std::vector<cuzk::v1::SubmitProofRequest> requests() const {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // The job ids CancelProof named, in order.
  std::vector<std::string> cancelled() const {
    std::lock_guard lock(mu_);
    return cancelled_;
  }

  grpc::Status Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* req,
                     cuzk::v1::ProveResponse* resp) override {
    proves++;
    const int now = ++running_;
    int seen = max_concurrent.load();
    while (now > seen && !max_concurrent.compare_exchange_weak(seen, now)) {
    }
    {
      std::lock_guard lock(mu_);
      requests_.push_back(req->submit());
    }
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms.load());
    const std::string& id = req->submit().request_id();
    while (std::chrono::steady_clock::now() < end && !ctx->IsCancelled()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    --running_;
    if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
    auto* r = resp->mutable_result();
    r->set_job_id(id);
    switch (mode.load()) {
      case Mode::Complete:
      case Mode::Corrupt: {
        r->set_status(cuzk::v1::AwaitProofResponse::COMPLETED);
        const int partitions =
            req->submit().proof_kind() == cuzk::v1::SNAP_DEALS_UPDATE ? 16
            : req->submit().proof_kind() == cuzk::v1::POREP_SEAL_COMMIT ||
                    req->submit().proof_kind() == cuzk::v1::PROOF_KIND_UNSPECIFIED
                ? 10
                : 1;
        std::string proof = groth16_stand_in_proof(partitions);
        if (mode.load() == Mode::Corrupt) {
          // Partition 1's A: its flags cleared and its x garbled (deterministically refused).
          for (std::size_t i = 192; i < 240; ++i) proof[i] = static_cast<char>(proof[i] ^ 0x5a);
          proof[192] = static_cast<char>(proof[192] & 0x1f);
        }
        r->set_proof(std::move(proof));
        r->set_queue_wait_ms(12);
        r->set_srs_load_ms(0);
        r->set_synthesis_ms(35500);
        r->set_gpu_compute_ms(37500);
        r->set_total_ms(static_cast<std::uint64_t>(delay_ms.load()));
        return grpc::Status::OK;
      }
      case Mode::Failed:
        r->set_status(cuzk::v1::AwaitProofResponse::FAILED);
        r->set_error_message("proof self-verification failed");
        return grpc::Status::OK;
      case Mode::Internal:
        return grpc::Status(grpc::StatusCode::INTERNAL, "synthesis panicked");
    }
    return grpc::Status::OK;
  }

  // As the real daemon does: CancelProof is not implemented there (cuzk-server/src/service.rs
  // answers was_running = false and cancels nothing; docs/gateway.md, "What real Curio and cuzk
  // do"), so the proof runs to its end. The call is recorded for tests that check it was sent.
  grpc::Status CancelProof(grpc::ServerContext*, const cuzk::v1::CancelProofRequest* req,
                           cuzk::v1::CancelProofResponse* resp) override {
    std::lock_guard lock(mu_);
    cancelled_.push_back(req->job_id());
    resp->set_was_running(false);
    return grpc::Status::OK;
  }

  grpc::Status GetStatus(grpc::ServerContext*, const cuzk::v1::GetStatusRequest*,
                         cuzk::v1::GetStatusResponse* resp) override {
    auto* g = resp->add_gpus();
    g->set_ordinal(0);
    g->set_name("NVIDIA GeForce RTX 4090");
    g->set_current_job_id(running_ > 0 ? "pf-job" : "");
    auto* q = resp->add_queues();
    q->set_proof_kind("porep-c2");
    q->set_pending(2);
    q->set_in_progress(1);
    resp->set_total_proofs_completed(static_cast<std::uint64_t>(proves.load()));
    resp->set_uptime_seconds(7);
    return grpc::Status::OK;
  }

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::atomic<int> running_{0};
  mutable std::mutex mu_;
  std::vector<cuzk::v1::SubmitProofRequest> requests_;
  std::vector<std::string> cancelled_;
};

}  // namespace pf::test
