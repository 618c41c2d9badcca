// Hostile JSON texts for the bounded-parsing tests: documents nested far deeper than any limit.
// Header-only.
#pragma once

#include <cstddef>
#include <string>

namespace pf::test {

// {"a":{"a":...{"a":1}...}}: depth objects, about 6 bytes each.
inline std::string nested_objects(std::size_t depth) {
  std::string out;
  out.reserve(depth * 6 + 1);
  for (std::size_t i = 0; i < depth; ++i) out += "{\"a\":";
  out += "1";
  out.append(depth, '}');
  return out;
}

// [[[...]]]: depth arrays.
inline std::string nested_arrays(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

}  // namespace pf::test
