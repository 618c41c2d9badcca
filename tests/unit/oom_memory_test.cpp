#include "core/oom_memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace pf::core
