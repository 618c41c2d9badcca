// SqlStore's leader lease (issue 14, core/leader_lease.h): the `leader_lease` table. The
// decision is core's; this file only reads the row and writes a decided one with a
// compare-and-set (a conditional UPDATE on the holder, epoch and expiry read), so two replicas
// racing for a lapsed lease cannot both win, and a renewal or take decided on a row that has
// changed since (a paused replica's stale read) does not land. Plain SQL that SQLite (3.35+) and
// PostgreSQL/YugabyteDB both run: no advisory locks, INSERT ... ON CONFLICT DO NOTHING, UPDATE ...
// RETURNING, SELECT ... FOR SHARE.
//
// The fence inside a job transaction (lock_leader_lease) must not interleave with a take: on
// PostgreSQL (READ COMMITTED) it reads the row FOR SHARE, so a take waits for that transaction to
// end and a take committed first is what the read sees; SQLite's write transactions (BEGIN
// IMMEDIATE) are serialised already. The lock has two limits so that a leader paused inside such
// a transaction cannot stall a failover: the holder's session is ended by PostgreSQL once it sits
// idle in that transaction for longer than the caller's limit (the lease's ttl), and a take waits
// for the lock at most kLeaseLockWaitMs, failing (logged, retried at the next try) rather than
// blocking the replica's store.
#include <algorithm>

#include "store/sql_columns.h"
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {

using sql::Statement;

namespace {

// How long a take waits for a job transaction's lock on the row before it gives up until the
// next try (a renewal interval later).
constexpr int kLeaseLockWaitMs = 1000;

// The lease row, described once (sql_columns.h): the reads select these columns, the
// compare-and-set writes all but the name it is keyed by.
const sql::Columns<core::LeaseRow, sql::RowRead>& lease_columns() {
  using L = sql::ColumnsOf<core::LeaseRow, sql::RowRead>;
  static const sql::Columns<core::LeaseRow, sql::RowRead> columns{
      L::text("name", &core::LeaseRow::name),
      L::text("holder", &core::LeaseRow::holder),
      L::text("holder_url", &core::LeaseRow::holder_url),
      L::text("holder_grpc", &core::LeaseRow::holder_grpc),
      L::text("holder_process", &core::LeaseRow::holder_process),
      L::int64("epoch", &core::LeaseRow::epoch),
      L::real("expires_at", &core::LeaseRow::expires_at),
      L::real("taken_at", &core::LeaseRow::taken_at),
      L::real("renewed_at", &core::LeaseRow::renewed_at),
  };
  return columns;
}

const sql::Columns<core::LeaseRow, sql::RowRead>& lease_written_columns() {
  static const auto columns =
      lease_columns().only({"holder", "holder_url", "holder_grpc", "holder_process", "epoch",
                            "expires_at", "taken_at", "renewed_at"});
  return columns;
}

const std::string& lease_select() {
  static const std::string sql =
      "SELECT " + lease_columns().list() + " FROM leader_lease WHERE name = :name";
  return sql;
}

std::optional<core::LeaseRow> read_lease_row(Statement& s) {
  if (!s.next()) return std::nullopt;
  core::LeaseRow row;
  sql::RowRead context{"leader lease"};
  lease_columns().read(s, row, context);
  return row;
}

}  // namespace

std::vector<std::string> sql::lease_tables_columns(std::string_view table) {
  if (table == "leader_lease") return lease_columns().names();
  return {};
}

std::optional<core::LeaseRow> SqlStore::leader_lease(const std::string& name) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, lease_select(), "reading leader lease " + name);
  s.bind_text(":name", name);
  return read_lease_row(s);
}

std::optional<core::LeaseRow> SqlStore::lock_leader_lease(const std::string& name,
                                                          double idle_limit_s) {
  std::lock_guard lock(mutex_);
  if (depth_ == 0 || conn_->dialect() != sql::Dialect::Postgres) {
    // Outside a transaction there is nothing to hold; SQLite's transaction already excludes
    // every other writer.
    Statement s(*conn_, lease_select(), "reading leader lease " + name);
    s.bind_text(":name", name);
    return read_lease_row(s);
  }
  const long long idle_ms =
      std::clamp(static_cast<long long>(idle_limit_s * 1000), 100LL, 3'600'000LL);
  // One round trip (the job fence runs in every job transaction, heartbeats' included): the
  // lock and the transaction's idle limit (set_config(..., true) is SET LOCAL) in one statement.
  static const std::string sql = "SELECT " + lease_columns().list() +
                                 ", set_config('idle_in_transaction_session_timeout', :idle_ms, "
                                 "true) AS idle_limit FROM leader_lease WHERE name = :name FOR "
                                 "SHARE";
  Statement s(*conn_, sql, "reading leader lease " + name + " for the transaction");
  s.bind_text(":name", name);
  s.bind_text(":idle_ms", std::to_string(idle_ms));
  return read_lease_row(s);
}

bool SqlStore::write_leader_lease(const core::LeaseRow& row, const core::LeaseRow& read) {
  if (row.name.empty() || row.holder.empty()) {
    throw StoreError("writing leader lease: a lease needs a name and a holder");
  }
  std::lock_guard lock(mutex_);
  bool written = false;
  transaction([&] {
    if (conn_->dialect() == sql::Dialect::Postgres) {
      conn_->exec("SET LOCAL lock_timeout = " + std::to_string(kLeaseLockWaitMs),
                  "bounding the wait for the leader lease");
    }
    // An empty row to compare against when the lease was never taken.
    static const std::string create = "INSERT INTO leader_lease (" + lease_columns().list() +
                                      ") VALUES (" + lease_columns().placeholders() +
                                      ") ON CONFLICT (name) DO NOTHING";
    Statement first(*conn_, create, "creating leader lease " + row.name);
    core::LeaseRow empty;
    empty.name = row.name;
    lease_columns().bind(first, empty);
    first.run();
    static const std::string sql =
        "UPDATE leader_lease SET " + lease_written_columns().assignments() +
        " WHERE name = :name AND holder = :read_holder AND epoch = :read_epoch AND expires_at = "
        ":read_expires_at RETURNING epoch";
    Statement cas(*conn_, sql, "writing leader lease " + row.name + " for " + row.holder);
    cas.bind_text(":name", row.name);
    lease_written_columns().bind(cas, row);
    cas.bind_text(":read_holder", read.holder);
    cas.bind_int(":read_epoch", read.epoch);
    cas.bind_real(":read_expires_at", read.expires_at);
    while (cas.next()) written = true;
  });
  return written;
}

}  // namespace pf::store
