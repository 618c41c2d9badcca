#include "cli/prove_request.h"

#include <openssl/evp.h>

#include <limits>

#include "gateway/request_check.h"
#include "util/bounded_json.h"

namespace pf::cli {
namespace {

// A C1 envelope is one long base64 string (Phase1Out) in a small object.
constexpr util::JsonLimits kEnvelopeLimits{std::numeric_limits<std::size_t>::max(), 8, 64,
                                           std::numeric_limits<std::size_t>::max()};
constexpr util::JsonLimits kVanillaListLimits{
    std::numeric_limits<std::size_t>::max(), 2,
    static_cast<std::size_t>(gateway::kMaxVanillaProofs) + 1,
    std::numeric_limits<std::size_t>::max()};

tl::expected<std::string, std::string> from_hex(const std::string& hex, const char* flag) {
  if (hex.size() != 2 * gateway::kCommitmentBytes) {
    return tl::unexpected(std::string(flag) + ": expected " +
                          std::to_string(2 * gateway::kCommitmentBytes) + " hex digits, got " +
                          std::to_string(hex.size()));
  }
  std::string bytes;
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    unsigned value = 0;
    for (std::size_t k = 0; k < 2; ++k) {
      const char c = hex[i + k];
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) return tl::unexpected(std::string(flag) + ": not hex");
      value = value * 16 + static_cast<unsigned>(digit);
    }
    bytes.push_back(static_cast<char>(value));
  }
  return bytes;
}

std::optional<std::string> from_base64(const std::string& text) {
  if (text.size() % 4 != 0 || text.size() > static_cast<std::size_t>(INT32_MAX))
    return std::nullopt;
  std::string out(text.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  std::size_t padding = 0;
  while (padding < 2 && padding < text.size() && text[text.size() - 1 - padding] == '=') ++padding;
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

// cuzk-bench's --vanilla format: a JSON array of base64 strings; anything else is one raw proof.
tl::expected<void, std::string> add_vanilla_proofs(std::string file,
                                                   cuzk::v1::SubmitProofRequest& request) {
  const auto first = file.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && file[first] == '[') {
    auto list = util::parse_json(file, kVanillaListLimits);
    if (!list || !list->is_array()) {
      return tl::unexpected("--input: not a JSON array of base64 strings: " +
                            (list ? std::string("not an array") : list.error()));
    }
    for (const auto& item : *list) {
      const auto decoded = item.is_string() ? from_base64(item.get<std::string>()) : std::nullopt;
      if (!decoded) return tl::unexpected(std::string("--input: an entry is not base64"));
      request.add_vanilla_proofs(*decoded);
    }
    return {};
  }
  request.add_vanilla_proofs(std::move(file));
  return {};
}

}  // namespace

tl::expected<cuzk::v1::SubmitProofRequest, std::string> build_prove_request(
    const ProveInputs& inputs, std::string file) {
  if (file.empty()) return tl::unexpected(std::string("--input: the file is empty"));
  cuzk::v1::SubmitProofRequest request;
  request.set_request_id(inputs.request_id);
  request.set_proof_kind(gateway::proof_kind(inputs.kind));
  request.set_miner_id(inputs.miner);
  request.set_registered_proof(inputs.registered_proof);
  switch (inputs.kind) {
    case core::JobKind::PorepC2: {
      auto envelope = util::parse_json(file, kEnvelopeLimits);
      if (!envelope || !envelope->is_object()) {
        return tl::unexpected(
            "--input: a PoRep C2 input is the C1 output envelope, a JSON object "
            "{\"SectorNum\", \"Phase1Out\", \"SectorSize\"}: " +
            (envelope ? std::string("not an object") : envelope.error()));
      }
      if (!envelope->contains("Phase1Out")) {
        return tl::unexpected(std::string("--input: the C1 envelope has no Phase1Out"));
      }
      const auto number = [&envelope](const char* key) -> std::optional<std::uint64_t> {
        const auto it = envelope->find(key);
        if (it == envelope->end() || !it->is_number_unsigned()) return std::nullopt;
        return it->get<std::uint64_t>();
      };
      const auto sector = inputs.sector ? inputs.sector : number("SectorNum");
      if (!sector) {
        return tl::unexpected(std::string("--sector: not given and the envelope has no SectorNum"));
      }
      request.set_sector_number(*sector);
      request.set_sector_size(number("SectorSize").value_or(32ULL << 30));
      request.set_vanilla_proof(std::move(file));
      return request;
    }
    case core::JobKind::SnapUpdate: {
      request.set_sector_number(inputs.sector.value_or(0));
      if (auto ok = add_vanilla_proofs(std::move(file), request); !ok)
        return tl::unexpected(ok.error());
      auto old_r = from_hex(inputs.comm_r_old_hex, "--comm-r-old");
      if (!old_r) return tl::unexpected(old_r.error());
      auto new_r = from_hex(inputs.comm_r_new_hex, "--comm-r-new");
      if (!new_r) return tl::unexpected(new_r.error());
      auto new_d = from_hex(inputs.comm_d_new_hex, "--comm-d-new");
      if (!new_d) return tl::unexpected(new_d.error());
      request.set_comm_r_old(*old_r);
      request.set_comm_r_new(*new_r);
      request.set_comm_d_new(*new_d);
      request.set_sector_size(32ULL << 30);
      return request;
    }
    case core::JobKind::WindowPost:
    case core::JobKind::WinningPost: {
      request.set_sector_number(inputs.sector.value_or(0));
      if (auto ok = add_vanilla_proofs(std::move(file), request); !ok)
        return tl::unexpected(ok.error());
      auto randomness = from_hex(inputs.randomness_hex, "--randomness");
      if (!randomness) return tl::unexpected(randomness.error());
      request.set_randomness(*randomness);
      request.set_partition_index(inputs.partition);
      request.set_sector_size(32ULL << 30);
      return request;
    }
  }
  return tl::unexpected(std::string("--kind: unknown"));
}

}  // namespace pf::cli
