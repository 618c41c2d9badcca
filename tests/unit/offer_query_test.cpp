#include "scenario/offer_query.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "market/query.h"

namespace pf::scenario {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<json> sample_offers() {
  return {
      json{{"id", 1},
           {"gpu_name", "RTX 4090"},
           {"num_gpus", 1},
           {"dph_total", 0.40},
           {"reliability", 0.99},
           {"geolocation", "Florida, US"},
           {"verified", true},
           {"driver_version", "535.86.05"},
           {"score", 10}},
      json{{"id", 2},
           {"gpu_name", "RTX 4090"},
           {"num_gpus", 2},
           {"dph_total", 0.75},
           {"reliability", 0.95},
           {"geolocation", "Quebec, CA"},
           {"verified", false},
           {"driver_version", "550.127.05"},
           {"score", 30}},
      json{{"id", 3},
           {"gpu_name", "H100 SXM"},
           {"num_gpus", 8},
           {"dph_total", 16.0},
           {"reliability", 0.999},
           {"geolocation", "SE"},
           {"verified", true},
           {"score", 30}},
      json{{"id", 4},
           {"gpu_name", "RTX 4090 Ti"},
           {"num_gpus", 4},
           {"dph_total", "1.5"},  // a vendor that stringifies numbers
           {"geolocation", "Taipei, TW"},
           {"verified", true},
           {"score", 20}},
  };
}

// nlohmann reads {{"score", "desc"}} as the object {"score": "desc"}; build the pairs explicitly.
json order_by(std::initializer_list<std::pair<const char*, const char*>> keys) {
  json order = json::array();
  for (const auto& [field, direction] : keys) order.push_back(json::array({field, direction}));
  return order;
}

std::vector<int> ids_of(const std::vector<json>& offers) {
  std::vector<int> ids;
  for (const auto& o : offers) ids.push_back(o.at("id").get<int>());
  return ids;
}

std::vector<int> search_ids(const json& body, const std::vector<json>& offers = sample_offers()) {
  auto result = apply_search(offers, body);
  EXPECT_TRUE(result.has_value()) << body.dump() << ": " << (result ? "" : result.error());
  return result ? ids_of(*result) : std::vector<int>{-1};
}

std::string search_error(const json& body, const std::vector<json>& offers = sample_offers()) {
  auto result = apply_search(offers, body);
  EXPECT_FALSE(result.has_value()) << body.dump() << " was accepted";
  return result ? std::string() : result.error();
}

// --- operators ---------------------------------------------------------------------------

TEST(ApplySearch, EmptyBodyReturnsEverythingById) {
  EXPECT_THAT(search_ids(json::object()), ElementsAre(1, 2, 3, 4));
}

TEST(ApplySearch, Eq) {
  EXPECT_THAT(search_ids({{"num_gpus", {{"eq", 2}}}}), ElementsAre(2));
  EXPECT_THAT(search_ids({{"verified", {{"eq", true}}}}), ElementsAre(1, 3, 4));
  EXPECT_THAT(search_ids({{"verified", {{"eq", false}}}}), ElementsAre(2));
}

TEST(ApplySearch, GpuNameEqualityIsExact) {
  EXPECT_THAT(search_ids({{"gpu_name", {{"eq", "RTX 4090"}}}}), ElementsAre(1, 2));
  EXPECT_THAT(search_ids({{"gpu_name", {{"eq", "rtx 4090"}}}}), ElementsAre());
  EXPECT_THAT(search_ids({{"gpu_name", {{"eq", "RTX"}}}}), ElementsAre());
}

TEST(ApplySearch, Neq) {
  EXPECT_THAT(search_ids({{"num_gpus", {{"neq", "2"}}}}), ElementsAre(1, 3, 4));
  EXPECT_THAT(search_ids({{"gpu_name", {{"neq", "RTX 4090"}}}}), ElementsAre(3, 4));
}

TEST(ApplySearch, OrderedOperators) {
  EXPECT_THAT(search_ids({{"num_gpus", {{"gt", 2}}}}), ElementsAre(3, 4));
  EXPECT_THAT(search_ids({{"num_gpus", {{"gte", 2}}}}), ElementsAre(2, 3, 4));
  EXPECT_THAT(search_ids({{"num_gpus", {{"lt", 2}}}}), ElementsAre(1));
  EXPECT_THAT(search_ids({{"num_gpus", {{"lte", 2}}}}), ElementsAre(1, 2));
}

TEST(ApplySearch, SeveralOperatorsOnOneFieldAllHold) {
  EXPECT_THAT(search_ids({{"num_gpus", {{"gte", 2}, {"lte", 4}}}}), ElementsAre(2, 4));
}

TEST(ApplySearch, InAndNotin) {
  EXPECT_THAT(search_ids({{"num_gpus", {{"in", {1, 8}}}}}), ElementsAre(1, 3));
  EXPECT_THAT(search_ids({{"num_gpus", {{"notin", {"1", "8"}}}}}), ElementsAre(2, 4));
  EXPECT_THAT(search_ids({{"gpu_name", {{"in", {"H100 SXM", "RTX 4090 Ti"}}}}}), ElementsAre(3, 4));
  EXPECT_THAT(search_ids({{"num_gpus", {{"in", json::array()}}}}), ElementsAre());
}

// --- coercion ----------------------------------------------------------------------------

TEST(ApplySearch, NumbersAsStringsCompareNumerically) {
  // "10" < "9" as text; numerically 10 > 9.
  EXPECT_THAT(search_ids({{"num_gpus", {{"gte", "4"}}}}), ElementsAre(3, 4));
  EXPECT_THAT(search_ids({{"reliability", {{"gt", "0.98"}}}}), ElementsAre(1, 3));
  EXPECT_THAT(search_ids({{"score", {{"lt", "9"}}}}), ElementsAre());
  // An offer value given as a string is read as a number too.
  EXPECT_THAT(search_ids({{"dph_total", {{"gt", 1}}}}), ElementsAre(3, 4));
  EXPECT_THAT(search_ids({{"dph_total", {{"eq", 1.5}}}}), ElementsAre(4));
}

TEST(ApplySearch, MultipliedValuesFromTheCliMatchMegabytes) {
  const std::vector<json> offers = {json{{"id", 1}, {"cpu_ram", 257000}},
                                    json{{"id", 2}, {"cpu_ram", 128000}},
                                    json{{"id", 3}, {"cpu_ram", 240000}}};
  EXPECT_THAT(search_ids({{"cpu_ram", {{"gte", 240000.0}}}}, offers), ElementsAre(1, 3));
}

TEST(ApplySearch, DriverVersionComparesAsNumber) {
  EXPECT_THAT(search_ids({{"driver_version", {{"gte", 540000000}}}}), ElementsAre(2));
  EXPECT_THAT(search_ids({{"driver_version", {{"eq", 535086005}}}}), ElementsAre(1));
  EXPECT_THAT(search_ids({{"driver_version", {{"eq", "535.86.05"}}}}), ElementsAre(1));
}

TEST(ApplySearch, BooleanComparesWithNumbersAsZeroOne) {
  const std::vector<json> offers = {json{{"id", 1}, {"has_avx", 1}},
                                    json{{"id", 2}, {"has_avx", 0}}};
  EXPECT_THAT(search_ids({{"has_avx", {{"eq", true}}}}, offers), ElementsAre(1));
  EXPECT_THAT(search_ids({{"has_avx", {{"eq", false}}}}, offers), ElementsAre(2));
}

// --- missing fields -------------------------------------------------------------------------

TEST(ApplySearch, MissingFieldMatchesOnlyNeqAndNotin) {
  // Offer 4 has no reliability; offer 3 has no driver_version.
  EXPECT_THAT(search_ids({{"reliability", {{"gt", 0}}}}), ElementsAre(1, 2, 3));
  EXPECT_THAT(search_ids({{"reliability", {{"lt", 2}}}}), ElementsAre(1, 2, 3));
  EXPECT_THAT(search_ids({{"reliability", {{"neq", 0.95}}}}), ElementsAre(1, 3, 4));
  EXPECT_THAT(search_ids({{"reliability", {{"notin", {0.95}}}}}), ElementsAre(1, 3, 4));
  EXPECT_THAT(search_ids({{"reliability", {{"in", {0.95, 0.99}}}}}), ElementsAre(1, 2));
  EXPECT_THAT(search_ids({{"nonexistent", {{"eq", "x"}}}}), ElementsAre());
}

TEST(ApplySearch, NullMatchesMissingAndNullValues) {
  std::vector<json> offers = sample_offers();
  offers[0]["reliability"] = nullptr;
  EXPECT_THAT(search_ids({{"reliability", {{"eq", nullptr}}}}, offers), ElementsAre(1, 4));
  EXPECT_THAT(search_ids({{"reliability", {{"neq", nullptr}}}}, offers), ElementsAre(2, 3));
}

// --- geolocation -----------------------------------------------------------------------------

TEST(ApplySearch, GeolocationMatchesTrailingCountryCode) {
  EXPECT_THAT(search_ids({{"geolocation", {{"in", {"US", "CA"}}}}}), ElementsAre(1, 2));
  EXPECT_THAT(search_ids({{"geolocation", {{"eq", "US"}}}}), ElementsAre(1));
  EXPECT_THAT(search_ids({{"geolocation", {{"eq", "SE"}}}}), ElementsAre(3));
  EXPECT_THAT(search_ids({{"geolocation", {{"eq", "Florida, US"}}}}), ElementsAre(1));
  EXPECT_THAT(search_ids({{"geolocation", {{"notin", {"US", "TW"}}}}}), ElementsAre(2, 3));
  EXPECT_THAT(search_ids({{"geolocation", {{"neq", "US"}}}}), ElementsAre(2, 3, 4));
  // Only a whole trailing code counts: "Florida" does not end in "DA".
  EXPECT_THAT(search_ids({{"geolocation", {{"eq", "DA"}}}}), ElementsAre());
}

TEST(ApplySearch, CountryCodeMatchIsOnlyForGeolocation) {
  const std::vector<json> offers = {json{{"id", 1}, {"cpu_name", "Something, US"}}};
  EXPECT_THAT(search_ids({{"cpu_name", {{"eq", "US"}}}}, offers), ElementsAre());
}

// --- order and limit ------------------------------------------------------------------------

TEST(ApplySearch, OrderAscDesc) {
  EXPECT_THAT(search_ids({{"order", order_by({{"dph_total", "asc"}})}}), ElementsAre(1, 2, 4, 3));
  EXPECT_THAT(search_ids({{"order", order_by({{"dph_total", "desc"}})}}), ElementsAre(3, 4, 2, 1));
}

TEST(ApplySearch, OrderMultiKeyThenIdBreaksTies) {
  // score: 1->10, 2->30, 3->30, 4->20.
  EXPECT_THAT(search_ids({{"order", order_by({{"score", "desc"}, {"num_gpus", "asc"}})}}),
              ElementsAre(2, 3, 4, 1));
  EXPECT_THAT(search_ids({{"order", order_by({{"score", "desc"}, {"num_gpus", "desc"}})}}),
              ElementsAre(3, 2, 4, 1));
  EXPECT_THAT(search_ids({{"order", order_by({{"score", "desc"}})}}), ElementsAre(2, 3, 4, 1));
  std::vector<json> reversed = sample_offers();
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_THAT(search_ids({{"order", order_by({{"score", "desc"}})}}, reversed),
              ElementsAre(2, 3, 4, 1));
}

TEST(ApplySearch, OfferLackingTheSortFieldSortsLastBothWays) {
  EXPECT_THAT(search_ids({{"order", order_by({{"reliability", "asc"}})}}), ElementsAre(2, 1, 3, 4));
  EXPECT_THAT(search_ids({{"order", order_by({{"reliability", "desc"}})}}),
              ElementsAre(3, 1, 2, 4));
}

TEST(ApplySearch, OrderOnStrings) {
  EXPECT_THAT(search_ids({{"order", order_by({{"gpu_name", "asc"}})}}), ElementsAre(3, 1, 2, 4));
}

TEST(ApplySearch, Limit) {
  EXPECT_THAT(search_ids({{"limit", 2}, {"order", order_by({{"dph_total", "desc"}})}}),
              ElementsAre(3, 4));
  EXPECT_THAT(search_ids({{"limit", 2.0}}), ElementsAre(1, 2));
  EXPECT_THAT(search_ids({{"limit", 100}}), ElementsAre(1, 2, 3, 4));
}

TEST(ApplySearch, DefaultLimitIs64) {
  std::vector<json> offers;
  for (int id = 1; id <= 100; ++id) offers.push_back(json{{"id", id}});
  auto result = apply_search(offers, json::object());
  ASSERT_TRUE(result) << result.error();
  EXPECT_EQ(result->size(), kDefaultSearchLimit);
  EXPECT_EQ(kDefaultSearchLimit, 64u);
  EXPECT_EQ(result->back()["id"], 64);
}

TEST(ApplySearch, NonFilterKeysAreAccepted) {
  EXPECT_THAT(search_ids({{"type", "on-demand"}, {"allocated_storage", 5.0}}),
              ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(search_ids({{"type", "bid"}}), ElementsAre(1, 2, 3, 4));
}

// --- malformed bodies ------------------------------------------------------------------------

TEST(ApplySearch, MalformedBodiesNameWhatIsWrong) {
  EXPECT_THAT(search_error(json::array()), HasSubstr("JSON object"));
  EXPECT_THAT(search_error({{"num_gpus", {{"gtx", 2}}}}),
              ::testing::AllOf(HasSubstr("'gtx'"), HasSubstr("'num_gpus'")));
  EXPECT_THAT(search_error({{"geolocation", {{"in", "US"}}}}),
              ::testing::AllOf(HasSubstr("'in'"), HasSubstr("'geolocation'"), HasSubstr("list")));
  EXPECT_THAT(search_error({{"geolocation", {{"notin", {{"US"}}}}}}), HasSubstr("list elements"));
  EXPECT_THAT(search_error({{"num_gpus", {{"gte", "two"}}}}),
              ::testing::AllOf(HasSubstr("'gte'"), HasSubstr("number")));
  EXPECT_THAT(search_error({{"num_gpus", {{"gte", true}}}}), HasSubstr("'gte'"));
  EXPECT_THAT(search_error({{"num_gpus", {{"eq", {{"a", 1}}}}}}), HasSubstr("'num_gpus'"));
  EXPECT_THAT(search_error({{"num_gpus", 2}}), HasSubstr("'num_gpus'"));
  EXPECT_THAT(search_error({{"limit", 0}}), HasSubstr("limit"));
  EXPECT_THAT(search_error({{"limit", -5}}), HasSubstr("limit"));
  EXPECT_THAT(search_error({{"limit", 2.5}}), HasSubstr("limit"));
  EXPECT_THAT(search_error({{"limit", "10"}}), HasSubstr("limit"));
  EXPECT_THAT(search_error({{"order", "score"}}), HasSubstr("order"));
  EXPECT_THAT(search_error({{"order", {"score", "desc"}}}), HasSubstr("entry 0"));
  EXPECT_THAT(search_error({{"order", order_by({{"score", "down"}})}}), HasSubstr("direction"));
  EXPECT_THAT(search_error({{"order", json{{"score", "desc"}}}}),
              HasSubstr("order must be a list"));
  EXPECT_THAT(search_error({{"order", {{"score"}}}}), HasSubstr("order"));
  EXPECT_THAT(search_error({{"order", {{1, "asc"}}}}), HasSubstr("field"));
  EXPECT_THAT(search_error({{"type", "spot"}}), HasSubstr("type"));
  EXPECT_THAT(search_error({{"allocated_storage", -1}}), HasSubstr("allocated_storage"));
  EXPECT_THAT(search_error({{"allocated_storage", "5"}}), HasSubstr("allocated_storage"));
}

TEST(ApplySearch, MalformedBodyIsRejectedEvenWithNoOffers) {
  EXPECT_THAT(search_error({{"num_gpus", {{"gtx", 2}}}}, {}), HasSubstr("'gtx'"));
}

TEST(ApplySearch, OfferThatIsNotAnObjectIsAnError) {
  EXPECT_THAT(search_error(json::object(), {json{{"id", 1}}, json(3)}), HasSubstr("offer #1"));
}

// --- round trip with the CLI query parser ----------------------------------------------------

TEST(ApplySearch, RoundTripFromCliQuery) {
  auto parsed = market::parse_query("gpu_name=RTX_4090 num_gpus>=2 cpu_ram>=240");
  ASSERT_TRUE(parsed) << parsed.error();
  auto offer = [](int id, const char* gpu, int gpus, double ram_mb) {
    return json{{"id", id},         {"gpu_name", gpu},  {"num_gpus", gpus},  {"cpu_ram", ram_mb},
                {"verified", true}, {"rentable", true}, {"external", false}, {"rented", false}};
  };
  std::vector<json> offers = {
      offer(10, "RTX 4090", 2, 257000),    // matches
      offer(11, "RTX 4090", 1, 257000),    // one GPU
      offer(12, "RTX 4090", 4, 128000),    // too little RAM
      offer(13, "RTX 4090 D", 2, 257000),  // other model
      offer(14, "RTX 4090", 8, 240000),    // matches (RAM exactly at the bound)
      offer(15, "RTX 4090", 2, 500000),    // rented: the CLI's default filter drops it
  };
  offers[5]["rented"] = true;
  json body = parsed->filters;
  body["order"] = order_by({{"num_gpus", "desc"}});
  EXPECT_THAT(search_ids(body, offers), ElementsAre(14, 10));
}

// Issue 10: an operand no offer could have (or one that is not finite) is refused by name.
TEST(ApplySearch, OperandsOutOfRangeAreRefused) {
  const auto offers = sample_offers();
  auto huge = apply_search(offers, json{{"cpu_ram", {{"gte", 1e308}}}});
  ASSERT_FALSE(huge);
  EXPECT_THAT(huge.error(), HasSubstr("operator 'gte' for field 'cpu_ram': value out of range"));
  auto huge_text = apply_search(offers, json{{"dph_total", {{"lt", "1e300"}}}});
  ASSERT_FALSE(huge_text);
  EXPECT_THAT(huge_text.error(), HasSubstr("value out of range"));
  auto in_list = apply_search(offers, json{{"num_gpus", {{"in", json::array({1, 1e20})}}}});
  ASSERT_FALSE(in_list);
  EXPECT_THAT(in_list.error(), HasSubstr("value out of range"));
  auto nan = apply_search(offers, json{{"num_gpus", {{"eq", std::nan("")}}}});
  ASSERT_FALSE(nan);
  EXPECT_THAT(nan.error(), HasSubstr("value out of range"));
  // The largest sane values still work.
  EXPECT_TRUE(apply_search(offers, json{{"cpu_ram", {{"lte", 1e9}}}}));
}

}  // namespace
}  // namespace pf::scenario
