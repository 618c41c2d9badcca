#include "market/offer_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pf::market {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

TEST(OfferJson, NormalisesUnitsOnce) {
  auto j = nlohmann::json::parse(R"({"id": 27812311, "machine_id": 69294, "host_id": 5085,
    "gpu_name": "RTX 5060 Ti", "num_gpus": 8, "gpu_ram": 16384, "gpu_total_ram": 131072,
    "cpu_name": "AMD", "cpu_cores": 64, "cpu_cores_effective": 32.0, "cpu_ram": 262144,
    "pcie_bw": 51.7, "pci_gen": 4, "inet_down": 4372.3, "inet_up": 2731.6,
    "inet_down_cost": 0.005, "disk_space": 500, "cuda_max_good": 13.1, "compute_cap": 1200,
    "reliability2": 0.9159, "verified": true, "geolocation": "Quebec, CA",
    "dph_total": 0.8273, "storage_cost": 0.1, "dlperf": 173.3})");
  auto o = offer_from_vast_json(j);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->id, 27812311);
  EXPECT_DOUBLE_EQ(o->gpu_ram_gib, 16);
  EXPECT_DOUBLE_EQ(o->gpu_total_ram_gib, 128);
  EXPECT_DOUBLE_EQ(o->cpu_ram_gib, 256);
  EXPECT_DOUBLE_EQ(o->usable_ram_gib, 256);
  EXPECT_DOUBLE_EQ(o->usable_cores, 32);
  EXPECT_DOUBLE_EQ(o->reliability, 0.9159);
  EXPECT_TRUE(o->verified);
  EXPECT_TRUE(o->data_flags.empty());
  // Round trip back to vast units.
  auto back = offer_to_vast_json(*o);
  EXPECT_DOUBLE_EQ(back["cpu_ram"].get<double>(), 262144);
  EXPECT_DOUBLE_EQ(back["gpu_ram"].get<double>(), 16384);
  auto again = offer_from_vast_json(back);
  ASSERT_TRUE(again);
  EXPECT_DOUBLE_EQ(again->dph_total, o->dph_total);
}

TEST(OfferJson, ToleratesNullsAndZerosWithFlags) {
  auto j = nlohmann::json::parse(
      R"({"id": 9, "gpu_name": "RTX 4090", "num_gpus": 1, "cpu_cores": 0,
          "cpu_cores_effective": null, "cpu_ram": null, "dph_total": "0.25", "pcie_bw": "fast"})");
  auto o = offer_from_vast_json(j);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->usable_cores, 0);
  EXPECT_DOUBLE_EQ(o->dph_total, 0.25);  // numeric string accepted
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("cpu_cores missing")));
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("pcie_bw is not a number")));
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("cpu_ram missing")));
}

// What billing reads (core/billing.h): vast-cli's vastai/data/offer.py names these fields.
TEST(OfferJson, BillingFieldsAreReadAndSurviveTheSnapshot) {
  auto j = nlohmann::json::parse(R"({"id": 7, "gpu_name": "RTX 4090", "num_gpus": 1,
    "cpu_ram": 65536, "cpu_cores_effective": 16, "inet_down": 800, "pcie_bw": 24,
    "dph_total": 0.4278, "dph_base": 0.40, "storage_cost": 0.1, "storage_total_cost": 0.0278,
    "inet_down_cost": 0.004, "inet_up_cost": 0.006, "end_date": 1780000000.5,
    "min_bid": 0.21})");
  auto o = offer_from_vast_json(j);
  ASSERT_TRUE(o) << o.error();
  EXPECT_DOUBLE_EQ(o->dph_base, 0.40);
  EXPECT_DOUBLE_EQ(o->min_bid, 0.21);
  EXPECT_DOUBLE_EQ(o->end_date, 1780000000.5);
  EXPECT_DOUBLE_EQ(o->storage_total_cost_per_hour, 0.0278);
  EXPECT_DOUBLE_EQ(o->inet_up_cost_per_gb, 0.006);
  EXPECT_TRUE(o->data_flags.empty());
  auto again = offer_from_vast_json(offer_to_vast_json(*o));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *o);
}

TEST(OfferJson, ANegativePriceIsReadAsUnknownAndFlagged) {
  auto j = nlohmann::json::parse(R"({"id": 8, "gpu_name": "RTX 4090", "num_gpus": 1,
    "dph_total": 0.3, "dph_base": -1, "storage_cost": -0.5, "inet_up_cost": -2,
    "end_date": -5, "min_bid": -0.1})");
  auto o = offer_from_vast_json(j);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->dph_base, 0);
  EXPECT_EQ(o->storage_cost_gb_month, 0);
  EXPECT_EQ(o->inet_up_cost_per_gb, 0);
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("storage_cost is negative")));
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("inet_up_cost is negative")));
  EXPECT_EQ(o->min_bid, 0);
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("min_bid is negative")));
  EXPECT_EQ(o->end_date, 0);
  EXPECT_THAT(o->data_flags, Contains(HasSubstr("end_date negative")));
}

TEST(OfferJson, RejectsOffersWithoutId) {
  EXPECT_FALSE(offer_from_vast_json(nlohmann::json::parse(R"({"gpu_name": "x"})")));
  EXPECT_FALSE(offer_from_vast_json(nlohmann::json::parse(R"({"id": "12"})")));
  EXPECT_FALSE(offer_from_vast_json(nlohmann::json::parse(R"([1,2])")));
  auto err = offer_from_vast_json(nlohmann::json::parse(R"({"id": -3})"));
  ASSERT_FALSE(err);
  EXPECT_THAT(err.error(), HasSubstr("id"));
}

TEST(OfferJson, OlderReliabilityFieldAccepted) {
  auto o = offer_from_vast_json(nlohmann::json::parse(R"({"id": 1, "reliability": 0.97})"));
  ASSERT_TRUE(o);
  EXPECT_DOUBLE_EQ(o->reliability, 0.97);
}

}  // namespace
TEST(OfferJson, IdsAndCountsBeyondTheirRangeAreFlaggedNotCast) {
  // Found by the fuzzer: machine_id 1e200 was cast to int64 (undefined behaviour).
  auto j = nlohmann::json::parse(
      R"({"id": 5, "machine_id": 1e200, "num_gpus": 3e9, "pci_gen": 4.5, "host_id": 77})");
  auto o = offer_from_vast_json(j);
  ASSERT_TRUE(o) << o.error();
  EXPECT_EQ(o->machine_id, 0);
  EXPECT_EQ(o->num_gpus, 0);
  EXPECT_EQ(o->pci_gen, 0);
  EXPECT_EQ(o->host_id, 77);
  int out_of_range = 0;
  for (const auto& flag : o->data_flags)
    out_of_range += flag.find("out of range") != std::string::npos;
  EXPECT_EQ(out_of_range, 3);
}

}  // namespace pf::market
