// Files the agent writes for itself alone (its token, job inputs for a command prover): mode
// 0600, never through a file another user could have prepared, complete or absent.
#pragma once

#include <cstddef>
#include <string>
#include <tl/expected.hpp>

namespace pf::agent {

// Writes `text` to `path` atomically with mode 0600: a fresh temporary file (never one another
// user could have prepared), synced, then renamed over the old one.
tl::expected<void, std::string> write_private_file(const std::string& path,
                                                   const std::string& text);

// The whole file, when it holds at most `max_bytes`; an error names the path and the limit.
tl::expected<std::string, std::string> read_bounded_file(const std::string& path,
                                                         std::size_t max_bytes);

}  // namespace pf::agent
