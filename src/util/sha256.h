// SHA-256 as lowercase hex (OpenSSL EVP): the content address of job inputs (manager and agent
// agree on it byte for byte), the digest of proofs, and the sim prover's derived proof.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

struct evp_md_ctx_st;

namespace pf::util {

// Incremental, so a large input is hashed while it is written or read.
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
// Of `prefix` followed by `bytes`, without joining them in memory.
std::string sha256_hex(std::string_view prefix, std::string_view bytes);
// Of the whole file, read in bounded pieces; an error names the path.
tl::expected<std::string, std::string> sha256_file_hex(const std::string& path);
// 64 lowercase hex digits: what a digest from sha256_hex looks like (and so safe as a file name).
bool is_sha256_hex(std::string_view text);

}  // namespace pf::util
