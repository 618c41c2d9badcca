// Small text helpers: number formatting for human-readable reasons (core must not depend on
// fmt) and trimming.
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>

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

// `text` without leading and trailing ASCII white space (spaces, tabs, line ends, form feeds,
// vertical tabs): a view into `text`.
inline std::string_view trim_view(std::string_view text) {
  constexpr std::string_view kWhite = " \t\r\n\f\v";
  const auto first = text.find_first_not_of(kWhite);
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(kWhite);
  return text.substr(first, last - first + 1);
}

// The same, as a string of its own.
inline std::string trim(const std::string& text) {
  return std::string(trim_view(text));
}

// Equal ignoring ASCII case (GPU model names: "RTX 4090" and "rtx 4090" are one model).
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace pf::core
