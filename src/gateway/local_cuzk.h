// The operator's own cuzk daemon, for the proof kinds that never go to a rented machine
// (issue 25): WindowPoSt and WinningPoSt, whose chain deadlines are seconds to minutes and which
// need the operator's own parameters, plus any kind the operator keeps local ([gateway]
// keep_local). Real Curio sends those to the same [Cuzk] Address as PoRep and SnapDeals
// (cmd/curio/tasks/tasks.go:177-203 at the pinned curio commit), so the gateway routes by kind:
//  - with [gateway] local_cuzk set, the call is relayed to that daemon as it came (no queue, no
//    job row), with the client's deadline and cancellation carried over, and its answer returned
//    unchanged: Curio sees exactly what its own daemon says;
//  - without it, the call is refused at once with FAILED_PRECONDITION naming the setting, so
//    Curio's task fails in its log within milliseconds instead of waiting on a fleet that may not
//    prove in time (WinningPoSt has one try: tasks/winning/winning_task.go:599).
// The channel is what Curio's own client uses: plaintext gRPC, 256 MiB messages, no keepalive
// (lib/cuzk/client.go:80-84); unix:///path addresses work as in Curio.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "core/job.h"
#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/listen_exposure.h"

namespace pf::gateway {

// Whether `kind` is proved only on the operator's own cuzk: the PoSt kinds always, and those in
// `keep_local`. An unknown kind is the fleet's (the queue's checks refuse it).
bool proved_locally(cuzk::v1::ProofKind kind, const std::vector<core::JobKind>& keep_local);

// The refusal when no local cuzk is configured (FAILED_PRECONDITION).
grpc::Status no_local_cuzk(cuzk::v1::ProofKind kind);

class LocalCuzk final {
 public:
  explicit LocalCuzk(std::string address);

  const std::string& address() const { return address_; }
  grpc::Status Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* request,
                     cuzk::v1::ProveResponse* reply);
  grpc::Status SubmitProof(grpc::ServerContext* ctx, const cuzk::v1::SubmitProofRequest* request,
                           cuzk::v1::SubmitProofResponse* reply);
  grpc::Status AwaitProof(grpc::ServerContext* ctx, const cuzk::v1::AwaitProofRequest* request,
                          cuzk::v1::AwaitProofResponse* reply);
  std::uint64_t relayed() const { return relayed_; }

 private:
  template <typename Request, typename Reply, typename Call>
  grpc::Status relay(grpc::ServerContext* ctx, const Request& request, Reply* reply, Call call);

  const std::string address_;
  std::unique_ptr<cuzk::v1::ProvingEngine::Stub> stub_;
  std::atomic<std::uint64_t> relayed_{0};
};

}  // namespace pf::gateway
