#include "store/sql_migrations.h"

namespace pf::store::sql {
namespace {

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
      if (now < step.version) {
        const std::string what = e.what();
        throw StoreError(what.rfind(applying, 0) == 0 ? what : applying + ": " + what);
      }
    } catch (...) {
      connection.rollback_quietly();
      throw;
    }
  }
}

}  // namespace pf::store::sql
