#include "core/blocklist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kHour = 3600;

Strike strike(std::int64_t machine, StrikeKind kind, double at, int others = 0) {
  Strike s;
  s.machine_id = machine;
  s.kind = kind;
  s.at = at;
  s.reason = "test evidence";
  s.our_others_on_machine = others;
  s.instance_id = 42;
  s.measured_rate = 12.5;
  s.break_even_rate = 30;
  return s;
}

Offer offer_on(std::int64_t machine) {
  Offer o;
  o.id = machine * 10;
  o.machine_id = machine;
  return o;
}

BadHost auto_entry(std::int64_t machine, int strikes, double added_at, double expires_at) {
  BadHost b;
  b.machine_id = machine;
  b.source = "auto";
  b.strikes = strikes;
  b.added_at = added_at;
  b.expires_at = expires_at;
  b.reason = "slow";
  return b;
}

TEST(Blocklist, ExpiryEscalatesWithEveryStrike) {
  BlocklistConfig cfg;  // 6 h, ×4
  std::vector<BadHost> list;
  const double t0 = 1000;
  auto first = apply_strike(list, strike(7, StrikeKind::Crashed, t0), cfg);
  ASSERT_TRUE(first.entry);
  EXPECT_EQ(first.entry->strikes, 1);
  EXPECT_DOUBLE_EQ(*first.entry->expires_at, t0 + 6 * kHour);
  EXPECT_EQ(first.entry->source, "auto");

  list.push_back(*first.entry);
  auto second = apply_strike(list, strike(7, StrikeKind::Offline, t0 + 10 * kHour), cfg);
  ASSERT_TRUE(second.entry);
  EXPECT_EQ(second.entry->strikes, 2);
  EXPECT_DOUBLE_EQ(*second.entry->expires_at, t0 + 10 * kHour + 24 * kHour);

  list[0] = *second.entry;
  auto third = apply_strike(list, strike(7, StrikeKind::SlowBenchmark, t0 + 40 * kHour), cfg);
  EXPECT_EQ(third.entry->strikes, 3);
  EXPECT_DOUBLE_EQ(*third.entry->expires_at, t0 + 40 * kHour + 96 * kHour);
}

TEST(Blocklist, ExpiryIsCappedAtTheMaximum) {
  BlocklistConfig cfg;
  EXPECT_DOUBLE_EQ(strike_expiry(20, 0, cfg), cfg.max_ttl_s);
}

TEST(Blocklist, EntryCarriesEvidenceAsJson) {
  auto out = apply_strike({}, strike(7, StrikeKind::SlowBenchmark, 50), {});
  ASSERT_TRUE(out.entry);
  const auto evidence = nlohmann::json::parse(out.entry->evidence_json);
  EXPECT_EQ(evidence.at("kind"), "slow_benchmark");
  EXPECT_EQ(evidence.at("instance_id"), 42);
  EXPECT_DOUBLE_EQ(evidence.at("measured_rate").get<double>(), 12.5);
  EXPECT_EQ(evidence.at("reason"), "test evidence");
  EXPECT_THAT(out.entry->reason, HasSubstr("slow_benchmark"));
}

TEST(Blocklist, SlownessWhileOurOwnInstanceSharedTheMachineIsNotBlamed) {
  auto out = apply_strike({}, strike(7, StrikeKind::SlowBenchmark, 50, /*others=*/1), {});
  EXPECT_FALSE(out.entry);
  EXPECT_THAT(out.reason, HasSubstr("our own contention"));
  // A crash is the host's doing whoever else was there.
  EXPECT_TRUE(apply_strike({}, strike(7, StrikeKind::Crashed, 50, 1), {}).entry);
}

TEST(Blocklist, OperatorEntriesAreKeptApart) {
  BadHost op;
  op.machine_id = 7;
  op.source = "operator";
  op.reason = "operator says so";
  std::vector<BadHost> list{op};
  auto out = apply_strike(list, strike(7, StrikeKind::Crashed, 50), {});
  ASSERT_TRUE(out.entry);
  EXPECT_EQ(out.entry->source, "auto");
  EXPECT_EQ(out.entry->strikes, 1);  // the operator's entry is not a strike
  EXPECT_EQ(auto_strikes(list, 7), 0);

  // Operator entries always exclude and never count against the cap.
  std::vector<Offer> pool;
  for (int m = 1; m <= 4; ++m) pool.push_back(offer_on(m));
  BadHost op2 = op;
  op2.machine_id = 1;
  std::vector<BadHost> entries{op2, auto_entry(2, 1, 0, 1e9), auto_entry(3, 1, 0, 1e9)};
  auto ex = excluded_machines(entries, pool, 100, {});
  EXPECT_TRUE(ex.machines.count(1));
  EXPECT_EQ(ex.machines.size(), 2u);  // operator + one auto (25% of 4)
  EXPECT_EQ(ex.auto_entries_waived, 1);
}

TEST(Blocklist, AutomaticEntriesMayExcludeOnlyAShareOfThePool) {
  std::vector<Offer> pool;
  for (int m = 1; m <= 20; ++m) pool.push_back(offer_on(m));
  std::vector<BadHost> entries;
  for (int m = 1; m <= 10; ++m) entries.push_back(auto_entry(m, m <= 3 ? 3 : 1, m, 1e9));
  BlocklistConfig cfg;
  cfg.max_pool_share = 0.25;
  auto ex = excluded_machines(entries, pool, 100, cfg);
  EXPECT_EQ(ex.machines.size(), 5u);
  EXPECT_EQ(ex.auto_entries_waived, 5);
  // Most strikes first, then the most recent.
  for (int m : {1, 2, 3, 10, 9}) EXPECT_TRUE(ex.machines.count(m)) << m;
  EXPECT_THAT(ex.reasons.back(), HasSubstr("waived"));
}

TEST(Blocklist, OneHostMayAlwaysBeExcluded) {
  auto ex = excluded_machines({auto_entry(5, 1, 0, 1e9)}, {offer_on(5)}, 100, {});
  EXPECT_TRUE(ex.machines.count(5));
}

TEST(Blocklist, ExpiredEntriesAndMachinesOutsideThePoolDoNotExclude) {
  std::vector<BadHost> entries{auto_entry(1, 1, 0, 50), auto_entry(9, 1, 0, 1e9)};
  auto ex = excluded_machines(entries, {offer_on(1), offer_on(2)}, 100, {});
  EXPECT_TRUE(ex.machines.empty());
}

}  // namespace
}  // namespace pf::core
