// Each table's columns are described once (src/store/sql_columns.h) and every statement that
// writes or reads the table follows from that description; the schema itself is built by each
// dialect's migrations. These tests hold the two together: on SQLite and on PostgreSQL, the
// migrated table has exactly the described columns, plus its id and what is written on its own.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "store/sql_store_detail.h"
#include "support/store_backends.h"

namespace pf::store {
namespace {

using pf::testing::Backend;
using pf::testing::TestDatabase;

std::vector<std::string> schema_columns(sql::Connection& connection, const std::string& table) {
  const std::string query =
      connection.dialect() == sql::Dialect::Sqlite
          ? "SELECT name FROM pragma_table_info(:table)"
          : "SELECT column_name AS name FROM information_schema.columns WHERE "
            "table_schema = current_schema() AND table_name = :table";
  sql::Statement s(connection, query, "reading the columns of " + table);
  s.bind_text(":table", table);
  std::vector<std::string> names;
  while (s.next()) names.push_back(s.text("name"));
  std::sort(names.begin(), names.end());
  return names;
}

struct DescribedTable {
  std::string table;
  std::vector<std::string> beside;  // in the schema, not in the description
};

class StoreSchemaTest : public ::testing::TestWithParam<Backend> {};

TEST_P(StoreSchemaTest, EveryDescribedTableHasExactlyItsDescribedColumns) {
  TestDatabase db(GetParam());
  auto store = db.open();  // migrated to the latest schema
  const std::vector<DescribedTable> tables{
      {"instances", {"id"}},           {"jobs", {"id", "proof"}}, {"instance_events", {"id"}},
      {"bench_runs", {"id"}},          {"bad_hosts", {}},         {"proof_samples", {}},
      {"memory_observations", {"id"}}, {"leader_lease", {}},
  };
  for (const auto& t : tables) {
    std::vector<std::string> expected = sql::described_columns(t.table);
    ASSERT_FALSE(expected.empty()) << t.table << " has no description";
    expected.insert(expected.end(), t.beside.begin(), t.beside.end());
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(schema_columns(store->connection(), t.table), expected) << t.table;
  }
}

TEST(StoreSchema, ADescriptionNamesEachColumnOnce) {
  for (const char* table : {"instances", "jobs", "instance_events", "bench_runs", "bad_hosts",
                            "proof_samples", "memory_observations", "leader_lease"}) {
    auto names = sql::described_columns(table);
    std::sort(names.begin(), names.end());
    EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << table;
  }
  EXPECT_TRUE(sql::described_columns("no_such_table").empty());
}

INSTANTIATE_TEST_SUITE_P(Db, StoreSchemaTest, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

}  // namespace
}  // namespace pf::store
