// Range checks for numeric flags. CLI11's own (CLI::Range, CLI::PositiveNumber) compare with <
// and >, which NaN passes, and they have no upper bound: `--revenue nan` made every profit NaN
// and a huge count could size an allocation. These refuse non-finite and out-of-range values;
// CLI11 prefixes the message with the flag ("--revenue: ...").
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <sstream>
#include <string>

namespace pf::cli {

inline std::string flag_bound_text(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// A finite number in [min, max], or (min, max] when `min_open`.
inline CLI::Validator finite_range(double min, double max, bool min_open = false) {
  const std::string range =
      (min_open ? "(" : "[") + flag_bound_text(min) + ", " + flag_bound_text(max) + "]";
  return CLI::Validator(
      [min, max, min_open, range](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        const bool parsed = !text.empty() && end == text.c_str() + text.size();
        const bool above = min_open ? value > min : value >= min;
        if (parsed && std::isfinite(value) && above && value <= max) return {};
        return "must be a finite number in " + range + ", got " + text;
      },
      "FINITE in " + range);
}

// A positive finite number up to `max`.
inline CLI::Validator finite_positive(double max) {
  return finite_range(0, max, true);
}

}  // namespace pf::cli
