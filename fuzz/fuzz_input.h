// Shared by the fuzz targets: the raw bytes as text, and JSON parsing that never throws.
// Keep targets thin (one entry point each) so they follow the parser when it moves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

namespace pf::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The JSON document, or a discarded value for invalid JSON (what the callers of the parsers
// under test do with bytes from outside).
inline nlohmann::json parse_json(std::string_view text) {
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace pf::fuzz
