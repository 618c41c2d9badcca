// The operator token `serve` accepts on every /api/v1 operator route. Its plaintext lives in a
// 0600 file (operator.token next to a SQLite database; in the working directory for a server
// database), for the CLI on that host; its hash lives in the database, so every replica on one
// database accepts the same token, including replicas whose host has no token file.
#pragma once

#include <filesystem>
#include <string>

#include "store/store.h"

namespace pf::cli {

// Where the token file goes for the database `db` (a path, sqlite:PATH or a server URL).
std::filesystem::path operator_token_path(const std::string& db);

// Reuses the token file, or creates it (mode 0600, exclusive create so two starts cannot
// write different tokens). Throws CommandFailed when it cannot.
std::string load_or_create_operator_token(const std::filesystem::path& path);

// The hash of the fleet's operator token, as `serve` starts:
// - the database holds one and this host has no token file: that hash (another replica
//   created the token; copy its operator.token here to use the CLI on this host);
// - a token file and no hash yet: the file's token, recorded in the database;
// - no file, no hash: a new token in a new file, recorded;
// - a file whose token is not the database's: refused, saying which replica's file to copy.
std::string fleet_operator_token_hash(store::Store& store, const std::string& db);

}  // namespace pf::cli
