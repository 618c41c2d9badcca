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

// The longest start of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
// sequence (a cut never leaves a partial character: PostgreSQL refuses text that is not UTF-8).
inline std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t end = max_bytes;
  // Back over continuation bytes (10xxxxxx) to the start of the character the cut falls in.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// Equal ignoring ASCII case (GPU model names: "RTX 4090" and "rtx 4090" are one model).
inline bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace pf::core
