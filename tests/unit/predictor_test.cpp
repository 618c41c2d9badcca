#include "core/memory_model.h"
#include "core/predictor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

Offer offer(std::string gpu, int n, double ram_gib, double cores, double pcie = 25) {
  Offer o;
  o.id = 1;
  o.machine_id = 2;
  o.gpu_name = std::move(gpu);
  o.num_gpus = n;
  o.cpu_ram_gib = ram_gib;
  o.cpu_cores = cores;
  o.cpu_cores_effective = cores;
  o.pcie_bw_gbs = pcie;
  o.pci_gen = 4;
  o.inet_down_mbps = 1000;
  o.dph_total = 0.4;
  derive_offer_fields(o);
  return o;
}

bool any_reason(const Prediction& p, const std::string& needle) {
  for (const auto& r : p.reasons)
    if (r.find(needle) != std::string::npos) return true;
  return false;
}

TEST(MemoryModel, PartitionsFollowPeakFormula) {
  MemoryModel m;
  EXPECT_EQ(partitions_for_ram(120, m), 3);  // (120-75)/14 = 3.2
  EXPECT_EQ(partitions_for_ram(256, m), 12);
  EXPECT_EQ(partitions_for_ram(75, m), 0);
  EXPECT_EQ(partitions_for_ram(60, m), 0);
  EXPECT_EQ(partitions_for_ram(89, m), 1);
  EXPECT_DOUBLE_EQ(peak_memory_gib(3, m), 70 + 42);
  // Whatever RAM allows, the planned peak plus headroom fits in it.
  for (double ram = 80; ram < 2048; ram += 7) {
    EXPECT_LE(peak_memory_gib(partitions_for_ram(ram, m), m) + m.headroom_gib, ram) << ram;
  }
}

TEST(MemoryModel, RateCurveMatchesSpec) {
  EXPECT_DOUBLE_EQ(rate_fraction(10, 10), 1.0);
  EXPECT_DOUBLE_EQ(rate_fraction(20, 10), 1.0);
  EXPECT_EQ(rate_fraction(0, 10), 0.0);
  EXPECT_NEAR(rate_fraction(3, 10), (1 - std::exp(-0.9)) / (1 - std::exp(-3.0)), 1e-12);
  EXPECT_LT(rate_fraction(3, 10), rate_fraction(4, 10));
}

TEST(Predictor, KnownModelWithAmpleHardwareUsesPriorAndBand) {
  auto cfg = default_predictor_config();
  auto p = predict_from_prior(offer("RTX 4090", 1, 512, 64), cfg);
  EXPECT_EQ(p.source, "prior");
  EXPECT_DOUBLE_EQ(p.rate, find_prior(cfg, "RTX 4090")->rate_per_gpu);
  EXPECT_LT(p.low, p.rate);
  EXPECT_GT(p.high, p.rate);
  EXPECT_EQ(p.partitions_full, 10);
  EXPECT_TRUE(any_reason(p, "RTX 4090 prior"));
}

TEST(Predictor, LookupIsCaseInsensitive) {
  auto cfg = default_predictor_config();
  ASSERT_NE(find_prior(cfg, "rtx 4090"), nullptr);
  EXPECT_EQ(find_prior(cfg, "RTX 9999"), nullptr);
}

TEST(Predictor, RamLimitsPartitionsWithPlainReason) {
  auto cfg = default_predictor_config();
  auto full = predict_from_prior(offer("RTX 4090", 1, 512, 64), cfg);
  auto small = predict_from_prior(offer("RTX 4090", 1, 120, 64), cfg);
  EXPECT_EQ(small.partitions, 3);
  EXPECT_NEAR(small.rate / full.rate, rate_fraction(3, 10), 1e-9);
  EXPECT_TRUE(any_reason(small, "RAM 120 GiB allows 3 partitions of 10"));
}

TEST(Predictor, TooLittleRamCannotProve) {
  auto p = predict_from_prior(offer("RTX 4090", 1, 64, 64), default_predictor_config());
  EXPECT_EQ(p.rate, 0);
  EXPECT_TRUE(any_reason(p, "cannot prove"));
}

TEST(Predictor, FewCoresScaleRateDown) {
  auto cfg = default_predictor_config();
  auto full = predict_from_prior(offer("RTX 4090", 1, 512, 64), cfg);
  auto starved = predict_from_prior(offer("RTX 4090", 1, 512, 8), cfg);
  EXPECT_NEAR(starved.rate, full.rate * 8 / cfg.cores_per_gpu_full, 1e-9);
  EXPECT_TRUE(any_reason(starved, "8 cores"));
}

TEST(Predictor, SlowPcieScalesRateDown) {
  auto cfg = default_predictor_config();
  auto fast = predict_from_prior(offer("RTX 3090", 1, 512, 64, 25), cfg);
  auto slow = predict_from_prior(offer("RTX 3090", 1, 512, 64, 2.9), cfg);
  EXPECT_NEAR(slow.rate, fast.rate * cfg.pcie_slow_factor, 1e-9);
  EXPECT_TRUE(any_reason(slow, "PCIe 2.9 GB/s"));
}

TEST(Predictor, MultiGpuScalesSublinearly) {
  auto cfg = default_predictor_config();
  auto one = predict_from_prior(offer("RTX 4090", 1, 2048, 256), cfg);
  auto four = predict_from_prior(offer("RTX 4090", 4, 2048, 256), cfg);
  EXPECT_GT(four.rate, one.rate);
  EXPECT_LT(four.rate, 4 * one.rate);
  EXPECT_EQ(four.partitions_full, 40);
  EXPECT_TRUE(any_reason(four, "scale sublinearly"));
}

TEST(Predictor, UnknownModelGetsWideBand) {
  auto cfg = default_predictor_config();
  auto known = predict_from_prior(offer("RTX 4090", 1, 512, 64), cfg);
  auto unknown = predict_from_prior(offer("Quantum X1", 1, 512, 64), cfg);
  EXPECT_GT((unknown.high - unknown.low) / unknown.rate, (known.high - known.low) / known.rate);
  EXPECT_TRUE(any_reason(unknown, "unknown GPU model 'Quantum X1'"));
}

TEST(Predictor, MissingFieldsNeverCrashAndWidenBand) {
  Offer o;
  o.id = 5;
  o.gpu_name = "RTX 4090";
  derive_offer_fields(o);  // zeros everywhere: cores, RAM, gpus
  EXPECT_THAT(o.data_flags, ::testing::Contains(HasSubstr("cpu_cores missing")));
  auto cfg = default_predictor_config();
  auto p = predict_from_prior(o, cfg);
  EXPECT_GE(p.rate, 0);
  EXPECT_EQ(p.partitions, 1);
  EXPECT_TRUE(any_reason(p, "RAM unknown"));
  EXPECT_TRUE(any_reason(p, "band widened"));
  EXPECT_LE(p.low, p.rate);
}

TEST(Offer, DeriveUsesEffectiveCoresAndFlagsOddities) {
  Offer o;
  o.cpu_cores = 32;
  o.cpu_cores_effective = 64;
  o.cpu_ram_gib = 100;
  o.num_gpus = 1;
  derive_offer_fields(o);
  EXPECT_EQ(o.usable_cores, 32);
  EXPECT_THAT(o.data_flags, ::testing::Contains(HasSubstr("exceeds cpu_cores")));
  Offer only_machine;
  only_machine.cpu_cores = 48;
  derive_offer_fields(only_machine);
  EXPECT_EQ(only_machine.usable_cores, 48);
  derive_offer_fields(only_machine);  // idempotent: no duplicated flags
  std::size_t n = only_machine.data_flags.size();
  derive_offer_fields(only_machine);
  EXPECT_EQ(only_machine.data_flags.size(), n);
}

}  // namespace
}  // namespace pf::core
