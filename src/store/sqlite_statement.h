// Internal to src/store: RAII over SQLite's C API and the prepared-statement cache every
// SqliteStore file uses. Parameters are named and columns read by name.
#pragma once

#include <sqlite3.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "store/store.h"

namespace pf::store::sqlite_detail {

// --- RAII over the C API -----------------------------------------------------------------------

struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

[[noreturn]] inline void fail(sqlite3* db, std::string_view doing) {
  throw StoreError(std::string(doing) + ": " + sqlite3_errmsg(db));
}

// Runs SQL that carries no values (DDL, pragmas, transaction control).
inline void exec(sqlite3* db, const std::string& sql, std::string_view doing) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, doing);
}

// Used while an exception is already propagating: a failure here must not replace it.
inline void rollback_quietly(sqlite3* db) {
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

// A prepared statement kept for reuse. Parsing SQL costs more than running it (it dominated the
// agent heartbeat), so each SqliteStore prepares each distinct SQL text once.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct CachedStatement {
  StmtHandle stmt;
  // Column name → index, read once at prepare time: rows are read by name, and an `instances`
  // row has 36 columns.
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> columns;
  bool in_use = false;  // a Statement holds it; a second user of the same SQL prepares its own
};

class StatementCache {
 public:
  // The cached statement for sql, prepared on first use; nullptr when it is already in use.
  CachedStatement* borrow(sqlite3* db, std::string_view sql, const std::string& doing) {
    auto it = by_sql_.find(sql);
    if (it == by_sql_.end()) {
      auto entry = std::make_unique<CachedStatement>();
      entry->stmt = prepare(db, sql, doing);
      const int n = sqlite3_column_count(entry->stmt.get());
      for (int i = 0; i < n; ++i)
        entry->columns.emplace(sqlite3_column_name(entry->stmt.get(), i), i);
      it = by_sql_.emplace(std::string(sql), std::move(entry)).first;
    }
    if (it->second->in_use) return nullptr;
    it->second->in_use = true;
    return it->second.get();
  }

  static StmtHandle prepare(sqlite3* db, std::string_view sql, const std::string& doing) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    StmtHandle stmt(raw);
    if (rc != SQLITE_OK) fail(db, doing + " (preparing)");
    return stmt;
  }

 private:
  std::unordered_map<std::string, std::unique_ptr<CachedStatement>, StringHash, std::equal_to<>>
      by_sql_;
};

// One use of a prepared statement. Parameters are named (":name") and columns are read by name,
// so the long instance rows cannot silently shift when a column is added.
class Statement {
 public:
  // Prepares sql for this use only (migrations, pragmas: SQL that runs once).
  Statement(sqlite3* db, std::string_view sql, std::string doing)
      : db_(db), doing_(std::move(doing)) {
    owned_ = StatementCache::prepare(db, sql, doing_);
    stmt_ = owned_.get();
  }
  // Uses the cache's statement for sql; resets it for the next user when done.
  Statement(StatementCache& cache, sqlite3* db, std::string_view sql, std::string doing)
      : db_(db), doing_(std::move(doing)) {
    cached_ = cache.borrow(db, sql, doing_);
    if (cached_ != nullptr) {
      stmt_ = cached_->stmt.get();
    } else {
      owned_ = StatementCache::prepare(db, sql, doing_);
      stmt_ = owned_.get();
    }
  }
  ~Statement() {
    if (cached_ == nullptr) return;
    // Resetting ends the statement's read of the database (an unreset SELECT would pin an old
    // snapshot) and its result code repeats an error already thrown, so it is not checked.
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    cached_->in_use = false;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind_int(const char* name, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, param(name), value));
  }
  void bind_bool(const char* name, bool value) { bind_int(name, value ? 1 : 0); }
  void bind_real(const char* name, double value) {
    // SQLite would turn NaN into NULL, which comes back as 0: refuse rather than lose it.
    if (std::isnan(value)) throw StoreError(doing_ + ": " + (name + 1) + " is NaN");
    check(sqlite3_bind_double(stmt_, param(name), value));
  }
  void bind_text(const char* name, std::string_view value) {
    check(sqlite3_bind_text64(stmt_, param(name), value.data(), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }
  void bind_blob(const char* name, std::string_view value) {
    check(sqlite3_bind_blob64(stmt_, param(name), value.data(), value.size(), SQLITE_TRANSIENT));
  }
  void bind_null(const char* name) { check(sqlite3_bind_null(stmt_, param(name))); }
  void bind_opt_real(const char* name, const std::optional<double>& value) {
    if (value)
      bind_real(name, *value);
    else
      bind_null(name);
  }
  void bind_opt_int(const char* name, const std::optional<std::int64_t>& value) {
    if (value)
      bind_int(name, *value);
    else
      bind_null(name);
  }

  // True while a row is available.
  bool next() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, doing_);
  }
  void run() {
    while (next()) {
    }
  }
  // Rows changed by the last run() (meaningful for INSERT/UPDATE/DELETE).
  int changes() const { return sqlite3_changes(db_); }

  bool is_null(const char* col) const {
    return sqlite3_column_type(stmt_, column(col)) == SQLITE_NULL;
  }
  std::int64_t integer(const char* col) const { return sqlite3_column_int64(stmt_, column(col)); }
  int int32(const char* col) const {
    const std::int64_t v = integer(col);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      throw StoreError(doing_ + ": column " + col + " is out of range: " + std::to_string(v));
    }
    return static_cast<int>(v);
  }
  bool boolean(const char* col) const { return integer(col) != 0; }
  double real(const char* col) const { return sqlite3_column_double(stmt_, column(col)); }
  std::string text(const char* col) const { return std::string(text_view(col)); }
  // Valid until the next step or the end of this Statement.
  std::string_view text_view(const char* col) const {
    const int i = column(col);
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i))};
  }
  std::string blob(const char* col) const {
    const int i = column(col);
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i))};
  }
  std::optional<double> opt_real(const char* col) const {
    if (is_null(col)) return std::nullopt;
    return real(col);
  }
  std::optional<std::int64_t> opt_integer(const char* col) const {
    if (is_null(col)) return std::nullopt;
    return integer(col);
  }

  const std::string& doing() const { return doing_; }

 private:
  int param(const char* name) const {
    const int i = sqlite3_bind_parameter_index(stmt_, name);
    if (i == 0) throw StoreError(doing_ + ": internal error: no SQL parameter " + name);
    return i;
  }
  int column(const char* name) const {
    if (cached_ != nullptr) {
      // SQLite re-prepares a statement after a schema change, which may move a column of
      // SELECT *: a remembered index is used only while the statement still names it so.
      auto it = cached_->columns.find(std::string_view(name));
      if (it != cached_->columns.end() && it->second < sqlite3_column_count(stmt_) &&
          std::strcmp(sqlite3_column_name(stmt_, it->second), name) == 0) {
        return it->second;
      }
    }
    const int n = sqlite3_column_count(stmt_);
    for (int i = 0; i < n; ++i) {
      if (std::strcmp(sqlite3_column_name(stmt_, i), name) == 0) return i;
    }
    throw StoreError(doing_ + ": internal error: no column " + name + " in the result");
  }
  void check(int rc) const {
    if (rc != SQLITE_OK) fail(db_, doing_ + " (binding)");
  }

  sqlite3* db_;
  std::string doing_;
  StmtHandle owned_;                   // set when this use prepared its own statement
  CachedStatement* cached_ = nullptr;  // set when borrowed from a StatementCache
  sqlite3_stmt* stmt_ = nullptr;
};

inline std::string dump_json(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw StoreError(std::string(what) + ": " + e.what());
  }
}

}  // namespace pf::store::sqlite_detail
