#include "store/store_url.h"

#include <cctype>
#include <utility>
#include <vector>

namespace pf::store {
namespace {

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(text[i])) != prefix[i]) return false;
  }
  return true;
}

// Where the user:password part of a URL is: [begin, end) of the text before '@' in the
// authority; empty when there is none.
struct Userinfo {
  std::size_t begin = 0;
  std::size_t end = 0;
};

Userinfo userinfo(std::string_view url) {
  const auto scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {};
  const std::size_t begin = scheme_end + 3;
  const std::size_t authority_end = url.find_first_of("/?#", begin);
  const std::string_view authority =
      url.substr(begin, authority_end == std::string_view::npos ? std::string_view::npos
                                                                : authority_end - begin);
  const auto at = authority.rfind('@');
  if (at == std::string_view::npos) return {};
  return {begin, begin + at};
}

// [begin, end) of the value of each `password=` query parameter, in order.
template <typename Fn>
void for_each_password_parameter(std::string_view url, Fn&& fn) {
  const auto query = url.find('?');
  if (query == std::string_view::npos) return;
  std::size_t pos = query + 1;
  while (pos <= url.size()) {
    const auto amp = url.find('&', pos);
    const std::size_t end = amp == std::string_view::npos ? url.size() : amp;
    const std::string_view param = url.substr(pos, end - pos);
    if (starts_with_nocase(param, "password=")) fn(pos + 9, end);
    if (amp == std::string_view::npos) break;
    pos = amp + 1;
  }
}

}  // namespace

bool is_postgres_url(std::string_view url) {
  return starts_with_nocase(url, "postgres://") || starts_with_nocase(url, "postgresql://");
}

bool url_has_password(std::string_view url) {
  if (!is_postgres_url(url)) return false;
  const Userinfo u = userinfo(url);
  if (url.substr(u.begin, u.end - u.begin).find(':') != std::string_view::npos) return true;
  bool found = false;
  for_each_password_parameter(url, [&](std::size_t, std::size_t) { found = true; });
  return found;
}

std::string redacted_url(std::string_view url) {
  if (!is_postgres_url(url)) return std::string(url);
  std::string out(url);
  // Query parameters first (they lie after the userinfo, so its offsets stay valid).
  std::vector<std::pair<std::size_t, std::size_t>> params;
  for_each_password_parameter(url,
                              [&](std::size_t b, std::size_t e) { params.emplace_back(b, e); });
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    out.replace(it->first, it->second - it->first, "***");
  }
  const Userinfo u = userinfo(url);
  const auto colon = url.substr(u.begin, u.end - u.begin).find(':');
  if (colon != std::string_view::npos) {
    const std::size_t from = u.begin + colon + 1;
    out.replace(from, u.end - from, "***");
  }
  return out;
}

}  // namespace pf::store
