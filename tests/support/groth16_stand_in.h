// Test double: bytes shaped like cuzk's Groth16 proofs (jobs/proof_check.h) without being one:
// each 192-byte partition is the BLS12-381 generators in their compressed encodings (A = C = the
// G1 generator, B = the G2 generator), so the structural check passes while nothing here would
// verify against a real key. Header-only.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace pf::test {

// The standard generators, compressed (zcash/IETF serialization, as blst and bls12_381 print
// them).
inline constexpr std::string_view kG1GeneratorHex =
    "97f1d3a73197d7942695638c4fa9ac0fc3688c4f9774b905a14e3a3f171bac586c55e83ff97a1aeffb3af00adb22c6"
    "bb";
inline constexpr std::string_view kG2GeneratorHex =
    "93e02b6052719f607dacd3a088274f65596bd0d09920b61ab5da61bbdc7f5049334cf11213945d57e5ac7d055d042b"
    "7e"
    "024aa2b2f08f0a91260805272dc51051c6e47ad4fa403b02b4510b647ae3d1770bac0326a805bbefd48056c8c121bd"
    "b8";

inline std::string from_hex(std::string_view hex) {
  const auto nibble = [](char c) {
    return c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0';
  };
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1])));
  }
  return out;
}

// `partitions` × (G1, G2, G1): 1,920 bytes for PoRep 32 GiB (10), 3,072 for SnapDeals (16).
inline std::string groth16_stand_in_proof(int partitions) {
  const std::string g1 = from_hex(kG1GeneratorHex);
  const std::string g2 = from_hex(kG2GeneratorHex);
  std::string out;
  for (int i = 0; i < partitions; ++i) out += g1 + g2 + g1;
  return out;
}

}  // namespace pf::test
