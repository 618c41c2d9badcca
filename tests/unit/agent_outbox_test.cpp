// The agent's event journal (sequence numbers that survive restarts, torn lines, compaction)
// and its bounded log buffer.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/log_buffer.h"
#include "agent/outbox.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pf_outbox_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<EventOutbox> open(std::int64_t epoch_ms = 1000) {
    auto box = EventOutbox::open(dir_.string(), epoch_ms);
    EXPECT_TRUE(box) << box.error();
    return std::move(*box);
  }
  static inline int counter_ = 0;
  fs::path dir_;
};

TEST_F(OutboxTest, AFreshJournalNumbersFromTheEpochMilliseconds) {
  auto box = open(1700000000123);
  EXPECT_EQ(box->add({{"type", "params_done"}}).value(), 1700000000123);
  EXPECT_EQ(box->add({{"type", "prover_started"}}).value(), 1700000000124);
  const auto pending = box->pending(10);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0]["seq"], 1700000000123);
  EXPECT_EQ(pending[1]["type"], "prover_started");
  EXPECT_EQ(box->pending(1).size(), 1u);
}

TEST_F(OutboxTest, UndeliveredEventsAndNumbersSurviveAReopen) {
  {
    auto box = open();
    box->add({{"type", "a"}});
    box->add({{"type", "b"}});
    box->add({{"type", "c"}});
    ASSERT_TRUE(box->acknowledge(1000));
  }
  // A later epoch must not restart the numbering of an existing journal.
  auto box = open(999999);
  EXPECT_EQ(box->pending_count(), 2u);
  EXPECT_EQ(box->pending(10)[0]["type"], "b");
  EXPECT_EQ(box->add({{"type", "d"}}).value(), 1003);
}

TEST_F(OutboxTest, NumbersSurviveCompactionOfADeliveredJournal) {
  {
    auto box = open();
    box->add({{"type", "a"}});
    box->add({{"type", "b"}});
    ASSERT_TRUE(box->acknowledge(1001));
    EXPECT_EQ(box->pending_count(), 0u);
  }
  EXPECT_EQ(fs::file_size(dir_ / "events.jsonl"), 0u);
  auto box = open(5);
  EXPECT_EQ(box->pending_count(), 0u);
  EXPECT_EQ(box->add({{"type", "c"}}).value(), 1002);
}

TEST_F(OutboxTest, ATornLastLineIsSkipped) {
  {
    auto box = open();
    box->add({{"type", "a"}});
  }
  std::ofstream(dir_ / "events.jsonl", std::ios::app) << R"({"type":"b","se)";
  auto box = open();
  ASSERT_EQ(box->pending_count(), 1u);
  EXPECT_EQ(box->add({{"type", "c"}}).value(), 1001);
}

// Issue 10: the journal and state are parsed with limits, so a deeply nested line or state
// (a corrupt disk, a hostile image) is skipped like a torn one instead of becoming a tree that
// crashes the agent when it is sent.
TEST_F(OutboxTest, DeeplyNestedLinesAndStateAreSkipped) {
  {
    auto box = open();
    box->add({{"type", "a"}});
  }
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  std::ofstream(dir_ / "events.jsonl", std::ios::app)
      << R"({"type":"b","seq":1001,"data":)" << deep << "}\n";
  auto box = open();
  ASSERT_EQ(box->pending_count(), 1u);
  EXPECT_EQ(box->pending(10)[0]["type"], "a");
  EXPECT_EQ(box->add({{"type", "c"}}).value(), 1001);
}

TEST_F(OutboxTest, AHostileStateFileIsRecoveredFrom) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "events.state") << std::string(100'000, '[');
  auto box = open(5000);
  EXPECT_EQ(box->add({{"type", "a"}}).value(), 5000);
}

TEST_F(OutboxTest, AcknowledgingIsIdempotentAndPartial) {
  auto box = open();
  for (int i = 0; i < 5; ++i) box->add({{"type", "e"}, {"i", i}});
  ASSERT_TRUE(box->acknowledge(1002));
  ASSERT_TRUE(box->acknowledge(1001));  // older: no effect
  const auto pending = box->pending(10);
  ASSERT_EQ(pending.size(), 2u);
  EXPECT_EQ(pending[0]["i"], 3);
}

TEST_F(OutboxTest, AnUnwritableDirectoryIsAClearError) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "blocker") << "x";
  auto box = EventOutbox::open((dir_ / "blocker" / "sub").string(), 1);
  ASSERT_FALSE(box);
  EXPECT_NE(box.error().find("blocker"), std::string::npos) << box.error();
}

TEST(LogBuffer, ChunksEndAtLineBoundariesAndAreConsumedExactly) {
  LogBuffer b(1 << 20);
  b.append_line("first line");
  b.append_line("second line");
  auto chunk = b.peek(15);
  EXPECT_EQ(chunk.text, "first line\n");
  b.append_line("third");  // arrives while the chunk is in flight
  b.consume(chunk);
  EXPECT_EQ(b.peek(100).text, "second line\nthird\n");
}

TEST(LogBuffer, OverflowDropsTheOldestAndSaysSo) {
  LogBuffer b(100);
  for (int i = 0; i < 20; ++i) b.append_line("line number " + std::to_string(i));
  EXPECT_LE(b.size(), 100u);
  auto chunk = b.peek(1000);
  EXPECT_EQ(chunk.text.rfind("[proverfleet agent: ", 0), 0u) << chunk.text;
  EXPECT_NE(chunk.text.find("bytes of log dropped]"), std::string::npos);
  EXPECT_NE(chunk.text.find("line number 19\n"), std::string::npos);
  EXPECT_EQ(chunk.text.find("line number 0\n"), std::string::npos);
  b.consume(chunk);
  EXPECT_EQ(b.size(), 0u);
  b.append_line("after");
  EXPECT_EQ(b.peek(1000).text, "after\n");  // the loss was reported once
}

}  // namespace
}  // namespace pf::agent
