// The chaos run's judgements (tests/reliability/fleet_checks.h) on made-up manager rows and
// market records: each figure is found when the situation is there and not otherwise, so a
// zero in the reliability table means "not seen", not "not looked for".
#include <gtest/gtest.h>

#include "reliability/fleet_checks.h"

namespace pf::reliability {
namespace {

using nlohmann::json;

json row(std::int64_t id, const std::string& state, std::int64_t market_id, std::int64_t offer,
         const std::string& reason = "") {
  return {{"id", id},
          {"deployment_id", "d" + std::to_string(id)},
          {"state", state},
          {"market_id", market_id},
          {"destroy_reason", reason},
          {"offer", {{"id", offer}, {"machine_id", offer * 10}}}};
}

json market(std::int64_t id, const std::string& label, const std::string& status = "running") {
  return {{"id", id}, {"label", label}, {"actual_status", status}};
}

std::size_t count(const std::vector<Finding>& findings, Figure f) {
  std::size_t n = 0;
  for (const auto& x : findings) n += x.figure == f ? 1 : 0;
  return n;
}

TEST(ReliabilityChecks, ConsistentFleetHasNoFindings) {
  const json rows = json::array({row(1, "proving", 500, 101), row(2, "destroyed", 501, 102)});
  const std::vector<json> listed = {market(500, "proverfleet:d1"), market(900, "someone-else")};
  EXPECT_TRUE(check_observation(rows, listed).empty());
  EXPECT_TRUE(false_destroys(rows, json::array()).empty());
}

TEST(ReliabilityChecks, TwoMarketInstancesWithOneLabelAreADuplicateRental) {
  const std::vector<json> listed = {market(500, "proverfleet:d1"), market(501, "proverfleet:d1")};
  const auto f = check_observation(json::array({row(1, "proving", 500, 101)}), listed);
  EXPECT_EQ(count(f, Figure::DuplicateRentals), 1u);
}

TEST(ReliabilityChecks, TwoLiveRowsOnOneOfferAreADuplicateRental) {
  const json rows = json::array(
      {row(1, "proving", 500, 101), row(2, "booting", 501, 101), row(3, "destroyed", 502, 101)});
  const auto f =
      check_observation(rows, {market(500, "proverfleet:d1"), market(501, "proverfleet:d2")});
  EXPECT_EQ(count(f, Figure::DuplicateRentals), 1u);
  // One of them on its way out: not a duplicate.
  const json leaving = json::array({row(1, "proving", 500, 101), row(2, "destroying", 501, 101)});
  EXPECT_EQ(
      count(check_observation(leaving, {market(500, "proverfleet:d1")}), Figure::DuplicateRentals),
      0u);
}

TEST(ReliabilityChecks, DestroyedRowWhoseInstanceRunsIsBilling) {
  const json rows = json::array({row(1, "destroyed", 500, 101)});
  EXPECT_EQ(
      count(check_observation(rows, {market(500, "proverfleet:d1")}), Figure::DestroyedButBilling),
      1u);
  // Found by label when the row never learnt its market id.
  json no_id = row(1, "destroyed", 0, 101);
  no_id["market_id"] = nullptr;
  EXPECT_EQ(count(check_observation(json::array({no_id}), {market(777, "proverfleet:d1")}),
                  Figure::DestroyedButBilling),
            1u);
  // Still listed but no longer running (being torn down): not billing.
  EXPECT_EQ(count(check_observation(rows, {market(500, "proverfleet:d1", "exited")}),
                  Figure::DestroyedButBilling),
            0u);
}

TEST(ReliabilityChecks, LeakedInstancesCountMarketInstancesAndLiveRowsOnce) {
  const json rows = json::array(
      {row(1, "destroying", 500, 101), row(2, "renting", 0, 102), row(3, "destroyed", 502, 103)});
  const auto f = leaked_instances(
      rows, {market(500, "proverfleet:d1"), market(600, "proverfleet:x"), market(700, "not-ours")});
  // market 500 (also row 1), market 600, row 2.
  EXPECT_EQ(count(f, Figure::LeakedInstances), 3u);
  EXPECT_TRUE(leaked_instances(json::array({row(3, "destroyed", 502, 103)}), {}).empty());
}

TEST(ReliabilityChecks, SilenceAndDeadlineDestroysAndAutomaticBadHostsAreFalseOnHealthyHosts) {
  const json rows =
      json::array({row(1, "destroyed", 500, 101, "heartbeat lost for 26 s"),
                   row(2, "destroyed", 501, 102, "deadline passed in booting after 1 min"),
                   row(3, "destroyed", 502, 103, "operator destroy"),
                   row(4, "destroyed", 503, 104, "autopilot: drop: below break-even")});
  const json bad =
      json::array({{{"machine_id", 1010}, {"source", "auto"}, {"reason", "offline"}},
                   {{"machine_id", 1020}, {"source", "operator"}, {"reason", "mine"}}});
  EXPECT_EQ(count(false_destroys(rows, bad), Figure::FalseDestroys), 3u);
}

TEST(ReliabilityChecks, FiguresPassOnlyWhenEverythingButRequestsIsZero) {
  Figures f;
  f.add(Figure::RequestsTried, 1000);
  EXPECT_TRUE(f.passed());
  f.finding(Figure::OrphanProcesses, "pid 1");
  EXPECT_FALSE(f.passed());
  Figures sum;
  sum.merge_json(f.to_json());
  EXPECT_EQ(sum.get(Figure::RequestsTried), 1000);
  EXPECT_EQ(sum.get(Figure::OrphanProcesses), 1);
  EXPECT_NE(sum.table("t").find("FAIL"), std::string::npos);
}

}  // namespace
}  // namespace pf::reliability
