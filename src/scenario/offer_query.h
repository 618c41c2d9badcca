// Server side of vast's offer search: applies a POST /api/v0/bundles/ body to offers in vast
// JSON form, for market-sim. Semantics follow /work/shared/reference/vast-api.md section 2 where
// it speaks, and the choices documented below where it does not.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>
#include <vector>

namespace pf::scenario {

// vast returns 64 offers when a search gives no "limit".
constexpr std::size_t kDefaultSearchLimit = 64;

// Applies a vast search body (filters plus optional "order", "limit", "type",
// "allocated_storage") to offers given in vast JSON form: filters every offer, sorts by "order"
// (list of [field, "asc"|"desc"]), truncates to "limit" (default kDefaultSearchLimit).
//
// Filters: {"field": {"op": value, ...}} with op in eq, neq, gt, gte, lt, lte, in, notin; all
// conditions must hold.
// - Numbers given as strings ("2") compare numerically with numbers; booleans count as 0/1.
// - Other strings compare exactly (gpu_name "RTX 4090"), except that geolocation eq/in also
//   match the trailing 2-letter country code ("Florida, US" matches in ["US"]).
// - driver_version: dotted strings ("535.86.05") on either side compare as 535086005.
// - A field the offer lacks (absent or null) matches only neq/notin, or eq/in with null.
// - gt/gte/lt/lte need a numeric filter value; an offer whose value is not numeric fails them.
// Sorting is stable, by each order key in turn, then by id ascending. Numbers sort before
// strings, and offers lacking the field sort last in either direction.
// "type" and "allocated_storage" are validated but do not change the offers (no repricing).
//
// Errors (a message naming the bad field/operator/key): body not an object, a filter that is
// not an object, unknown operator, in/notin without a list, ordered operator without a number,
// limit not a positive integer, order not a list of [field, "asc"|"desc"] pairs, type not one
// of on-demand/ondemand/bid/reserved, allocated_storage not a non-negative number, an offer
// that is not a JSON object.
tl::expected<std::vector<nlohmann::json>, std::string> apply_search(
    const std::vector<nlohmann::json>& offers, const nlohmann::json& body);

}  // namespace pf::scenario
