#include "market/query.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <set>

#include "core/text.h"
#include "util/bounded_json.h"

namespace pf::market {
namespace {

using nlohmann::json;

struct FieldInfo {
  std::string_view name;
  QueryFieldKind kind;
};

// vast-cli's offers_fields plus the offer fields third-party clients filter on (reliability2,
// score, hosting_type, ...), so that those do not draw an "unknown field" warning.
constexpr std::array kFields = {
    FieldInfo{"bw_nvlink", QueryFieldKind::Number},
    FieldInfo{"cluster_id", QueryFieldKind::Number},
    FieldInfo{"compute_cap", QueryFieldKind::Number},
    FieldInfo{"cpu_arch", QueryFieldKind::String},
    FieldInfo{"cpu_cores", QueryFieldKind::Number},
    FieldInfo{"cpu_cores_effective", QueryFieldKind::Number},
    FieldInfo{"cpu_ghz", QueryFieldKind::Number},
    FieldInfo{"cpu_name", QueryFieldKind::String},
    FieldInfo{"cpu_ram", QueryFieldKind::Number},
    FieldInfo{"cuda_max_good", QueryFieldKind::Number},
    FieldInfo{"datacenter", QueryFieldKind::Bool},
    FieldInfo{"direct_port_count", QueryFieldKind::Number},
    FieldInfo{"disk_bw", QueryFieldKind::Number},
    FieldInfo{"disk_name", QueryFieldKind::String},
    FieldInfo{"disk_space", QueryFieldKind::Number},
    FieldInfo{"dlperf", QueryFieldKind::Number},
    FieldInfo{"dlperf_per_dphtotal", QueryFieldKind::Number},
    FieldInfo{"dph_base", QueryFieldKind::Number},
    FieldInfo{"dph_total", QueryFieldKind::Number},
    FieldInfo{"driver_vers", QueryFieldKind::Number},
    FieldInfo{"driver_version", QueryFieldKind::Number},
    FieldInfo{"duration", QueryFieldKind::Number},
    FieldInfo{"end_date", QueryFieldKind::Number},
    FieldInfo{"external", QueryFieldKind::Bool},
    FieldInfo{"flops_per_dphtotal", QueryFieldKind::Number},
    FieldInfo{"geolocation", QueryFieldKind::String},
    FieldInfo{"gpu_arch", QueryFieldKind::String},
    FieldInfo{"gpu_display_active", QueryFieldKind::Bool},
    FieldInfo{"gpu_frac", QueryFieldKind::Number},
    FieldInfo{"gpu_lanes", QueryFieldKind::Number},
    FieldInfo{"gpu_max_power", QueryFieldKind::Number},
    FieldInfo{"gpu_max_temp", QueryFieldKind::Number},
    FieldInfo{"gpu_mem_bw", QueryFieldKind::Number},
    FieldInfo{"gpu_name", QueryFieldKind::String},
    FieldInfo{"gpu_ram", QueryFieldKind::Number},
    FieldInfo{"gpu_total_ram", QueryFieldKind::Number},
    FieldInfo{"has_avx", QueryFieldKind::Bool},
    FieldInfo{"host_id", QueryFieldKind::Number},
    FieldInfo{"hosting_type", QueryFieldKind::Number},
    FieldInfo{"id", QueryFieldKind::Number},
    FieldInfo{"inet_down", QueryFieldKind::Number},
    FieldInfo{"inet_down_cost", QueryFieldKind::Number},
    FieldInfo{"inet_up", QueryFieldKind::Number},
    FieldInfo{"inet_up_cost", QueryFieldKind::Number},
    FieldInfo{"machine_id", QueryFieldKind::Number},
    FieldInfo{"min_bid", QueryFieldKind::Number},
    FieldInfo{"mobo_name", QueryFieldKind::String},
    FieldInfo{"num_gpus", QueryFieldKind::Number},
    FieldInfo{"pci_gen", QueryFieldKind::Number},
    FieldInfo{"pcie_bw", QueryFieldKind::Number},
    FieldInfo{"public_ipaddr", QueryFieldKind::String},
    FieldInfo{"reliability", QueryFieldKind::Number},
    FieldInfo{"reliability2", QueryFieldKind::Number},
    FieldInfo{"rentable", QueryFieldKind::Bool},
    FieldInfo{"rented", QueryFieldKind::Bool},
    FieldInfo{"score", QueryFieldKind::Number},
    FieldInfo{"start_date", QueryFieldKind::Number},
    FieldInfo{"static_ip", QueryFieldKind::Bool},
    FieldInfo{"storage_cost", QueryFieldKind::Number},
    FieldInfo{"total_flops", QueryFieldKind::Number},
    // "22.04": numeric-looking but a release name, so not validated as a number.
    FieldInfo{"ubuntu_version", QueryFieldKind::String},
    FieldInfo{"verification", QueryFieldKind::String},
    FieldInfo{"verified", QueryFieldKind::Bool},
    FieldInfo{"vms_enabled", QueryFieldKind::Bool},
};

constexpr std::array<std::pair<std::string_view, std::string_view>, 5> kAliases = {{
    {"cuda_vers", "cuda_max_good"},
    {"display_active", "gpu_display_active"},
    {"dlperf_usd", "dlperf_per_dphtotal"},
    {"dph", "dph_total"},
    {"flops_usd", "flops_per_dphtotal"},
}};

// The CLI takes GB and days; the API wants MB and seconds.
constexpr std::array<std::pair<std::string_view, double>, 4> kMultipliers = {{
    {"cpu_ram", 1000.0},
    {"gpu_ram", 1000.0},
    {"gpu_total_ram", 1000.0},
    {"duration", 24.0 * 60.0 * 60.0},
}};

// The values a number field may be compared with, in the units the query is written in (GB,
// days): anything outside is a typo or an attack, and could overflow once scaled (cpu_ram>=1e308
// is infinite in MB, which JSON writes as null).
struct NumberRange {
  std::string_view field;
  double min;
  double max;
  std::string_view unit;
};
constexpr double kMaxQueryMagnitude = 1e12;  // any other number field
constexpr std::array kNumberRanges = {
    NumberRange{"num_gpus", 0, 1024, ""},       NumberRange{"cpu_ram", 0, 1e6, " GB"},
    NumberRange{"gpu_ram", 0, 1e6, " GB"},      NumberRange{"gpu_total_ram", 0, 1e6, " GB"},
    NumberRange{"duration", 0, 36500, " days"}, NumberRange{"reliability", 0, 1, ""},
    NumberRange{"reliability2", 0, 1, ""},      NumberRange{"gpu_frac", 0, 1, ""},
};

NumberRange number_range_of(std::string_view field) {
  for (const auto& range : kNumberRanges) {
    if (range.field == field) return range;
  }
  return NumberRange{field, -kMaxQueryMagnitude, kMaxQueryMagnitude, ""};
}

std::string format_bound(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// nullopt when `value` is a sane value for `field`, else why not.
std::optional<std::string> out_of_range(std::string_view field, double value) {
  const NumberRange range = number_range_of(field);
  if (std::isfinite(value) && value >= range.min && value <= range.max) return std::nullopt;
  return "value out of range (" + std::string(field) + " takes " + format_bound(range.min) +
         " to " + format_bound(range.max) + std::string(range.unit) + ")";
}

constexpr std::array<std::pair<std::string_view, std::string_view>, 19> kOperators = {{
    {"=", "eq"},       {"==", "eq"},       {"!=", "neq"},    {"<", "lt"},         {"<=", "lte"},
    {">", "gt"},       {">=", "gte"},      {"eq", "eq"},     {"neq", "neq"},      {"noteq", "neq"},
    {"not eq", "neq"}, {"gt", "gt"},       {"gte", "gte"},   {"lt", "lt"},        {"lte", "lte"},
    {"in", "in"},      {"notin", "notin"}, {"nin", "notin"}, {"not in", "notin"},
}};

std::optional<std::string_view> api_operator(std::string_view written) {
  for (const auto& [spelling, name] : kOperators) {
    if (spelling == written) return name;
  }
  return std::nullopt;
}

std::optional<double> multiplier_of(std::string_view field) {
  for (const auto& [name, factor] : kMultipliers) {
    if (name == field) return factor;
  }
  return std::nullopt;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_operator_char(char c) {
  return c == '=' || c == '<' || c == '>' || c == '!';
}
bool is_quote(char c) {
  return c == '"' || c == '\'';
}
bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_field_char(char c) {
  return is_letter(c) || (c >= '0' && c <= '9') || c == '_';
}

std::string_view strip_quotes(std::string_view s) {
  if (s.size() >= 2 && is_quote(s.front()) && s.back() == s.front()) {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

bool is_valid_field_name(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_field_char(c)) return false;
  }
  return true;
}

bool is_ordered(std::string_view op) {
  return op == "gt" || op == "gte" || op == "lt" || op == "lte";
}
bool is_membership(std::string_view op) {
  return op == "in" || op == "notin";
}

// One term as written, before any interpretation.
struct RawTerm {
  std::string_view text;   // the whole term, for error messages
  std::string_view field;  // as written (alias not yet resolved)
  std::string op;          // as written, "not  in" folded to "not in"
  std::string_view value;  // a [list], a "quoted" string or a bare word, as written
};

// Splits the query into terms. Operators may stand between spaces ("num_gpus >= 2",
// "geolocation not in [US, CA]"); lists and quoted strings may contain spaces.
class TermScanner {
 public:
  explicit TermScanner(std::string_view text) : text_(text) {}

  // nullopt at the end of the input.
  tl::expected<std::optional<RawTerm>, std::string> next() {
    skip_spaces();
    if (pos_ == text_.size()) return std::nullopt;
    const std::size_t start = pos_;
    RawTerm term;

    while (pos_ < text_.size() && !is_space(text_[pos_]) && !is_operator_char(text_[pos_]) &&
           text_[pos_] != '[' && !is_quote(text_[pos_])) {
      ++pos_;
    }
    term.field = text_.substr(start, pos_ - start);
    if (term.field.empty()) return fail(start, "missing field name");
    for (char c : term.field) {
      if (!is_field_char(c)) {
        return fail(start, "illegal character '" + std::string(1, c) + "' in field name '" +
                               std::string(term.field) + "'");
      }
    }
    const std::size_t field_end = pos_;

    skip_spaces();
    const std::size_t op_start = pos_;
    if (pos_ < text_.size() && is_operator_char(text_[pos_])) {
      while (pos_ < text_.size() && is_operator_char(text_[pos_])) ++pos_;
      term.op = std::string(text_.substr(op_start, pos_ - op_start));
      if (!api_operator(term.op)) return fail(start, "unknown operator '" + term.op + "'");
    } else {
      std::string word(read_word());
      if (word == "not") {
        skip_spaces();
        word += " ";
        word += read_word();
      }
      if (!api_operator(word) || !at_word_end()) {
        pos_ = field_end;
        return fail(start, "missing operator");
      }
      term.op = std::move(word);
    }

    skip_spaces();
    const std::size_t value_start = pos_;
    if (pos_ == text_.size()) return fail(start, "missing value");
    const char first = text_[pos_];
    if (first == '[' || is_quote(first)) {
      const char closer = first == '[' ? ']' : first;
      const std::size_t close = text_.find(closer, pos_ + 1);
      if (close == std::string_view::npos) {
        pos_ = text_.size();
        return fail(start, first == '[' ? "unclosed list (missing ']')"
                                        : "unclosed quote (missing " + std::string(1, first) + ")");
      }
      pos_ = close + 1;
      if (pos_ < text_.size() && !is_space(text_[pos_])) {
        return fail(start,
                    "unexpected text after " + std::string(first == '[' ? "list" : "quoted value"));
      }
    } else {
      for (; pos_ < text_.size() && !is_space(text_[pos_]); ++pos_) {
        const char c = text_[pos_];
        if (c == '[' || c == ']' || is_quote(c)) {
          return fail(start, "stray '" + std::string(1, c) + "' in value");
        }
        if (is_operator_char(c)) {
          return fail(start,
                      "unexpected '" + std::string(1, c) + "' in value (one operator per term)");
        }
      }
    }
    term.value = text_.substr(value_start, pos_ - value_start);
    term.text = text_.substr(start, pos_ - start);
    return term;
  }

 private:
  void skip_spaces() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }

  std::string_view read_word() {
    const std::size_t start = pos_;
    while (pos_ < text_.size() && is_letter(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // A word operator must stand alone: "gte2" is not "gte 2".
  bool at_word_end() const {
    return pos_ == text_.size() || is_space(text_[pos_]) || text_[pos_] == '[' ||
           is_quote(text_[pos_]);
  }

  // The term shown in the message runs from its start to the next space at or after where the
  // scan stopped, so it reads as the user wrote it ('num_gpus>>1').
  tl::unexpected<std::string> fail(std::size_t start, const std::string& why) const {
    std::size_t end = pos_;
    while (end < text_.size() && !is_space(text_[end])) ++end;
    return tl::unexpected("bad query term '" + std::string(text_.substr(start, end - start)) +
                          "': " + why);
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

std::string underscores_to_spaces(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '_') c = ' ';
  }
  return out;
}

// One value (a scalar, or one element of a list) in the JSON the CLI would send, after checking
// it fits the field. `op` is the API operator the value is compared with.
tl::expected<json, std::string> convert_value(std::string_view written, const std::string& field,
                                              std::string_view op) {
  const std::string text = underscores_to_spaces(strip_quotes(written));
  const auto kind = query_field_kind(field);
  if (text.empty()) return tl::unexpected(std::string("empty value"));

  if (field == "driver_version" && text.find('.') != std::string::npos) {
    auto version = numeric_driver_version(text);
    if (!version)
      return tl::unexpected("driver_version must look like 535.86.05, got '" + text + "'");
    return json(*version);
  }

  json value;
  if (text == "true" || text == "True") {
    value = true;
  } else if (text == "false" || text == "False") {
    value = false;
  } else if (text == "None" || text == "null") {
    value = nullptr;
  } else {
    value = text;
  }

  if (value.is_null()) {
    if (op != "eq" && op != "neq" && !is_membership(op)) {
      return tl::unexpected(std::string("null only works with = or !="));
    }
    return value;
  }
  if (is_ordered(op) && !parse_query_number(text)) {
    return tl::unexpected("operator '" + std::string(op) + "' needs a number, got '" + text + "'");
  }
  if (auto factor = multiplier_of(field)) {
    auto number = parse_query_number(text);
    if (!number) return tl::unexpected(field + " needs a number (GB or days), got '" + text + "'");
    if (auto why = out_of_range(field, *number)) return tl::unexpected(*why);
    const double scaled = *number * *factor;
    if (!std::isfinite(scaled)) return tl::unexpected(std::string("value out of range"));
    return json(scaled);
  }
  if (kind == QueryFieldKind::Number) {
    auto number = parse_query_number(text);
    if (!number) return tl::unexpected(field + " needs a number, got '" + text + "'");
    if (auto why = out_of_range(field, *number)) return tl::unexpected(*why);
  }
  if (kind == QueryFieldKind::Bool && !value.is_boolean()) {
    return tl::unexpected(field + " needs true or false, got '" + text + "'");
  }
  return value;
}

// The elements of "[US, CA]" (from_brackets) or of a bare "US,CA", trimmed, empty ones dropped.
// Inside brackets an unquoted element may not contain spaces or operators: that is a list whose
// ']' was forgotten and which swallowed the following terms.
tl::expected<std::vector<std::string_view>, std::string> list_elements(std::string_view written,
                                                                       bool from_brackets) {
  if (from_brackets) written = written.substr(1, written.size() - 2);
  std::vector<std::string_view> out;
  while (true) {
    const std::size_t comma = written.find(',');
    const std::string_view element = core::trim_view(written.substr(0, comma));
    if (from_brackets && !element.empty() && !is_quote(element.front())) {
      for (char c : element) {
        if (is_space(c) || is_operator_char(c) || c == '[') {
          return tl::unexpected("malformed list element '" + std::string(element) +
                                "' (missing ',' or ']'?)");
        }
      }
    }
    if (!element.empty()) out.push_back(element);
    if (comma == std::string_view::npos) break;
    written.remove_prefix(comma + 1);
  }
  if (out.empty()) return tl::unexpected(std::string("empty list"));
  return out;
}

}  // namespace

std::optional<QueryFieldKind> query_field_kind(std::string_view field) {
  for (const auto& info : kFields) {
    if (info.name == field) return info.kind;
  }
  return std::nullopt;
}

std::string_view resolve_query_field_alias(std::string_view field) {
  for (const auto& [alias, name] : kAliases) {
    if (alias == field) return name;
  }
  return field;
}

std::optional<double> parse_query_number(std::string_view text) {
  if (text.empty()) return std::nullopt;
  // from_chars rejects a leading '+', which people do write.
  if (text.front() == '+') text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::int64_t> numeric_driver_version(std::string_view version) {
  std::int64_t result = 0;
  int parts = 0;
  while (true) {
    const std::size_t dot = version.find('.');
    const std::string_view part = version.substr(0, dot);
    if (part.empty() || part.size() > 3) return std::nullopt;
    int number = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), number);
    if (ec != std::errc() || end != part.data() + part.size() || number < 0) return std::nullopt;
    // A version has three parts; stop at the fourth before result * 1000 can overflow (the
    // fuzzer's "11.0.0.0.0.0.0" did).
    if (++parts > 3) return std::nullopt;
    result = result * 1000 + number;
    if (dot == std::string_view::npos) break;
    version.remove_prefix(dot + 1);
  }
  if (parts != 3) return std::nullopt;
  return result;
}

tl::expected<ParsedQuery, std::string> parse_query(std::string_view text,
                                                   bool add_default_filters) {
  // Terms become JSON strings, which cannot hold invalid UTF-8 (dump() would throw).
  if (auto bad = util::first_invalid_utf8(text)) {
    return tl::unexpected("bad query: invalid UTF-8 at byte " + std::to_string(*bad + 1));
  }
  ParsedQuery parsed;
  if (add_default_filters) {
    parsed.filters = {{"verified", {{"eq", true}}},
                      {"external", {{"eq", false}}},
                      {"rentable", {{"eq", true}}},
                      {"rented", {{"eq", false}}}};
  }
  std::set<std::string> warned;
  TermScanner scanner(text);
  while (true) {
    auto next = scanner.next();
    if (!next) return tl::unexpected(next.error());
    if (!*next) break;
    const RawTerm& term = **next;
    auto bad = [&term](const std::string& why) {
      return tl::unexpected("bad query term '" + std::string(term.text) + "': " + why);
    };

    const std::string_view op = *api_operator(term.op);
    const std::string field(resolve_query_field_alias(term.field));
    if (!query_field_kind(field) && warned.insert(field).second) {
      parsed.warnings.push_back("unknown field '" + field + "' in query term '" +
                                std::string(term.text) + "' (sent anyway)");
    }

    if (term.value == "any" || term.value == "?" || term.value == "*") {
      if (op != "eq") return bad("wildcard '" + std::string(term.value) + "' only works with '='");
      parsed.filters.erase(field);
      continue;
    }

    json value;
    const bool is_list = term.value.front() == '[';
    if (is_membership(op)) {
      const auto elements = list_elements(is_list ? term.value : strip_quotes(term.value), is_list);
      if (!elements) return bad(elements.error());
      value = json::array();
      for (std::string_view element : *elements) {
        auto converted = convert_value(element, field, op);
        if (!converted) return bad(converted.error());
        value.push_back(std::move(*converted));
      }
    } else {
      if (is_list) return bad("a [list] needs 'in' or 'notin', not '" + term.op + "'");
      auto converted = convert_value(term.value, field, op);
      if (!converted) return bad(converted.error());
      value = std::move(*converted);
    }
    parsed.filters[field][std::string(op)] = std::move(value);
  }
  return parsed;
}

tl::expected<std::vector<std::pair<std::string, std::string>>, std::string> parse_order(
    std::string_view text) {
  if (core::trim_view(text).empty()) return tl::unexpected(std::string("empty order"));
  if (auto bad = util::first_invalid_utf8(text)) {
    return tl::unexpected("bad order: invalid UTF-8 at byte " + std::to_string(*bad + 1));
  }
  std::vector<std::pair<std::string, std::string>> order;
  while (true) {
    const std::size_t comma = text.find(',');
    std::string_view entry = core::trim_view(text.substr(0, comma));
    std::string direction = "asc";
    if (!entry.empty() && (entry.back() == '-' || entry.back() == '+')) {
      direction = entry.back() == '-' ? "desc" : "asc";
      entry.remove_suffix(1);
    }
    if (!is_valid_field_name(entry)) {
      return tl::unexpected("bad order entry '" +
                            std::string(core::trim_view(text.substr(0, comma))) +
                            "': expected a field name, optionally followed by '-' (desc) or "
                            "'+' (asc)");
    }
    order.emplace_back(std::string(resolve_query_field_alias(entry)), std::move(direction));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return order;
}

}  // namespace pf::market
