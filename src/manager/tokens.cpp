#include "manager/tokens.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

#include "util/hex.h"

namespace pf::manager {

std::string random_token() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1) throw std::runtime_error("no randomness for a token");
  return util::lower_hex(buf, sizeof buf);
}

std::string hash_token(const std::string& token) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(token.data(), token.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sha256 failed");
  }
  return util::lower_hex(md, len);
}

bool is_agent_token(const std::string& token) {
  return token.size() == kAgentTokenHexChars && std::all_of(token.begin(), token.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool tokens_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace pf::manager
