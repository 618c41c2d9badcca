// The leader lease in the store (sql_store_leader.cpp): the compare-and-set that lets exactly
// one of several replicas on one database take a lapsed lease. Two stores opened on one
// database (a SQLite file, a PostgreSQL database) are two replicas, each with its own
// connection, as two processes would have.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <optional>
#include <thread>

#include "core/leader_lease.h"
#include "support/store_backends.h"

namespace pf::store {
namespace {

const core::LeaseTiming kTiming{.ttl_s = 15, .guard_s = 2};
constexpr const char* kName = "manager";

// One try of replica `me`: read, decide, write if the decision says so. Returns the decision
// and whether its write landed.
std::pair<core::LeaseDecision, bool> try_lead(Store& store, const std::string& me,
                                              std::optional<std::int64_t> held, double now) {
  const auto row = store.leader_lease(kName);
  auto d = core::decide_lease(row, me, "http://" + me, held, now, kTiming);
  d.row.name = kName;
  bool written = false;
  if (d.action == core::LeaseAction::Take || d.action == core::LeaseAction::Renew) {
    written = store.write_leader_lease(d.row, row.value_or(core::LeaseRow{}));
  }
  return {d, written};
}

class LeaderLeaseStore : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  pf::testing::TestDatabase db_{GetParam()};
};
INSTANTIATE_TEST_SUITE_P(Db, LeaderLeaseStore, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(LeaderLeaseStore, NoRowUntilTheFirstTakeWhichWritesEpochOne) {
  auto opened = db_.open();
  Store& store = *opened;
  EXPECT_EQ(store.leader_lease(kName), std::nullopt);
  const auto [d, written] = try_lead(store, "a", std::nullopt, 1000);
  EXPECT_EQ(d.action, core::LeaseAction::Take);
  ASSERT_TRUE(written);
  const auto row = store.leader_lease(kName);
  ASSERT_TRUE(row);
  EXPECT_EQ(row->holder, "a");
  EXPECT_EQ(row->holder_url, "http://a");
  EXPECT_EQ(row->epoch, 1);
  EXPECT_DOUBLE_EQ(row->expires_at, 1015);
  EXPECT_DOUBLE_EQ(row->taken_at, 1000);
}

TEST_P(LeaderLeaseStore, AWriteDecidedOnARowThatChangedSinceDoesNotLand) {
  auto opened = db_.open();
  Store& store = *opened;
  ASSERT_TRUE(try_lead(store, "a", std::nullopt, 1000).second);
  const core::LeaseRow read = *store.leader_lease(kName);
  // a renews (same holder and epoch, a later expiry) after b read the row.
  ASSERT_TRUE(try_lead(store, "a", 1, 1005).second);
  core::LeaseRow grab = read;
  grab.holder = "b";
  grab.epoch = 2;
  grab.expires_at = 1030;
  EXPECT_FALSE(store.write_leader_lease(grab, read));
  EXPECT_EQ(store.leader_lease(kName)->holder, "a");
  // Decided on the row as it is now, the same write lands.
  EXPECT_TRUE(store.write_leader_lease(grab, *store.leader_lease(kName)));
  EXPECT_EQ(store.leader_lease(kName)->holder, "b");
  EXPECT_EQ(store.leader_lease(kName)->epoch, 2);
  // A first write against "no row" lands only while there is none.
  EXPECT_FALSE(store.write_leader_lease(grab, core::LeaseRow{}));
}

TEST_P(LeaderLeaseStore, AStaleRenewalOfAnExLeaderDoesNotLand) {
  auto a_store = db_.open();
  auto b_store = db_.open();
  Store& a = *a_store;
  Store& b = *b_store;
  ASSERT_TRUE(try_lead(a, "a", std::nullopt, 1000).second);
  // a is paused; its lease lapses and b takes it.
  const auto [taken, b_written] = try_lead(b, "b", std::nullopt, 1016);
  ASSERT_EQ(taken.action, core::LeaseAction::Take);
  ASSERT_TRUE(b_written);
  // a wakes up with a renewal decided on the row it read before the pause (epoch 1).
  core::LeaseRow read_before;
  read_before.name = kName;
  read_before.holder = "a";
  read_before.holder_url = "http://a";
  read_before.epoch = 1;
  read_before.expires_at = 1015;
  core::LeaseRow stale = read_before;
  stale.expires_at = 1031;
  EXPECT_FALSE(a.write_leader_lease(stale, read_before));
  // Reading again, a steps down.
  EXPECT_EQ(try_lead(a, "a", 1, 1016).first.action, core::LeaseAction::StepDown);
  EXPECT_EQ(a.leader_lease(kName)->holder, "b");
  EXPECT_EQ(a.leader_lease(kName)->epoch, 2);
  // b renews its own term.
  const auto [renew, renewed] = try_lead(b, "b", 2, 1020);
  EXPECT_EQ(renew.action, core::LeaseAction::Renew);
  EXPECT_TRUE(renewed);
  EXPECT_DOUBLE_EQ(a.leader_lease(kName)->expires_at, 1035);
}

TEST_P(LeaderLeaseStore, TwoReplicasRacingForALapsedLeaseNeverBothWin) {
  auto first = db_.open();  // migrates once before the racers open the database
  constexpr int kRounds = 40;
  std::atomic<int> wins[2] = {0, 0};
  std::atomic<int> both = 0;
  std::atomic<int> round_wins = 0;
  std::barrier sync(2, [&]() noexcept {
    if (round_wins.load() > 1) ++both;
    round_wins = 0;
  });
  auto racer = [&](int who) {
    auto opened = db_.open();
    Store& store = *opened;
    const std::string me = who == 0 ? "a" : "b";
    for (int round = 0; round < kRounds; ++round) {
      // Each round starts after the previous round's lease expired: both see it lapsed.
      const double now = 1000 + 100.0 * round;
      sync.arrive_and_wait();
      if (try_lead(store, me, std::nullopt, now).second) {
        ++wins[who];
        ++round_wins;
      }
      sync.arrive_and_wait();
    }
  };
  std::thread t0(racer, 0);
  std::thread t1(racer, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(both.load(), 0);
  EXPECT_EQ(wins[0] + wins[1], kRounds) << "each round has exactly one winner";
  // Every take moved the fencing counter by exactly one.
  EXPECT_EQ(first->leader_lease(kName)->epoch, kRounds);
}

TEST_P(LeaderLeaseStore, TheHoldersGrpcAddressRidesWithTheRow) {
  auto opened = db_.open();
  Store& store = *opened;
  ASSERT_TRUE(try_lead(store, "a", std::nullopt, 1000).second);
  core::LeaseRow renewed = *store.leader_lease(kName);
  renewed.holder_grpc = "10.0.0.5:9820";
  renewed.expires_at = 1020;
  ASSERT_TRUE(store.write_leader_lease(renewed, *store.leader_lease(kName)));
  EXPECT_EQ(store.leader_lease(kName)->holder_grpc, "10.0.0.5:9820");
  EXPECT_EQ(store.lock_leader_lease(kName, 15)->holder_grpc, "10.0.0.5:9820");
}

// The job fence's read (lock_leader_lease) inside a transaction: on PostgreSQL (READ COMMITTED)
// a take cannot commit between it and the transaction's end. SQLite's write transactions
// (BEGIN IMMEDIATE) exclude every other writer already.
class LeaderLeasePgLock : public ::testing::Test {
 protected:
  pf::testing::TestDatabase db_{pf::testing::Backend::Postgres};
};

TEST_F(LeaderLeasePgLock, ATakeWaitsForTheFencedTransactionAndGivesUpRatherThanBlock) {
  auto leader_store = db_.open();
  auto follower_store = db_.open();
  ASSERT_TRUE(try_lead(*leader_store, "a", std::nullopt, 1000).second);
  // b decides to take (a's lease lapsed by b's clock) while a's job transaction holds the row.
  std::optional<std::string> refused;
  bool taken = false;
  leader_store->transaction([&] {
    ASSERT_EQ(leader_store->lock_leader_lease(kName, 15)->holder, "a");
    std::thread follower([&] {
      try {
        taken = try_lead(*follower_store, "b", std::nullopt, 2000).second;
      } catch (const StoreError& e) {
        refused = e.what();
      }
    });
    follower.join();  // within the transaction: the take met the lock and gave up
    leader_store->put_setting("fenced-write", "1");
  });
  EXPECT_FALSE(taken);
  ASSERT_TRUE(refused) << "the take landed inside the fenced transaction";
  EXPECT_NE(refused->find("lock timeout"), std::string::npos) << *refused;
  EXPECT_EQ(leader_store->setting("fenced-write"), "1");
  // Its next try, after the transaction, takes the lease.
  EXPECT_TRUE(try_lead(*follower_store, "b", std::nullopt, 2000).second);
  EXPECT_EQ(follower_store->leader_lease(kName)->holder, "b");
  EXPECT_EQ(follower_store->leader_lease(kName)->epoch, 2);
}

TEST_F(LeaderLeasePgLock, AHolderIdleInItsFencedTransactionPastTheLimitLosesItsSession) {
  auto leader_store = db_.open();
  auto follower_store = db_.open();
  ASSERT_TRUE(try_lead(*leader_store, "a", std::nullopt, 1000).second);
  // a stands still (a paused process) inside its job transaction: PostgreSQL ends the session
  // after the idle limit, the lock goes with it, and b's take lands.
  bool taken = false;
  EXPECT_THROW(leader_store->transaction([&] {
    ASSERT_EQ(leader_store->lock_leader_lease(kName, 0.3)->holder, "a");
    const auto by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!taken && std::chrono::steady_clock::now() < by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      try {
        taken = try_lead(*follower_store, "b", std::nullopt, 2000).second;
      } catch (const StoreError&) {
        // the lock is still held: a's session has not been ended yet
      }
    }
    leader_store->put_setting("stale-write", "1");  // a wakes: its session is gone
  }),
               StoreError);
  EXPECT_TRUE(taken);
  EXPECT_EQ(follower_store->setting("stale-write"), std::nullopt);
  // a's store reconnects for its next use and sees b's term.
  EXPECT_EQ(leader_store->leader_lease(kName)->holder, "b");
}

}  // namespace
}  // namespace pf::store
