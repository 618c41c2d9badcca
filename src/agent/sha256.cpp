#include "agent/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <vector>

namespace pf::agent {
namespace {

struct DigestContextDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using DigestContext = std::unique_ptr<EVP_MD_CTX, DigestContextDeleter>;

std::string to_hex(const unsigned char* bytes, unsigned int size) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2u);
  for (unsigned int i = 0; i < size; ++i) {
    out.push_back(kDigits[bytes[i] >> 4]);
    out.push_back(kDigits[bytes[i] & 15]);
  }
  return out;
}

DigestContext new_sha256() {
  DigestContext ctx(EVP_MD_CTX_new());
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("cannot initialise SHA-256 (OpenSSL)");
  }
  return ctx;
}

std::string finish(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx, md, &len) != 1) throw std::runtime_error("SHA-256 failed");
  return to_hex(md, len);
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  return sha256_hex({}, bytes);
}

std::string sha256_hex(std::string_view prefix, std::string_view bytes) {
  auto ctx = new_sha256();
  if (EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size()) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1) {
    throw std::runtime_error("SHA-256 failed");
  }
  return finish(ctx.get());
}

tl::expected<std::string, std::string> sha256_file_hex(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return tl::unexpected("cannot read " + path + ": " + std::strerror(errno));
  auto ctx = new_sha256();
  std::vector<char> buffer(1u << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = in.gcount();
    if (n > 0 && EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<std::size_t>(n)) != 1) {
      throw std::runtime_error("SHA-256 failed");
    }
  }
  if (in.bad()) return tl::unexpected("cannot read " + path + ": " + std::strerror(errno));
  return finish(ctx.get());
}

bool is_sha256_hex(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace pf::agent
