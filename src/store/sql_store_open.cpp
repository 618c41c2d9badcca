// Choosing the database a store URL names, and what of that URL errors may show.
#include <algorithm>
#include <string_view>

#include "store/sql_store.h"
#include "store/sqlite_connection.h"

namespace pf::store {
namespace {

constexpr std::string_view kPostgresSchemes[] = {"postgres://", "postgresql://"};

bool is_postgres_url(std::string_view url) {
  for (auto scheme : kPostgresSchemes)
    if (url.starts_with(scheme)) return true;
  return false;
}

}  // namespace

std::string redact_store_url(std::string_view url) {
  std::string out(url);
  const auto scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    // The authority runs to the first '/', '?' or '#'; its user info ends at its last '@'.
    const std::size_t start = scheme_end + 3;
    const std::size_t end = std::min(out.find_first_of("/?#", start), out.size());
    const std::size_t at = out.rfind('@', end == 0 ? 0 : end - 1);
    if (at != std::string::npos && at >= start) {
      const std::size_t colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // libpq also takes the password as a parameter: ...?password=secret&sslmode=require.
  const auto query = out.find('?');
  if (query != std::string::npos) {
    std::size_t pos = query + 1;
    while (pos < out.size()) {
      std::size_t amp = out.find('&', pos);
      if (amp == std::string::npos) amp = out.size();
      constexpr std::string_view kKey = "password=";
      if (std::string_view(out).substr(pos, amp - pos).starts_with(kKey)) {
        out.replace(pos + kKey.size(), amp - pos - kKey.size(), "***");
        amp = pos + kKey.size() + 3;
      }
      pos = amp + 1;
    }
  }
  return out;
}

std::unique_ptr<SqlStore> open_sql_store(const std::string& url) {
  if (is_postgres_url(url)) {
    throw StoreError("unsupported store URL '" + redact_store_url(url) +
                     "': this build has no PostgreSQL store yet");
  }
  std::string_view path = url;
  constexpr std::string_view kScheme = "sqlite:";
  if (path.starts_with(kScheme)) {
    path.remove_prefix(kScheme.size());
    // "sqlite:///var/lib/pf.db" names the absolute path /var/lib/pf.db.
    if (path.starts_with("//")) path.remove_prefix(2);
  } else if (path.find("://") != std::string_view::npos) {
    throw StoreError("unsupported store URL '" + redact_store_url(url) +
                     "': use sqlite:PATH, a file path, or postgres://…");
  }
  if (path.empty()) throw StoreError("store URL '" + url + "' names no database path");
  const std::string file(path);
  return std::make_unique<SqlStore>(std::make_unique<SqliteConnection>(file), file);
}

std::unique_ptr<Store> open_store(const std::string& url) {
  return open_sql_store(url);
}

}  // namespace pf::store
