// A Curio-like PoRep C2 request for the gateway's tests: the C1 output envelope Curio sends as
// vanilla_proof ({"SectorNum", "Phase1Out", "SectorSize"}) for a 32 GiB sector. Header-only.
#pragma once

#include <cstdint>
#include <string>

#include "cuzk/v1/proving.pb.h"

namespace pf::test {

inline cuzk::v1::SubmitProofRequest porep_request(const std::string& request_id,
                                                  std::uint64_t sector,
                                                  std::uint64_t miner = 2000) {
  cuzk::v1::SubmitProofRequest r;
  r.set_request_id(request_id);
  r.set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  r.set_sector_size(32ULL << 30);
  r.set_sector_number(sector);
  r.set_miner_id(miner);
  r.set_vanilla_proof(R"({"SectorNum":)" + std::to_string(sector) +
                      R"(,"Phase1Out":"c2VjdG9y","SectorSize":34359738368})");
  return r;
}

}  // namespace pf::test
