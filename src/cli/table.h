// Plain-text tables for human output: columns sized to content, numbers right-aligned.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pf::cli {

class Table {
 public:
  enum class Align { Left, Right };
  struct Column {
    std::string header;
    Align align = Align::Left;
    std::size_t max_width = 0;  // 0 = unlimited; longer cells are cut with "…"
  };

  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  void add_row(std::vector<std::string> cells);
  void print(std::ostream& out) const;
  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace pf::cli
