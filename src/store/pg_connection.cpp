#include "store/pg_connection.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "store/store_url.h"

namespace pf::store {

namespace {

// Fixed OIDs of PostgreSQL's catalog (pg_type.dat), the same on YugabyteDB.
constexpr Oid kBoolOid = 16;
constexpr Oid kByteaOid = 17;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;

// Settings every session starts with, so values read back the same on every server:
// bytea as hex (decoded here), doubles with enough digits to round-trip on PostgreSQL 11-based
// servers too (YugabyteDB; 12+ print the shortest exact form either way), and no NOTICEs
// ("relation already exists, skipping") on stderr.
constexpr const char* kSessionSetup =
    "SET client_min_messages = warning; SET bytea_output = 'hex'; SET extra_float_digits = 3";

// Added to the URL unless it sets them: a server that does not answer fails the connect in
// 10 s, and a peer that vanished (host down, cable cut) is noticed by TCP keepalives rather
// than by a query that waits forever.
constexpr std::array<std::pair<const char*, const char*>, 7> kConnectionDefaults{{
    {"connect_timeout", "10"},
    {"keepalives", "1"},
    {"keepalives_idle", "30"},
    {"keepalives_interval", "10"},
    {"keepalives_count", "3"},
    {"tcp_user_timeout", "30000"},
    {"application_name", "proverfleet"},
}};

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != prefix[i]) return false;
  }
  return true;
}

// Where the URL's authority ([user[:password]@]host[:port]) lies.
struct Authority {
  std::size_t begin = 0;
  std::size_t end = 0;  // first '/', '?' or the end
};
std::optional<Authority> authority_of(std::string_view url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::nullopt;
  Authority a;
  a.begin = scheme + 3;
  a.end = url.find_first_of("/?", a.begin);
  if (a.end == std::string_view::npos) a.end = url.size();
  return a;
}

// The password's [begin, end) in the user info, if the URL has one.
std::optional<std::pair<std::size_t, std::size_t>> userinfo_password(std::string_view url) {
  const auto a = authority_of(url);
  if (!a) return std::nullopt;
  const std::size_t at = url.substr(0, a->end).rfind('@');
  if (at == std::string_view::npos || at < a->begin) return std::nullopt;
  const std::size_t colon = url.substr(0, at).find(':', a->begin);
  if (colon == std::string_view::npos) return std::nullopt;
  return std::make_pair(colon + 1, at);
}

// Calls fn(name, value_begin, value_end) for each `name=value` of the URL's query.
template <typename Fn>
void for_each_query_param(std::string_view url, Fn&& fn) {
  std::size_t pos = url.find('?');
  while (pos != std::string_view::npos && pos < url.size()) {
    const std::size_t key = pos + 1;
    std::size_t end = url.find('&', key);
    if (end == std::string_view::npos) end = url.size();
    const std::string_view param = url.substr(key, end - key);
    const std::size_t eq = param.find('=');
    fn(param.substr(0, eq), eq == std::string_view::npos ? end : key + eq + 1, end);
    pos = end < url.size() ? end : std::string_view::npos;
  }
}

bool has_query_param(std::string_view url, std::string_view name) {
  bool found = false;
  for_each_query_param(
      url, [&](std::string_view key, std::size_t, std::size_t) { found = found || key == name; });
  return found;
}

std::string percent_decoded(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    int value = 0;
    if (s[i] == '%' && i + 2 < s.size()) {
      const auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, value, 16);
      if (ec == std::errc() && p == s.data() + i + 3) {
        out.push_back(static_cast<char>(value));
        i += 2;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}
bool is_identifier_char(char c) {
  return is_name_char(c) || c == '$' || static_cast<unsigned char>(c) >= 0x80;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

namespace pg_detail {

PositionalSql to_positional_parameters(std::string_view sql) {
  PositionalSql out;
  out.text.reserve(sql.size() + 8);
  std::size_t i = 0;
  const std::size_t n = sql.size();
  // Copies sql[i, end) verbatim and moves past it.
  auto copy_to = [&](std::size_t end) {
    out.text.append(sql.substr(i, end - i));
    i = end;
  };
  while (i < n) {
    const char c = sql[i];
    if (c == '\'') {
      // '…' with '' inside; E'…' also takes backslash escapes.
      const bool backslashes = i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') &&
                               (i < 2 || !is_identifier_char(sql[i - 2]));
      std::size_t j = i + 1;
      while (j < n) {
        if (backslashes && sql[j] == '\\') {
          j += 2;
          continue;
        }
        if (sql[j] == '\'') {
          if (j + 1 < n && sql[j + 1] == '\'') {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      copy_to(std::min(n, j + 1));
    } else if (c == '"') {
      std::size_t j = i + 1;
      while (j < n) {
        if (sql[j] == '"') {
          if (j + 1 < n && sql[j + 1] == '"') {
            j += 2;
            continue;
          }
          break;
        }
        ++j;
      }
      copy_to(std::min(n, j + 1));
    } else if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      const std::size_t eol = sql.find('\n', i);
      copy_to(eol == std::string_view::npos ? n : eol);
    } else if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      // Block comments nest in PostgreSQL.
      int depth = 0;
      std::size_t j = i;
      while (j < n) {
        if (sql[j] == '/' && j + 1 < n && sql[j + 1] == '*') {
          ++depth;
          j += 2;
        } else if (sql[j] == '*' && j + 1 < n && sql[j + 1] == '/') {
          j += 2;
          if (--depth == 0) break;
        } else {
          ++j;
        }
      }
      copy_to(std::min(n, j));
    } else if (c == '$' && (i == 0 || !is_identifier_char(sql[i - 1]))) {
      // $tag$…$tag$ (dollar quoting); anything else with a '$' is copied as it is.
      std::size_t j = i + 1;
      while (j < n && (j == i + 1 ? is_name_start(sql[j]) : is_name_char(sql[j]))) ++j;
      if (j < n && sql[j] == '$') {
        const std::string_view tag = sql.substr(i, j - i + 1);
        const std::size_t close = sql.find(tag, j + 1);
        copy_to(close == std::string_view::npos ? n : close + tag.size());
      } else {
        copy_to(i + 1);
      }
    } else if (c == ':' && i + 1 < n && sql[i + 1] == ':') {
      copy_to(i + 2);  // a cast: the type name after it is no parameter
    } else if (c == ':' && i + 1 < n && is_name_start(sql[i + 1])) {
      std::size_t j = i + 1;
      while (j < n && is_name_char(sql[j])) ++j;
      const std::string_view name = sql.substr(i, j - i);
      std::size_t k = 0;
      while (k < out.names.size() && out.names[k] != name) ++k;
      if (k == out.names.size()) out.names.emplace_back(name);
      out.text += '$';
      out.text += std::to_string(k + 1);
      i = j;
    } else if (is_identifier_char(c)) {
      // A whole word at once: a ':' or '$' inside an identifier starts nothing, and the quote
      // branch can tell E'…' from a word ending in E by looking back.
      std::size_t j = i + 1;
      while (j < n && is_identifier_char(sql[j])) ++j;
      copy_to(j);
    } else {
      copy_to(i + 1);
    }
  }
  return out;
}

}  // namespace pg_detail

// --- sessions, results and prepared statements -------------------------------------------------

void PgConnection::ResultFree::operator()(pg_result* result) const noexcept {
  PQclear(result);
}
using PgResult = PgConnection::Result;

class PgConnection::Session {
 public:
  // Connects; throws std::runtime_error with libpq's message when it cannot.
  explicit Session(const std::string& url) : conn_(PQconnectdb(url.c_str())) {
    if (!conn_) throw std::runtime_error("libpq could not allocate a connection");
    if (PQstatus(conn_.get()) != CONNECTION_OK) {
      throw std::runtime_error(PQerrorMessage(conn_.get()));
    }
  }
  PGconn* get() const { return conn_.get(); }
  bool open() const { return PQstatus(conn_.get()) == CONNECTION_OK; }

 private:
  struct Finish {
    void operator()(PGconn* conn) const noexcept { PQfinish(conn); }
  };
  std::unique_ptr<PGconn, Finish> conn_;
};

struct PgConnection::Prepared {
  std::string name;  // the server-side statement name: "pf_<index>"
  pg_detail::PositionalSql sql;
  std::uint64_t prepared_in = 0;  // the session generation it was prepared on (0: none)
  bool columns_known = false;     // filled by the first run
  std::unordered_map<std::string, int, pg_detail::SqlHash, std::equal_to<>> columns;
  std::vector<Oid> column_types;
};

// One statement to send: a prepared one with its values, or parameterless SQL (`plain`).
struct PgConnection::Outgoing {
  Prepared* prepared = nullptr;
  std::string plain;
  std::vector<std::string> values;
  std::vector<char> bound;  // values[k] is sent only where bound[k]; otherwise NULL
  // values[k] travels in binary form (bytea: the bytes themselves) where binary[k]; otherwise
  // as text. Blobs go binary: half the bytes of the hex text form, and nothing to encode.
  std::vector<char> binary;
  // Results in binary form (Cursor::prefer_binary_results): bytea arrives as its bytes, not as
  // hex text twice their size.
  bool binary_results = false;
  std::string doing;
};

// What went wrong with one statement, as libpq told it.
struct PgConnection::Failure {
  std::string message;
  std::string sqlstate;
  bool broken = false;  // the session is gone (server restart, network)
};

namespace {

bool succeeded(const PGresult* result) {
  const ExecStatusType status = PQresultStatus(result);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

// A prepared statement's values as libpq takes them: pointers (null: NULL), and, when any value
// is binary, each value's length and format.
struct ParamArrays {
  explicit ParamArrays(const PgConnection::Outgoing& out) : values(out.values.size(), nullptr) {
    bool any_binary = false;
    for (std::size_t k = 0; k < values.size(); ++k) {
      if (out.bound[k] != 0) values[k] = out.values[k].c_str();
      any_binary = any_binary || (out.bound[k] != 0 && out.binary[k] != 0);
    }
    if (!any_binary) return;
    lengths.assign(values.size(), 0);
    formats.assign(values.size(), 0);
    for (std::size_t k = 0; k < values.size(); ++k) {
      lengths[k] = static_cast<int>(out.values[k].size());
      formats[k] = out.bound[k] != 0 && out.binary[k] != 0 ? 1 : 0;
    }
  }
  int count() const { return static_cast<int>(values.size()); }
  const int* lengths_or_null() const { return lengths.empty() ? nullptr : lengths.data(); }
  const int* formats_or_null() const { return formats.empty() ? nullptr : formats.data(); }

  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;
};

// Sends one statement without waiting (pipeline mode); 1 on success, as libpq says.
int send_statement(PGconn* conn, const PgConnection::Outgoing& out) {
  if (out.prepared == nullptr) {
    return PQsendQueryParams(conn, out.plain.c_str(), 0, nullptr, nullptr, nullptr, nullptr, 0);
  }
  const ParamArrays params(out);
  return PQsendQueryPrepared(conn, out.prepared->name.c_str(), params.count(), params.values.data(),
                             params.lengths_or_null(), params.formats_or_null(), 0);
}

// Runs one statement and waits for its result (never null: libpq's own failure is a result
// too, or the nullptr case is turned into one by the caller's check).
PgResult run_statement(PGconn* conn, const PgConnection::Outgoing& out) {
  if (out.prepared == nullptr) return PgResult(PQexec(conn, out.plain.c_str()));
  const ParamArrays params(out);
  return PgResult(PQexecPrepared(conn, out.prepared->name.c_str(), params.count(),
                                 params.values.data(), params.lengths_or_null(),
                                 params.formats_or_null(), out.binary_results ? 1 : 0));
}

}  // namespace

// --- the cursor ----------------------------------------------------------------------------------

class PgConnection::PgCursor final : public sql::Cursor {
 public:
  PgCursor(PgConnection& connection, Prepared& prepared, std::string doing)
      : connection_(connection), prepared_(prepared) {
    out_.prepared = &prepared;
    out_.doing = std::move(doing);
    out_.values.resize(prepared.sql.names.size());
    out_.bound.assign(prepared.sql.names.size(), 0);
    out_.binary.assign(prepared.sql.names.size(), 0);
  }

  void bind_int(const char* name, std::int64_t value) override {
    char buf[24];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    set(name, std::string(buf, end));
  }
  void bind_real(const char* name, double value) override {
    if (std::isinf(value)) {
      set(name, value > 0 ? "Infinity" : "-Infinity");
      return;
    }
    // The shortest text that reads back as exactly this double.
    char buf[32];
    const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
    set(name, std::string(buf, end));
  }
  void bind_text(const char* name, std::string_view value) override {
    set(name, std::string(value));
  }
  void bind_blob(const char* name, std::string_view value) override {
    // Binary: bytea's binary form is the bytes themselves, NUL included. The statement's
    // parameter must be a bytea (every blob column here is one).
    set(name, std::string(value));
    out_.binary[static_cast<std::size_t>(index_of(name))] = 1;
  }
  void bind_null(const char* name) override { out_.bound[index_of(name)] = 0; }
  void prefer_binary_results() override { out_.binary_results = true; }

  bool next() override {
    if (deferred_) throw StoreError(out_.doing + ": reading a statement that was held back");
    if (!result_) {
      result_ = connection_.run(out_);
      learn_columns();
      row_ = 0;
    } else if (row_ < rows()) {
      ++row_;
    }
    return row_ < rows();
  }

  bool run_or_defer() override {
    if (result_ || deferred_) throw StoreError(out_.doing + ": the statement already ran");
    if (connection_.hold_back(out_)) {
      deferred_ = true;
      return false;
    }
    while (next()) {
    }
    return true;
  }

  std::int64_t changes() const override {
    if (!result_) return 0;
    const char* tuples = PQcmdTuples(result_.get());
    std::int64_t value = 0;
    const std::string_view text(tuples);
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;  // "" (a statement that changes no rows) reads as 0
  }

  int column_count() const override {
    ran("counting columns");
    return PQnfields(result_.get());
  }
  std::string column_name(int index) const override {
    ran("naming a column");
    return PQfname(result_.get(), check_index(index));
  }
  int column(const char* name) const override {
    const auto it = prepared_.columns.find(std::string_view(name));
    if (it == prepared_.columns.end()) {
      ran(std::string("reading column ") + name);
      throw StoreError(out_.doing + ": the result has no column " + name);
    }
    return it->second;
  }
  bool is_null(int index) const override { return null_at(index); }
  sql::ValueKind kind(int index) const override {
    if (null_at(index)) return sql::ValueKind::Null;
    switch (type_of(index)) {
      case kBoolOid:
      case kInt2Oid:
      case kInt4Oid:
      case kInt8Oid:
        return sql::ValueKind::Integer;
      case kFloat4Oid:
      case kFloat8Oid:
      case kNumericOid:
        return sql::ValueKind::Real;
      case kByteaOid:
        return sql::ValueKind::Blob;
      default:
        return sql::ValueKind::Text;
    }
  }
  std::int64_t integer(int index) const override {
    if (null_at(index)) return 0;  // as SQLite reads NULL
    const std::string_view text = value_at(index);
    if (binary_at(index)) return binary_integer(index, text);
    if (type_of(index) == kBoolOid) return text == "t" ? 1 : 0;
    std::int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw StoreError(out_.doing + ": column " + name_of(index) + " is not an integer: '" +
                       std::string(text.substr(0, 40)) + "'");
    }
    return value;
  }
  double real(int index) const override {
    if (null_at(index)) return 0.0;
    const std::string_view text = value_at(index);
    if (binary_at(index)) {
      throw StoreError(out_.doing + ": column " + name_of(index) +
                       " came in binary form, read only for integers and bytes");
    }
    if (text == "Infinity") return std::numeric_limits<double>::infinity();
    if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
    double value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw StoreError(out_.doing + ": column " + name_of(index) + " is not a number: '" +
                       std::string(text.substr(0, 40)) + "'");
    }
    return value;
  }
  std::string_view text_view(int index) const override {
    if (null_at(index)) return {};
    return value_at(index);
  }
  std::string blob(int index) const override {
    if (null_at(index)) return {};
    const std::string_view text = value_at(index);
    if (type_of(index) != kByteaOid || binary_at(index)) return std::string(text);
    if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0) {
      throw StoreError(out_.doing + ": column " + name_of(index) + " is not bytea in hex form");
    }
    // Sized once and written in place: job input chunks are MiBs (store/job_input_store.h).
    std::string bytes(text.size() / 2 - 1, '\0');
    int bad = 0;
    for (std::size_t i = 2, o = 0; i < text.size(); i += 2, ++o) {
      const int hi = hex_digit(text[i]);
      const int lo = hex_digit(text[i + 1]);
      bad |= hi | lo;  // negative once any digit was not one
      bytes[o] = static_cast<char>(((hi & 0xf) << 4) | (lo & 0xf));
    }
    if (bad < 0) {
      throw StoreError(out_.doing + ": column " + name_of(index) + " is not bytea in hex form");
    }
    return bytes;
  }

 private:
  int index_of(const char* name) const {
    const auto& names = prepared_.sql.names;
    for (std::size_t k = 0; k < names.size(); ++k) {
      if (names[k] == name) return static_cast<int>(k);
    }
    throw StoreError(out_.doing + ": the statement has no parameter " + name);
  }
  void set(const char* name, std::string value) {
    const auto k = static_cast<std::size_t>(index_of(name));
    out_.values[k] = std::move(value);
    out_.bound[k] = 1;
    out_.binary[k] = 0;
  }
  void learn_columns() {
    if (prepared_.columns_known) return;
    const int count = PQnfields(result_.get());
    for (int i = 0; i < count; ++i) {
      prepared_.columns.emplace(PQfname(result_.get(), i), i);
      prepared_.column_types.push_back(PQftype(result_.get(), i));
    }
    prepared_.columns_known = true;
  }

  int rows() const { return PQntuples(result_.get()); }
  void ran(const std::string& what) const {
    if (!result_) throw StoreError(out_.doing + ": " + what + " before the statement ran");
  }
  int check_index(int index) const {
    if (index < 0 || index >= PQnfields(result_.get())) {
      throw StoreError(out_.doing + ": no column " + std::to_string(index));
    }
    return index;
  }
  // The cell (row_, index), checked.
  int cell(int index) const {
    ran("reading a column");
    if (row_ >= rows()) throw StoreError(out_.doing + ": reading a column with no row");
    return check_index(index);
  }
  bool null_at(int index) const { return PQgetisnull(result_.get(), row_, cell(index)) != 0; }
  std::string_view value_at(int index) const {
    const int col = cell(index);
    return {PQgetvalue(result_.get(), row_, col),
            static_cast<std::size_t>(PQgetlength(result_.get(), row_, col))};
  }
  std::string name_of(int index) const { return PQfname(result_.get(), index); }
  bool binary_at(int index) const { return PQfformat(result_.get(), index) == 1; }
  // An integer column in binary form: big-endian, of its type's width.
  std::int64_t binary_integer(int index, std::string_view bytes) const {
    std::size_t width = 0;
    switch (type_of(index)) {
      case kBoolOid:
        width = 1;
        break;
      case kInt2Oid:
        width = 2;
        break;
      case kInt4Oid:
        width = 4;
        break;
      case kInt8Oid:
        width = 8;
        break;
      default:
        break;
    }
    if (width == 0 || bytes.size() != width) {
      throw StoreError(out_.doing + ": column " + name_of(index) +
                       " is not an integer in binary form");
    }
    std::uint64_t value = 0;
    for (const char b : bytes) value = (value << 8) | static_cast<unsigned char>(b);
    if (width < 8 && type_of(index) != kBoolOid && (value >> (8 * width - 1)) != 0) {
      value |= ~std::uint64_t{0} << (8 * width);  // sign-extend
    }
    return static_cast<std::int64_t>(value);
  }
  Oid type_of(int index) const { return prepared_.column_types[static_cast<std::size_t>(index)]; }

  PgConnection& connection_;
  Prepared& prepared_;
  Outgoing out_;
  PgResult result_;
  int row_ = 0;
  bool deferred_ = false;
};

// --- the connection ------------------------------------------------------------------------------

PgConnection::PgConnection(std::string url) : url_(std::move(url)) {
  redacted_url_ = store::redacted_url(url_);
  if (!is_postgres_url(url_)) {
    throw StoreError("opening " + redacted_url_ + ": not a postgres:// or postgresql:// URL");
  }
  if (const auto p = userinfo_password(url_)) {
    secrets_.emplace_back(url_.substr(p->first, p->second - p->first));
  }
  for_each_query_param(url_, [&](std::string_view key, std::size_t begin, std::size_t end) {
    if (starts_with_ci(key, "password") && key.size() == 8) {
      secrets_.emplace_back(url_.substr(begin, end - begin));
    }
  });
  for (std::size_t i = 0, n = secrets_.size(); i < n; ++i) {
    std::string decoded = percent_decoded(secrets_[i]);
    if (decoded != secrets_[i]) secrets_.push_back(std::move(decoded));
  }
  std::erase_if(secrets_, [](const std::string& s) { return s.empty(); });
  for (const auto& [name, value] : kConnectionDefaults) {
    if (has_query_param(url_, name)) continue;
    url_ += url_.find('?') == std::string::npos ? '?' : '&';
    url_ += name;
    url_ += '=';
    url_ += value;
  }
  session_for("connecting");
}

PgConnection::~PgConnection() {
  on_sent_outcomes_ = nullptr;  // its owner may be gone already
  fail_in_flight("the store was closed before the commit was confirmed");
}

std::string PgConnection::scrub(std::string message) const {
  for (const auto& secret : secrets_) {
    std::size_t pos = 0;
    while ((pos = message.find(secret, pos)) != std::string::npos) {
      message.replace(pos, secret.size(), "***");
      pos += 3;
    }
  }
  return message;
}

void PgConnection::drop_session() noexcept {
  fail_in_flight("the connection to PostgreSQL (" + redacted_url_ +
                 ") was lost before the commit was confirmed; it may or may not have been applied");
  session_.reset();
  held_.clear();  // statements of the session's transaction: gone with it
}

void PgConnection::fail_in_flight(const std::string& error) noexcept {
  if (in_flight_.empty()) return;
  for (InFlight& f : in_flight_) {
    f.outcome->done = true;
    // A statement the server already refused aborted the transaction: that outcome is known.
    f.outcome->error = f.refused         ? f.error
                       : f.doing.empty() ? error
                                         : f.doing.front() + ": " + error;
  }
  in_flight_.clear();
  if (on_sent_outcomes_) on_sent_outcomes_(true);
}

void PgConnection::read_in_flight(bool wait) noexcept {
  if (in_flight_.empty()) return;
  if (!session_) {
    fail_in_flight("no session");
    return;
  }
  PGconn* conn = session_->get();
  // The session broke with commits unconfirmed: whether the server applied them is unknown,
  // and their outcome says so whichever read noticed the break first (this one or the next
  // statement's, through drop_session).
  auto broken = [&](const char* what) {
    fail_in_flight(std::string(what) + ": " + scrub(trimmed(PQerrorMessage(conn))) +
                   "; the connection to PostgreSQL (" + redacted_url_ +
                   ") was lost before the commit was confirmed; it may or may not have been "
                   "applied");
    drop_session();
  };
  if (!wait && PQconsumeInput(conn) != 1) return broken("reading");
  bool failed = false;
  bool completed = false;
  while (!in_flight_.empty()) {
    if (!wait && PQisBusy(conn) != 0) break;
    InFlight& f = in_flight_.front();
    PgResult r(PQgetResult(conn));
    if (f.read < f.doing.size()) {
      if (f.ending) {
        if (r) continue;  // more than one result for a statement: not from what we send
        f.ending = false;
        ++f.read;
        continue;
      }
      if (!r) return broken("reading a result");
      const ExecStatusType status = PQresultStatus(r.get());
      if (status != PGRES_PIPELINE_ABORTED && !succeeded(r.get()) && f.error.empty()) {
        const Failure failure = failure_of(r.get());
        f.error = f.doing[f.read] + ": " + scrub(trimmed(failure.message)) +
                  (failure.sqlstate.empty() ? "" : " (SQLSTATE " + failure.sqlstate + ")");
        // libpq's own errors for a lost connection carry no SQLSTATE; class 08 is a connection
        // exception and 57P0x the server shutting the session down: none is a refusal.
        f.refused = !failure.sqlstate.empty() && failure.sqlstate.rfind("08", 0) != 0 &&
                    failure.sqlstate.rfind("57P0", 0) != 0;
      }
      f.ending = true;
      continue;
    }
    if (!r || PQresultStatus(r.get()) != PGRES_PIPELINE_SYNC) return broken("ending a pipeline");
    f.outcome->done = true;
    f.outcome->error = f.error;
    failed = failed || !f.error.empty();
    completed = true;
    in_flight_.pop_front();
  }
  if (in_flight_.empty() && PQexitPipelineMode(conn) != 1) return broken("ending a pipeline");
  if (completed && on_sent_outcomes_) on_sent_outcomes_(failed);
}

int PgConnection::read_arrived() {
  read_in_flight(false);
  return in_flight_.empty() || !session_ ? -1 : PQsocket(session_->get());
}

std::shared_ptr<sql::SentCommit> PgConnection::commit_sent() {
  if (!in_transaction_) throw StoreError("committing: no transaction is open");
  // Only a transaction of held writes alone, on a session they are all prepared on.
  bool ahead = held_.size() > 1 && held_.front().plain == "BEGIN" && !statement_failed_ &&
               !transaction_lost_ && session_ && session_->open() &&
               in_flight_.size() < kMaxInFlight;
  for (std::size_t i = 1; ahead && i < held_.size(); ++i) {
    const Prepared* p = held_[i].prepared;
    ahead = p != nullptr && p->prepared_in == session_generation_;
  }
  auto outcome = std::make_shared<sql::SentCommit>();
  if (!ahead) {
    commit();
    outcome->done = true;
    return outcome;
  }
  InFlight f;
  f.outcome = outcome;
  std::vector<Outgoing> batch(std::make_move_iterator(held_.begin() + 1),
                              std::make_move_iterator(held_.end()));
  held_.clear();
  in_transaction_ = false;  // whatever happens now, the transaction is over for the caller
  for (const Outgoing& out : batch) f.doing.push_back(out.doing);
  PGconn* conn = session_->get();
  auto lost = [&](const char* what) {
    const std::string error = std::string(what) + ": " + scrub(trimmed(PQerrorMessage(conn)));
    drop_session();  // fails the commits sent before this one
    throw StoreError(f.doing.front() + ": the connection to PostgreSQL (" + redacted_url_ +
                     ") was lost while committing: " + error);
  };
  if (PQpipelineStatus(conn) == PQ_PIPELINE_OFF && PQenterPipelineMode(conn) != 1) {
    lost("starting a pipeline");
  }
  for (const Outgoing& out : batch) {
    if (send_statement(conn, out) != 1) lost("sending");
  }
  // The sync ends the implicit transaction the segment runs as, and flushes it out.
  if (PQpipelineSync(conn) != 1) lost("sending");
  in_flight_.push_back(std::move(f));
  return outcome;
}

namespace {

// False when the server closed an idle session (restart, admin shutdown, idle timeout): the
// socket reports the hang-up before any statement is sent on it.
bool idle_session_alive(PGconn* conn) {
  if (PQstatus(conn) != CONNECTION_OK) return false;
  const int fd = PQsocket(conn);
  if (fd < 0) return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return true;  // nothing pending (or EINTR: the next use will tell)
  if ((p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0) return false;
  // Consumes what the server sent (a notice, a termination); a session that cannot read is
  // replaced and the caller reconnects.
  if (PQconsumeInput(conn) == 0) return false;
  while (PGnotify* notify = PQnotifies(conn)) PQfreemem(notify);
  return PQstatus(conn) == CONNECTION_OK;
}

}  // namespace

PgConnection::Session& PgConnection::session_for(std::string_view doing) {
  if (in_transaction_) {
    if (transaction_lost_ || !session_ || !session_->open()) {
      transaction_lost_ = true;
      drop_session();
      throw StoreError(std::string(doing) + ": the connection to PostgreSQL (" + redacted_url_ +
                       ") was lost inside the transaction; it is rolled back");
    }
    return *session_;
  }
  // A session with sent commits outstanding is not idle: its answers are still coming.
  if (!in_flight_.empty() && session_) return *session_;
  if (session_ && !idle_session_alive(session_->get())) drop_session();
  if (!session_) {
    try {
      auto session = std::make_unique<Session>(url_);
      const PgResult setup(PQexec(session->get(), kSessionSetup));
      if (!setup || !succeeded(setup.get())) {
        throw std::runtime_error(setup ? PQresultErrorMessage(setup.get())
                                       : PQerrorMessage(session->get()));
      }
      session_ = std::move(session);
      ++session_generation_;
    } catch (const std::exception& error) {
      throw StoreError(std::string(doing) + ": connecting to " + redacted_url_ + ": " +
                       scrub(trimmed(error.what())));
    }
  }
  return *session_;
}

PgConnection::Failure PgConnection::failure_of(const PGresult* result) const {
  Failure f;
  PGconn* conn = session_ ? session_->get() : nullptr;
  const char* message = result != nullptr ? PQresultErrorMessage(result) : "";
  if (message == nullptr || *message == '\0') {
    message = conn != nullptr ? PQerrorMessage(conn) : "no session";
  }
  f.message = message;
  if (result != nullptr) {
    if (const char* state = PQresultErrorField(result, PG_DIAG_SQLSTATE)) f.sqlstate = state;
  }
  f.broken = conn == nullptr || PQstatus(conn) != CONNECTION_OK;
  return f;
}

void PgConnection::fail(std::string_view doing_view, const Failure& failure) {
  // A copy: `doing` may belong to a held-back statement, which drop_session() discards.
  const std::string doing(doing_view);
  std::string message = scrub(trimmed(failure.message));
  if (failure.broken) {
    drop_session();
    if (in_transaction_) transaction_lost_ = true;
    throw StoreError(std::string(doing) + ": the connection to PostgreSQL (" + redacted_url_ +
                     ") was lost" + (in_transaction_ ? " inside the transaction" : "") + ": " +
                     message);
  }
  if (in_transaction_) statement_failed_ = true;  // PostgreSQL refuses the rest of it
  if (!failure.sqlstate.empty()) message += " (SQLSTATE " + failure.sqlstate + ")";
  throw StoreError(std::string(doing) + ": " + message);
}

std::unique_ptr<sql::Cursor> PgConnection::prepare(std::string_view sql, const std::string& doing) {
  auto it = by_sql_.find(sql);
  if (it == by_sql_.end()) {
    auto prepared = std::make_unique<Prepared>();
    prepared->name = "pf_" + std::to_string(prepared_.size());
    prepared->sql = pg_detail::to_positional_parameters(sql);
    prepared_.push_back(std::move(prepared));
    it = by_sql_.emplace(std::string(sql), prepared_.size() - 1).first;
  }
  return std::make_unique<PgCursor>(*this, *prepared_[it->second], doing);
}

void PgConnection::prepare_on_session(Session& session, Outgoing& out) {
  if (out.prepared == nullptr || out.prepared->prepared_in == session_generation_) return;
  const PgResult r(PQprepare(session.get(), out.prepared->name.c_str(),
                             out.prepared->sql.text.c_str(), 0, nullptr));
  if (!r || !succeeded(r.get())) fail(out.doing, failure_of(r.get()));
  out.prepared->prepared_in = session_generation_;
}

bool PgConnection::hold_back(const Outgoing& out) {
  if (!in_transaction_) return false;
  // A bound on what waits: a long transaction of held-back writes still sends them in batches
  // (and libpq's blocking pipeline never has more than this many results to read back).
  if (held_.size() >= kMaxHeldBack) run_held(nullptr);
  held_.push_back(out);
  return true;
}

PgResult PgConnection::run(Outgoing& last) {
  return run_held(&last);
}

PgResult PgConnection::run_held(Outgoing* last) {
  last_sent_failed_ = false;
  if (last == nullptr && held_.empty()) return nullptr;
  read_in_flight(true);  // the answers of commits sent ahead come first
  const std::string doing = last != nullptr ? last->doing : held_.front().doing;
  Session& session = session_for(doing);
  // Prepared before the pipeline starts (once per statement and session).
  for (auto& out : held_) prepare_on_session(session, out);
  if (last != nullptr) prepare_on_session(session, *last);
  PGconn* conn = session.get();

  if (held_.empty()) {
    if (last == nullptr) return nullptr;
    PgResult r = run_statement(conn, *last);
    if (!r || !succeeded(r.get())) {
      last_sent_failed_ = true;
      fail(last->doing, failure_of(r.get()));
    }
    return r;
  }

  // One round trip: every held-back statement, then `last`, then a sync.
  std::vector<Outgoing> batch = std::move(held_);
  held_.clear();
  auto lost = [&](const std::string& what) {
    Failure f;
    f.message = what + ": " + PQerrorMessage(conn);
    f.broken = true;
    fail(doing, f);
  };
  if (PQenterPipelineMode(conn) != 1) lost("starting a pipeline");
  const std::size_t count = batch.size() + (last != nullptr ? 1 : 0);
  for (std::size_t i = 0; i < count; ++i) {
    if (send_statement(conn, i < batch.size() ? batch[i] : *last) != 1) lost("sending");
  }
  if (PQpipelineSync(conn) != 1) lost("sending");

  std::optional<std::pair<std::size_t, Failure>> first_failure;
  PgResult last_result;
  for (std::size_t i = 0; i < count; ++i) {
    PgResult r(PQgetResult(conn));
    if (!r) lost("reading a result");
    const ExecStatusType status = PQresultStatus(r.get());
    if (status == PGRES_FATAL_ERROR && !first_failure) {
      first_failure.emplace(i, failure_of(r.get()));
    } else if (status != PGRES_PIPELINE_ABORTED && !succeeded(r.get()) && !first_failure) {
      first_failure.emplace(i, failure_of(r.get()));
    }
    // Each statement's results end with a null.
    while (PGresult* extra = PQgetResult(conn)) PQclear(extra);
    if (i + 1 == count && last != nullptr) last_result = std::move(r);
  }
  const PgResult sync(PQgetResult(conn));
  if (!sync || PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) lost("ending a pipeline");
  if (PQexitPipelineMode(conn) != 1) lost("ending a pipeline");
  if (first_failure) {
    const std::size_t i = first_failure->first;
    last_sent_failed_ = i == batch.size();
    fail(i < batch.size() ? batch[i].doing : last->doing, first_failure->second);
  }
  return last_result;
}

void PgConnection::run_plain(const std::string& sql, std::string_view doing) {
  // Held-back writes go first, in their own round trip: `sql` may hold several statements,
  // which a pipeline cannot carry.
  if (!held_.empty()) run_held(nullptr);
  read_in_flight(true);
  Session& session = session_for(doing);
  const PgResult r(PQexec(session.get(), sql.c_str()));
  if (!r || !succeeded(r.get())) fail(doing, failure_of(r.get()));
}

void PgConnection::exec(const std::string& sql, std::string_view doing) {
  const std::size_t start = sql.find_first_not_of(" \t\r\n");
  const bool rollback_to = in_transaction_ && start != std::string::npos &&
                           starts_with_ci(std::string_view(sql).substr(start), "rollback to");
  // Every exec sends what is held first, the SAVEPOINT included: what is still held now came
  // after the savepoint being rolled back to, so it is dropped rather than sent (a held write
  // that would fail cannot doom a transaction its caller recovers).
  if (rollback_to) held_.clear();
  run_plain(sql, doing);
  // ROLLBACK TO SAVEPOINT is the one way out of a failed transaction short of ending it.
  if (rollback_to) statement_failed_ = false;
}

void PgConnection::begin() {
  if (in_transaction_) {
    throw StoreError("beginning a transaction: one is already open (nested ones are SAVEPOINTs)");
  }
  // The session is checked (and replaced when the server closed it) now; BEGIN itself travels
  // with the transaction's first statement.
  session_for("beginning a transaction");
  Outgoing begin;
  begin.plain = "BEGIN";
  begin.doing = "beginning a transaction";
  held_.push_back(std::move(begin));
  in_transaction_ = true;
  transaction_lost_ = false;
  statement_failed_ = false;
}

void PgConnection::commit() {
  if (!in_transaction_) throw StoreError("committing: no transaction is open");
  if (held_.size() == 1 && held_.front().plain == "BEGIN") {
    // Nothing reached the server (its reads came from the caller's copies): nothing to end.
    held_.clear();
    in_transaction_ = false;
    return;
  }
  Outgoing commit;
  commit.plain = "COMMIT";
  commit.doing = "committing";
  try {
    run_held(&commit);
  } catch (const StoreError&) {
    // COMMIT itself failed, or the session is gone: the transaction is over. A held-back
    // statement that failed instead made the pipeline skip the COMMIT: the transaction stays
    // open (aborted) on the server, and rollback_quietly() ends it.
    if (last_sent_failed_ || !session_ || transaction_lost_) {
      in_transaction_ = false;
      transaction_lost_ = false;
      held_.clear();
    }
    throw;
  }
  in_transaction_ = false;
  // COMMIT of a transaction in which a statement failed rolls it back without an error.
  if (statement_failed_) {
    throw StoreError(
        "committing: a statement of the transaction had failed, so PostgreSQL "
        "rolled it back");
  }
}

void PgConnection::rollback_quietly() noexcept {
  if (!in_transaction_) return;
  const bool lost = transaction_lost_;
  in_transaction_ = false;
  transaction_lost_ = false;
  // Nothing held back is sent; when even BEGIN is still held, the server never saw the
  // transaction.
  const bool begun_on_server = held_.empty() || held_.front().plain != "BEGIN";
  held_.clear();
  if (lost || !session_ || !begun_on_server) return;
  read_in_flight(true);
  if (!session_) return;
  const PgResult r(PQexec(session_->get(), "ROLLBACK"));
  // A session that cannot roll back is not reused: the next use reconnects.
  if (!r || !succeeded(r.get())) drop_session();
}

int PgConnection::schema_version() {
  sql::Statement present(*this, "SELECT to_regclass('schema_version') IS NOT NULL AS present",
                         "reading the schema version");
  if (!present.next() || !present.boolean("present")) return 0;
  sql::Statement row(*this, "SELECT version FROM schema_version", "reading the schema version");
  if (!row.next()) return 0;
  const int version = row.int32("version");
  if (row.next()) {
    throw StoreError("reading the schema version: table schema_version has more than one row");
  }
  return version;
}

void PgConnection::set_schema_version(int version) {
  const std::string doing = "setting the schema version to " + std::to_string(version);
  exec(
      "CREATE TABLE IF NOT EXISTS schema_version (one_row BOOLEAN PRIMARY KEY DEFAULT TRUE "
      "CHECK (one_row), version INTEGER NOT NULL)",
      doing);
  sql::Statement upsert(*this,
                        "INSERT INTO schema_version (one_row, version) VALUES (TRUE, :version) "
                        "ON CONFLICT (one_row) DO UPDATE SET version = excluded.version",
                        doing);
  upsert.bind_int(":version", version);
  upsert.run();
}

}  // namespace pf::store
