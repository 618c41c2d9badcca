// The request `proverfleet prove` sends: a SubmitProofRequest built from a file the way Curio
// builds it for each kind (/work/shared/reference/cuzk.md §1):
//  - porep-c2: vanilla_proof = the C1 output envelope file as it is ({"SectorNum",
//    "Phase1Out", "SectorSize"}); sector number and size default to the envelope's;
//  - the others: vanilla_proofs from a cuzk-bench style file (a JSON array of base64 strings,
//    one per partition or sector; any other file is one raw proof), plus randomness (PoSt) or
//    the three commitments (SnapDeals) in hex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "core/job.h"
#include "cuzk/v1/proving.pb.h"

namespace pf::cli {

struct ProveInputs {
  core::JobKind kind = core::JobKind::PorepC2;
  std::string request_id;
  std::optional<std::uint64_t> sector;  // nullopt: the envelope's SectorNum (PoRep)
  std::uint64_t miner = 0;
  std::uint64_t registered_proof = 0;
  std::uint32_t partition = 0;
  std::string randomness_hex;  // PoSt: 32 bytes
  std::string comm_r_old_hex;  // SnapDeals: 32 bytes each
  std::string comm_r_new_hex;
  std::string comm_d_new_hex;
};

// `file` is the input file's content. The error names the flag or the file's problem.
tl::expected<cuzk::v1::SubmitProofRequest, std::string> build_prove_request(
    const ProveInputs& inputs, std::string file);

}  // namespace pf::cli
