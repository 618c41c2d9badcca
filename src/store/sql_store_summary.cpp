// SqlStore's hot reads (issue 14): what the fleet summary, the jobs report and the dashboard
// need of the fleet's history, asked of the database so that neither reads every row. A fleet
// keeps each rental it ever made; these paths run every second (dashboard) or on every scrape
// (/metrics), and their cost must not grow with the destroyed rows.
//
// Each query names the state 'destroyed' as a literal, never a bound value: that is what lets
// the partial indexes of migration 8 (instances_live, instances_destroyed,
// instances_destroyed_billed) serve it, on SQLite and on PostgreSQL alike. The destroyed rows'
// all-time totals are running totals (table destroyed_totals, kept by triggers: migration 11).
// The SQL is portable (see store/sql_connection.h).
#include <string>

#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {

using sql::Statement;

std::map<core::InstanceState, InstanceTotals> SqlStore::instance_totals() {
  std::lock_guard lock(mutex_);
  // One statement, so one snapshot: the all-time totals of two calls never step back (they
  // feed Prometheus counters). Live rows are read through instances_live; the destroyed ones
  // are the running totals the triggers of migration 11 keep in the same transaction as every
  // change to a destroyed row: one row, however long the history.
  Statement s(*conn_,
              "SELECT state, COUNT(*) AS instances, COALESCE(SUM(spend_usd), 0.0) AS spend_usd, "
              "CAST(COALESCE(SUM(proofs_production), 0) AS BIGINT) AS proofs_production "
              "FROM instances WHERE state <> 'destroyed' GROUP BY state "
              "UNION ALL "
              "SELECT 'destroyed', instances, spend_usd, proofs_production "
              "FROM destroyed_totals WHERE id = 1",
              "totalling instances by state");
  std::map<core::InstanceState, InstanceTotals> out;
  while (s.next()) {
    const std::int64_t count = s.integer("instances");
    if (count == 0) continue;  // the destroyed branch answers a row even when there are none
    const std::string name = s.text("state");
    const auto state = core::parse_instance_state(name);
    if (!state) throw StoreError("totalling instances: unknown state '" + name + "'");
    InstanceTotals& totals = out[*state];
    totals.instances = count;
    totals.spend_usd = s.real("spend_usd");
    totals.proofs_production = s.integer("proofs_production");
  }
  return out;
}

std::vector<core::InstanceRecord> SqlStore::destroyed_instances_since(double since) {
  std::lock_guard lock(mutex_);
  // Three index searches rather than one OR: neither SQLite's nor PostgreSQL's planner serves
  // an OR across two columns from two partial indexes as reliably.
  Statement s(*conn_,
              "SELECT * FROM instances WHERE id IN ("
              "SELECT id FROM instances WHERE state = 'destroyed' AND destroyed_at >= :since "
              "UNION SELECT id FROM instances WHERE state = 'destroyed' AND billed_until >= :since "
              "UNION SELECT id FROM instances WHERE state = 'destroyed' AND destroyed_at IS NULL"
              ") ORDER BY id",
              "listing instances destroyed since " + std::to_string(since));
  s.bind_real(":since", since);
  return read_instances(s);
}

std::vector<core::BenchRun> SqlStore::instance_bench_runs(std::int64_t instance_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM bench_runs WHERE instance_id = :instance_id ORDER BY at, id",
              "reading bench runs of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  return read_bench_runs(s);
}

}  // namespace pf::store
