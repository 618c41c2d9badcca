// Database URLs as operators write them (a file path, sqlite:PATH, postgres://… or
// postgresql://…), read without connecting. A PostgreSQL URL may carry a password (in
// user:password@ or as ?password=): it is never printed, and commands refuse it on their
// command line (every local user can read it there) in favour of PGPASSFILE or $PGPASSWORD.
#pragma once

#include <string>
#include <string_view>

namespace pf::store {

// True for postgres:// and postgresql:// URLs (the scheme in any case).
bool is_postgres_url(std::string_view url);

// True when the URL carries a password (user:password@host or a password= parameter).
bool url_has_password(std::string_view url);

// The URL with any password replaced by "***": what logs, errors and output may show.
std::string redacted_url(std::string_view url);

}  // namespace pf::store
