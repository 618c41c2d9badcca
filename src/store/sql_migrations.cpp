#include "store/sql_migrations.h"

#include <chrono>
#include <thread>

namespace pf::store::sql {
namespace {

// Tries of one migration step that failed while the database still lacks it (a deadlock
// victim among replicas migrating together) before its error is final.
constexpr int kMigrationAttempts = 4;

[[noreturn]] void refuse_newer(const std::string& where, int found) {
  throw StoreError("opening store '" + where + "': database schema version " +
                   std::to_string(found) + " is newer than this proverfleet (" +
                   std::to_string(kLatestSchemaVersion) + "); upgrade proverfleet");
}

}  // namespace

std::span<const Migration> migrations_for(Dialect dialect) {
  return dialect == Dialect::Postgres ? pg_migrations() : sqlite_migrations();
}

void migrate(Connection& connection, const std::string& where, int target) {
  const std::string doing = "opening store '" + where + "'";
  int found = 0;
  try {
    found = connection.schema_version();
  } catch (const StoreError& e) {
    throw StoreError(doing + ": " + e.what());
  }
  if (found > kLatestSchemaVersion) refuse_newer(where, found);
  for (const Migration& step : migrations_for(connection.dialect())) {
    if (step.version <= found) continue;
    if (step.version > target) break;
    const std::string applying = doing + ": applying migration " + std::to_string(step.version) +
                                 " (" + step.description + ")";
    // Replicas starting together migrate together; PostgreSQL may pick one of them as a
    // deadlock victim (their DDL locks the same tables in different orders). The victim tries
    // the step again, and then finds it applied (or waits for the others and finds it so).
    for (int attempt = 1;; ++attempt) {
      try {
        connection.begin();
        // Another process may have migrated between our first read and BEGIN.
        const int now = connection.schema_version();
        if (now > kLatestSchemaVersion) refuse_newer(where, now);
        if (now < step.version) {
          connection.exec(step.sql, applying);
          connection.set_schema_version(step.version);
        }
        connection.commit();
        break;
      } catch (const StoreError& e) {
        connection.rollback_quietly();
        // Two replicas starting together on a PostgreSQL database both see the old version
        // (READ COMMITTED takes no lock to read it); the second's CREATE then fails once the
        // first commits. The step is applied either way: carry on from what is there now.
        int now = 0;
        try {
          now = connection.schema_version();
        } catch (const StoreError&) {
          throw e;  // the database is unreachable: the first failure says why
        }
        if (now > kLatestSchemaVersion) refuse_newer(where, now);
        if (now >= step.version) break;
        if (attempt < kMigrationAttempts) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100 * attempt));
          continue;
        }
        const std::string what = e.what();
        throw StoreError(what.rfind(applying, 0) == 0 ? what : applying + ": " + what);
      } catch (...) {
        connection.rollback_quietly();
        throw;
      }
    }
  }
}

}  // namespace pf::store::sql
