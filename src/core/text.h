// Small text helpers: number formatting for human-readable reasons (core must not depend on
// fmt) and trimming.
#pragma once

#include <cstdio>
#include <string>

namespace pf::core {

// Fixed-point with `decimals` places: fixed(3.14159, 1) == "3.1".
inline std::string fixed(double value, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

// A proportion as a whole percentage: percent(0.664) == "66%".
inline std::string percent(double fraction) {
  return fixed(fraction * 100, 0) + "%";
}

// `text` without leading and trailing spaces, tabs and line ends.
inline std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

}  // namespace pf::core
