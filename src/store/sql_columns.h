// Internal to src/store: a table's columns described once. The column list, the placeholders and
// the SET list of every statement that writes the table, how a row is bound, read and copied all
// follow from the one description, so adding a column is one line here (and its migration), not
// five hand-kept lists that must agree. `StoreSchema.*` checks each description against the
// schema both dialects' migrations build.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "store/sql_connection.h"

namespace pf::store::sql {

// What reading a row needs beyond the row, for most tables: its name for errors ("job 7").
struct RowRead {
  std::string what;
};

// One column of `Row`: its name in the schema, how a row's value is bound to its parameter
// (":name"), read from a result row and copied between two rows. `Context` carries what reading
// needs beyond the row (a cache, the row's name for errors).
template <class Row, class Context>
struct Column {
  std::string name;
  std::function<void(Statement&, const char* param, const Row&)> bind;
  std::function<void(const Statement&, const char* name, Row&, Context&)> read;
  std::function<void(const Row& from, Row& to)> copy;
};

template <class Row, class Context>
class Columns {
 public:
  using Col = Column<Row, Context>;

  Columns(std::initializer_list<Col> columns) : columns_(columns) { index_params(); }

  // The same table restricted to `names` (in that order): an update of some columns.
  Columns only(std::initializer_list<std::string_view> names) const {
    Columns out;
    for (std::string_view name : names) out.columns_.push_back(find(name));
    out.index_params();
    return out;
  }

  // "a, b, c"
  std::string list() const {
    return join([](const Col& c) { return c.name; });
  }
  // ":a, :b, :c"
  std::string placeholders() const {
    return join([](const Col& c) { return ":" + c.name; });
  }
  // "a = :a, b = :b"
  std::string assignments() const {
    return join([](const Col& c) { return c.name + " = :" + c.name; });
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Col& c : columns_) out.push_back(c.name);
    return out;
  }

  void bind(Statement& s, const Row& row) const {
    for (std::size_t i = 0; i < columns_.size(); ++i) {
      columns_[i].bind(s, params_[i].c_str(), row);
    }
  }
  void read(const Statement& s, Row& row, Context& context) const {
    for (const Col& c : columns_) c.read(s, c.name.c_str(), row, context);
  }
  void copy(const Row& from, Row& to) const {
    for (const Col& c : columns_) c.copy(from, to);
  }

 private:
  Columns() = default;

  const Col& find(std::string_view name) const {
    for (const Col& c : columns_) {
      if (c.name == name) return c;
    }
    throw StoreError("internal: no column '" + std::string(name) + "' in the description");
  }
  void index_params() {
    params_.clear();
    for (const Col& c : columns_) params_.push_back(":" + c.name);
  }
  template <class Text>
  std::string join(Text text) const {
    std::string out;
    for (const Col& c : columns_) out += (out.empty() ? "" : ", ") + text(c);
    return out;
  }

  std::vector<Col> columns_;
  std::vector<std::string> params_;  // ":name", kept for the life of the table
};

// Columns that map one member of the row, by kind of value.
template <class Row, class Context>
struct ColumnsOf {
  using Col = Column<Row, Context>;

  template <class Member>
  static std::function<void(const Row&, Row&)> copier(Member Row::*m) {
    return [m](const Row& from, Row& to) { to.*m = from.*m; };
  }

  static Col real(std::string name, double Row::*m) {
    return {
        std::move(name), [m](Statement& s, const char* p, const Row& r) { s.bind_real(p, r.*m); },
        [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.real(n); }, copier(m)};
  }
  static Col opt_real(std::string name, std::optional<double> Row::*m) {
    return {std::move(name),
            [m](Statement& s, const char* p, const Row& r) { s.bind_opt_real(p, r.*m); },
            [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.opt_real(n); },
            copier(m)};
  }
  static Col int32(std::string name, int Row::*m) {
    return {
        std::move(name), [m](Statement& s, const char* p, const Row& r) { s.bind_int(p, r.*m); },
        [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.int32(n); }, copier(m)};
  }
  static Col int64(std::string name, std::int64_t Row::*m) {
    return {std::move(name),
            [m](Statement& s, const char* p, const Row& r) { s.bind_int(p, r.*m); },
            [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.integer(n); },
            copier(m)};
  }
  static Col opt_int64(std::string name, std::optional<std::int64_t> Row::*m) {
    return {std::move(name),
            [m](Statement& s, const char* p, const Row& r) { s.bind_opt_int(p, r.*m); },
            [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.opt_integer(n); },
            copier(m)};
  }
  // A bool kept as 0 or 1.
  static Col flag(std::string name, bool Row::*m) {
    return {std::move(name),
            [m](Statement& s, const char* p, const Row& r) { s.bind_bool(p, r.*m); },
            [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.boolean(n); },
            copier(m)};
  }
  static Col text(std::string name, std::string Row::*m) {
    return {
        std::move(name), [m](Statement& s, const char* p, const Row& r) { s.bind_text(p, r.*m); },
        [m](const Statement& s, const char* n, Row& r, Context&) { r.*m = s.text(n); }, copier(m)};
  }
  // An enum kept as its name: `parse` gives nullopt for a name this build does not know, which
  // fails the read naming the row (`Context::what`), the column and the value.
  template <class Enum, class Parse>
  static Col named(std::string name, Enum Row::*m, Parse parse) {
    return {std::move(name),
            // to_string: the enum's own, found by ADL.
            [m](Statement& s, const char* p, const Row& r) { s.bind_text(p, to_string(r.*m)); },
            [m, parse](const Statement& s, const char* n, Row& r, Context& c) {
              const std::string value = s.text(n);
              auto parsed = parse(value);
              if (!parsed) throw StoreError(c.what + " has unknown " + n + " '" + value + "'");
              r.*m = *parsed;
            },
            copier(m)};
  }
};

}  // namespace pf::store::sql
