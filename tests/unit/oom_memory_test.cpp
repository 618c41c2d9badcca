#include "core/oom_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

InstanceRecord rental(std::int64_t id, std::int64_t machine, int oom_partitions) {
  InstanceRecord r;
  r.id = id;
  r.offer.machine_id = machine;
  r.oom_partitions = oom_partitions;
  return r;
}

// 512 GiB, 64 cores, 2 GPUs: the ordinary plan runs 28 partitions (14 per GPU).
PlanInput big_machine() {
  PlanInput in;
  in.ram_gib = 512;
  in.cores = 64;
  in.gpus = 2;
  return in;
}

TEST(OomMemory, SmallestOomedPlanPerMachine) {
  const std::vector<InstanceRecord> fleet = {rental(1, 7, 28), rental(2, 7, 21), rental(3, 8, 0),
                                             rental(4, 9, 12)};
  const auto by_machine = oom_partitions_by_machine(fleet);
  EXPECT_EQ(by_machine.size(), 2u);
  EXPECT_EQ(by_machine.at(7), 21);
  EXPECT_EQ(by_machine.at(9), 12);
  EXPECT_FALSE(by_machine.count(8));
}

TEST(OomMemory, NoOomMeansTheOrdinaryPlan) {
  const auto ordinary = plan_prover(big_machine(), PlanLimits{});
  const auto plan = plan_for_machine(big_machine(), PlanLimits{}, 0);
  ASSERT_TRUE(ordinary && plan);
  EXPECT_EQ(plan->partitions, ordinary->partitions);
}

TEST(OomMemory, PlansBelowTheOomedPlanOnTheNextRental) {
  const auto ordinary = plan_prover(big_machine(), PlanLimits{});
  ASSERT_TRUE(ordinary);
  const int killed_at = ordinary->partitions;
  const auto plan = plan_for_machine(big_machine(), PlanLimits{}, killed_at);
  ASSERT_TRUE(plan);
  EXPECT_LT(plan->partitions, killed_at);
  EXPECT_GE(plan->partitions, 1);
  EXPECT_THAT(plan->reasons.front(), HasSubstr("killed for memory"));
}

// The manager (from the agent's oom event) and the simulator (its prover) record through this.
TEST(OomMemory, RecordKeepsTheSmallestKillingPlan) {
  InstanceRecord rec;
  EXPECT_FALSE(record_oom(rec, 0));
  EXPECT_FALSE(record_oom(rec, -3));
  EXPECT_FALSE(record_oom(rec, std::int64_t{kMaxPlanPartitions} + 1));
  EXPECT_EQ(rec.oom_partitions, 0);
  EXPECT_TRUE(record_oom(rec, 12));
  EXPECT_TRUE(record_oom(rec, 16));
  EXPECT_EQ(rec.oom_partitions, 12);
  EXPECT_TRUE(record_oom(rec, 9));
  EXPECT_EQ(rec.oom_partitions, 9);
}

TEST(OomMemory, KilledAtOnePartitionCannotRunAgain) {
  EXPECT_FALSE(plan_for_machine(big_machine(), PlanLimits{}, 1));
}

// --- the memory model learned from observed peaks (memory_check) -----------------------

MemoryObservation seen(std::int64_t machine, int partitions, double peak, bool oom = false,
                       const std::string& gpu = "RTX 4090") {
  MemoryObservation o;
  o.machine_id = machine;
  o.gpu_name = gpu;
  o.num_gpus = 2;
  o.partitions = partitions;
  o.observed_peak_gib = peak;
  o.usable_ram_gib = 512;
  o.oom = oom;
  return o;
}

TEST(MemoryLearning, WithoutObservationsTheConfiguredModel) {
  const MemoryModel configured;
  const auto learned = learned_memory_model(configured, {}, 7, "RTX 4090");
  EXPECT_EQ(learned.source, "configured");
  EXPECT_DOUBLE_EQ(learned.model.per_partition_gib, configured.per_partition_gib);
  EXPECT_EQ(learned.observations, 0);
}

TEST(MemoryLearning, APeakAboveTheModelShrinksTheNextPlanOnThatMachine) {
  // The ordinary plan runs 28 partitions on 512 GiB; this machine peaked at 16 GiB per
  // partition (518 GiB at 28) instead of 14: at the same plan it would be killed.
  const auto ordinary = plan_prover(big_machine(), PlanLimits{});
  ASSERT_TRUE(ordinary);
  ASSERT_EQ(ordinary->partitions, 28);
  const std::vector<MemoryObservation> obs = {seen(7, 28, 70 + 16 * 28.0),
                                              seen(7, 28, 70 + 16.2 * 28)};
  const auto learned = learned_memory_model(MemoryModel{}, obs, 7, "RTX 4090");
  EXPECT_EQ(learned.source, "machine");
  EXPECT_EQ(learned.observations, 2);
  EXPECT_NEAR(learned.model.per_partition_gib, 16.1, 1e-9);  // the median, not the largest
  EXPECT_THAT(learned.reason, HasSubstr("this machine's 2 observation(s)"));

  PlanLimits limits;
  limits.model = learned.model;
  const auto plan = plan_for_machine(big_machine(), limits, 0);
  ASSERT_TRUE(plan);
  EXPECT_LT(plan->partitions, ordinary->partitions);
  // What the machine really needs at the new plan fits, with the headroom.
  EXPECT_LE(70 + learned.model.per_partition_gib * plan->partitions,
            512 - limits.model.headroom_gib);
}

TEST(MemoryLearning, NeverBelowTheConfiguredModel) {
  // One warm-up proof's peak under-states several proofs in flight: a low reading is no licence
  // for a bigger plan.
  const std::vector<MemoryObservation> obs = {seen(7, 28, 70 + 10 * 28.0)};
  const auto learned = learned_memory_model(MemoryModel{}, obs, 7, "RTX 4090");
  EXPECT_EQ(learned.source, "machine");
  EXPECT_DOUBLE_EQ(learned.model.per_partition_gib, MemoryModel{}.per_partition_gib);
}

TEST(MemoryLearning, AnOomIsALowerBoundOnThePeak) {
  // Killed at 28 partitions under 512 GiB, no reading: the peak was above 512.
  const std::vector<MemoryObservation> obs = {seen(7, 28, 0, /*oom=*/true)};
  const auto learned = learned_memory_model(MemoryModel{}, obs, 7, "RTX 4090");
  EXPECT_NEAR(learned.model.per_partition_gib, (512 * 1.05 - 70) / 28, 1e-9);
  PlanLimits limits;
  limits.model = learned.model;
  const auto plan = plan_for_machine(big_machine(), limits, 0);
  ASSERT_TRUE(plan);
  EXPECT_LT(plan->partitions, 28);
}

TEST(MemoryLearning, OtherMachinesOfTheModelCountShrunkTowardTheConfiguredFigure) {
  const std::vector<MemoryObservation> obs = {
      seen(1, 20, 70 + 18 * 20.0), seen(2, 20, 70 + 18 * 20.0),
      seen(3, 20, 70 + 40 * 20.0, false, "RTX 3090")};  // another model: ignored
  const auto learned = learned_memory_model(MemoryModel{}, obs, 9, "rtx 4090");
  EXPECT_EQ(learned.source, "model");
  EXPECT_EQ(learned.observations, 2);
  // Two machines at 18 against the configured 14 weighted as two: 16.
  EXPECT_NEAR(learned.model.per_partition_gib, 16, 1e-9);
  // The machine's own observation wins over its model's.
  std::vector<MemoryObservation> with_own = obs;
  with_own.push_back(seen(9, 20, 70 + 15 * 20.0));
  const auto own = learned_memory_model(MemoryModel{}, with_own, 9, "RTX 4090");
  EXPECT_EQ(own.source, "machine");
  EXPECT_NEAR(own.model.per_partition_gib, 15, 1e-9);
}

TEST(MemoryLearning, ReportsThatSayNothingAreSkippedAndAbsurdOnesBounded) {
  const std::vector<MemoryObservation> junk = {
      seen(7, 0, 500), seen(7, 10, std::nan("")), seen(7, 10, 50) /* below the base */,
      seen(7, 10, std::numeric_limits<double>::infinity())};
  const auto none = learned_memory_model(MemoryModel{}, junk, 7, "RTX 4090");
  EXPECT_EQ(none.source, "configured");
  const std::vector<MemoryObservation> huge = {seen(7, 1, 1e6)};
  const MemoryLearningConfig cfg;
  EXPECT_DOUBLE_EQ(
      learned_memory_model(MemoryModel{}, huge, 7, "RTX 4090", cfg).model.per_partition_gib,
      cfg.max_per_partition_gib);
}

}  // namespace
}  // namespace pf::core
