// Agent logs in the store (schema 4): bounded per instance (bytes and chunks, oldest dropped),
// kept apart per instance, and still there after the database is opened again — what a
// manager restart needs. On SQLite and PostgreSQL (tests/support/store_backends.h).
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "store/store.h"
#include "support/store_backends.h"

namespace pf::store {
namespace {

using pf::testing::Backend;
using pf::testing::TestDatabase;

std::int64_t add_instance(Store& store, const std::string& deployment) {
  core::InstanceRecord r;
  r.deployment_id = deployment;
  r.offer.id = 1;
  r.offer.machine_id = 1;
  return store.insert_instance(r);
}

class AgentLogsStore : public ::testing::TestWithParam<Backend> {
 protected:
  TestDatabase db_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Db, AgentLogsStore, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(AgentLogsStore, KeepsTheNewestBytesPerInstanceAndSurvivesAReopen) {
  std::int64_t a = 0, b = 0;
  {
    auto store = db_.open();
    a = add_instance(*store, "dep-a");
    b = add_instance(*store, "dep-b");
    EXPECT_EQ(store->agent_log(a), "");
    for (int i = 0; i < 10; ++i) {
      store->append_agent_log(a, 1000 + i, "line " + std::to_string(i) + "\n", 28);
    }
    store->append_agent_log(b, 1000, "other instance\n", 28);
    // 7 bytes a line: the newest four fit in 28 bytes.
    EXPECT_EQ(store->agent_log(a), "line 6\nline 7\nline 8\nline 9\n");
    EXPECT_EQ(store->agent_log(b), "other instance\n");
  }
  auto reopened = db_.open();
  EXPECT_EQ(reopened->agent_log(a), "line 6\nline 7\nline 8\nline 9\n");
  // A chunk larger than the allowance keeps its newest bytes and replaces everything.
  reopened->append_agent_log(a, 2000, std::string(50, 'x') + "END", 10);
  EXPECT_EQ(reopened->agent_log(a), "xxxxxxxEND");
  EXPECT_EQ(reopened->agent_log(b), "other instance\n");
}

// The retention sweep ([deploy] log_retention_days, event_retention_days): logs and audit trails
// of instances destroyed before the cutoff go; a live instance's, and a recently destroyed
// one's, stay whatever their age; the instance rows stay.
TEST_P(AgentLogsStore, RetentionRemovesOnlyWhatLongDestroyedInstancesLeft) {
  auto store = db_.open();
  const auto old_id = add_instance(*store, "dep-old");
  const auto recent_id = add_instance(*store, "dep-recent");
  const auto live_id = add_instance(*store, "dep-live");
  for (const auto& [id, destroyed_at] : {std::pair{old_id, 1000.0}, std::pair{recent_id, 9000.0}}) {
    auto r = *store->instance(id);
    r.state = core::InstanceState::Destroyed;
    r.destroyed_at = destroyed_at;
    store->update_instance(r);
  }
  for (const auto id : {old_id, recent_id, live_id}) {
    store->append_agent_log(id, 500, "log of " + std::to_string(id) + "\n", 1024);
    core::InstanceEvent e;
    e.instance_id = id;
    e.at = 500;
    e.kind = "state";
    e.message = "an old event";
    store->append_event(e);
  }
  EXPECT_EQ(store->drop_agent_logs(5000), 1);
  EXPECT_EQ(store->drop_events(5000), 1);
  EXPECT_EQ(store->agent_log(old_id), "");
  EXPECT_TRUE(store->events(old_id, 0).empty());
  for (const auto id : {recent_id, live_id}) {
    EXPECT_EQ(store->agent_log(id), "log of " + std::to_string(id) + "\n");
    EXPECT_EQ(store->events(id, 0).size(), 1u);
  }
  EXPECT_TRUE(store->instance(old_id));
  EXPECT_EQ(store->drop_agent_logs(5000), 0);  // nothing left to find
}

TEST_P(AgentLogsStore, TheNumberOfChunksIsBoundedToo) {
  auto store = db_.open();
  const auto id = add_instance(*store, "dep");
  const std::size_t pushes = kMaxAgentLogChunks + 10;
  for (std::size_t i = 0; i < pushes; ++i) store->append_agent_log(id, 1, "x", 1 << 20);
  EXPECT_EQ(store->agent_log(id).size(), kMaxAgentLogChunks);
}

TEST_P(AgentLogsStore, EmptyChunksAndUnknownInstancesAddNothing) {
  auto store = db_.open();
  const auto id = add_instance(*store, "dep");
  store->append_agent_log(id, 1, "", 100);
  EXPECT_EQ(store->agent_log(id), "");
  EXPECT_THROW(store->append_agent_log(id + 1, 1, "ghost", 100), StoreError);
  EXPECT_EQ(store->agent_log(id + 1), "");
}

// An agent's log is whatever bytes it sent (a text/plain push is not checked): NUL bytes and
// invalid UTF-8 come back as they went in, on PostgreSQL too (its TEXT would refuse them).
TEST_P(AgentLogsStore, AnyBytesComeBackAsSent) {
  auto store = db_.open();
  const auto id = add_instance(*store, "dep");
  const std::string bytes("nul\0 then \xff\xfe invalid UTF-8\n", 27);
  store->append_agent_log(id, 1, bytes, 1 << 20);
  EXPECT_EQ(store->agent_log(id), bytes);
}

// Two replicas (two connections) appending to one instance's log at once still keep at most
// the allowance: each append's trim sees the other's chunk.
TEST_P(AgentLogsStore, ConcurrentAppendsFromTwoConnectionsStayBounded) {
  auto first = db_.open();
  auto second = db_.open();
  const auto id = add_instance(*first, "dep");
  constexpr std::size_t kMaxBytes = 64;
  constexpr int kPerThread = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    Store& store = t % 2 == 0 ? *first : *second;
    threads.emplace_back([&store, id, t] {
      for (int i = 0; i < kPerThread; ++i) {
        store.append_agent_log(id, i, "thread " + std::to_string(t) + " line\n", kMaxBytes);
      }
    });
  }
  for (auto& th : threads) th.join();
  const std::string kept = first->agent_log(id);
  EXPECT_LE(kept.size(), kMaxBytes);
  EXPECT_GE(kept.size(), kMaxBytes - 14);  // full but for less than one line
  EXPECT_EQ(kept, second->agent_log(id));
}

}  // namespace
}  // namespace pf::store
