#include "util/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "util/hex.h"

namespace pf::util {

void Sha256::CtxFree::operator()(evp_md_ctx_st* ctx) const {
  EVP_MD_CTX_free(ctx);
}

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  if (!ctx_ || EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sha256: cannot start a digest");
  }
}

void Sha256::update(std::string_view bytes) {
  if (EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) != 1) {
    throw std::runtime_error("sha256: digest update failed");
  }
}

std::string Sha256::hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_.get(), md.data(), &len) != 1) {
    throw std::runtime_error("sha256: digest final failed");
  }
  return lower_hex(md.data(), len);
}

std::string sha256_hex(std::string_view bytes) {
  Sha256 digest;
  digest.update(bytes);
  return digest.hex();
}

std::string sha256_hex(std::string_view prefix, std::string_view bytes) {
  Sha256 digest;
  digest.update(prefix);
  digest.update(bytes);
  return digest.hex();
}

tl::expected<std::string, std::string> sha256_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return tl::unexpected("cannot read " + path + ": " + std::strerror(errno));
  Sha256 digest;
  std::vector<char> buffer(1u << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = in.gcount();
    if (n > 0) digest.update(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
  }
  if (in.bad()) return tl::unexpected("cannot read " + path + ": " + std::strerror(errno));
  return digest.hex();
}

bool is_sha256_hex(std::string_view text) {
  return is_lower_hex(text, 64);
}

}  // namespace pf::util
