#include "store/written_copies.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <set>

namespace pf::store {
namespace {

TEST(SeqSet, ContiguousSeqsAreOneIntervalAndGapsCloseWhenFilled) {
  SeqSet set;
  for (std::int64_t seq = 1; seq <= 1000; ++seq) EXPECT_TRUE(set.insert(seq));
  EXPECT_EQ(set.intervals(), 1u);
  EXPECT_FALSE(set.insert(500));
  EXPECT_TRUE(set.contains(1));
  EXPECT_TRUE(set.contains(1000));
  EXPECT_FALSE(set.contains(0));
  EXPECT_FALSE(set.contains(1001));

  EXPECT_TRUE(set.insert(1002));
  EXPECT_EQ(set.intervals(), 2u);
  EXPECT_FALSE(set.contains(1001));
  EXPECT_TRUE(set.insert(1001));  // joins both sides
  EXPECT_EQ(set.intervals(), 1u);
  EXPECT_TRUE(set.contains(1002));
}

TEST(SeqSet, AgreesWithAPlainSetOnRandomInsertsIncludingTheExtremes) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> pick(-40, 40);
  SeqSet set;
  std::set<std::int64_t> plain;
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min();
  const std::int64_t hi = std::numeric_limits<std::int64_t>::max();
  for (std::int64_t seq : {lo, hi, lo + 1, hi - 1}) {
    EXPECT_EQ(set.insert(seq), plain.insert(seq).second);
  }
  for (int i = 0; i < 2000; ++i) {
    const std::int64_t seq = pick(rng);
    ASSERT_EQ(set.insert(seq), plain.insert(seq).second) << seq;
  }
  for (std::int64_t seq = -45; seq <= 45; ++seq) {
    EXPECT_EQ(set.contains(seq), plain.count(seq) == 1) << seq;
  }
  EXPECT_TRUE(set.contains(lo));
  EXPECT_TRUE(set.contains(hi));
  EXPECT_LE(set.intervals(), 3u);  // the extremes and [-40, 40], all seen by now
}

TEST(WrittenCopies, KeepsLiveRowsFollowsSeqsOnlyOnceLoadedAndForgetsTheDestroyed) {
  WrittenCopies copies;
  core::InstanceRecord row;
  row.id = 3;
  row.state = core::InstanceState::Proving;
  copies.keep_row(row);
  ASSERT_NE(copies.row(3), nullptr);
  EXPECT_EQ(copies.row(3)->state, core::InstanceState::Proving);

  EXPECT_FALSE(copies.has_seq(3, 1));  // not loaded: unknown, not "absent"
  copies.add_seq(3, 1);                // ignored until loaded
  EXPECT_FALSE(copies.has_seq(3, 1));
  copies.keep_seqs(3, {1, 2, 5});
  EXPECT_EQ(copies.has_seq(3, 2), true);
  EXPECT_EQ(copies.has_seq(3, 4), false);
  copies.add_seq(3, 4);
  EXPECT_EQ(copies.has_seq(3, 4), true);

  row.state = core::InstanceState::Destroyed;
  copies.keep_row(row);
  EXPECT_EQ(copies.row(3), nullptr);
  EXPECT_FALSE(copies.has_seq(3, 1));
  EXPECT_EQ(copies.rows_kept(), 0u);

  row.id = 4;
  row.state = core::InstanceState::Registered;
  copies.keep_row(row);
  copies.keep_seqs(4, {});
  copies.clear();
  EXPECT_EQ(copies.row(4), nullptr);
  EXPECT_FALSE(copies.has_seq(4, 1));
}

}  // namespace
}  // namespace pf::store
