// Internal to src/store: the seam between the one SQL store (SqlStore: every Store method,
// written once) and the databases it runs on (SqliteConnection, PgConnection). A backend turns
// named parameters and named columns into its own API; the store never sees sqlite3_* or pqxx.
//
// SQL written against this interface must run on both SQLite (3.40, Debian bookworm) and
// PostgreSQL 15 / YugabyteDB YSQL: `INSERT ... ON CONFLICT ... DO NOTHING/UPDATE`, `RETURNING`,
// `COALESCE`, `lower(x) = lower(y)`, SAVEPOINT; no `INSERT OR IGNORE/REPLACE`, no
// `last_insert_rowid()`, no `COLLATE NOCASE` in queries, no advisory locks. Where the two must
// differ (DDL types, BEGIN IMMEDIATE), Connection::dialect() says which one runs.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "store/confirm.h"

namespace pf::store::sql {

enum class Dialect { Sqlite, Postgres };

// What a result value holds, for code that copies rows without knowing the table
// (proverfleet migrate): SQLite's storage class of the value; PostgreSQL's column type.
enum class ValueKind { Null, Integer, Real, Text, Blob };

// One use of a prepared statement, by a backend. Parameters are named (":name" in the SQL, the
// same name with its colon passed to bind_*); columns are found by name once (column()) and
// then read by index. The first next() runs the statement.
class Cursor {
 public:
  virtual ~Cursor() = default;

  virtual void bind_int(const char* name, std::int64_t value) = 0;
  virtual void bind_real(const char* name, double value) = 0;  // finite or ±inf; never NaN
  virtual void bind_text(const char* name, std::string_view value) = 0;  // valid UTF-8
  virtual void bind_blob(const char* name, std::string_view value) = 0;  // any bytes
  virtual void bind_null(const char* name) = 0;
  // Asks for the results in the database's binary form where it has one (PostgreSQL: bytea as
  // its bytes rather than hex text); then only integer(), blob() and text_view() of text
  // columns may read them. Before the first next(). Default: nothing changes (SQLite).
  virtual void prefer_binary_results() {}

  // True while a row is available. Throws StoreError naming what was being done.
  virtual bool next() = 0;
  // Runs a write whose rows nothing reads, or holds it back: a backend may keep it inside a
  // transaction and send it with the next statement that needs an answer, or with the COMMIT
  // (PostgreSQL: one round trip for several statements); its failure then fails the
  // transaction there, naming this statement. True when it ran now (changes() says what it
  // did); false when held back (changes() is unknown, and must not be relied on).
  virtual bool run_or_defer() = 0;
  // Rows changed by the statement (meaningful for INSERT/UPDATE/DELETE once next() returned
  // false).
  virtual std::int64_t changes() const = 0;

  virtual int column_count() const = 0;
  virtual std::string column_name(int index) const = 0;
  // The index of the column called `name`; throws StoreError when the result has none.
  virtual int column(const char* name) const = 0;
  virtual bool is_null(int index) const = 0;
  virtual ValueKind kind(int index) const = 0;
  virtual std::int64_t integer(int index) const = 0;
  virtual double real(int index) const = 0;
  // Valid until the next next() or the end of the cursor.
  virtual std::string_view text_view(int index) const = 0;
  virtual std::string blob(int index) const = 0;
};

// The outcome of a transaction whose COMMIT went out before its answer came
// (Connection::commit_sent). Written and read under the connection's user's lock.
struct SentCommit {
  bool done = false;
  std::string error;  // empty once done: committed
};

// A database connection. Not thread-safe: SqlStore serialises every use with its mutex.
class Connection {
 public:
  virtual ~Connection() = default;

  virtual Dialect dialect() const = 0;
  // A cursor for `sql` (prepared once per connection and reused when free). `doing` names the
  // operation in errors ("reading instance 4").
  virtual std::unique_ptr<Cursor> prepare(std::string_view sql, const std::string& doing) = 0;
  // Runs SQL that carries no parameters and returns no rows (DDL, SAVEPOINT, BEGIN, COMMIT).
  // May hold several statements separated by ';' (migrations).
  virtual void exec(const std::string& sql, std::string_view doing) = 0;
  // Starts a transaction that writes (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN).
  virtual void begin() = 0;
  virtual void commit() = 0;
  // Used while an exception propagates: never throws, and does nothing outside a transaction.
  virtual void rollback_quietly() noexcept = 0;
  // Ends the open transaction like commit(), but may return before the database answered: the
  // outcome is filled in when the answer is read, by the next use of the connection that needs
  // one or by read_arrived(). Other transactions may run meanwhile; they reach the database
  // after it, in order. A backend may send this way only a transaction that sent nothing yet;
  // any other is committed here and returned done. Default (SQLite): commit().
  virtual std::shared_ptr<SentCommit> commit_sent() {
    commit();
    auto done = std::make_shared<SentCommit>();
    done->done = true;
    return done;
  }
  // Reads, without waiting, the answers that arrived for sent commits. Returns the socket to
  // wait on (poll for POLLIN) for the rest, or -1 when none is outstanding.
  virtual int read_arrived() { return -1; }
  // Called whenever outcomes of sent commits were filled in (by whichever use of the connection
  // read them), `failed` when one of them failed (its transaction is undone: the user's copies
  // of what it wrote are no longer true). Under the user's lock; must not throw.
  virtual void on_sent_outcomes(std::function<void(bool failed)> /*hook*/) {}

  // The schema version the database holds (0: empty). SQLite: PRAGMA user_version;
  // PostgreSQL: a one-row table `schema_version` the migrations keep.
  virtual int schema_version() = 0;
  // Sets it (inside the migration's transaction).
  virtual void set_schema_version(int version) = 0;
};

// What store code uses: one statement use, bound and read by name. Same shape on every backend.
class Statement {
 public:
  Statement(Connection& connection, std::string_view sql, std::string doing)
      : doing_(std::move(doing)), cursor_(connection.prepare(sql, doing_)) {}

  void bind_int(const char* name, std::int64_t value) { cursor_->bind_int(name, value); }
  void bind_bool(const char* name, bool value) { bind_int(name, value ? 1 : 0); }
  void bind_real(const char* name, double value) {
    // SQLite would turn NaN into NULL, which comes back as 0: refuse rather than lose it.
    if (std::isnan(value)) throw StoreError(doing_ + ": " + (name + 1) + " is NaN");
    cursor_->bind_real(name, value);
  }
  void bind_text(const char* name, std::string_view value) { cursor_->bind_text(name, value); }
  void bind_blob(const char* name, std::string_view value) { cursor_->bind_blob(name, value); }
  void bind_null(const char* name) { cursor_->bind_null(name); }
  // See Cursor::prefer_binary_results: for statements that read MiBs of blobs.
  void prefer_binary_results() { cursor_->prefer_binary_results(); }
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

  bool next() { return cursor_->next(); }
  void run() {
    while (next()) {
    }
  }
  // See Cursor::run_or_defer. The hot agent path uses it, so that a PostgreSQL transaction
  // costs fewer round trips.
  bool run_or_defer() { return cursor_->run_or_defer(); }
  std::int64_t changes() const { return cursor_->changes(); }

  bool is_null(const char* col) const { return cursor_->is_null(cursor_->column(col)); }
  std::int64_t integer(const char* col) const { return cursor_->integer(cursor_->column(col)); }
  int int32(const char* col) const {
    const std::int64_t v = integer(col);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      throw StoreError(doing_ + ": column " + col + " is out of range: " + std::to_string(v));
    }
    return static_cast<int>(v);
  }
  bool boolean(const char* col) const { return integer(col) != 0; }
  double real(const char* col) const { return cursor_->real(cursor_->column(col)); }
  std::string text(const char* col) const { return std::string(text_view(col)); }
  // Valid until the next next() or the end of this Statement.
  std::string_view text_view(const char* col) const {
    return cursor_->text_view(cursor_->column(col));
  }
  std::string blob(const char* col) const { return cursor_->blob(cursor_->column(col)); }
  std::optional<double> opt_real(const char* col) const {
    if (is_null(col)) return std::nullopt;
    return real(col);
  }
  std::optional<std::int64_t> opt_integer(const char* col) const {
    if (is_null(col)) return std::nullopt;
    return integer(col);
  }

  // By index, for code that copies whole tables (proverfleet migrate).
  Cursor& cursor() { return *cursor_; }
  const std::string& doing() const { return doing_; }

 private:
  std::string doing_;
  std::unique_ptr<Cursor> cursor_;
};

}  // namespace pf::store::sql
