// Files the agent writes for itself alone (its token, job inputs for a command prover): mode
// 0600, never through a file another user could have prepared, complete or absent.
// (Reading a file with a size limit: util::read_bounded_file.)
#pragma once

#include <string>
#include <tl/expected.hpp>

namespace pf::agent {

// Writes `text` to `path` atomically with mode 0600: a fresh temporary file (never one another
// user could have prepared), synced, then renamed over the old one.
tl::expected<void, std::string> write_private_file(const std::string& path,
                                                   const std::string& text);

}  // namespace pf::agent
