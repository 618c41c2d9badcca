#include "gateway/request_check.h"

#include <algorithm>
#include <array>
#include <random>

namespace pf::gateway {
namespace {

tl::unexpected<RequestError> invalid(std::string message) {
  return tl::unexpected(RequestError{grpc::StatusCode::INVALID_ARGUMENT, std::move(message)});
}

std::string shown(std::string_view text) {
  constexpr std::size_t kShown = 64;
  std::string out;
  for (char c : text.substr(0, kShown)) {
    out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  }
  if (text.size() > kShown) out += "...";
  return out;
}

tl::expected<void, RequestError> need_bytes(const std::string& value, const char* field,
                                            const char* kind) {
  if (value.size() == kCommitmentBytes) return {};
  return invalid(std::string(field) + ": " + kind + " needs " + std::to_string(kCommitmentBytes) +
                 " bytes, got " + std::to_string(value.size()));
}

tl::expected<void, RequestError> need_vanilla_proofs(const cuzk::v1::SubmitProofRequest& r,
                                                     const char* kind, const char* one_per) {
  if (r.vanilla_proofs_size() == 0) {
    return invalid(std::string("vanilla_proofs: ") + kind + " needs one vanilla proof per " +
                   one_per + ", got none");
  }
  if (r.vanilla_proofs_size() > kMaxVanillaProofs) {
    return invalid("vanilla_proofs: at most " + std::to_string(kMaxVanillaProofs) + ", got " +
                   std::to_string(r.vanilla_proofs_size()));
  }
  for (int i = 0; i < r.vanilla_proofs_size(); ++i) {
    if (r.vanilla_proofs(i).empty()) {
      return invalid("vanilla_proofs[" + std::to_string(i) + "]: empty");
    }
  }
  return {};
}

// The fields each kind's prover reads; see the header.
tl::expected<void, RequestError> check_kind_fields(const cuzk::v1::SubmitProofRequest& r,
                                                   core::JobKind kind) {
  switch (kind) {
    case core::JobKind::PorepC2: {
      if (r.vanilla_proof().empty()) {
        return invalid("vanilla_proof: PoRep C2 needs the C1 output (JSON envelope), got none");
      }
      const auto first = r.vanilla_proof().find_first_not_of(" \t\r\n");
      if (first == std::string::npos || r.vanilla_proof()[first] != '{') {
        return invalid(
            "vanilla_proof: PoRep C2 needs the C1 output as a JSON object "
            "{\"SectorNum\", \"Phase1Out\", \"SectorSize\"}");
      }
      return {};
    }
    case core::JobKind::SnapUpdate: {
      if (auto ok = need_vanilla_proofs(r, "SnapDeals", "partition"); !ok) return ok;
      if (auto ok = need_bytes(r.comm_r_old(), "comm_r_old", "SnapDeals"); !ok) return ok;
      if (auto ok = need_bytes(r.comm_r_new(), "comm_r_new", "SnapDeals"); !ok) return ok;
      return need_bytes(r.comm_d_new(), "comm_d_new", "SnapDeals");
    }
    case core::JobKind::WindowPost: {
      if (auto ok = need_vanilla_proofs(r, "WindowPoSt", "sector"); !ok) return ok;
      return need_bytes(r.randomness(), "randomness", "WindowPoSt");
    }
    case core::JobKind::WinningPost: {
      if (auto ok = need_vanilla_proofs(r, "WinningPoSt", "sector"); !ok) return ok;
      return need_bytes(r.randomness(), "randomness", "WinningPoSt");
    }
  }
  return invalid("proof_kind: unknown");
}

}  // namespace

std::optional<core::JobKind> job_kind(cuzk::v1::ProofKind kind) {
  switch (kind) {
    case cuzk::v1::POREP_SEAL_COMMIT:
      return core::JobKind::PorepC2;
    case cuzk::v1::SNAP_DEALS_UPDATE:
      return core::JobKind::SnapUpdate;
    case cuzk::v1::WINDOW_POST_PARTITION:
      return core::JobKind::WindowPost;
    case cuzk::v1::WINNING_POST:
      return core::JobKind::WinningPost;
    default:
      return std::nullopt;
  }
}

cuzk::v1::ProofKind proof_kind(core::JobKind kind) {
  switch (kind) {
    case core::JobKind::PorepC2:
      return cuzk::v1::POREP_SEAL_COMMIT;
    case core::JobKind::SnapUpdate:
      return cuzk::v1::SNAP_DEALS_UPDATE;
    case core::JobKind::WindowPost:
      return cuzk::v1::WINDOW_POST_PARTITION;
    case core::JobKind::WinningPost:
      return cuzk::v1::WINNING_POST;
  }
  return cuzk::v1::PROOF_KIND_UNSPECIFIED;
}

bool is_sector_size(std::uint64_t bytes) {
  static constexpr std::array<std::uint64_t, 5> kSizes{2ULL << 10, 8ULL << 20, 512ULL << 20,
                                                       32ULL << 30, 64ULL << 30};
  return std::find(kSizes.begin(), kSizes.end(), bytes) != kSizes.end();
}

std::optional<std::chrono::milliseconds> await_timeout(std::uint64_t timeout_ms) {
  if (timeout_ms == 0) return std::nullopt;
  return std::chrono::milliseconds(
      static_cast<std::int64_t>(std::min<std::uint64_t>(timeout_ms, 365ULL * 24 * 3600 * 1000)));
}

tl::expected<void, RequestError> check_request_id(std::string_view id, std::string_view field) {
  if (id.empty()) return invalid(std::string(field) + ": empty");
  if (id.size() > kMaxRequestIdBytes) {
    return invalid(std::string(field) + ": at most " + std::to_string(kMaxRequestIdBytes) +
                   " bytes, got " + std::to_string(id.size()));
  }
  const auto bad = std::find_if(id.begin(), id.end(), [](char c) { return c < 0x20 || c >= 0x7f; });
  if (bad != id.end()) {
    return invalid(std::string(field) + ": only printable ASCII allowed, byte " +
                   std::to_string(bad - id.begin()) + " is not ('" + shown(id) + "')");
  }
  return {};
}

tl::expected<CheckedRequest, RequestError> check_submit(cuzk::v1::SubmitProofRequest request,
                                                        std::int64_t max_input_bytes) {
  if (!request.request_id().empty()) {
    if (auto ok = check_request_id(request.request_id(), "request_id"); !ok) {
      return tl::unexpected(ok.error());
    }
  }
  const auto kind = job_kind(request.proof_kind());
  if (!kind) {
    return invalid("proof_kind: " + std::to_string(static_cast<int>(request.proof_kind())) +
                   " is not a proof kind (POREP_SEAL_COMMIT=1, SNAP_DEALS_UPDATE=2, "
                   "WINDOW_POST_PARTITION=3, WINNING_POST=4)");
  }
  if (!cuzk::v1::Priority_IsValid(request.priority())) {
    return invalid("priority: " + std::to_string(static_cast<int>(request.priority())) +
                   " is not a priority (0..4)");
  }
  if (request.sector_size() != 0 && !is_sector_size(request.sector_size())) {
    return invalid("sector_size: " + std::to_string(request.sector_size()) +
                   " is not a Filecoin sector size (2 KiB, 8 MiB, 512 MiB, 32 GiB, 64 GiB)");
  }
  if (auto ok = check_kind_fields(request, *kind); !ok) return tl::unexpected(ok.error());

  // Sized before it is serialized: an oversize request costs no copy.
  request.clear_request_id();
  const auto size = static_cast<std::int64_t>(request.ByteSizeLong());
  if (size > kCuzkMaxInputBytes && max_input_bytes > kCuzkMaxInputBytes) {
    return tl::unexpected(RequestError{
        grpc::StatusCode::RESOURCE_EXHAUSTED,
        "input: " + std::to_string(size) + " bytes, over the " +
            std::to_string(kCuzkMaxInputBytes) +
            " bytes a prover's cuzk daemon can take (it decodes at most 128 MiB a message and "
            "has no chunked input)"});
  }
  if (size > max_input_bytes) {
    return tl::unexpected(
        RequestError{grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "input: " + std::to_string(size) + " bytes, over the gateway's limit of " +
                         std::to_string(max_input_bytes) + " bytes ([jobs] max_input_mib)"});
  }
  CheckedRequest checked;
  checked.kind = *kind;
  checked.priority = static_cast<int>(request.priority());
  checked.input = request.SerializeAsString();
  return checked;
}

std::string generate_request_id() {
  std::random_device random;
  std::array<std::uint32_t, 4> words{};
  for (auto& w : words) w = random();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "pf-";
  for (int i = 0; i < 32; ++i) {
    if (i == 8 || i == 12 || i == 16 || i == 20) id.push_back('-');
    const auto word = words[static_cast<std::size_t>(i / 8)];
    id.push_back(kHex[(word >> ((i % 8) * 4)) & 0xf]);
  }
  return id;
}

}  // namespace pf::gateway
