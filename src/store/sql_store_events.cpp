// SqlStore's audit trail (EventStore, store/event_store.h): instance_events and the agents' logs.
#include <string_view>
#include <vector>

#include "store/sql_columns.h"
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {
namespace {

using sql::RowRead;
using sql::Statement;

const sql::Columns<core::InstanceEvent, RowRead>& event_columns() {
  using E = sql::ColumnsOf<core::InstanceEvent, RowRead>;
  static const sql::Columns<core::InstanceEvent, RowRead> columns{
      E::int64("instance_id", &core::InstanceEvent::instance_id),
      E::real("at", &core::InstanceEvent::at),
      E::text("kind", &core::InstanceEvent::kind),
      E::text("message", &core::InstanceEvent::message),
      E::text("data_json", &core::InstanceEvent::data_json),
  };
  return columns;
}

core::InstanceEvent read_event(const Statement& s) {
  core::InstanceEvent e;
  e.id = s.integer("id");
  RowRead context{"event " + std::to_string(e.id)};
  event_columns().read(s, e, context);
  return e;
}

}  // namespace

std::vector<std::string> sql::event_tables_columns(std::string_view table) {
  if (table == "instance_events") return event_columns().names();
  return {};
}

// --- audit trail ---------------------------------------------------------------------------------

std::int64_t SqlStore::append_event(const core::InstanceEvent& event) {
  std::lock_guard lock(mutex_);
  static const std::string sql = "INSERT INTO instance_events (" + event_columns().list() +
                                 ") VALUES (" + event_columns().placeholders() + ") RETURNING id";
  Statement s(
      *conn_, sql,
      "appending '" + event.kind + "' event for instance " + std::to_string(event.instance_id));
  event_columns().bind(s, event);
  return sql::inserted_id(s);
}

std::vector<core::InstanceEvent> SqlStore::events(std::int64_t instance_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT * FROM (SELECT * FROM instance_events WHERE instance_id = :instance_id "
              "ORDER BY at DESC, id DESC LIMIT :limit) AS recent ORDER BY at, id",
              "reading events of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  s.bind_int(":limit", sql::limit_or_all(limit));
  std::vector<core::InstanceEvent> out;
  while (s.next()) out.push_back(read_event(s));
  return out;
}

// --- agent logs ----------------------------------------------------------------------------------

void SqlStore::append_agent_log(std::int64_t instance_id, double at, std::string_view text,
                                std::size_t max_bytes) {
  std::lock_guard lock(mutex_);
  if (text.empty() || max_bytes == 0) return;
  // A chunk larger than the whole allowance keeps its newest bytes.
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  const std::string doing = "appending to the log of instance " + std::to_string(instance_id);
  transaction([&] {
    // Two replicas appending to one instance's log would each trim without seeing the other's
    // chunk and keep more than allowed: on PostgreSQL the instance row is locked first (NO KEY
    // UPDATE: the log rows' foreign key checks still pass). SQLite's BEGIN IMMEDIATE already
    // serialises every writer.
    if (conn_->dialect() == sql::Dialect::Postgres) {
      Statement lock_row(
          *conn_, "SELECT id FROM instances WHERE id = :instance_id FOR NO KEY UPDATE", doing);
      lock_row.bind_int(":instance_id", instance_id);
      lock_row.run();
    }
    {
      Statement s(*conn_,
                  "INSERT INTO agent_logs (instance_id, at, bytes, text) "
                  "VALUES (:instance_id, :at, :bytes, :text)",
                  doing);
      s.bind_int(":instance_id", instance_id);
      s.bind_real(":at", at);
      s.bind_int(":bytes", static_cast<std::int64_t>(text.size()));
      sql::bind_bytes(conn_->dialect(), s, ":text", text);
      s.run();
    }
    // Newest first: everything past the byte allowance or the chunk cap goes.
    Statement trim(*conn_,
                   "DELETE FROM agent_logs WHERE id IN (SELECT id FROM ("
                   "SELECT id, SUM(bytes) OVER (ORDER BY id DESC) AS kept, "
                   "ROW_NUMBER() OVER (ORDER BY id DESC) AS n "
                   "FROM agent_logs WHERE instance_id = :instance_id) AS ranked "
                   "WHERE kept > :max_bytes OR n > :max_chunks)",
                   doing);
    trim.bind_int(":instance_id", instance_id);
    trim.bind_int(":max_bytes", static_cast<std::int64_t>(max_bytes));
    trim.bind_int(":max_chunks", static_cast<std::int64_t>(kMaxAgentLogChunks));
    trim.run();
  });
}

std::string SqlStore::agent_log(std::int64_t instance_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT text FROM agent_logs WHERE instance_id = :instance_id ORDER BY id",
              "reading the log of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  std::string out;
  const bool bytea = conn_->dialect() == sql::Dialect::Postgres;
  while (s.next()) out += bytea ? s.blob("text") : s.text("text");
  return out;
}

// --- retention -------------------------------------------------------------------------------

namespace {

// Deletes the rows of `table` whose instance was destroyed before `before`: through the index on
// instances(state, destroyed_at), so a sweep that finds nothing old reads little.
std::int64_t drop_rows_of_destroyed(sql::Connection& c, const char* table, double before) {
  Statement s(c,
              std::string("DELETE FROM ") + table +
                  " WHERE instance_id IN (SELECT id FROM instances WHERE state = 'destroyed' AND "
                  "destroyed_at IS NOT NULL AND destroyed_at > 0 AND destroyed_at < :before)",
              std::string("removing the ") + table + " of instances destroyed long ago");
  s.bind_real(":before", before);
  s.run();
  return s.changes();
}

}  // namespace

std::int64_t SqlStore::drop_agent_logs(double destroyed_before) {
  std::lock_guard lock(mutex_);
  return drop_rows_of_destroyed(*conn_, "agent_logs", destroyed_before);
}

std::int64_t SqlStore::drop_events(double destroyed_before) {
  std::lock_guard lock(mutex_);
  return drop_rows_of_destroyed(*conn_, "instance_events", destroyed_before);
}

}  // namespace pf::store
