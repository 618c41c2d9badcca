// The benchmark input (issue 13 item 3): the manager's ranged replies, the register reply's
// offer as the agent reads it, and the agent's fetch (token sent, resumed, digest-checked,
// cached once per machine).
#include "agent/benchmark_input.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/params.h"
#include "manager/benchmark_input.h"
#include "support/param_server.h"
#include "support/temp_dir.h"

namespace pf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

manager::BenchmarkInput input_of(std::string bytes, std::size_t reply_bytes) {
  manager::BenchmarkInput in;
  in.name = "c1.json";
  in.digest = agent::param_digest_of(bytes);
  in.bytes = std::make_shared<const std::string>(std::move(bytes));
  in.reply_bytes = reply_bytes;
  return in;
}

std::string header(const manager::BenchmarkInputReply& r, const std::string& name) {
  for (const auto& [n, v] : r.headers) {
    if (n == name) return v;
  }
  return "";
}

TEST(BenchmarkInputReply, WholeFileRangesAndTheEnd) {
  const auto in = input_of("0123456789", 4);
  // No range, larger than one reply: the first reply_bytes as a 206.
  auto first = manager::benchmark_input_reply(in, std::nullopt);
  EXPECT_EQ(first.status, 206);
  EXPECT_EQ(first.body, "0123");
  EXPECT_EQ(header(first, "Content-Range"), "bytes 0-3/10");
  EXPECT_EQ(header(first, "ETag"), "\"" + in.digest + "\"");
  // A closed range inside the cap, an open one capped, one running past the end.
  auto mid = manager::benchmark_input_reply(in, std::pair{2, std::optional<std::int64_t>(4)});
  EXPECT_EQ(mid.status, 206);
  EXPECT_EQ(mid.body, "234");
  EXPECT_EQ(header(mid, "Content-Range"), "bytes 2-4/10");
  auto open = manager::benchmark_input_reply(in, std::pair{5, std::optional<std::int64_t>()});
  EXPECT_EQ(open.body, "5678");
  auto tail = manager::benchmark_input_reply(in, std::pair{8, std::optional<std::int64_t>(99)});
  EXPECT_EQ(tail.body, "89");
  EXPECT_EQ(header(tail, "Content-Range"), "bytes 8-9/10");
  auto past = manager::benchmark_input_reply(in, std::pair{10, std::optional<std::int64_t>()});
  EXPECT_EQ(past.status, 416);
  EXPECT_TRUE(past.body.empty());
  EXPECT_EQ(header(past, "Content-Range"), "bytes */10");
  // A file that fits one reply comes whole without a range.
  auto whole = manager::benchmark_input_reply(input_of("abc", 4), std::nullopt);
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, "abc");
}

TEST(BenchmarkInputOffer, TheRegisterReplyIsReadStrictly) {
  const auto in = input_of("0123456789", 4096);
  auto offer = agent::parse_benchmark_input(manager::to_json(in), "http://mgr:8470/");
  ASSERT_TRUE(offer) << offer.error();
  ASSERT_TRUE(*offer);
  EXPECT_EQ((*offer)->file.name, "c1.json");
  EXPECT_EQ((*offer)->file.url, "http://mgr:8470/api/v1/agent/benchmark-input");
  EXPECT_EQ((*offer)->file.bytes, 10u);
  EXPECT_EQ((*offer)->file.digest, in.digest);
  EXPECT_EQ((*offer)->chunk_bytes, 4096u);

  auto none = agent::parse_benchmark_input(json(nullptr), "http://mgr");
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);

  auto err = [&](const std::function<void(json&)>& edit) {
    json j = manager::to_json(in);
    edit(j);
    auto r = agent::parse_benchmark_input(j, "http://mgr");
    return r ? std::string() : r.error();
  };
  // The token goes only to the manager: no other host, no query tricks.
  EXPECT_NE(err([](json& j) { j["path"] = "http://evil/x"; }).find("path"), std::string::npos);
  EXPECT_NE(err([](json& j) { j["path"] = "/api/x@evil"; }).find("path"), std::string::npos);
  EXPECT_NE(err([](json& j) { j.erase("digest"); }).find("digest"), std::string::npos);
  EXPECT_NE(err([](json& j) { j["bytes"] = 0; }).find("bytes"), std::string::npos);
  EXPECT_NE(err([](json& j) { j["name"] = "../c1"; }).find("name"), std::string::npos);
  EXPECT_NE(err([](json& j) { j["chunk_bytes"] = 1; }).find("chunk_bytes"), std::string::npos);
}

class BenchmarkFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    c1_ = test::ParamServer::random_bytes(40 * 1024 + 3, 5);
    server_.put("c1.json", c1_);
    server_.require_authorization("Bearer agent-token");
    offer_.file = {.name = "c1.json",
                   .url = server_.url("c1.json"),
                   .bytes = c1_.size(),
                   .digest = agent::param_digest_of(c1_)};
    offer_.chunk_bytes = 8 * 1024;
    options_.dir = dir_.file("benchmark-input");
    options_.retry_base_s = 0.01;
    options_.retry_cap_s = 0.05;
    options_.chunk_attempts = 2;
    options_.free_gib = [](const std::string&) { return std::optional<double>(100.0); };
  }

  pf::testing::TempDir dir_;
  test::ParamServer server_;
  std::string c1_;
  agent::BenchmarkInputOffer offer_;
  agent::FetchOptions options_;
};

TEST_F(BenchmarkFetchTest, FetchedWithTheTokenInTheManagersChunksThenCachedOnDisk) {
  auto path = agent::fetch_benchmark_input(offer_, options_, "Authorization: Bearer agent-token");
  ASSERT_TRUE(path) << path.error();
  std::ifstream in(*path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), c1_);
  EXPECT_EQ(server_.requests.load(), 6);  // 40 KiB + 3 bytes in 8 KiB ranges
  // Once per machine: a second agent run uses the verified copy without asking.
  auto again = agent::fetch_benchmark_input(offer_, options_, "Authorization: Bearer agent-token");
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ(*again, *path);
  EXPECT_EQ(server_.requests.load(), 6);
}

TEST_F(BenchmarkFetchTest, AWrongTokenIsRefusedNotRetried) {
  auto path = agent::fetch_benchmark_input(offer_, options_, "Authorization: Bearer other");
  ASSERT_FALSE(path);
  EXPECT_NE(path.error().find("HTTP 401"), std::string::npos) << path.error();
}

TEST_F(BenchmarkFetchTest, ADigestMismatchIsRefusedAndNothingIsKept) {
  offer_.file.digest = agent::param_digest_of("not the file");
  auto path = agent::fetch_benchmark_input(offer_, options_, "Authorization: Bearer agent-token");
  ASSERT_FALSE(path);
  EXPECT_NE(path.error().find("corrupt at its source"), std::string::npos) << path.error();
  EXPECT_FALSE(fs::exists(options_.dir + "/c1.json"));
  EXPECT_FALSE(fs::exists(options_.dir + "/c1.json.part"));
}

TEST_F(BenchmarkFetchTest, AnInterruptedFetchResumes) {
  {
    agent::FetchOptions cut = options_;
    cut.connections = 1;
    cut.chunk_attempts = 1;
    cut.cancelled = [&] { return server_.served.load() >= 2 * offer_.chunk_bytes; };
    auto r = agent::fetch_benchmark_input(offer_, cut, "Authorization: Bearer agent-token");
    ASSERT_FALSE(r);
  }
  const auto served = server_.served.load();
  auto path = agent::fetch_benchmark_input(offer_, options_, "Authorization: Bearer agent-token");
  ASSERT_TRUE(path) << path.error();
  // Only what was not recorded came again: less than the whole file on the second run.
  EXPECT_LT(server_.served.load() - served, c1_.size());
  std::ifstream in(*path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), c1_);
}

}  // namespace
}  // namespace pf
