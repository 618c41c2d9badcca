#include "scenario/offer_query.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>

#include "market/query.h"
#include "scenario/json_text.h"

namespace pf::scenario {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 8> kOperators = {"eq", "neq", "gt", "gte",
                                                        "lt", "lte", "in", "notin"};

bool is_ordered(std::string_view op) {
  return op == "gt" || op == "gte" || op == "lt" || op == "lte";
}
bool is_scalar(const json& v) {
  return v.is_null() || v.is_boolean() || v.is_number() || v.is_string();
}

struct Condition {
  std::string field;
  std::string op;
  json value;  // a scalar, or an array of scalars for in/notin
};

struct SortKey {
  std::string field;
  bool descending = false;
};

struct Search {
  std::vector<Condition> conditions;
  std::vector<SortKey> order;
  std::size_t limit = kDefaultSearchLimit;
};

// A value in the form it is compared in: driver versions "535.86.05" become 535086005 so that
// they compare with what the CLI sends.
json normalised(const std::string& field, const json& value) {
  if (field == "driver_version" && value.is_string()) {
    if (auto version = market::numeric_driver_version(value.get_ref<const std::string&>())) {
      return *version;
    }
  }
  return value;
}

// Numbers, numeric strings and booleans (as 0/1) read as numbers; anything else does not.
std::optional<double> as_number(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? 1.0 : 0.0;
  if (value.is_number()) {
    const double v = value.get<double>();
    return std::isfinite(v) ? std::optional(v) : std::nullopt;
  }
  if (value.is_string()) return market::parse_query_number(value.get_ref<const std::string&>());
  return std::nullopt;
}

char ascii_upper(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
}

// "Florida, US" -> "US"; "US" -> "US"; anything without a trailing 2-letter code -> "".
std::string country_code(std::string_view geolocation) {
  const std::size_t comma = geolocation.rfind(',');
  std::string_view tail =
      comma == std::string_view::npos ? geolocation : geolocation.substr(comma + 1);
  while (!tail.empty() && tail.front() == ' ') tail.remove_prefix(1);
  while (!tail.empty() && tail.back() == ' ') tail.remove_suffix(1);
  if (tail.size() != 2) return {};
  std::string code;
  for (char c : tail) {
    const char upper = ascii_upper(c);
    if (upper < 'A' || upper > 'Z') return {};
    code.push_back(upper);
  }
  return code;
}

// Equality of an offer's present (non-null) value with one non-null filter value.
bool values_equal(const std::string& field, const json& offer_value, const json& filter_value) {
  const json lhs = normalised(field, offer_value);
  const json rhs = normalised(field, filter_value);
  const auto lhs_number = as_number(lhs);
  const auto rhs_number = as_number(rhs);
  if (lhs_number && rhs_number) return *lhs_number == *rhs_number;
  if (!lhs.is_string() || !rhs.is_string()) return false;
  const auto& lhs_text = lhs.get_ref<const std::string&>();
  const auto& rhs_text = rhs.get_ref<const std::string&>();
  if (lhs_text == rhs_text) return true;
  if (field == "geolocation") {
    const std::string offer_country = country_code(lhs_text);
    if (offer_country.empty() || rhs_text.size() != 2) return false;
    return offer_country == std::string{ascii_upper(rhs_text[0]), ascii_upper(rhs_text[1])};
  }
  return false;
}

// `offer_value` is nullptr when the offer lacks the field (absent or null).
bool equals(const std::string& field, const json* offer_value, const json& filter_value) {
  if (filter_value.is_null()) return offer_value == nullptr;
  return offer_value != nullptr && values_equal(field, *offer_value, filter_value);
}

bool is_member(const std::string& field, const json* offer_value, const json& list) {
  return std::any_of(list.begin(), list.end(),
                     [&](const json& element) { return equals(field, offer_value, element); });
}

bool matches(const json& offer, const Condition& c) {
  const auto it = offer.find(c.field);
  const json* offer_value = (it == offer.end() || it->is_null()) ? nullptr : &*it;
  if (c.op == "eq") return equals(c.field, offer_value, c.value);
  if (c.op == "neq") return !equals(c.field, offer_value, c.value);
  if (c.op == "in") return is_member(c.field, offer_value, c.value);
  if (c.op == "notin") return !is_member(c.field, offer_value, c.value);
  if (offer_value == nullptr) return false;
  const auto lhs = as_number(normalised(c.field, *offer_value));
  const auto rhs = as_number(normalised(c.field, c.value));
  if (!lhs || !rhs) return false;
  if (c.op == "gt") return *lhs > *rhs;
  if (c.op == "gte") return *lhs >= *rhs;
  if (c.op == "lt") return *lhs < *rhs;
  return *lhs <= *rhs;  // lte: compile() admits nothing else
}

tl::unexpected<std::string> invalid(const std::string& what) {
  return tl::unexpected(what);
}

// No offer field is anywhere near this (MB of RAM, seconds of duration included): a larger
// operand is a client bug, refused rather than compared.
constexpr double kMaxOperandMagnitude = 1e15;

bool operand_in_range(const json& value) {
  if (!value.is_number() && !value.is_string()) return true;
  const auto number = as_number(value);
  if (!number) return !value.is_number();  // a JSON number that is not finite
  return std::fabs(*number) <= kMaxOperandMagnitude;
}

tl::expected<Condition, std::string> compile_condition(const std::string& field,
                                                       const std::string& op, const json& value) {
  if (std::find(kOperators.begin(), kOperators.end(), op) == kOperators.end()) {
    return invalid("unknown operator '" + op + "' for field '" + field +
                   "' (expected eq, neq, gt, gte, lt, lte, in or notin)");
  }
  const bool in_range = value.is_array() ? std::all_of(value.begin(), value.end(), operand_in_range)
                                         : operand_in_range(value);
  if (!in_range) {
    return invalid("operator '" + op + "' for field '" + field + "': value out of range, got " +
                   describe_json(value));
  }
  if (op == "in" || op == "notin") {
    if (!value.is_array()) {
      return invalid("operator '" + op + "' for field '" + field + "' needs a list, got " +
                     describe_json(value));
    }
    for (const json& element : value) {
      if (!is_scalar(element)) {
        return invalid("operator '" + op + "' for field '" + field +
                       "': list elements must be strings, numbers, booleans or null, got " +
                       describe_json(element));
      }
    }
  } else if (is_ordered(op)) {
    if (!as_number(normalised(field, value)) || value.is_boolean()) {
      return invalid("operator '" + op + "' for field '" + field + "' needs a number, got " +
                     describe_json(value));
    }
  } else if (!is_scalar(value)) {
    return invalid("operator '" + op + "' for field '" + field +
                   "' needs a string, number, boolean or null, got " + describe_json(value));
  }
  return Condition{field, op, value};
}

tl::expected<std::vector<SortKey>, std::string> compile_order(const json& order) {
  const std::string shape = "order must be a list of [field, \"asc\"|\"desc\"] pairs";
  if (!order.is_array()) return invalid(shape + ", got " + describe_json(order));
  std::vector<SortKey> keys;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const json& pair = order[i];
    const std::string where = shape + "; entry " + std::to_string(i) + " is ";
    if (!pair.is_array() || pair.size() != 2) return invalid(where + pair.dump());
    if (!pair[0].is_string() || pair[0].get_ref<const std::string&>().empty()) {
      return invalid(where + pair.dump() + " (field must be a non-empty string)");
    }
    if (pair[1] != "asc" && pair[1] != "desc") {
      return invalid(where + pair.dump() + " (direction must be \"asc\" or \"desc\")");
    }
    keys.push_back(SortKey{pair[0].get<std::string>(), pair[1] == "desc"});
  }
  return keys;
}

tl::expected<std::size_t, std::string> compile_limit(const json& limit) {
  const std::string problem = "limit must be a positive integer, got " + describe_json(limit);
  if (limit.is_number_unsigned()) {
    const auto n = limit.get<std::uint64_t>();
    if (n == 0) return invalid(problem);
    return static_cast<std::size_t>(n);
  }
  if (limit.is_number_integer()) {
    const auto n = limit.get<std::int64_t>();
    if (n <= 0) return invalid(problem);
    return static_cast<std::size_t>(n);
  }
  if (limit.is_number_float()) {
    const double n = limit.get<double>();
    // 64.0 is what a client that keeps every number as a double sends.
    if (std::isfinite(n) && n >= 1 && std::floor(n) == n && n <= 1e15) {
      return static_cast<std::size_t>(n);
    }
  }
  return invalid(problem);
}

tl::expected<Search, std::string> compile(const json& body) {
  if (!body.is_object()) {
    return invalid("search body must be a JSON object, got " + describe_json(body));
  }
  Search search;
  for (const auto& [key, value] : body.items()) {
    if (key == "order") {
      auto order = compile_order(value);
      if (!order) return tl::unexpected(order.error());
      search.order = std::move(*order);
    } else if (key == "limit") {
      auto limit = compile_limit(value);
      if (!limit) return tl::unexpected(limit.error());
      search.limit = *limit;
    } else if (key == "type") {
      if (value != "on-demand" && value != "ondemand" && value != "bid" && value != "reserved") {
        return invalid("type must be \"on-demand\", \"bid\" or \"reserved\", got " +
                       describe_json(value));
      }
    } else if (key == "allocated_storage") {
      const auto gb = value.is_number() ? as_number(value) : std::nullopt;
      if (!gb || *gb < 0) {
        return invalid("allocated_storage must be a non-negative number of GB, got " +
                       describe_json(value));
      }
    } else {
      if (!value.is_object()) {
        return invalid("filter on field '" + key +
                       "' must be an object like {\"eq\": value}, got " + describe_json(value));
      }
      for (const auto& [op, operand] : value.items()) {
        auto condition = compile_condition(key, op, operand);
        if (!condition) return tl::unexpected(condition.error());
        search.conditions.push_back(std::move(*condition));
      }
    }
  }
  return search;
}

// Orders two values of one sort key; <0 when `a` comes first. Lacking the field always sorts
// last, and numbers before strings, whatever the direction.
int compare_for_sort(const std::string& field, const json& a_offer, const json& b_offer,
                     bool descending) {
  auto rank_of = [&field](const json& offer, double& number, std::string& text) {
    const auto it = offer.find(field);
    if (it == offer.end() || it->is_null()) return 2;
    const json value = normalised(field, *it);
    if (auto n = as_number(value)) {
      number = *n;
      return 0;
    }
    if (value.is_string()) {
      text = value.get<std::string>();
      return 1;
    }
    return 2;
  };
  double a_number = 0;
  double b_number = 0;
  std::string a_text;
  std::string b_text;
  const int a_rank = rank_of(a_offer, a_number, a_text);
  const int b_rank = rank_of(b_offer, b_number, b_text);
  if (a_rank != b_rank) return a_rank < b_rank ? -1 : 1;
  int cmp = 0;
  if (a_rank == 0) cmp = a_number < b_number ? -1 : (a_number > b_number ? 1 : 0);
  if (a_rank == 1) cmp = a_text.compare(b_text) < 0 ? -1 : (a_text == b_text ? 0 : 1);
  return descending ? -cmp : cmp;
}

}  // namespace

tl::expected<std::vector<json>, std::string> apply_search(const std::vector<json>& offers,
                                                          const json& body) {
  auto search = compile(body);
  if (!search) return tl::unexpected(search.error());

  std::vector<const json*> kept;
  for (std::size_t i = 0; i < offers.size(); ++i) {
    const json& offer = offers[i];
    if (!offer.is_object()) {
      return invalid("offer #" + std::to_string(i) + " is not a JSON object but " +
                     describe_json(offer));
    }
    const bool all_hold = std::all_of(search->conditions.begin(), search->conditions.end(),
                                      [&offer](const Condition& c) { return matches(offer, c); });
    if (all_hold) kept.push_back(&offer);
  }

  std::stable_sort(kept.begin(), kept.end(), [&search](const json* a, const json* b) {
    for (const SortKey& key : search->order) {
      const int cmp = compare_for_sort(key.field, *a, *b, key.descending);
      if (cmp != 0) return cmp < 0;
    }
    return compare_for_sort("id", *a, *b, false) < 0;
  });

  std::vector<json> result;
  const std::size_t count = std::min(kept.size(), search->limit);
  result.reserve(count);
  for (std::size_t i = 0; i < count; ++i) result.push_back(*kept[i]);
  return result;
}

}  // namespace pf::scenario
