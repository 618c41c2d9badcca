// Internal to src/store: sql::Connection over SQLite's C API. One connection, used under
// SqlStore's mutex; WAL so CLI commands can read while the manager writes. Statements are
// prepared once per connection (parsing SQL cost more than running it on the agent heartbeat),
// and a file database is checkpointed by a thread of its own, so no commit pays for copying the
// WAL back.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "store/sql_connection.h"

struct sqlite3;

namespace pf::store {

class SqliteConnection final : public sql::Connection {
 public:
  // `path` is a database file (its directory must exist; it is created 0600) or ":memory:".
  explicit SqliteConnection(const std::string& path);
  ~SqliteConnection() override;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  sql::Dialect dialect() const override { return sql::Dialect::Sqlite; }
  std::unique_ptr<sql::Cursor> prepare(std::string_view sql, const std::string& doing) override;
  void exec(const std::string& sql, std::string_view doing) override;
  void begin() override;  // BEGIN IMMEDIATE: the write lock up front, so no upgrade deadlock
  void commit() override;
  void rollback_quietly() noexcept override;
  int schema_version() override;  // PRAGMA user_version
  void set_schema_version(int version) override;

 private:
  struct DbCloser {
    void operator()(sqlite3* db) const;
  };
  class StatementCache;
  class Checkpointer;

  std::unique_ptr<sqlite3, DbCloser> db_;
  // After db_, so they end before it closes.
  std::unique_ptr<StatementCache> statements_;
  std::unique_ptr<Checkpointer> checkpointer_;  // file databases only
};

}  // namespace pf::store
