// Conversion between vast.ai's offer JSON (field names and units as the API sends them)
// and core::Offer. The single place where MiB→GiB and friends happen.
#pragma once

#include <string>

#include <nlohmann/json.hpp>
#include <tl/expected.hpp>

#include "core/offer.h"

namespace pf::market {

// Tolerant: null/absent/wrong-typed optional fields become zero with a data flag.
// Fails (with a message naming the field) only when the offer is unusable: no numeric id.
tl::expected<core::Offer, std::string> offer_from_vast_json(const nlohmann::json& j);

// The offer in vast's field names and units (used by market-sim to serve offers).
nlohmann::json offer_to_vast_json(const core::Offer& offer);

constexpr double kMiBPerGiB = 1024.0;

}  // namespace pf::market
