// SHA-256 as lowercase hex (OpenSSL EVP): the content address of job inputs and the digest of
// proofs. Incremental, so a large input is hashed while it is written.
#pragma once

#include <memory>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace pf::jobs {

class Sha256 {
 public:
  Sha256();  // throws std::runtime_error if OpenSSL cannot start a digest
  void update(std::string_view bytes);
  std::string hex();  // finishes; the object is spent afterwards

 private:
  struct CtxFree {
    void operator()(evp_md_ctx_st* ctx) const;
  };
  std::unique_ptr<evp_md_ctx_st, CtxFree> ctx_;
};

std::string sha256_hex(std::string_view bytes);

// 64 lowercase hex digits: what a digest from sha256_hex looks like (and all a file name under
// the input directory may be).
bool is_sha256_hex(std::string_view text);

}  // namespace pf::jobs
