#include "gateway/local_cuzk.h"

#include <algorithm>

#include "gateway/listen_exposure.h"
#include "gateway/request_check.h"

namespace pf::gateway {
namespace {

// Curio's own client's message limit (lib/cuzk/client.go:83); the daemon's is 128 MiB.
constexpr int kCurioMessageBytes = 256 << 20;

std::string kind_name(cuzk::v1::ProofKind kind) {
  if (const auto k = job_kind(kind)) return core::to_string(*k);
  return "proof kind " + std::to_string(static_cast<int>(kind));
}

}  // namespace

bool proved_locally(cuzk::v1::ProofKind kind, const std::vector<core::JobKind>& keep_local) {
  const auto k = job_kind(kind);
  if (!k) return false;
  if (*k == core::JobKind::WindowPost || *k == core::JobKind::WinningPost) return true;
  return std::find(keep_local.begin(), keep_local.end(), *k) != keep_local.end();
}

grpc::Status no_local_cuzk(cuzk::v1::ProofKind kind) {
  return {grpc::StatusCode::FAILED_PRECONDITION,
          "proof_kind: " + kind_name(kind) +
              " is never proved on rented machines (chain deadlines, the operator's own "
              "parameters), and this gateway has no local cuzk to relay it to: set [gateway] "
              "local_cuzk = \"HOST:PORT\" of your own cuzk daemon, or point this Curio's PoSt at "
              "its own [Cuzk] Address"};
}

LocalCuzk::LocalCuzk(std::string address) : address_(std::move(address)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kCurioMessageBytes);
  args.SetMaxSendMessageSize(kCurioMessageBytes);
  stub_ = cuzk::v1::ProvingEngine::NewStub(
      grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args));
}

template <typename Request, typename Reply, typename Call>
grpc::Status LocalCuzk::relay(grpc::ServerContext* ctx, const Request& request, Reply* reply,
                              Call call) {
  ++relayed_;
  // The client's deadline and cancellation carry over to the local daemon's call.
  const std::unique_ptr<grpc::ClientContext> upstream =
      grpc::ClientContext::FromServerContext(*ctx);
  const grpc::Status status = call(*stub_, upstream.get(), request, reply);
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return {grpc::StatusCode::UNAVAILABLE,
            "the operator's cuzk at " + address_ +
                " ([gateway] local_cuzk) is unavailable: " + status.error_message()};
  }
  return status;
}

grpc::Status LocalCuzk::Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* request,
                              cuzk::v1::ProveResponse* reply) {
  return relay(ctx, *request, reply,
               [](auto& stub, grpc::ClientContext* c, const auto& r, auto* o) {
                 return stub.Prove(c, r, o);
               });
}

grpc::Status LocalCuzk::SubmitProof(grpc::ServerContext* ctx,
                                    const cuzk::v1::SubmitProofRequest* request,
                                    cuzk::v1::SubmitProofResponse* reply) {
  return relay(ctx, *request, reply,
               [](auto& stub, grpc::ClientContext* c, const auto& r, auto* o) {
                 return stub.SubmitProof(c, r, o);
               });
}

grpc::Status LocalCuzk::AwaitProof(grpc::ServerContext* ctx,
                                   const cuzk::v1::AwaitProofRequest* request,
                                   cuzk::v1::AwaitProofResponse* reply) {
  return relay(ctx, *request, reply,
               [](auto& stub, grpc::ClientContext* c, const auto& r, auto* o) {
                 return stub.AwaitProof(c, r, o);
               });
}

}  // namespace pf::gateway
