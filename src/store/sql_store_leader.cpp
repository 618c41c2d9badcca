// SqlStore's leader lease (issue 14, core/leader_lease.h): the `leader_lease` table. The
// decision is core's; this file only reads the row and writes a decided one with a
// compare-and-set (a conditional UPDATE on the holder, epoch and expiry read), so two replicas
// racing for a lapsed lease cannot both win, and a renewal or take decided on a row that has
// changed since (a paused replica's stale read) does not land. Plain SQL that SQLite (3.35+) and
// PostgreSQL/YugabyteDB both run: no advisory locks, INSERT ... ON CONFLICT DO NOTHING, UPDATE ...
// RETURNING.
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {

using sql::Statement;

std::optional<core::LeaseRow> SqlStore::leader_lease(const std::string& name) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT name, holder, holder_url, holder_process, epoch, expires_at, taken_at, "
              "renewed_at FROM "
              "leader_lease WHERE name = :name",
              "reading leader lease " + name);
  s.bind_text(":name", name);
  if (!s.next()) return std::nullopt;
  core::LeaseRow row;
  row.name = s.text("name");
  row.holder = s.text("holder");
  row.holder_url = s.text("holder_url");
  row.holder_process = s.text("holder_process");
  row.epoch = s.integer("epoch");
  row.expires_at = s.real("expires_at");
  row.taken_at = s.real("taken_at");
  row.renewed_at = s.real("renewed_at");
  return row;
}

bool SqlStore::write_leader_lease(const core::LeaseRow& row, const core::LeaseRow& read) {
  if (row.name.empty() || row.holder.empty()) {
    throw StoreError("writing leader lease: a lease needs a name and a holder");
  }
  std::lock_guard lock(mutex_);
  bool written = false;
  transaction([&] {
    Statement first(*conn_,
                    "INSERT INTO leader_lease (name, holder, holder_url, holder_process, epoch, "
                    "expires_at, taken_at, renewed_at) VALUES (:name, '', '', '', 0, 0, 0, 0) "
                    "ON CONFLICT (name) DO NOTHING",
                    "creating leader lease " + row.name);
    first.bind_text(":name", row.name);
    first.run();
    Statement cas(
        *conn_,
        "UPDATE leader_lease SET holder = :holder, holder_url = :holder_url, "
        "holder_process = :holder_process, epoch = :epoch, expires_at = :expires_at, taken_at = "
        ":taken_at, renewed_at = "
        ":renewed_at WHERE name = :name AND holder = :read_holder AND epoch = :read_epoch "
        "AND expires_at = :read_expires_at RETURNING epoch",
        "writing leader lease " + row.name + " for " + row.holder);
    cas.bind_text(":name", row.name);
    cas.bind_text(":holder", row.holder);
    cas.bind_text(":holder_url", row.holder_url);
    cas.bind_text(":holder_process", row.holder_process);
    cas.bind_int(":epoch", row.epoch);
    cas.bind_real(":expires_at", row.expires_at);
    cas.bind_real(":taken_at", row.taken_at);
    cas.bind_real(":renewed_at", row.renewed_at);
    cas.bind_text(":read_holder", read.holder);
    cas.bind_int(":read_epoch", read.epoch);
    cas.bind_real(":read_expires_at", read.expires_at);
    while (cas.next()) written = true;
  });
  return written;
}

}  // namespace pf::store
