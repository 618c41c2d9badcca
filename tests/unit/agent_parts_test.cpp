// The agent's pure parts, without threads or a manager: the commands a heartbeat reply
// carries, the terms a register reply sets, the caps on a prover plan and the OOM lesson kept
// in the state dir. The whole agent runs in agent_flow_test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/machine_plan.h"
#include "agent/manager_commands.h"
#include "agent/registration.h"

namespace pf::agent {
namespace {

using nlohmann::json;
using Kind = ManagerCommand::Kind;

TEST(ManagerCommands, StringAndObjectFormsAreReadAndOutOfRangeValuesAreNotActedOn) {
  const auto got = parse_manager_commands(json::array(
      {"stop", "replan", "replan:12", "replan:9999", "set_concurrency:3", "set_concurrency:0",
       json{{"name", "set_concurrency"}, {"value", 4}}, json{{"command", "replan"}}, "reboot"}));
  ASSERT_EQ(got.size(), 9u);
  EXPECT_EQ(got[0].kind, Kind::Stop);
  EXPECT_EQ(got[1].kind, Kind::Replan);
  EXPECT_FALSE(got[1].value);
  EXPECT_EQ(got[2].kind, Kind::Replan);
  EXPECT_EQ(got[2].value, 12);
  EXPECT_EQ(got[3].kind, Kind::Replan);  // a re-plan still, but with no cap from the command
  EXPECT_FALSE(got[3].value);
  EXPECT_EQ(got[4].kind, Kind::SetConcurrency);
  EXPECT_EQ(got[4].value, 3);
  EXPECT_EQ(got[5].kind, Kind::Unknown);  // concurrency 0 is not a setting
  EXPECT_EQ(got[6].kind, Kind::SetConcurrency);
  EXPECT_EQ(got[6].value, 4);
  EXPECT_EQ(got[7].kind, Kind::Replan);
  EXPECT_EQ(got[8].kind, Kind::Unknown);
  EXPECT_EQ(got[8].raw, "reboot");
}

TEST(RegisterReply, TermsComeFromTheReplyAndNonsenseKeepsTheDefaults) {
  const ManagerTerms terms = parse_register_reply(
      {{"heartbeat_s", 5},
       {"prover", {{"kind", "sim"}}},
       {"params", json::array({{{"name", "a"}}})},
       {"benchmark", {{"max_samples", 7}}},
       {"machine",
        {{"oom_partitions", 6},
         {"memory_model", {{"per_partition_gib", 9.5}, {"reason", "seen on this GPU"}}}}}});
  EXPECT_EQ(terms.heartbeat_s, 5);
  EXPECT_EQ(terms.prover_settings["kind"], "sim");
  EXPECT_EQ(terms.params_manifest.size(), 1u);
  EXPECT_TRUE(terms.benchmark_input_offer.is_null());
  EXPECT_EQ(terms.max_samples, 7);
  EXPECT_EQ(terms.machine_oom_partitions, 6);
  EXPECT_EQ(terms.machine_per_partition_gib, 9.5);
  EXPECT_EQ(terms.machine_memory_reason, "seen on this GPU");

  const ManagerTerms odd = parse_register_reply(
      {{"heartbeat_s", -1},
       {"prover", "cuzk"},
       {"params", nullptr},
       {"machine", {{"oom_partitions", 100000}, {"memory_model", {{"per_partition_gib", 500}}}}}});
  EXPECT_EQ(odd.heartbeat_s, 10);
  EXPECT_TRUE(odd.prover_settings.is_object());
  EXPECT_TRUE(odd.params_manifest.is_array());
  EXPECT_EQ(odd.machine_oom_partitions, 0);
  EXPECT_EQ(odd.machine_per_partition_gib, 0);
}

TEST(MachinePlan, TheSmallestPositiveCapWinsAndTheMemoryModelOnlyRaisesThePerPartitionFigure) {
  const core::PlanLimits defaults;
  const auto none = plan_limits({}, 0);
  EXPECT_EQ(none.partition_cap, 0);
  EXPECT_EQ(none.model.per_partition_gib, defaults.model.per_partition_gib);

  const auto capped = plan_limits({std::nullopt, 8, 0, 5}, 1e-3);
  EXPECT_EQ(capped.partition_cap, 5);  // 0 from the settings is no cap
  EXPECT_EQ(capped.model.per_partition_gib, defaults.model.per_partition_gib);

  const auto lesson = plan_limits({4, 8, std::nullopt, std::nullopt}, 1000);
  EXPECT_EQ(lesson.partition_cap, 4);
  EXPECT_EQ(lesson.model.per_partition_gib, 1000);
}

TEST(MachinePlan, ProofsInFlightFollowTheCommandThenTheFlagThenTheSettingsThenThePlan) {
  core::ProverPlan plan;
  plan.proofs_in_flight = 3;
  EXPECT_EQ(proofs_in_flight(plan, 7, 5, 4), 7);
  EXPECT_EQ(proofs_in_flight(plan, std::nullopt, 5, 4), 5);
  EXPECT_EQ(proofs_in_flight(plan, std::nullopt, 0, 4), 4);
  EXPECT_EQ(proofs_in_flight(plan, std::nullopt, std::nullopt, 0), 3);
  plan.proofs_in_flight = 0;
  EXPECT_EQ(proofs_in_flight(plan, std::nullopt, std::nullopt, std::nullopt), 1);
}

TEST(MachinePlan, TheOomLessonSurvivesInTheStateDirAndAHostileFileIsIgnored) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("pf-agent-parts-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const PartitionCapFile file(dir.string());
  EXPECT_FALSE(file.load());
  EXPECT_FALSE(file.save(6));
  EXPECT_EQ(file.load(), 6);
  std::ofstream(dir / "agent.json", std::ios::trunc) << R"({"partition_cap": -3})";
  EXPECT_FALSE(file.load());
  std::ofstream(dir / "agent.json", std::ios::trunc) << "{ torn";
  EXPECT_FALSE(file.load());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pf::agent
