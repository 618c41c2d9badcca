// Internal to src/store: the schema's migrations, one list per dialect with the same version
// numbers (sqlite_migrations.cpp, pg_migrations.cpp), applied in order when a store opens.
#pragma once

#include <span>
#include <string>

#include "store/sql_connection.h"

namespace pf::store::sql {

// The newest migration's version: what this build writes, on every dialect.
inline constexpr int kLatestSchemaVersion = 19;

struct Migration {
  int version;
  const char* description;
  const char* sql;  // may hold several statements separated by ';'
};

// True when `list` runs 1, 2, 3, ... in order up to kLatestSchemaVersion (each dialect's list
// asserts it at compile time).
template <typename List>
consteval bool versions_are_consecutive(const List& list) {
  int expected = 1;
  for (const auto& m : list)
    if (m.version != expected++) return false;
  return expected - 1 == kLatestSchemaVersion;
}

std::span<const Migration> sqlite_migrations();
std::span<const Migration> pg_migrations();
std::span<const Migration> migrations_for(Dialect dialect);

// Applies every migration newer than the database's version up to `target`, each in its own
// transaction together with its version bump; refuses a database written by a newer
// proverfleet. `where` names the store in errors (a URL already redacted). A step that another
// process applied meanwhile is not applied twice.
void migrate(Connection& connection, const std::string& where, int target = kLatestSchemaVersion);

}  // namespace pf::store::sql
