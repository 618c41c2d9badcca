// SqlStore (store/sql_store.h): opening (migrations), the schema version and what each table's
// description holds. Each aggregate's statements live in a file of their own:
// sql_store_instances.cpp, sql_store_events.cpp, sql_store_hosts.cpp, sql_store_jobs.cpp,
// sql_store_inputs.cpp, sql_store_settings.cpp, sql_store_leader.cpp; transactions and sent
// commits in sql_store_commits.cpp, the hot reads in sql_store_summary.cpp.
#include "store/sql_store.h"

#include <string_view>
#include <vector>

#include "store/offer_snapshot.h"
#include "store/sql_migrations.h"
#include "store/sql_store_detail.h"

namespace pf::store {

std::vector<std::string> sql::described_columns(std::string_view table) {
  for (auto* of : {instance_tables_columns, event_tables_columns, host_tables_columns,
                   job_tables_columns, lease_tables_columns}) {
    if (auto names = of(table); !names.empty()) return names;
  }
  return {};
}

int latest_schema_version() {
  return sql::kLatestSchemaVersion;
}

SqlStore::SqlStore(std::unique_ptr<sql::Connection> connection, std::string where,
                   std::function<std::unique_ptr<sql::Connection>()> open_input_connection)
    : conn_(std::move(connection)), where_(std::move(where)), caches_(std::make_unique<Caches>()) {
  sql::migrate(*conn_, where_);
  conn_->on_sent_outcomes([this](bool failed) { on_sent_outcomes(failed); });
  // After the migrations: a pooled connection is opened on first use, on the migrated schema.
  if (open_input_connection) {
    input_pool_ = std::make_unique<ConnectionPool>(std::move(open_input_connection),
                                                   kInputConnections, kInputConnectionCheckAfterS);
  }
}

std::optional<ConnectionPool::Stats> SqlStore::input_pool_stats() const {
  if (!input_pool_) return std::nullopt;
  return input_pool_->stats();
}

SqlStore::~SqlStore() {
  stop_commit_reader();  // before the connection it reads goes
}

int SqlStore::schema_version() {
  std::lock_guard lock(mutex_);
  return conn_->schema_version();
}

}  // namespace pf::store
