// The demo's Curio (`proverfleet demo`): a cluster of Curio nodes sending the scenario's job
// arrivals to the gateway exactly as Curio's cuzk tasks do, read at the curio commit the agent
// image pins (docs/gateway.md, "What real Curio and cuzk do"):
//  - only the unary `Prove` (lib/cuzk/client.go:123), plaintext, no metadata, no keepalive, one
//    connection per node (client.go:80-84);
//  - each node keeps at most its [Cuzk] MaxPending calls open (one counter per node shared by
//    every kind, client.go:52, harmony/taskhelp/max.go:42-44); arrivals beyond wait in the
//    cluster's task table (Curio's harmony_task);
//  - a call that fails (any gRPC error, or a result that is not COMPLETED) fails the task, which
//    the next node to poll takes again with the same request_id (task_type_handler.go:349-359),
//    after the kind's RetryWait, until its MaxFailures tries are spent: PoRep 10 tries waiting
//    min(1 s << failures, 2 min) (tasks/seal/task_porep.go:216-219); SnapDeals 3, WindowPoSt 5,
//    WinningPoSt 1, without waiting (tasks/snap/task_prove.go:177, tasks/window/compute_task.go:
//    459, tasks/winning/winning_task.go:599). Waits are divided by time_scale. A retry prefers
//    another node than the one that failed, as any node may claim a released task;
//  - requests are shaped per kind as lib/ffi/cuzk_funcs.go builds them (request ids
//    "porep-M-S", "snap-M-S", "wdpost-M-0-[b b …]", "winpost-M-<hex>"; priorities NORMAL, HIGH,
//    CRITICAL), with random bytes so every task's input differs;
//  - ProveTimeout is each call's deadline (client.go:117-121).
// Arrivals follow the scenario's Poisson process (scenario::draw_arrivals over its horizon,
// repeated with a fresh draw after each horizon) in wall time: scenario seconds ÷ time_scale;
// `mix` splits them by kind.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/job.h"
#include "scenario/scenario.h"

namespace grpc {
class ClientContext;
}

namespace pf::cli {

// The shares of arrivals by kind (normalised; all 0 = PoRep only).
struct ProofMix {
  double porep = 1;
  double snap = 0;
  double window_post = 0;
  double winning_post = 0;
};

// How Curio's task engine retries a task of `kind`: tries in all (MaxFailures) and the wait
// before the try after `failures` failed ones (RetryWait), in Curio's seconds.
struct CurioRetry {
  int max_tries = 1;
  double wait_s = 0;
};
CurioRetry curio_retry(core::JobKind kind, int failures);

struct LoadGeneratorOptions {
  std::string target;  // the gateway, HOST:PORT (every node)
  scenario::Demand demand;
  double horizon_s = 0;   // scenario seconds of one pass over the demand
  double time_scale = 1;  // scenario seconds per wall second
  std::uint64_t seed = 0;
  int nodes = 2;                         // Curio nodes, each its own connection and counter
  int max_pending = 10;                  // each node's [Cuzk] MaxPending
  ProofMix mix;                          // the kinds the arrivals are
  std::int64_t miner_id = 1000;          // request ids "porep-<miner>-<sector>", ...
  std::int64_t first_sector = 1;         // distinct per run: a request_id seen after its proof
                                         // was delivered means "rejected" to the gateway
  std::size_t vanilla_bytes = 16 << 10;  // random bytes in each task's vanilla proof(s)
  double prove_timeout_s = 1800;         // Curio's ProveTimeout (wall seconds)
  std::function<void(const std::string&)> log;  // failures worth a line; may be empty
};

struct LoadStats {
  std::int64_t arrived = 0;            // tasks so far
  std::int64_t proved = 0;             // tasks whose Prove answered COMPLETED with a proof
  std::int64_t proved_post = 0;        // ... of them PoSt (never the fleet's: [gateway] local_cuzk)
  std::int64_t failed = 0;             // tasks whose tries are spent (Curio gives up on them)
  std::int64_t retries = 0;            // failed tries taken again
  std::int64_t retries_elsewhere = 0;  // ... by another node than the one that failed
  std::int64_t post_refused = 0;       // PoSt tries refused (no [gateway] local_cuzk)
  std::int64_t waiting = 0;            // tasks not being proved now (new, or waiting to retry)
  std::int64_t in_flight = 0;          // Prove calls open now (all nodes)
  int max_open_per_node = 0;           // the most calls one node held open at once
};

// One pass of the demand's arrivals in wall seconds from the generator's start, ascending.
std::vector<double> wall_arrivals(const scenario::Demand& demand, double horizon_s,
                                  double time_scale, std::uint64_t seed);

// The scenario's demand, for the load: a /2 scenario's arrivals; a /1 scenario's constant
// economics.demand_proofs_per_hour over its horizon; nullopt when it states none (unlimited).
std::optional<scenario::Demand> load_demand(const scenario::Scenario& scenario);

class LoadGenerator {
 public:
  explicit LoadGenerator(LoadGeneratorOptions options);
  ~LoadGenerator();  // stop()
  LoadGenerator(const LoadGenerator&) = delete;
  LoadGenerator& operator=(const LoadGenerator&) = delete;

  void start();
  // Cancels calls in flight and joins every thread; idempotent.
  void stop();
  LoadStats stats() const;

 private:
  struct Node;
  struct Task {
    core::JobKind kind = core::JobKind::PorepC2;
    std::int64_t sector = 0;
    int failures = 0;
    int last_node = -1;
    std::chrono::steady_clock::time_point eligible_at{};
  };

  void run_arrivals();
  void run_node_slot(int node);
  // The task `node` claims now (one another node failed first, when there is one), or why it
  // must wait: nullopt with `until` set to when a waiting task becomes eligible.
  std::optional<Task> claim(int node, std::chrono::steady_clock::time_point& until);
  // One try; true when the task is done (proved).
  bool prove(int node, const Task& task);
  void note(const std::string& line) const;

  LoadGeneratorOptions o_;
  std::vector<std::unique_ptr<Node>> nodes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<Task> tasks_;                // waiting (Curio's harmony_task rows not owned)
  std::set<grpc::ClientContext*> calls_;  // in flight, for stop()'s TryCancel
  std::vector<int> open_per_node_;
  LoadStats stats_;
  mutable std::atomic<std::uint64_t> notes_{0};
  std::vector<std::thread> threads_;
};

}  // namespace pf::cli
