#include "util/bls12_381.h"

#include <openssl/bn.h>

#include <memory>

namespace pf::util {
namespace {

// The base field modulus of BLS12-381.
constexpr const char* kModulusHex =
    "1a0111ea397fe69a4b1ba7b6434bacd764774b84f38512bf6730d2a0f6b0f6241eabfffeb153ffffb9feffffffffaa"
    "ab";

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
struct CtxFree {
  void operator()(BN_CTX* c) const { BN_CTX_free(c); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

Bn bn() {
  return Bn(BN_new());
}

// The field and its scratch space, for one check.
struct Field {
  Bn p = bn();
  Bn half = bn();  // (p - 1) / 2: Euler's criterion
  std::unique_ptr<BN_CTX, CtxFree> ctx{BN_CTX_new()};

  Field() {
    BIGNUM* raw = p.get();
    BN_hex2bn(&raw, kModulusHex);
    BN_sub(half.get(), p.get(), BN_value_one());
    BN_rshift1(half.get(), half.get());
  }
  bool ok() const { return p && half && ctx; }

  Bn mul(const BIGNUM* a, const BIGNUM* b) {
    Bn r = bn();
    BN_mod_mul(r.get(), a, b, p.get(), ctx.get());
    return r;
  }
  Bn add(const BIGNUM* a, const BIGNUM* b) {
    Bn r = bn();
    BN_mod_add(r.get(), a, b, p.get(), ctx.get());
    return r;
  }
  Bn sub(const BIGNUM* a, const BIGNUM* b) {
    Bn r = bn();
    BN_mod_sub(r.get(), a, b, p.get(), ctx.get());
    return r;
  }
  Bn word(unsigned long w) {
    Bn r = bn();
    BN_set_word(r.get(), w);
    return r;
  }
  // a is 0 or a square in Fp (Euler: a^((p-1)/2) is 1 for a nonzero square, p-1 otherwise).
  bool square_or_zero(const BIGNUM* a) {
    if (BN_is_zero(a)) return true;
    Bn e = bn();
    BN_mod_exp(e.get(), a, half.get(), p.get(), ctx.get());
    return BN_is_one(e.get());
  }
};

// The flags of a compressed encoding, and x's bytes without them (as a field element < p).
std::optional<std::string> read_coordinate(std::string_view bytes, bool with_flags, Field& f,
                                           Bn& out, const char* what) {
  std::string raw(bytes);
  if (with_flags) {
    const auto flags = static_cast<unsigned char>(raw[0]);
    if ((flags & 0x80) == 0) return std::string(what) + ": not a compressed point (flag bit unset)";
    if ((flags & 0x40) != 0) return std::string(what) + ": the point at infinity";
    raw[0] = static_cast<char>(flags & 0x1f);
  }
  out.reset(BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()),
                      static_cast<int>(raw.size()), nullptr));
  if (!out) return std::string(what) + ": out of memory";
  if (BN_cmp(out.get(), f.p.get()) >= 0) {
    return std::string(what) + ": x is not below the field modulus";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> g1_compressed_problem(std::string_view bytes) {
  if (bytes.size() != kG1CompressedBytes) {
    return "G1 point: " + std::to_string(bytes.size()) + " bytes, not " +
           std::to_string(kG1CompressedBytes);
  }
  Field f;
  if (!f.ok()) return std::string("G1 point: out of memory");
  Bn x;
  if (auto problem = read_coordinate(bytes, true, f, x, "G1 point")) return problem;
  // y² = x³ + 4
  const Bn x2 = f.mul(x.get(), x.get());
  const Bn x3 = f.mul(x2.get(), x.get());
  const Bn four = f.word(4);
  const Bn rhs = f.add(x3.get(), four.get());
  if (!f.square_or_zero(rhs.get())) return std::string("G1 point: x is not on the curve");
  return std::nullopt;
}

std::optional<std::string> g2_compressed_problem(std::string_view bytes) {
  if (bytes.size() != kG2CompressedBytes) {
    return "G2 point: " + std::to_string(bytes.size()) + " bytes, not " +
           std::to_string(kG2CompressedBytes);
  }
  Field f;
  if (!f.ok()) return std::string("G2 point: out of memory");
  Bn x1, x0;
  if (auto problem = read_coordinate(bytes.substr(0, 48), true, f, x1, "G2 point")) {
    return problem;
  }
  if (auto problem = read_coordinate(bytes.substr(48), false, f, x0, "G2 point")) return problem;
  // x² = (x0² - x1²) + 2·x0·x1·u
  const Bn x0s = f.mul(x0.get(), x0.get());
  const Bn x1s = f.mul(x1.get(), x1.get());
  const Bn a0 = f.sub(x0s.get(), x1s.get());
  const Bn x0x1 = f.mul(x0.get(), x1.get());
  const Bn a1 = f.add(x0x1.get(), x0x1.get());
  // x³ = x²·x = (a0·x0 - a1·x1) + (a0·x1 + a1·x0)·u
  const Bn a0x0 = f.mul(a0.get(), x0.get());
  const Bn a1x1 = f.mul(a1.get(), x1.get());
  const Bn a0x1 = f.mul(a0.get(), x1.get());
  const Bn a1x0 = f.mul(a1.get(), x0.get());
  const Bn c0 = f.sub(a0x0.get(), a1x1.get());
  const Bn c1 = f.add(a0x1.get(), a1x0.get());
  // + 4(1 + u)
  const Bn four = f.word(4);
  const Bn r0 = f.add(c0.get(), four.get());
  const Bn r1 = f.add(c1.get(), four.get());
  // r0 + r1·u is a square in Fp2 exactly when its norm r0² + r1² is a square in Fp.
  const Bn r0s = f.mul(r0.get(), r0.get());
  const Bn r1s = f.mul(r1.get(), r1.get());
  const Bn norm = f.add(r0s.get(), r1s.get());
  if (!f.square_or_zero(norm.get())) return std::string("G2 point: x is not on the twist");
  return std::nullopt;
}

}  // namespace pf::util
