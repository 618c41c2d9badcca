// Internal to src/store: the schema's migrations, applied in order when a store opens.
#pragma once

#include <string>
#include <string_view>

struct sqlite3;

namespace pf::store::sqlite_detail {

// The database's PRAGMA user_version.
int read_user_version(sqlite3* db, std::string_view doing);

// The newest migration's version: what this build writes.
int latest_version();

// Applies every migration newer than the database's version, each in its own transaction;
// refuses a database written by a newer proverfleet. `path` names the store in errors.
void migrate(sqlite3* db, const std::string& path);

}  // namespace pf::store::sqlite_detail
