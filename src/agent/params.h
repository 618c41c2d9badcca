// Proof parameters: the files the manager's manifest names (agent/param_manifest.h; digest as
// in lotus' parameters.json: hex of the first 16 bytes of BLAKE2b-512 over the whole file),
// fetched with parallel ranged GETs into <dir>/<name>.part. A file whose size the manifest
// does not give is sized by a 1-byte ranged GET first (Content-Range), bounded by
// kMaxParamFileBytes.
//
// Crash safety: each finished chunk is flushed to disk and then recorded in
// <name>.part.chunks, so a restart (even after SIGKILL) fetches only the chunks not recorded.
// A file is renamed to its final name only after its digest matched; a mismatch deletes it
// and fetches it once more, then fails with a message naming the file and both digests.
// A verified file leaves a marker (.<name>.verified: digest, size, mtime) so that a restart
// does not re-hash 44 GiB.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "agent/param_manifest.h"
#include "market/http_client.h"

namespace pf::agent {

// Hex of the first 16 bytes of BLAKE2b-512 over the file.
tl::expected<std::string, std::string> param_digest(const std::string& path);
std::string param_digest_of(const std::string& data);

struct FetchProgressSnapshot {
  std::uint64_t done_bytes = 0;
  std::uint64_t total_bytes = 0;
  int files_done = 0;
  int files_total = 0;
  double bytes_per_s = 0;       // over the last few seconds
  std::optional<double> eta_s;  // nullopt while the rate is unknown
  std::string current;          // file being fetched or verified
};

// Shared between the fetching threads and whoever reports progress.
class FetchProgress {
 public:
  void add_bytes(std::uint64_t n) { done_.fetch_add(n, std::memory_order_relaxed); }
  // Bytes found on disk from an earlier run: counted as done, but not in the rate.
  void add_existing(std::uint64_t n) {
    existing_.fetch_add(n, std::memory_order_relaxed);
    done_.fetch_add(n, std::memory_order_relaxed);
  }
  void set_total(std::uint64_t total, int files);
  void file_done();
  void set_current(const std::string& what);
  // Rewinds the byte count when a corrupt file is thrown away.
  void sub_bytes(std::uint64_t n) { done_.fetch_sub(n, std::memory_order_relaxed); }
  void sub_existing(std::uint64_t n) {
    existing_.fetch_sub(n, std::memory_order_relaxed);
    done_.fetch_sub(n, std::memory_order_relaxed);
  }
  // `now` in seconds on any monotonic clock; the rate is measured between calls.
  FetchProgressSnapshot snapshot(double now);

 private:
  std::atomic<std::uint64_t> done_{0};
  std::atomic<std::uint64_t> existing_{0};
  std::atomic<std::uint64_t> total_{0};
  std::atomic<int> files_done_{0};
  std::atomic<int> files_total_{0};
  std::mutex mu_;
  std::string current_;
  std::deque<std::pair<double, std::uint64_t>> samples_;
};

struct FetchOptions {
  std::string dir;
  int connections = 4;                      // parallel ranged GETs per file
  std::uint64_t chunk_bytes = 64ull << 20;  // unit of resume
  double reserve_gib = 1;                   // free space left over after the files
  int chunk_attempts = 8;                   // per chunk, with jittered back-off
  double retry_base_s = 1;
  double retry_cap_s = 30;
  market::HttpOptions http = [] {
    market::HttpOptions o;
    o.request_timeout_s = 0;  // chunks of a slow link take long; the low-speed limit guards
    return o;
  }();
  long low_speed_bytes_per_s = 1024;
  long low_speed_time_s = 60;
  // Free GiB at a path; tests replace it. Default: statvfs.
  std::function<std::optional<double>(const std::string& dir)> free_gib;
  std::function<bool()> cancelled;  // polled while fetching; true aborts with "cancelled"
  // Sent with every request ("Name: value"): the manager's bearer token for its own files.
  std::vector<std::string> headers;
  std::function<void(const std::string& line)> log;
};

struct FetchSummary {
  std::uint64_t bytes = 0;         // total size of the files
  std::uint64_t downloaded = 0;    // bytes fetched by this run
  int refetched = 0;               // files fetched again after a digest mismatch
  std::vector<std::string> paths;  // final paths, in manifest order
};

// Fetches every file of `files` into options.dir (created if missing) and verifies it.
// Blocking; progress goes to `progress`.
tl::expected<FetchSummary, std::string> fetch_params(const std::vector<ParamFile>& files,
                                                     const FetchOptions& options,
                                                     FetchProgress& progress);

}  // namespace pf::agent
