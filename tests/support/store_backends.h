// Store tests on every database the store runs on (issue 14: one suite, both stores). A test
// suite takes a Backend parameter and instantiates with kStoreBackends:
//
//   class MyStoreTest : public ::testing::TestWithParam<pf::testing::Backend> { ... };
//   INSTANTIATE_TEST_SUITE_P(Db, MyStoreTest, pf::testing::kStoreBackends,
//                            pf::testing::backend_name);
//
// TestDatabase names a new database of that kind (SQLite: an empty file in a private temporary
// directory or ":memory:"; PostgreSQL: a fresh database on the run's test server, holding this
// build's schema unless asked for an empty one, tests/support/pg_server.h) and opens stores on
// it, as many as a test wants.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/sql_store.h"
#include "support/pg_server.h"
#include "support/temp_dir.h"

namespace pf::testing {

enum class Backend { SqliteMemory, Sqlite, Postgres };

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::SqliteMemory:
      return "sqlite_memory";
    case Backend::Sqlite:
      return "sqlite";
    case Backend::Postgres:
      return "postgres";
  }
  return "unknown";
}

// A database every connection of a test shares (SQLite's file, PostgreSQL's database).
inline const auto kStoreBackends = ::testing::Values(Backend::Sqlite, Backend::Postgres);
// And SQLite in memory too, for the store's own behaviour tests.
inline const auto kAllStoreBackends =
    ::testing::Values(Backend::SqliteMemory, Backend::Sqlite, Backend::Postgres);

class TestDatabase {
 public:
  // On PostgreSQL, `schema` Latest (the default) copies a database already migrated to this
  // build's schema (pg_server.h): opening a store on it migrates nothing, as on a running
  // fleet's database. A test of the migrations themselves asks for PgSchema::Empty. SQLite
  // always starts empty (its migrations cost a few milliseconds).
  explicit TestDatabase(Backend backend, pf::test::PgSchema schema = pf::test::PgSchema::Latest)
      : backend_(backend) {
    switch (backend) {
      case Backend::SqliteMemory:
        url_ = ":memory:";
        break;
      case Backend::Sqlite:
        url_ = "sqlite:" + dir_.file("fleet.db");
        break;
      case Backend::Postgres:
        url_ = pf::test::fresh_pg_database(schema);
        break;
    }
  }

  Backend backend() const { return backend_; }
  bool is_postgres() const { return backend_ == Backend::Postgres; }
  // What open_store takes. ":memory:" opens a new, separate database each time.
  const std::string& url() const { return url_; }
  std::unique_ptr<store::SqlStore> open() const { return store::open_sql_store(url_); }
  // A private directory for whatever else the test writes (job inputs, ...).
  const TempDir& dir() const { return dir_; }

 private:
  Backend backend_;
  TempDir dir_;
  std::string url_;
};

}  // namespace pf::testing
