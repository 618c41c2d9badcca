// BLS12-381 point encodings, checked without a pairing library (none is in Debian's archive):
// whether bytes are a compressed G1 (48 bytes) or G2 (96 bytes) point in the serialization
// Filecoin's proofs use (bellperson over blstrs, the zcash/IETF format): the top three bits of
// the first byte are the flags compressed (set), infinity and y's sign; the rest is x, big-endian,
// below the field modulus p; for G2, x = x1·u + x0 written x1 then x0. A point is on the curve
// E: y² = x³ + 4 (G1) or E': y² = x³ + 4(1 + u) over Fp2 = Fp[u]/(u² + 1) (G2) exactly when the
// right side has a square root, which a Legendre symbol decides (in Fp2: through the norm).
//
// This is a structural check: it refuses truncated, garbled or zeroed proofs and most corrupted
// points, not a proof that verifies wrongly (that needs the pairing and the verifying key; see
// docs/gateway.md, "Proofs from untrusted hosts"). Subgroup membership is not checked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pf::util {

inline constexpr std::size_t kG1CompressedBytes = 48;
inline constexpr std::size_t kG2CompressedBytes = 96;

// Why `bytes` is not a compressed, finite point of G1 / G2 on its curve; nullopt when it is.
std::optional<std::string> g1_compressed_problem(std::string_view bytes);
std::optional<std::string> g2_compressed_problem(std::string_view bytes);

}  // namespace pf::util
