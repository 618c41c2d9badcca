// Internal to src/store: sql::Connection over PostgreSQL (libpq). One session, used under
// SqlStore's mutex. Named parameters (":name") become $1..$n once per SQL text and
// each text is prepared once per session; values travel as text (doubles in their shortest
// exact form, bytea as hex), so every value round-trips exactly.
//
// A session that breaks outside a transaction is replaced on the next use (a serve outlives a
// database restart); one that breaks inside a transaction fails that transaction: every
// statement of it throws until rollback_quietly(), and the next use reconnects. Every failure
// is a StoreError naming what was being done; no message carries the URL's password.
//
// For SQL run here: PostgreSQL infers each parameter's type from where it stands, so a
// parameter with no context (`:x IS NULL`, `SELECT :x`) needs a cast (`CAST(:x AS BIGINT)` or
// `:x::bigint`); integers bind as BIGINT text, so columns they go to are BIGINT. A failed
// statement aborts the whole transaction (unlike SQLite): a failure the store means to survive
// inside one runs under a SAVEPOINT. As in SQLite, an unbound parameter is NULL and a NULL
// reads as 0 / "" through integer()/real()/text(); a BOOLEAN column reads as 0/1 through
// integer().
//
// Round trips: BEGIN and the writes run through Statement::run_or_defer() inside a
// transaction are held back and sent, in one libpq pipeline, with the next statement that needs
// an answer or with the COMMIT (so a transaction that reads a row and writes two costs two
// round trips, not five). A held-back write that fails fails the statement it travelled with,
// naming the write, and the transaction is rolled back.
//
// Commits sent ahead (commit_sent): a transaction that sent nothing yet (BEGIN and its writes all
// held) goes out as one pipeline segment without BEGIN/COMMIT, which PostgreSQL runs as one
// implicit transaction (a failure undoes all of it and nothing of the segments after it), and
// the caller is free before the answer comes. The next transaction is sent behind it on the same
// session; whatever next needs an answer reads the earlier answers first (in order, filling
// their outcomes), and read_arrived() reads those that came without waiting. So the agent path's
// round trip no longer holds the store: callers overlap theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/sql_connection.h"

// libpq's handles (libpq-fe.h stays out of this header).
extern "C" {
struct pg_result;
}

namespace pf::store {

namespace pg_detail {

// SQL with ":name" parameters rewritten to PostgreSQL's $k. A name used twice maps to one $k;
// `::type` casts and text inside quotes ('…', "…", $tag$…$tag$) and comments are untouched.
struct PositionalSql {
  std::string text;
  std::vector<std::string> names;  // names[k - 1] is $k's name, with its colon (":id")
};
PositionalSql to_positional_parameters(std::string_view sql);

struct SqlHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

}  // namespace pg_detail

class PgConnection final : public sql::Connection {
 public:
  // `url`: postgres://[user[:password]@][host][:port][/dbname][?param=value&…] (or
  // postgresql://; store/store_url.h reads them). Connects now; throws StoreError (the URL
  // redacted) when it cannot.
  // A connect timeout and TCP keepalives are added unless the URL sets them.
  explicit PgConnection(std::string url);
  ~PgConnection() override;
  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;

  sql::Dialect dialect() const override { return sql::Dialect::Postgres; }
  std::unique_ptr<sql::Cursor> prepare(std::string_view sql, const std::string& doing) override;
  void exec(const std::string& sql, std::string_view doing) override;
  void begin() override;
  void commit() override;
  void rollback_quietly() noexcept override;
  std::shared_ptr<sql::SentCommit> commit_sent() override;
  int read_arrived() override;
  void on_sent_outcomes(std::function<void(bool failed)> hook) override {
    on_sent_outcomes_ = std::move(hook);
  }
  // The one row of table schema_version; 0 when the table does not exist.
  int schema_version() override;
  // Creates schema_version when absent and sets its row.
  void set_schema_version(int version) override;

  const std::string& redacted_url() const { return redacted_url_; }

  class Session;    // one libpq connection
  struct Prepared;  // one SQL text: its $k form, parameter and column names
  class PgCursor;
  struct Outgoing;  // one statement to send, with its values
  struct Failure;   // what libpq said went wrong
  struct ResultFree {
    void operator()(pg_result* result) const noexcept;
  };
  using Result = std::unique_ptr<pg_result, ResultFree>;

  // Held-back statements sent at once when this many wait (a long transaction's writes).
  static constexpr std::size_t kMaxHeldBack = 64;
  // Sent commits whose answers may be outstanding at once; one more is committed in place.
  static constexpr std::size_t kMaxInFlight = 64;

 private:
  // The session to run the next statement on, connecting when there is none (outside a
  // transaction) or throwing when the transaction's session was lost.
  Session& session_for(std::string_view doing);
  // Runs parameterless SQL (several statements allowed), after what is held back.
  void run_plain(const std::string& sql, std::string_view doing);
  // Prepares `out`'s statement on the session unless it already is.
  void prepare_on_session(Session& session, Outgoing& out);
  // Keeps `out` to send later (true), or says it must run now (false: no transaction).
  bool hold_back(const Outgoing& out);
  // Runs `out` and returns its result, sending what is held back first in the same round trip.
  Result run(Outgoing& out);
  // Sends what is held back, then `last` when given, in one pipeline; `last`'s result (null
  // without one). The first failure among them is thrown, naming its statement.
  Result run_held(Outgoing* last);
  // What went wrong, from a failed result (or null: the session's own message).
  Failure failure_of(const pg_result* result) const;
  // Throws the StoreError for `failure` (dropping a broken session first).
  [[noreturn]] void fail(std::string_view doing, const Failure& failure);
  // Reads the answers of sent commits: all of them (`wait`), or those already here. Never
  // throws: a broken session fails every outstanding commit and is dropped.
  void read_in_flight(bool wait) noexcept;
  // Ends every outstanding commit with `error` (the session broke under them).
  void fail_in_flight(const std::string& error) noexcept;
  void drop_session() noexcept;
  std::string scrub(std::string message) const;

  friend class PgCursor;

  std::string url_;  // with the connect timeout and keepalives added
  std::string redacted_url_;
  std::vector<std::string> secrets_;  // the password as written and decoded: never in a message
  std::unique_ptr<Session> session_;
  std::uint64_t session_generation_ = 0;  // bumps on every connect: statements re-prepare
  bool in_transaction_ = false;
  bool transaction_lost_ = false;  // the session broke inside the open transaction
  bool statement_failed_ = false;  // a statement failed since BEGIN or the last ROLLBACK TO
  bool last_sent_failed_ = false;  // of the last pipeline, the final statement itself failed
  std::vector<Outgoing> held_;     // BEGIN and deferred writes not yet sent, in order
  // One sent commit whose answers are not all read: its statements' results, then the sync.
  struct InFlight {
    std::vector<std::string> doing;  // per statement, for the error
    std::shared_ptr<sql::SentCommit> outcome;
    std::size_t read = 0;  // statements whose result was read
    bool ending = false;   // the current statement's result was read; its closing null is next
    std::string error;     // the first failure among them
    // That failure was the server refusing a statement (a SQLSTATE outside connection loss and
    // shutdown): the transaction was rolled back, whatever happens to the session next.
    bool refused = false;
  };
  std::deque<InFlight> in_flight_;
  std::function<void(bool failed)> on_sent_outcomes_;
  std::vector<std::unique_ptr<Prepared>> prepared_;  // by first use; index = statement name
  std::unordered_map<std::string, std::size_t, pg_detail::SqlHash, std::equal_to<>> by_sql_;
};

}  // namespace pf::store
