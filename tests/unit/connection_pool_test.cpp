// The job inputs' connection pool (store/connection_pool.h, issue 29): bounded, health-checked,
// and what it is for: an input download does not wait behind the store's serialised connection.
#include "store/connection_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "jobs/input_store.h"
#include "store/sqlite_connection.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"

namespace pf::store {
namespace {

using namespace std::chrono_literals;

class ConnectionPoolTest : public ::testing::Test {
 protected:
  ConnectionPool::Opener opener() {
    return [this] {
      ++opened_;
      return std::make_unique<SqliteConnection>(path_);
    };
  }
  testing::TempDir dir_;
  std::string path_ = dir_.file("pool.db");
  std::atomic<int> opened_{0};
};

TEST_F(ConnectionPoolTest, LendsAtMostItsSizeAndTheNextCallerWaits) {
  ConnectionPool pool(opener(), 2, 60);
  auto a = pool.acquire();
  auto b = pool.acquire();
  EXPECT_EQ(pool.stats().lent, 2u);
  auto third = std::async(std::launch::async, [&] { return pool.acquire(); });
  EXPECT_EQ(third.wait_for(200ms), std::future_status::timeout);
  { auto gone = std::move(a); }  // returned
  ASSERT_EQ(third.wait_for(5s), std::future_status::ready);
  auto c = third.get();
  EXPECT_EQ(opened_.load(), 2);  // the returned one was lent again, not a third opened
  EXPECT_EQ(pool.stats().open, 2u);
}

TEST_F(ConnectionPoolTest, AFailedConnectionIsClosedAndAnotherOpened) {
  ConnectionPool pool(opener(), 1, 60);
  {
    auto a = pool.acquire();
    a.failed();
  }
  EXPECT_EQ(pool.stats().open, 0u);
  EXPECT_EQ(pool.stats().closed, 1);
  auto b = pool.acquire();
  sql::Statement ping(*b, "SELECT 1 AS one", "test");
  ASSERT_TRUE(ping.next());
  EXPECT_EQ(opened_.load(), 2);
}

TEST_F(ConnectionPoolTest, AnIdleConnectionIsCheckedBeforeItIsLentAgain) {
  ConnectionPool pool(opener(), 1, 0);  // every reuse is checked
  { auto a = pool.acquire(); }
  { auto b = pool.acquire(); }  // checked: healthy, kept
  EXPECT_EQ(opened_.load(), 1);
  EXPECT_EQ(pool.stats().closed, 0);
}

TEST_F(ConnectionPoolTest, AnOpenerThatFailsLeavesRoomForTheNextTry) {
  bool fail = true;
  ConnectionPool pool(
      [&]() -> std::unique_ptr<sql::Connection> {
        if (fail) throw StoreError("the database is down");
        return std::make_unique<SqliteConnection>(path_);
      },
      1, 60);
  EXPECT_THROW(pool.acquire(), StoreError);
  fail = false;
  auto a = pool.acquire();  // not stuck waiting for a slot the failure held
  EXPECT_EQ(pool.stats().lent, 1u);
}

class InputPoolTest : public ::testing::TestWithParam<testing::Backend> {
 protected:
  testing::TestDatabase db_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Db, InputPoolTest, testing::kStoreBackends, testing::backend_name);

// While another thread holds the store's connection in a transaction (a heartbeat's write, a
// slow statement), inputs are written and read on the pool.
TEST_P(InputPoolTest, InputsAreReadAndWrittenBesideATransactionOnTheMainConnection) {
  auto store = db_.open();
  ASSERT_TRUE(store->input_pool_stats());
  jobs::InputStore inputs(*store, [] { return 1'000'000.0; });
  const std::string input(3 * jobs::kInputChunkBytes / 2, 'x');
  const auto stored = inputs.put(input);

  std::promise<void> inside, release;
  auto held = std::async(std::launch::async, [&] {
    store->transaction([&] {
      store->put_setting("held", "1");
      inside.set_value();
      release.get_future().wait();
    });
  });
  inside.get_future().wait();
  auto reader = std::async(std::launch::async, [&] {
    const auto range = inputs.read(stored.digest, 0, jobs::kInputChunkBytes * 2);
    return range ? range->bytes : std::string();
  });
  const bool read_beside = reader.wait_for(10s) == std::future_status::ready;
  release.set_value();
  held.get();
  ASSERT_TRUE(read_beside) << "the input read waited for the store's transaction";
  EXPECT_EQ(reader.get(), input);
  EXPECT_GE(store->input_pool_stats()->opened, 1);
}

// An in-memory SQLite database is one connection's own: inputs stay on it.
TEST(InputPool, AnInMemoryStoreKeepsInputsOnItsOneConnection) {
  auto store = open_sql_store(":memory:");
  EXPECT_FALSE(store->input_pool_stats());
  jobs::InputStore inputs(*store, [] { return 1.0; });
  const auto stored = inputs.put("in memory");
  EXPECT_EQ(inputs.read(stored.digest, 0, 100)->bytes, "in memory");
}

}  // namespace
}  // namespace pf::store
