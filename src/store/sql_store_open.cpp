// Choosing the database a store URL names (store/store_url.h reads URLs).
#include <functional>
#include <string_view>

#include "store/pg_connection.h"
#include "store/sql_store.h"
#include "store/sqlite_connection.h"
#include "store/store_url.h"

namespace pf::store {

std::unique_ptr<SqlStore> open_sql_store(const std::string& url) {
  if (is_postgres_url(url)) {
    // PgConnection's errors carry the URL redacted; so do the store's.
    return std::make_unique<SqlStore>(std::make_unique<PgConnection>(url), redacted_url(url),
                                      [url] { return std::make_unique<PgConnection>(url); });
  }
  std::string_view path = url;
  constexpr std::string_view kScheme = "sqlite:";
  if (path.starts_with(kScheme)) {
    path.remove_prefix(kScheme.size());
    // "sqlite:///var/lib/pf.db" names the absolute path /var/lib/pf.db.
    if (path.starts_with("//")) path.remove_prefix(2);
  } else if (path.find("://") != std::string_view::npos) {
    throw StoreError("unsupported store URL '" + redacted_url(url) +
                     "': use sqlite:PATH, a file path, or postgres://…");
  }
  if (path.empty()) throw StoreError("store URL '" + url + "' names no database path");
  const std::string file(path);
  // Each ":memory:" connection is a database of its own: inputs stay on the one connection.
  std::function<std::unique_ptr<sql::Connection>()> open_more;
  if (file != ":memory:") open_more = [file] { return std::make_unique<SqliteConnection>(file); };
  return std::make_unique<SqlStore>(std::make_unique<SqliteConnection>(file), file,
                                    std::move(open_more));
}

std::unique_ptr<Store> open_store(const std::string& url) {
  return open_sql_store(url);
}

}  // namespace pf::store
