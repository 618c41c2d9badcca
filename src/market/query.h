// The vast.ai CLI query language ("gpu_name=RTX_4090 num_gpus>=2 ...") turned into the JSON
// filter object that POST /api/v0/bundles/ takes. Mirrors vast-cli's vastai/api/query.py
// (see /work/shared/reference/vast-api.md section 3), but rejects malformed terms with a message
// naming the term instead of sending something the server would misread.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

namespace pf::market {

// What a known offer field holds; decides which values a query term may give it.
enum class QueryFieldKind { Number, String, Bool };

// The kind of an offer field in vast's API names; nullopt for fields this table does not know
// (the CLI still sends those, with a warning). Takes the API name, not a CLI alias.
std::optional<QueryFieldKind> query_field_kind(std::string_view field);

// CLI alias -> API field name (cuda_vers -> cuda_max_good, dph -> dph_total, ...); any other
// name is returned unchanged.
std::string_view resolve_query_field_alias(std::string_view field);

// The query language's notion of a number: the whole text is a finite decimal number
// ("2", "0.98", "-1", "1e3"). Used by the parser and by the server-side evaluator alike, so
// that "numbers sent as strings" mean the same thing on both ends.
std::optional<double> parse_query_number(std::string_view text);

// "535.86.05" -> 535086005: each of the three parts zero-padded to 3 digits, as the CLI does.
// nullopt unless the text is exactly three dot-separated groups of 1-3 digits.
std::optional<std::int64_t> numeric_driver_version(std::string_view version);

struct ParsedQuery {
  nlohmann::json filters = nlohmann::json::object();  // {"field": {"op": value, ...}, ...}
  std::vector<std::string> warnings;                  // e.g. unknown field names (still sent)
};

// Parses e.g. "gpu_name=RTX_4090 num_gpus>=2 reliability>0.98 cpu_ram>=240 geolocation in
// [US,CA] verified=any".
// add_default_filters: start from the CLI defaults verified=true, external=false, rentable=true,
// rented=false (field=any removes a filter, including a default).
// `in`/`notin` with a bare value (no brackets) take it as a comma-separated list, like the CLI:
// "geolocation in US" -> ["US"], "geolocation in US,CA" -> ["US","CA"].
// Error: a message naming the offending term, e.g.
// "bad query term 'num_gpus>>1': unknown operator '>>'".
tl::expected<ParsedQuery, std::string> parse_query(std::string_view text,
                                                   bool add_default_filters = true);

// The CLI's "-o" order syntax: "num_gpus,total_flops-" ->
// [["num_gpus","asc"],["total_flops","desc"]]. A trailing '-' means desc, a trailing '+' (or
// none) asc; aliases are applied. Empty entries and illegal field names are errors.
tl::expected<std::vector<std::pair<std::string, std::string>>, std::string> parse_order(
    std::string_view text);

}  // namespace pf::market
