// core::plan_reconcile: every case of the store against one complete market list.
#include <gtest/gtest.h>

#include "core/reconcile.h"

namespace pf::core {
namespace {

using K = ReconcileAction::Kind;
using S = InstanceState;

constexpr double kReconcileNow = 10'000;

InstanceRecord row(std::int64_t id, const std::string& dep, S state,
                   std::optional<std::int64_t> market_id, double created_at = 0) {
  InstanceRecord r;
  r.id = id;
  r.deployment_id = dep;
  r.state = state;
  r.market_id = market_id;
  r.created_at = created_at;
  r.state_since = created_at;
  r.market_status = "running";
  r.market_status_since = created_at + 1;
  return r;
}

ListedInstance listed(std::int64_t id, const std::string& label, const std::string& status) {
  ListedInstance l;
  l.id = id;
  l.label = label;
  l.actual_status = status;
  return l;
}

std::vector<std::pair<K, std::int64_t>> kinds(const std::vector<ReconcileAction>& plan) {
  std::vector<std::pair<K, std::int64_t>> out;
  for (const auto& a : plan) out.emplace_back(a.kind, a.instance_id);
  return out;
}

TEST(ReconcilePlan, EveryCase) {
  const std::vector<InstanceRecord> rows{
      row(1, "steady", S::Proving, 501),
      row(2, "closed", S::Destroyed, 502),
      row(3, "dup", S::Proving, 503),
      row(4, "lost-reply", S::Renting, std::nullopt, kReconcileNow - 30),
      row(5, "gone", S::Proving, 505),
      row(6, "never", S::Renting, std::nullopt, kReconcileNow - 900),
      row(7, "young", S::Booting, 507, kReconcileNow - 10),
      row(8, "leaving", S::Destroying, 508),
  };
  const std::vector<ListedInstance> market{
      listed(501, "proverfleet:steady", "running"),
      listed(502, "proverfleet:closed", "running"),
      listed(599, "proverfleet:dup", "running"),
      listed(503, "proverfleet:dup", "exited"),
      listed(504, "proverfleet:lost-reply", "loading"),
      listed(600, "proverfleet:nobody", "running"),
      listed(700, "someone-else", "running"),
  };
  const auto plan = plan_reconcile(rows, market, kReconcileNow, {}, {120, 600});
  const std::vector<std::pair<K, std::int64_t>> expected{
      {K::DestroyListed, 2},  // destroyed but still listed
      {K::DestroyListed, 3},  // a second instance for one deployment
      {K::RecordStatus, 3},   // its own instance's status changed
      {K::Adopt, 4},         {K::RecordStatus, 4},
      {K::ConfirmCreate, 4}, {K::RecordOrphan, 0},  // our label, no row
      {K::Close, 5},                                // vanished
      {K::Close, 6},                                // never confirmed: nothing was rented
  };
  EXPECT_EQ(kinds(plan), expected);
  for (const auto& a : plan) {
    if (a.kind == K::Close && a.instance_id == 5) {
      EXPECT_EQ(a.close->cause, CloseCause::Vanished);
    }
    if (a.kind == K::Close && a.instance_id == 6) {
      EXPECT_EQ(a.close->cause, CloseCause::NotRented);
    }
    if (a.kind == K::RecordOrphan) {
      EXPECT_EQ(a.deployment_id, "nobody");
      EXPECT_EQ(a.close->cause, CloseCause::Orphan);
    }
    if (a.kind == K::DestroyListed && a.instance_id == 3) {
      EXPECT_EQ(a.listed->id, 599);
    }
  }
}

// A stop is recorded with its cause; one the instance cannot come back from (its host's
// contract ended) closes it now as market_stopped, which strikes nobody. A row already being
// destroyed is left to the tick that confirms it.
TEST(ReconcilePlan, AMarketStopIsRecordedWithItsCauseAndAnEndedContractCloses) {
  const std::vector<InstanceRecord> rows{row(1, "outbid", S::Proving, 501),
                                         row(2, "ended", S::Proving, 502),
                                         row(3, "leaving", S::Destroying, 503)};
  ListedInstance outbid = listed(501, "proverfleet:outbid", "stopped");
  outbid.is_bid = true;
  outbid.intended_status = outbid.cur_state = outbid.next_state = "stopped";
  ListedInstance ended = listed(502, "proverfleet:ended", "stopped");
  ended.intended_status = "running";
  ended.end_date = kReconcileNow - 120;
  ListedInstance leaving = ended;
  leaving.id = 503;
  leaving.label = "proverfleet:leaving";
  const auto plan = plan_reconcile(rows, {outbid, ended, leaving}, kReconcileNow, {}, {120, 600});
  ASSERT_EQ(kinds(plan), (std::vector<std::pair<K, std::int64_t>>{
                             {K::RecordStatus, 1}, {K::Close, 2}, {K::RecordStatus, 3}}));
  EXPECT_NE(plan[0].reason.find("outbid"), std::string::npos) << plan[0].reason;
  ASSERT_TRUE(plan[1].close);
  EXPECT_EQ(plan[1].close->cause, CloseCause::MarketStopped);
  EXPECT_NE(plan[1].close->reason.find("contract ended 2 min ago"), std::string::npos)
      << plan[1].close->reason;
}

TEST(ReconcilePlan, ACreateInFlightIsNotClosed) {
  const std::vector<InstanceRecord> rows{row(6, "never", S::Renting, std::nullopt, kReconcileNow - 300)};
  EXPECT_EQ(plan_reconcile(rows, {}, kReconcileNow, {}, {120, 600}).size(), 1u);
  EXPECT_TRUE(plan_reconcile(rows, {}, kReconcileNow, {6}, {120, 600}).empty());
}

}  // namespace
}  // namespace pf::core
