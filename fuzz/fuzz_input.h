// Shared by the fuzz targets: the raw bytes as text, and JSON parsing that never throws.
// Keep targets thin (one entry point each) so they follow the parser when it moves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "util/bounded_json.h"

namespace pf::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The JSON document through the product's one bounded entry point (util::parse_json), or a
// discarded value when it refuses the text (what the callers of the parsers under test do).
inline nlohmann::json parse_json(std::string_view text) {
  auto parsed = pf::util::parse_json(text);
  if (!parsed) return nlohmann::json(nlohmann::json::value_t::discarded);
  return std::move(*parsed);
}

}  // namespace pf::fuzz
