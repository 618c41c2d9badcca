// Agent logs in the store (schema 4): bounded per instance (bytes and chunks, oldest dropped),
// kept apart per instance, and still there after the database is opened again — what a
// manager restart needs.
#include <gtest/gtest.h>

#include <string>

#include "store/store.h"
#include "support/temp_dir.h"

namespace pf::store {
namespace {

using pf::testing::TempDir;

std::int64_t add_instance(Store& store, const std::string& deployment) {
  core::InstanceRecord r;
  r.deployment_id = deployment;
  r.offer.id = 1;
  r.offer.machine_id = 1;
  return store.insert_instance(r);
}

TEST(AgentLogsStore, KeepsTheNewestBytesPerInstanceAndSurvivesAReopen) {
  TempDir dir;
  const std::string url = "sqlite:" + dir.file("fleet.db");
  std::int64_t a = 0, b = 0;
  {
    auto store = open_store(url);
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
  auto reopened = open_store(url);
  EXPECT_EQ(reopened->agent_log(a), "line 6\nline 7\nline 8\nline 9\n");
  // A chunk larger than the allowance keeps its newest bytes and replaces everything.
  reopened->append_agent_log(a, 2000, std::string(50, 'x') + "END", 10);
  EXPECT_EQ(reopened->agent_log(a), "xxxxxxxEND");
  EXPECT_EQ(reopened->agent_log(b), "other instance\n");
}

TEST(AgentLogsStore, TheNumberOfChunksIsBoundedToo) {
  auto store = open_store(":memory:");
  const auto id = add_instance(*store, "dep");
  const std::size_t pushes = kMaxAgentLogChunks + 10;
  for (std::size_t i = 0; i < pushes; ++i) store->append_agent_log(id, 1, "x", 1 << 20);
  EXPECT_EQ(store->agent_log(id).size(), kMaxAgentLogChunks);
}

TEST(AgentLogsStore, EmptyChunksAndUnknownInstancesAddNothing) {
  auto store = open_store(":memory:");
  const auto id = add_instance(*store, "dep");
  store->append_agent_log(id, 1, "", 100);
  EXPECT_EQ(store->agent_log(id), "");
  EXPECT_THROW(store->append_agent_log(id + 1, 1, "ghost", 100), StoreError);
  EXPECT_EQ(store->agent_log(id + 1), "");
}

}  // namespace
}  // namespace pf::store
