// Copies a fleet's whole history from one database to another (`proverfleet migrate`, e.g.
// from the SQLite file of one machine to the PostgreSQL that replicas share). Table by table,
// row by row, ids kept, in one transaction on the target; then checks every table's count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "store/sql_connection.h"

namespace pf::store {

struct TableCopy {
  std::string table;
  std::int64_t source_rows = 0;
  std::int64_t target_rows = 0;  // counted after the commit
};

struct CopyProgress {
  std::string table;
  std::int64_t rows_done = 0;
  std::int64_t rows_total = 0;
};

// Both connections hold the same schema version (open both through open_store first: it
// migrates). The target must be empty (no row in any table the source has): a copy into a
// database in use would mix two fleets' ids. Throws StoreError naming the table and row on any
// failure; the target is then left as it was (the copy is one transaction).
// `progress` is called every few thousand rows and at the end of each table.
std::vector<TableCopy> copy_store(sql::Connection& source, sql::Connection& target,
                                  const std::function<void(const CopyProgress&)>& progress = {});

// The tables of a store, parents first (rows that others reference are copied before them).
std::vector<std::string> store_tables(sql::Connection& connection);

}  // namespace pf::store
