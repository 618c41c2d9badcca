// The `cuzk` prover: runs the cuzk daemon with the planned configuration and keeps Prove calls in
// flight through the gRPC contract in proto/cuzk/v1/proving.proto (reference cuzk.md §1),
// reading HTTP GET /status (§2) for heartbeats. A client's job (ProofJob::input) goes to the
// daemon as the client's own SubmitProofRequest with our request id; its proof comes back. gRPC
// stays inside prover_cuzk.cpp: the headers are heavy and nothing else needs them.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "agent/prover.h"

namespace pf::agent {

// --- the gRPC client ---------------------------------------------------------------------

struct CuzkProofInput {
  std::string vanilla_proof;  // PoRep C2 input: {SectorNum, Phase1Out, SectorSize} JSON
  std::uint64_t sector_size = 34359738368ull;
  std::uint64_t registered_proof = 8;  // StackedDrg32GiBV1_1 (go-state-types numbering)
  std::uint64_t sector_number = 1;
  std::uint64_t miner_id = 1000;
};

// A Prove request without its request id, serialized once. A C1 input is ~51 MB: proofs in
// flight then share this one buffer instead of each holding a copy and its encoding.
struct CuzkPreparedProof;

struct CuzkProofResult {
  enum class Status { Unknown, Completed, Failed, Cancelled, Timeout };
  Status status = Status::Unknown;
  std::string error_message;
  std::size_t proof_bytes = 0;
  std::string proof;  // the proof bytes (COMPLETED)
  std::uint64_t queue_wait_ms = 0, srs_load_ms = 0, synthesis_ms = 0, gpu_compute_ms = 0,
                total_ms = 0;
};

struct CuzkStatus {
  std::uint64_t completed = 0, failed = 0, uptime_s = 0;
  int gpu_workers = 0;
  int gpu_workers_busy = 0;
  std::uint32_t pending = 0, in_progress = 0;
};

struct RpcError {
  int code = 0;  // grpc::StatusCode
  std::string message;
  // The daemon went away or never answered (UNAVAILABLE, CANCELLED, UNKNOWN, ABORTED,
  // DEADLINE_EXCEEDED), as opposed to a request it rejected or a proof that failed (INTERNAL).
  bool transport() const;
};

class CuzkClient {
 public:
  // "host:port", "http://host:port" or "unix:///path".
  explicit CuzkClient(const std::string& address);
  ~CuzkClient();
  CuzkClient(const CuzkClient&) = delete;
  CuzkClient& operator=(const CuzkClient&) = delete;

  static std::shared_ptr<const CuzkPreparedProof> prepare(const CuzkProofInput& input);
  // A client's job: `submit_request` is its serialized cuzk.v1.SubmitProofRequest (issue 12
  // contract). Every field reaches the daemon as the client sent it; only the request id is
  // ours (prove() sets it). An error when the bytes are not such a request.
  static tl::expected<std::shared_ptr<const CuzkPreparedProof>, std::string> prepare_request(
      const std::string& submit_request);
  // `request_id` must be unique: the daemon does not deduplicate.
  tl::expected<CuzkProofResult, RpcError> prove(std::shared_ptr<const CuzkPreparedProof> proof,
                                                const std::string& request_id, double timeout_s);
  tl::expected<CuzkStatus, RpcError> status(double timeout_s);
  // Cancels every Prove in flight (they fail with CANCELLED).
  void cancel_all();
  // CancelProof on the daemon for the proof `request_id`; true: it was running there.
  tl::expected<bool, RpcError> cancel(const std::string& request_id, double timeout_s);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// --- the prover ----------------------------------------------------------------------------

// The daemon's program as curio installs it: `make cuzk` builds cargo's `cuzk-daemon` binary and
// copies it to ./cuzk, `make install-cuzk` installs that as /usr/local/bin/cuzk (curio's
// scripts/makefiles/30-build.mk), and the agent image puts it there too (deploy/agent-image).
inline constexpr const char* kCuzkProgram = "cuzk";

struct CuzkOptions {
  std::string daemon = kCuzkProgram;  // empty: use a daemon already listening at `listen`
  std::string listen = "127.0.0.1:9820";
  std::string status_listen = "127.0.0.1:9821";  // empty: no HTTP /status
  std::string param_dir;                         // [srs] param_cache: parameters and the PCE file
  std::string config_path;                       // written before every start
  std::string c1_path;                           // the benchmark input
  std::uint64_t registered_proof = 8;
  std::uint64_t sector_size = 34359738368ull;
  std::uint64_t sector_number = 1;
  std::uint64_t miner_id = 1000;
  double prove_timeout_s = 1800;  // Prove blocks for the whole proof (Curio uses 30 min)
  double startup_timeout_s = 300;
  std::string probe_root = "/";
  std::string log_level = "info";
  std::map<std::string, std::string> env;
  std::function<void(const std::string& line)> log;  // agent log and daemon output
};

// The PCE file whose absence makes the first proof pay the extraction (cuzk.md §5).
inline constexpr const char* kPorepPceFile = "pce-porep-32g.bin";

class CuzkProver final : public Prover {
 public:
  explicit CuzkProver(CuzkOptions options);
  ~CuzkProver() override;

  std::string kind() const override { return "cuzk"; }
  bool needs_cache_warmup() const override;
  tl::expected<std::string, std::string> start(const core::ProverPlan& plan, bool warmup) override;
  ProofOutcome prove(const ProofJob& job) override;
  ProverHealth health() override;
  void stop() override;
  // CancelProof on the daemon for that job's request id: its Prove then ends CANCELLED and the
  // daemon's GPU is free. Should the daemon not cancel it, the proof runs to its end.
  void cancel(std::int64_t job_id) override;
  core::KindSet proof_kinds(const std::vector<std::string>& param_files) const override;
  std::optional<double> peak_memory_gib() override;
  nlohmann::json status_json() override;

 private:
  void log(const std::string& line) const;

  CuzkOptions options_;
  std::string nonce_;  // makes request ids unique across agent restarts
  std::unique_ptr<CuzkClient> client_;
  std::mutex mu_;
  std::unique_ptr<ChildProcess> daemon_;
  std::optional<std::int64_t> oom_kills_before_;
  std::shared_ptr<const CuzkPreparedProof> prepared_;
  std::atomic<bool> stopping_{false};
  std::optional<double> peak_gib_;
  std::optional<ExitStatus> exit_;
  // Client jobs being proved → their request id on the daemon, and those cancel() asked for.
  std::map<std::int64_t, std::string> job_requests_;
  std::map<std::int64_t, bool> job_cancelled_;
};

}  // namespace pf::agent
