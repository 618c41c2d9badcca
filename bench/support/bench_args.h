// Bench helper: command-line numbers, the same in every bench. Header-only.
#pragma once

#include <cstdlib>

namespace pf::bench {

// A whole number in [0, 10,000,000] (counts, runs): false for anything else.
inline bool parse_count(const char* text, int& out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 10'000'000) return false;
  out = static_cast<int>(v);
  return true;
}

}  // namespace pf::bench
