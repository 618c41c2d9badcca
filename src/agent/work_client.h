// The agent's side of the job protocol (issue 12, contract "Agent ↔ manager job protocol"):
// lease jobs by long-poll, fetch a job's input (resumable, SHA-256 checked, cached by digest
// under the state dir) and deliver `started` and results until the manager has them.
//
//  - lease: POST /api/v1/agent/jobs/lease {max_jobs, wait_ms}; one call, no retry (the caller's
//    loop backs off).
//  - input: GET /api/v1/agent/jobs/{id}/input?attempt=A with Range: bytes=O-(N-1); the bytes
//    arrive in memory and are hashed as they come, so the proof starts as soon as the last byte
//    is checked. A cut transfer resumes from what arrived; a fetch that ends unfinished (the
//    agent stopping, a refusal) leaves what arrived in <cache>/<digest>.part, where the next
//    fetch (the next agent run too) resumes. The whole input is checked against the digest the
//    lease named: a mismatch throws it away and fetches once more, then fails. A verified input
//    is written to <cache>/<digest> behind the proof (a writer thread; served from memory
//    meanwhile) and from there to any later job with that digest (a re-lease after a restart,
//    a client that resubmitted the same input), checked again before each use.
//  - started / result: retried with capped full-jitter backoff (core::kAgentRetryMaxS) until a
//    200 or a final refusal (404/409/410, or another 4xx that no retry can fix), or until the
//    caller cancels. A 401 calls on_unauthorized (the agent registers again) and retries.
//
// Thread-safe: several workers fetch and report at once; two fetches of one digest are
// serialized (the second finds the first's input in the cache).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tl/expected.hpp>
#include <vector>

#include "agent/manager_client.h"
#include "core/job.h"
#include "util/sha256.h"

namespace pf::agent {

struct LeasedJob {
  std::int64_t id = 0;
  int attempt = 0;
  core::JobKind kind = core::JobKind::PorepC2;
  std::string input_digest;  // SHA-256 hex, checked to be 64 lowercase hex digits
  std::int64_t input_bytes = 0;
  double deadline_at = 0;  // epoch s
  double lease_s = 0;
};

// What the agent uploads when a job's proof ends.
struct JobReport {
  std::int64_t job_id = 0;
  int attempt = 0;
  bool ok = false;
  std::string proof;    // ok: the proof bytes (sent base64)
  std::string message;  // !ok: why
  bool oom = false;     // !ok: the prover was killed for memory (not the job's fault)
  double prove_ms = 0, gpu_ms = 0, queue_ms = 0;
};

struct Delivery {
  enum class Kind {
    Applied,    // 200, applied
    Ignored,    // 200, not applied (late or duplicate): nothing more to do
    Refused,    // a final refusal: the job is not ours (404/409/410) or the body can never pass
    Abandoned,  // cancelled before a final answer
  };
  Kind kind = Kind::Abandoned;
  std::string reason;
};
const char* to_string(Delivery::Kind kind);

struct InputError {
  enum class Kind {
    NotOurs,    // 404/409/410: the job was taken from us; forget it
    Cancelled,  // the caller cancelled
    Failed,     // digest mismatch after a re-fetch, a refused request, a disk error
  };
  Kind kind = Kind::Failed;
  std::string message;
};

struct WorkClientOptions {
  std::string cache_dir;                         // e.g. <state_dir>/job-inputs; created 0700
  std::uint64_t max_cache_bytes = 4ull << 30;    // verified inputs kept beyond this are evicted
  std::int64_t max_input_bytes = 1ll << 30;      // a lease naming a larger input is refused
  std::chrono::milliseconds lease_wait{20'000};  // the long-poll wait asked for (≤ 25 s)
  double chunk_timeout_s = 300;                  // one input reply
  double retry_base_s = 0.5;
  double retry_max_s = 15;  // core::kAgentRetryMaxS
  std::function<void(const std::string&)> log;
  std::function<void(const CallError&)> on_unauthorized;
  // Waits `seconds` (real) between retries; returns false when the caller is stopping. Empty:
  // sleeps.
  std::function<bool(double seconds)> wait;
};

class WorkClient {
 public:
  WorkClient(ManagerClient& manager, WorkClientOptions options);
  // Writes the inputs still on their way to the cache, then returns.
  ~WorkClient();
  WorkClient(const WorkClient&) = delete;
  WorkClient& operator=(const WorkClient&) = delete;

  // One long-poll for up to `max_jobs` (1..64) jobs. An empty list: none came in the wait.
  CallResult<std::vector<LeasedJob>> lease(int max_jobs);
  // The job's verified input, from the cache or downloaded. `cancelled` is polled between
  // replies and retries.
  tl::expected<std::shared_ptr<const std::string>, InputError> fetch_input(
      const LeasedJob& job, const std::function<bool()>& cancelled);
  Delivery report_started(std::int64_t job_id, int attempt, const std::function<bool()>& cancelled);
  Delivery report_result(const JobReport& report, const std::function<bool()>& cancelled);

  std::string cache_path(const std::string& digest) const;
  // Returns once every verified input is written to the cache (for tests).
  void wait_for_cache();

 private:
  Delivery deliver(const std::string& path, const nlohmann::json& body,
                   const std::function<bool()>& cancelled);
  bool wait_retry(int failures);
  void log(const std::string& line) const;
  // An input's bytes as they arrive, and their running SHA-256.
  struct PartInput {
    std::string bytes;
    std::optional<util::Sha256> hash;
    void reset() {
      bytes.clear();
      hash.reset();
    }
    void append(std::string_view more) {
      if (!hash) hash.emplace();
      hash->update(more);
      bytes.append(more);
    }
    std::string digest() {
      if (!hash) hash.emplace();
      std::string hex = hash->hex();
      hash.reset();
      return hex;
    }
  };
  // Downloads into `held` until it holds input_bytes; a final error, or nothing.
  tl::expected<void, InputError> download(const LeasedJob& job, PartInput& held,
                                          const std::function<bool()>& cancelled);
  // What an unfinished fetch got, for the next one to resume from.
  void save_part(const std::string& part, const std::string& bytes);
  // Hands a verified input to the cache writer (started on first use).
  void keep_in_cache(const std::string& digest, std::shared_ptr<const std::string> bytes);
  void cache_writer_loop();
  // One digest's fetch at a time (the per-digest mutex lives in fetching_ while anyone uses it).
  class DigestLock {
   public:
    DigestLock(WorkClient& client, std::string digest);
    ~DigestLock();
    DigestLock(const DigestLock&) = delete;
    DigestLock& operator=(const DigestLock&) = delete;

   private:
    WorkClient& client_;
    std::string digest_;
    std::shared_ptr<std::mutex> mutex_;
    std::unique_lock<std::mutex> held_;
  };
  // Removes the oldest verified inputs (and stale part files) beyond max_cache_bytes, except
  // `keep` and the digests being fetched now.
  void evict(const std::string& keep);

  ManagerClient& manager_;
  WorkClientOptions options_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<std::mutex>> fetching_;  // digest → its fetch lock
  std::mt19937_64 rng_{std::random_device{}()};
  // Verified inputs the writer has yet to put in the cache (served from here meanwhile).
  std::map<std::string, std::shared_ptr<const std::string>> to_cache_;
  std::condition_variable cache_cv_;
  bool closing_ = false;
  std::thread cache_writer_;  // last: started after everything it uses
};

// The lease reply's jobs, checked field by field (a hostile or broken manager cannot make the
// agent use a bad file name or an unbounded size). Errors name the field.
tl::expected<std::vector<LeasedJob>, std::string> parse_leases(const nlohmann::json& reply,
                                                               std::int64_t max_input_bytes);

}  // namespace pf::agent
