#include "gateway/client_tokens.h"

#include <openssl/crypto.h>

#include <algorithm>
#include <set>

#include "core/text.h"

namespace pf::gateway {
namespace {

bool valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxClientNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

bool valid_token(std::string_view token) {
  if (token.size() < kMinClientTokenBytes || token.size() > kMaxClientTokenBytes) return false;
  return std::all_of(token.begin(), token.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

}  // namespace

tl::expected<std::vector<ClientToken>, std::string> parse_client_tokens(std::string_view text) {
  if (text.size() > kMaxClientTokensFileBytes) {
    return tl::unexpected("more than " + std::to_string(kMaxClientTokensFileBytes) + " bytes");
  }
  std::vector<ClientToken> out;
  std::set<std::string, std::less<>> names;
  std::set<std::string, std::less<>> tokens;
  std::size_t line_no = 0;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const std::string_view raw = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
    ++line_no;
    const std::string_view line = core::trim_view(raw);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = "line " + std::to_string(line_no) + ": ";
    const auto gap = line.find_first_of(" \t");
    if (gap == std::string_view::npos) {
      return tl::unexpected(where + "expected `CLIENT TOKEN`, found one word");
    }
    const std::string_view name = line.substr(0, gap);
    const std::string_view token = core::trim_view(line.substr(gap + 1));
    if (!valid_name(name)) {
      return tl::unexpected(where + "a client name is 1 to " + std::to_string(kMaxClientNameBytes) +
                            " of A-Z a-z 0-9 . _ -");
    }
    if (name == kDefaultClient) {
      return tl::unexpected(where + "\"" + std::string(kDefaultClient) +
                            "\" is the client of calls without a token; name this one otherwise");
    }
    if (!valid_token(token)) {
      return tl::unexpected(where + "the token of '" + std::string(name) + "' must be " +
                            std::to_string(kMinClientTokenBytes) + " to " +
                            std::to_string(kMaxClientTokenBytes) +
                            " printable characters without spaces");
    }
    if (!names.insert(std::string(name)).second) {
      return tl::unexpected(where + "client '" + std::string(name) + "' is listed twice");
    }
    if (!tokens.insert(std::string(token)).second) {
      return tl::unexpected(where + "the token of '" + std::string(name) +
                            "' is another client's too; every client needs its own");
    }
    if (out.size() >= kMaxClientTokens) {
      return tl::unexpected(where + "more than " + std::to_string(kMaxClientTokens) + " clients");
    }
    out.push_back({std::string(name), std::string(token)});
  }
  return out;
}

std::optional<std::string> client_of_authorization(const std::vector<ClientToken>& tokens,
                                                   std::string_view authorization) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.substr(0, kBearer.size()) != kBearer) return std::nullopt;
  const std::string_view presented = core::trim_view(authorization.substr(kBearer.size()));
  std::optional<std::string> found;
  // Every token is compared, so the time taken does not tell which one matched.
  for (const auto& t : tokens) {
    if (t.token.size() == presented.size() &&
        CRYPTO_memcmp(t.token.data(), presented.data(), presented.size()) == 0) {
      found = t.client;
    }
  }
  return found;
}

}  // namespace pf::gateway
