#include "store/store_copy.h"

#include <algorithm>
#include <memory>

namespace pf::store {
namespace {

// Kept out of a copy: the schema's own bookkeeping, the replicas' leader lease (who leads
// the source's fleet says nothing about the target's), and the destroyed instances' running
// totals, which the target's triggers build again as the instances land (migration 11).
bool copied(const std::string& table) {
  return table != "schema_version" && table != "leader_lease" && table != "destroyed_totals";
}

std::string quoted(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::int64_t count_rows(sql::Connection& c, const std::string& table, const std::string& doing) {
  sql::Statement s(c, "SELECT COUNT(*) AS n FROM " + quoted(table), doing);
  if (!s.next()) throw StoreError(doing + ": no count");
  return s.integer("n");
}

void bind_value(sql::Statement& insert, const char* name, sql::Cursor& row, int index) {
  switch (row.kind(index)) {
    case sql::ValueKind::Null:
      insert.bind_null(name);
      break;
    case sql::ValueKind::Integer:
      insert.bind_int(name, row.integer(index));
      break;
    case sql::ValueKind::Real:
      insert.bind_real(name, row.real(index));
      break;
    case sql::ValueKind::Text:
      insert.bind_text(name, row.text_view(index));
      break;
    case sql::ValueKind::Blob:
      insert.bind_blob(name, row.blob(index));
      break;
  }
}

// Copies every row of `table`; returns how many.
std::int64_t copy_table(sql::Connection& source, sql::Connection& target, const std::string& table,
                        std::int64_t total,
                        const std::function<void(const CopyProgress&)>& progress) {
  const std::string doing = "copying table " + table;
  sql::Statement rows(source, "SELECT * FROM " + quoted(table), doing + " (reading)");
  std::vector<std::string> params;
  std::string insert_sql;
  std::int64_t done = 0;
  while (rows.next()) {
    sql::Cursor& row = rows.cursor();
    if (insert_sql.empty()) {
      std::string columns;
      std::string values;
      for (int i = 0; i < row.column_count(); ++i) {
        params.push_back(":c" + std::to_string(i));
        columns += (i ? ", " : "") + quoted(row.column_name(i));
        values += (i ? ", " : "") + params.back();
      }
      insert_sql = "INSERT INTO " + quoted(table) + " (" + columns + ") VALUES (" + values + ")";
    }
    sql::Statement insert(target, insert_sql,
                          doing + " (writing row " + std::to_string(done + 1) + ")");
    for (int i = 0; i < row.column_count(); ++i) {
      bind_value(insert, params[static_cast<std::size_t>(i)].c_str(), row, i);
    }
    insert.run();
    ++done;
    if (progress && done % 5000 == 0) progress({table, done, total});
  }
  if (progress) progress({table, done, total});
  return done;
}

// PostgreSQL hands out ids from a sequence that copied rows did not advance: move each past the
// largest copied id so the next insert cannot collide.
void advance_id_sequences(sql::Connection& target, const std::vector<std::string>& tables) {
  if (target.dialect() != sql::Dialect::Postgres) return;
  for (const auto& table : tables) {
    bool has_id = false;
    {
      sql::Statement cols(target,
                          "SELECT column_name AS name FROM information_schema.columns WHERE "
                          "table_schema = current_schema() AND table_name = :table",
                          "reading the columns of " + table);
      cols.bind_text(":table", table);
      while (cols.next()) has_id = has_id || cols.text("name") == "id";
    }
    if (!has_id) continue;
    sql::Statement s(
        target,
        "SELECT setval(pg_get_serial_sequence(:table, 'id'), (SELECT COALESCE(MAX(id), "
        "0) + 1 FROM " +
            quoted(table) + "), false) AS v",
        "advancing the id sequence of " + table);
    s.bind_text(":table", quoted(table));
    s.run();
  }
}

}  // namespace

std::vector<std::string> store_tables(sql::Connection& connection) {
  const std::string sql =
      connection.dialect() == sql::Dialect::Sqlite
          ? "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
          : "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = "
            "current_schema() AND table_type = 'BASE TABLE'";
  std::vector<std::string> tables;
  sql::Statement s(connection, sql, "listing the tables");
  while (s.next()) {
    std::string name = s.text("name");
    if (copied(name)) tables.push_back(std::move(name));
  }
  // Every reference in the schema points at instances: it goes first, the rest by name.
  std::sort(tables.begin(), tables.end(), [](const std::string& a, const std::string& b) {
    if ((a == "instances") != (b == "instances")) return a == "instances";
    return a < b;
  });
  return tables;
}

std::vector<TableCopy> copy_store(sql::Connection& source, sql::Connection& target,
                                  const std::function<void(const CopyProgress&)>& progress) {
  const int from_version = source.schema_version();
  const int to_version = target.schema_version();
  if (from_version != to_version) {
    throw StoreError("the source holds schema version " + std::to_string(from_version) +
                     " and the target " + std::to_string(to_version) +
                     ": open both with this build first");
  }
  const std::vector<std::string> tables = store_tables(source);
  const std::vector<std::string> target_tables = store_tables(target);
  for (const auto& table : tables) {
    if (std::find(target_tables.begin(), target_tables.end(), table) == target_tables.end())
      throw StoreError("the target has no table " + table);
    const std::int64_t n = count_rows(target, table, "checking that the target is empty");
    if (n != 0) {
      throw StoreError("the target is not empty: table " + table + " holds " + std::to_string(n) +
                       " rows (migrate copies into an empty database)");
    }
  }

  std::vector<TableCopy> out;
  // One snapshot of the source, one transaction on the target: all of it lands or nothing.
  source.begin();
  try {
    target.begin();
    try {
      for (const auto& table : tables) {
        TableCopy c;
        c.table = table;
        c.source_rows = count_rows(source, table, "counting the source's rows");
        const std::int64_t copied_rows = copy_table(source, target, table, c.source_rows, progress);
        const std::int64_t landed = count_rows(target, table, "counting the copied rows");
        if (copied_rows != c.source_rows || landed != c.source_rows) {
          throw StoreError("table " + table + ": the source holds " +
                           std::to_string(c.source_rows) + " rows but " + std::to_string(landed) +
                           " were written");
        }
        out.push_back(std::move(c));
      }
      advance_id_sequences(target, tables);
      target.commit();
    } catch (...) {
      target.rollback_quietly();
      throw;
    }
    source.commit();
  } catch (...) {
    source.rollback_quietly();
    throw;
  }
  for (auto& c : out) c.target_rows = count_rows(target, c.table, "counting the copied rows");
  return out;
}

}  // namespace pf::store
