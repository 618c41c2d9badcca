// Internal to src/store: the offer an instance was rented from, as its row keeps it: vast's own
// JSON of the offer (market/offer_json.h) in `offer_json`, what that JSON does not carry (what
// the manager learned of the machine) in `offer_extra_json`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/offer.h"
#include "store/sql_connection.h"
#include "store/sql_store.h"

namespace pf::store {

// Parsed offer snapshots by instance id, each kept with the exact text it was parsed from. A
// snapshot is written once, at rent time, and read on every agent call; a row whose text still
// matches skips the JSON parse. Matching the text rather than trusting the id keeps this right
// when the row is rewritten, by this connection or another one.
class OfferCache {
 public:
  const core::Offer* find(std::int64_t id, std::string_view vast, std::string_view extra) const {
    auto it = by_id_.find(id);
    if (it == by_id_.end() || it->second.vast != vast || it->second.extra != extra) return nullptr;
    return &it->second.offer;
  }
  void put(std::int64_t id, std::string_view vast, std::string_view extra,
           const core::Offer& offer) {
    // Bounded: a fleet's live rows fit many times over; a full listing of old rows refills it.
    if (by_id_.size() >= kMaxEntries && !by_id_.count(id)) by_id_.clear();
    by_id_[id] = Entry{std::string(vast), std::string(extra), offer};
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  struct Entry {
    std::string vast;
    std::string extra;
    core::Offer offer;
  };
  std::unordered_map<std::int64_t, Entry> by_id_;
};

// The two columns' texts for `offer` (`doing` names the write in errors).
std::string offer_vast_text(const core::Offer& offer, const std::string& doing);
std::string offer_extra_text(const core::Offer& offer, const std::string& doing);

// The offer of the row `s` is on, from `cache` when its texts are those cached for
// `instance_id`. Throws StoreError naming `what` when a snapshot is corrupt.
core::Offer read_offer_snapshot(const sql::Statement& s, std::int64_t instance_id,
                                const std::string& what, OfferCache& cache);

// What a SqlStore keeps between reads (sql_store.h): the parsed offer snapshots.
struct SqlStore::Caches {
  OfferCache offers;
};

}  // namespace pf::store
