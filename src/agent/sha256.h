// SHA-256 for the agent: the content address of a job's input (issue 12 contract: lowercase
// hex of the input bytes) and the sim prover's derived proof.
#pragma once

#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::agent {

// Lowercase hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);
// Lowercase hex SHA-256 of `prefix` followed by `bytes`, without joining them in memory.
std::string sha256_hex(std::string_view prefix, std::string_view bytes);
// Lowercase hex SHA-256 of the whole file, read in bounded pieces; an error names the path.
tl::expected<std::string, std::string> sha256_file_hex(const std::string& path);
// True for 64 lowercase hex digits: a digest that is safe to use as a file name.
bool is_sha256_hex(std::string_view text);

}  // namespace pf::agent
