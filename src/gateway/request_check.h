// What the gateway accepts as a proof request, and what it turns it into: the checks a client's
// SubmitProofRequest must pass before it becomes a job (each refusal names the field), and the
// job input the contract fixes (the request serialized with request_id cleared).
//
// The checks are the fields each kind's prover reads (/work/shared/reference/cuzk.md §1):
//  - PoRep C2: vanilla_proof = the C1 output envelope (a JSON object);
//  - SnapDeals: vanilla_proofs (one per partition), comm_r_old, comm_r_new, comm_d_new (32 bytes);
//  - WindowPoSt / WinningPoSt: vanilla_proofs (one per sector), randomness (32 bytes).
// sector_size, when given, must be a Filecoin sector size. A real daemon checks only the kind and
// fails the rest later on its GPU; a fleet refuses early, since a bad request would otherwise be
// retried on machine after machine and strike good hosts.
#pragma once

#include <grpcpp/support/status.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "core/job.h"
#include "cuzk/v1/proving.pb.h"

namespace pf::gateway {

inline constexpr std::size_t kMaxRequestIdBytes = 256;
// A WindowPoSt partition holds at most 2349 sectors, a SnapDeals proof 16 partitions.
inline constexpr int kMaxVanillaProofs = 10'000;
inline constexpr std::size_t kCommitmentBytes = 32;
// cuzk's daemon decodes at most 128 MiB a message (extern/cuzk/cuzk-daemon/src/main.rs:243 and
// :270 at the pinned curio commit) and takes no input in pieces (every RPC is unary), so no
// rented prover could read a larger job: the input (this request serialized) plus the agent's
// request_id and the ProveRequest wrapper must fit.
inline constexpr std::int64_t kCuzkMaxMessageBytes = 128LL << 20;
inline constexpr std::int64_t kCuzkEnvelopeBytes = 1024;
inline constexpr std::int64_t kCuzkMaxInputBytes = kCuzkMaxMessageBytes - kCuzkEnvelopeBytes;

// A refused request: the gRPC code (INVALID_ARGUMENT or RESOURCE_EXHAUSTED) and a message that
// starts with the field ("proof_kind: ...").
struct RequestError {
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
  std::string message;
};

struct CheckedRequest {
  core::JobKind kind = core::JobKind::PorepC2;
  int priority = 0;   // cuzk.v1.Priority as sent (0 = unspecified)
  std::string input;  // the job input: the request serialized, request_id cleared
};

// `field` names what is checked in messages ("request_id", "job_id"). Empty is refused: callers
// that generate an id for an empty request_id do so before checking.
tl::expected<void, RequestError> check_request_id(std::string_view id, std::string_view field);
// AwaitProof's timeout_ms: nullopt for 0 (wait forever); beyond a year is forever too (the cap
// keeps the callers' arithmetic from overflowing).
std::optional<std::chrono::milliseconds> await_timeout(std::uint64_t timeout_ms);

// Checks `request` and builds the job input; an input over `max_input_bytes` or over what cuzk's
// daemon can decode (kCuzkMaxInputBytes) is RESOURCE_EXHAUSTED with both sizes and the limit's
// source in the message. The request_id is checked when non-empty.
// Takes the request by value so a caller that moves it in holds one copy of a large input
// beside its serialized form, not two.
tl::expected<CheckedRequest, RequestError> check_submit(cuzk::v1::SubmitProofRequest request,
                                                        std::int64_t max_input_bytes);

std::optional<core::JobKind> job_kind(cuzk::v1::ProofKind kind);
cuzk::v1::ProofKind proof_kind(core::JobKind kind);

// Whether `bytes` is a Filecoin sector size (2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB).
bool is_sector_size(std::uint64_t bytes);

// "pf-" and 32 random hex digits in UUID groups: the job id of a request sent without one.
std::string generate_request_id();

}  // namespace pf::gateway
