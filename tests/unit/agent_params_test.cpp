// Parameter fetching: parallel ranged downloads, resume from recorded chunks, digest checks
// (mismatch → one re-fetch → clear error), disk-space check, servers without Range support.
// The crash-and-resume of a real agent process (SIGKILL) is in tests/integration/agent_cli_test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/params.h"
#include "support/eventually.h"
#include "support/param_server.h"

namespace pf::agent {
namespace {

using pf::test::eventually;

namespace fs = std::filesystem;
using nlohmann::json;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("pf_params_" + std::to_string(::getpid()) + "_" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    content_ = test::ParamServer::random_bytes(1 << 20, 7);  // 1 MiB = 16 chunks of 64 KiB
    server_.put("v28-test.params", content_);
    server_.put("v28-test.vk", "small verifying key");
    files_ = {ParamFile{.name = "v28-test.params",
                        .url = server_.url("v28-test.params"),
                        .bytes = content_.size(),
                        .digest = param_digest_of(content_)},
              ParamFile{.name = "v28-test.vk",
                        .url = server_.url("v28-test.vk"),
                        .bytes = 19,
                        .digest = param_digest_of("small verifying key")}};
    options_.dir = dir_.str() + "/params";
    options_.chunk_bytes = 64 * 1024;
    options_.connections = 4;
    options_.retry_base_s = 0.01;
    options_.retry_cap_s = 0.05;
    options_.free_gib = [](const std::string&) { return std::optional<double>(100.0); };
    options_.log = [this](const std::string& line) { log_.push_back(line); };
  }

  bool logged(const std::string& text) const {
    for (const auto& l : log_) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }

  TempDir dir_;
  test::ParamServer server_;
  std::string content_;
  std::vector<ParamFile> files_;
  FetchOptions options_;
  FetchProgress progress_;
  std::vector<std::string> log_;
};

TEST(ParamDigest, IsTheFirst16BytesOfBlake2b512) {
  // BLAKE2b-512("abc") = ba80a53f981c4d0d6a2797b69f12f6e9 4c212f14...
  EXPECT_EQ(param_digest_of("abc"), "ba80a53f981c4d0d6a2797b69f12f6e9");
  TempDir d;
  std::ofstream(d.str() + "/f") << "abc";
  EXPECT_EQ(param_digest(d.str() + "/f").value(), "ba80a53f981c4d0d6a2797b69f12f6e9");
  auto missing = param_digest(d.str() + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("/nope"), std::string::npos);
}

TEST_F(ParamsTest, FetchesInParallelRangesAndVerifies) {
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
  EXPECT_EQ(read_all(options_.dir + "/v28-test.vk"), "small verifying key");
  EXPECT_EQ(r->downloaded, content_.size() + 19);
  EXPECT_EQ(r->refetched, 0);
  EXPECT_FALSE(fs::exists(options_.dir + "/v28-test.params.part"));
  EXPECT_FALSE(fs::exists(options_.dir + "/v28-test.params.part.chunks"));
  EXPECT_EQ(server_.requests.load(), 17);  // 16 ranged chunks + the small file
  for (const auto& range : server_.ranges_seen()) EXPECT_EQ(range.rfind("bytes=", 0), 0u) << range;
  const auto snap = progress_.snapshot(1e9);
  EXPECT_EQ(snap.done_bytes, snap.total_bytes);
  EXPECT_EQ(snap.files_done, 2);
  EXPECT_EQ(snap.files_total, 2);
}

TEST_F(ParamsTest, AVerifiedFileIsNotFetchedOrHashedAgain) {
  ASSERT_TRUE(fetch_params(files_, options_, progress_));
  const int before = server_.requests.load();
  FetchProgress again;
  auto r = fetch_params(files_, options_, again);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->downloaded, 0u);
  EXPECT_EQ(server_.requests.load(), before);
  EXPECT_EQ(again.snapshot(1).done_bytes, content_.size() + 19);
}

TEST_F(ParamsTest, AFileChangedOnDiskIsFetchedAgain) {
  ASSERT_TRUE(fetch_params(files_, options_, progress_));
  {
    std::fstream f(options_.dir + "/v28-test.params",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put('\x42');
  }
  fs::last_write_time(
      options_.dir + "/v28-test.params",
      fs::last_write_time(options_.dir + "/v28-test.params") + std::chrono::seconds(5));
  FetchProgress again;
  auto r = fetch_params(files_, options_, again);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->downloaded, content_.size());
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
  EXPECT_TRUE(logged("does not match its digest"));
}

TEST_F(ParamsTest, ResumesFromTheRecordedChunksOnly) {
  // What a crash after 5 chunks leaves behind: the reserved .part with those chunks written,
  // their indices recorded, and a torn last line.
  fs::create_directories(options_.dir);
  const std::uint64_t chunk = options_.chunk_bytes;
  {
    std::ofstream part(options_.dir + "/v28-test.params.part", std::ios::binary);
    std::string data = content_.substr(0, 5 * chunk);
    data.resize(content_.size(), '\0');
    part << data;
    std::ofstream rec(options_.dir + "/v28-test.params.part.chunks");
    rec << "pf-chunks v1 " << content_.size() << " " << chunk << "\n0\n1\n2\n3\n4\n1";
  }
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
  // Chunk 1 appears on the torn line too, but as "1" it is complete; what matters is that
  // only the 11 unrecorded chunks (and the small file) came over the wire.
  EXPECT_EQ(r->downloaded, content_.size() - 5 * chunk + 19);
  EXPECT_EQ(server_.served.load(), content_.size() - 5 * chunk + 19);
  EXPECT_TRUE(logged("resuming v28-test.params"));
}

TEST_F(ParamsTest, AChunkRecordForADifferentChunkSizeStartsOver) {
  fs::create_directories(options_.dir);
  {
    std::ofstream(options_.dir + "/v28-test.params.part", std::ios::binary) << "garbage";
    std::ofstream(options_.dir + "/v28-test.params.part.chunks")
        << "pf-chunks v1 1048576 4096\n0\n";
  }
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->downloaded, content_.size() + 19);
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
}

TEST_F(ParamsTest, ADigestMismatchIsFetchedOnceMore) {
  server_.corrupt = true;
  // The source is repaired right after the first mismatch is noticed.
  options_.log = [this](const std::string& line) {
    log_.push_back(line);
    if (line.find("digest mismatch") != std::string::npos) server_.corrupt = false;
  };
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->refetched, 1);
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
  const auto snap = progress_.snapshot(1);
  EXPECT_EQ(snap.done_bytes, snap.total_bytes);
}

TEST_F(ParamsTest, ACorruptSourceEndsInAClearErrorAfterOneRefetch) {
  server_.corrupt = true;
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("v28-test.params is corrupt at its source"), std::string::npos)
      << r.error();
  EXPECT_NE(r.error().find(files_[0].digest), std::string::npos) << r.error();
  EXPECT_EQ(server_.served.load(), 2 * content_.size());  // fetched exactly twice
  EXPECT_FALSE(fs::exists(options_.dir + "/v28-test.params"));
  EXPECT_FALSE(fs::exists(options_.dir + "/v28-test.params.part"));
}

TEST_F(ParamsTest, NotEnoughDiskFailsBeforeAnyDownload) {
  options_.free_gib = [](const std::string&) { return std::optional<double>(0.5); };
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("not enough disk space"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("0.5 GiB free"), std::string::npos) << r.error();
  EXPECT_EQ(server_.requests.load(), 0);
}

TEST_F(ParamsTest, DiskNeedCountsSpaceAlreadyReservedByAPartialFile) {
  // A 1 GiB reserve plus the 1 MiB file: 1.001 GiB needed, 1.0005 GiB free → too little...
  options_.free_gib = [](const std::string&) { return std::optional<double>(1.0005); };
  EXPECT_FALSE(fetch_params(files_, options_, progress_));
  // ...unless the .part already holds most of it.
  fs::create_directories(options_.dir);
  {
    std::ofstream part(options_.dir + "/v28-test.params.part", std::ios::binary);
    part << std::string(content_.size(), '\0');
  }
  FetchProgress again;
  EXPECT_TRUE(fetch_params(files_, options_, again));
}

TEST_F(ParamsTest, TransientServerErrorsAreRetried) {
  server_.fail_next = 3;
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
  EXPECT_EQ(server_.requests.load(), 17 + 3);
}

TEST_F(ParamsTest, AMissingFileIsAClearError) {
  files_[1].url = server_.url("nope.vk");
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("HTTP 404"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("nope.vk"), std::string::npos) << r.error();
}

TEST_F(ParamsTest, AServerWithoutRangesIsFetchedInOnePiece) {
  server_.ignore_ranges = true;
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(read_all(options_.dir + "/v28-test.params"), content_);
  EXPECT_TRUE(logged("server ignores byte ranges"));
}

TEST_F(ParamsTest, CancellationStopsTheFetch) {
  server_.bytes_per_s = 256 * 1024;  // 4 s for the big file
  std::atomic<bool> cancel{false};
  options_.cancelled = [&] { return cancel.load(); };
  std::thread canceller([&] {
    eventually([&] { return server_.served > 0; });  // cancelled while downloading
    cancel = true;
  });
  auto r = fetch_params(files_, options_, progress_);
  canceller.join();
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("cancelled"), std::string::npos) << r.error();
}

TEST(ParamManifest, ParsesTheManagersList) {
  const json m = json::parse(R"([
    {"name": "v28-a.params", "url": "https://x/ipfs/Qm1", "bytes": 10, "digest": "6A388072A518CF46EBD661F5CC46900A"},
    {"name": "v28-a.vk", "url": "http://x/vk", "bytes": 5}
  ])");
  auto files = parse_param_manifest(m);
  ASSERT_TRUE(files) << files.error();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].digest, "6a388072a518cf46ebd661f5cc46900a");
  EXPECT_EQ((*files)[1].bytes, 5u);
  EXPECT_TRUE((*files)[1].digest.empty());
}

TEST(ParamManifest, RejectsWhatCouldHurt) {
  auto err = [](const char* text) {
    auto r = parse_param_manifest(json::parse(text));
    return r ? std::string() : r.error();
  };
  EXPECT_NE(err(R"("v28-a.params")").find("must be an array"), std::string::npos);
  EXPECT_NE(err(R"({"name": "x"})").find("must map to {cid, digest, sector_size}"),
            std::string::npos);
  EXPECT_NE(
      err(R"([{"name": "../etc/passwd", "url": "http://x", "bytes": 1}])").find("params[0].name"),
      std::string::npos);
  EXPECT_NE(err(R"([{"name": ".hidden", "url": "http://x", "bytes": 1}])").find("params[0].name"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "a", "url": "ftp://x", "bytes": 1}])").find("http(s) URL"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "a", "url": "http://x", "bytes": -1}])").find("params[0].bytes"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "a", "url": "http://x", "bytes": 0}])").find("neither bytes nor"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "a", "bytes": 1}])").find("needs a url or a cid"), std::string::npos);
  EXPECT_NE(
      err(R"([{"name": "a", "url": "http://x", "bytes": 1, "digest": "xyz"}])").find("32 hex"),
      std::string::npos);
  EXPECT_NE(err(R"([{"name": "a", "url": "http://x", "bytes": 1},
                    {"name": "a", "url": "http://y", "bytes": 2}])")
                .find("listed twice"),
            std::string::npos);
}

// Issue 10: manifest text goes through the bounded parser.
TEST(ParamManifest, TextIsParsedWithLimits) {
  auto good = parse_param_manifest_text(R"([{"name": "a.vk", "url": "http://x/a", "bytes": 5}])");
  ASSERT_TRUE(good) << good.error();
  EXPECT_EQ(good->size(), 1u);
  auto deep = parse_param_manifest_text(std::string(100'000, '['));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error(), "not valid JSON: nesting deeper than 8 at byte 9");
  auto huge =
      parse_param_manifest_text(R"([{"name": "a.vk", "url": "http://x/a", "bytes": 1e400}])");
  ASSERT_FALSE(huge);
  EXPECT_NE(huge.error().find("number out of range"), std::string::npos) << huge.error();
}

}  // namespace
}  // namespace pf::agent
