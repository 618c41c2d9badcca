// The operator token `serve` accepts on every /api/v1 operator route. Its plaintext lives in a
// 0600 file (operator.token next to a SQLite database; in the working directory for a server
// database), for the CLI on that host; its hash lives in the database, so every replica on one
// database accepts the same token, including replicas whose host has no token file.
#pragma once

#include <filesystem>
#include <string>

namespace pf::store {
class SettingsStore;  // store/settings_store.h
}  // namespace pf::store

namespace pf::cli {

// Where the token file goes for the database `db` (a path, sqlite:PATH or a server URL).
std::filesystem::path operator_token_path(const std::string& db);

// Reuses the token file, or creates it (mode 0600, exclusive create so two starts cannot
// write different tokens). Throws CommandFailed when it cannot.
std::string load_or_create_operator_token(const std::filesystem::path& path);

// The hash of the operator token `serve` accepts, as it starts on the database `db`.
// A SQLite database has one host: its token file is the token (deleting it makes a new one), and
// its hash is recorded. A server database may have many replicas, and the hash recorded in it is
// the fleet's token:
// - recorded, and this host has no token file: that hash (another replica created the token;
//   copy its operator.token here to use the CLI on this host);
// - a token file and nothing recorded yet: the file's token, recorded;
// - no file, nothing recorded: a new token in a new file, recorded;
// - a file whose token is not the recorded one: refused, saying which file to copy.
std::string fleet_operator_token_hash(store::SettingsStore& store, const std::string& db);
// The same with the token file and the kind of database given (tests).
std::string fleet_operator_token_hash(store::SettingsStore& store,
                                      const std::filesystem::path& token_file,
                                      bool shared_database);

}  // namespace pf::cli
