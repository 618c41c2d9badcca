#include "cli/table.h"

#include <algorithm>

namespace pf::cli {
namespace {

// Display width in code points (UTF-8 continuation bytes take no column).
std::size_t width(const std::string& s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

std::string cut(const std::string& s, std::size_t max) {
  if (max == 0 || width(s) <= max) return s;
  std::string out;
  std::size_t cols = 0;
  for (char c : s) {
    bool starts = (c & 0xC0) != 0x80;
    if (starts && cols == max - 1) break;
    if (starts) ++cols;
    out.push_back(c);
  }
  return out + "…";
}

}  // namespace

void Table::add_row(std::vector<std::string> cells) {
  cells.resize(columns_.size());
  for (std::size_t i = 0; i < cells.size(); ++i) cells[i] = cut(cells[i], columns_[i].max_width);
  rows_.push_back(std::move(cells));
}

void Table::print(std::ostream& out) const {
  std::vector<std::size_t> w(columns_.size());
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    w[i] = width(columns_[i].header);
    for (const auto& r : rows_) w[i] = std::max(w[i], width(r[i]));
  }
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string pad(w[i] - width(cells[i]), ' ');
      bool last = i + 1 == cells.size();
      if (columns_[i].align == Align::Right) {
        line += pad + cells[i];
      } else {
        line += cells[i];
        if (!last) line += pad;
      }
      if (!last) line += "  ";
    }
    out << line << "\n";
  };
  std::vector<std::string> headers;
  for (const auto& c : columns_) headers.push_back(c.header);
  emit(headers);
  for (const auto& r : rows_) emit(r);
}

}  // namespace pf::cli
