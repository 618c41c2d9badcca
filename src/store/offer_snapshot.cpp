#include "store/offer_snapshot.h"

#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "market/offer_json.h"
#include "store/sql_store_detail.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;

core::Offer parse_offer(std::string_view vast_text, std::string_view extra_text,
                        const std::string& what) {
  auto vast_parsed = util::parse_json(vast_text);
  if (!vast_parsed) throw StoreError(what + ": corrupt offer snapshot: " + vast_parsed.error());
  auto extra_parsed = util::parse_json(extra_text);
  if (!extra_parsed) throw StoreError(what + ": corrupt offer snapshot: " + extra_parsed.error());
  try {
    json vast = std::move(*vast_parsed);
    const json extra = std::move(*extra_parsed);
    // offer_from_vast_json rejects an offer without a positive id (a market boundary rule); a
    // snapshot may legitimately hold none (an adopted instance), so carry it around the check.
    const std::int64_t id = vast.value("id", std::int64_t{0});
    vast["id"] = 1;
    auto parsed = market::offer_from_vast_json(vast);
    if (!parsed) throw StoreError(what + ": offer snapshot: " + parsed.error());
    core::Offer offer = std::move(*parsed);
    offer.id = id;
    offer.usable_ram_gib = extra.at("usable_ram_gib").get<double>();
    offer.usable_cores = extra.at("usable_cores").get<double>();
    offer.gpu_total_ram_gib = extra.at("gpu_total_ram_gib").get<double>();
    offer.data_flags = extra.at("data_flags").get<std::vector<std::string>>();
    return offer;
  } catch (const json::exception& e) {
    throw StoreError(what + ": corrupt offer snapshot: " + e.what());
  }
}

}  // namespace

std::string offer_vast_text(const core::Offer& offer, const std::string& doing) {
  return sql::dump_json(market::offer_to_vast_json(offer), doing + ": encoding offer");
}

std::string offer_extra_text(const core::Offer& offer, const std::string& doing) {
  const json extra{
      {"usable_ram_gib", offer.usable_ram_gib},
      {"usable_cores", offer.usable_cores},
      {"gpu_total_ram_gib", offer.gpu_total_ram_gib},
      {"data_flags", offer.data_flags},
  };
  return sql::dump_json(extra, doing + ": encoding offer");
}

core::Offer read_offer_snapshot(const sql::Statement& s, std::int64_t instance_id,
                                const std::string& what, OfferCache& cache) {
  const std::string_view vast = s.text_view("offer_json");
  const std::string_view extra = s.text_view("offer_extra_json");
  if (const core::Offer* known = cache.find(instance_id, vast, extra)) return *known;
  core::Offer offer = parse_offer(vast, extra, what);
  cache.put(instance_id, vast, extra, offer);
  return offer;
}

}  // namespace pf::store
