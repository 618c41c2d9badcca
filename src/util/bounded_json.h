// The one entry point for JSON that comes from outside the process (HTTP bodies and replies,
// files, store rows): a parse with limits on size, nesting, element count and string length,
// and only finite numbers. Depth is enforced while parsing, so a hostile document never
// becomes a deep tree (copying, dumping and comparing nlohmann trees recurse).
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::util {

struct JsonLimits {
  std::size_t max_bytes = 16u << 20;        // the whole text
  std::size_t max_depth = 64;               // nested arrays/objects; a scalar document is 0
  std::size_t max_values = 1'000'000;       // every value, container or scalar, and every key
  std::size_t max_string_bytes = 1u << 20;  // one string or key
};

// The parsed document, or a message naming the problem and where it is, as a 1-based byte
// offset ("nesting deeper than 64 at byte 65", "number out of range at byte 7", or nlohmann's
// "parse error at line 1, column 3: ..."). Numbers that overflow a double are refused, never
// turned into infinity. Never throws for any input.
tl::expected<nlohmann::json, std::string> parse_json(std::string_view text,
                                                     const JsonLimits& limits = {});

// Reads and parses a file. The size is checked before the file is read; the message starts
// with the path in quotes ("'x.json': is a directory", "'x.json': nesting deeper than ...").
tl::expected<nlohmann::json, std::string> parse_json_file(const std::filesystem::path& path,
                                                          const JsonLimits& limits = {});

// Reads a regular file of at most `max_bytes` (checked before reading). The message does not
// name the file ("no such file", "is a directory", "file too large: N bytes (at most M)"): the
// caller says what the file was for.
tl::expected<std::string, std::string> read_bounded_file(const std::filesystem::path& path,
                                                         std::size_t max_bytes);

// Whether every number in `value` is finite: nlohmann writes NaN and infinity as null, which a
// reader then takes for "absent". Iterative, so any depth is safe.
bool all_numbers_finite(const nlohmann::json& value);

// The 0-based offset of the first byte that is not well-formed UTF-8 (overlong forms,
// surrogates and code points above U+10FFFF included), or nullopt. Text that will become a JSON
// string must pass: nlohmann's dump() throws on invalid UTF-8.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// `value` as compact JSON text, any invalid UTF-8 in its strings (agent logs, market names)
// written as U+FFFD: where replacing beats failing (replies, events, logs sent on). Never throws
// for bad UTF-8.
std::string dump_json_lossy(const nlohmann::json& value);

}  // namespace pf::util
