// The demo's client load: Curio's PoRep C2 work arriving at the gateway as a scenario's demand
// says (`proverfleet demo`), so the dashboard shows a business serving work.
//
// Arrivals are the scenario's Poisson process (scenario::draw_arrivals over its horizon,
// repeated with a fresh draw after each horizon) in wall time: scenario seconds ÷ time_scale.
// Each arrival becomes one `Prove` call over the generated cuzk.v1 stubs, as Curio sends it: a
// PoRep-shaped SubmitProofRequest (a C1 envelope with random bytes, so inputs differ) with
// request_id "porep-<miner>-<sector>". Like Curio, at most max_pending calls are in flight
// (arrivals beyond wait in the generator, as Curio keeps tasks in its own database); a call
// that ends UNAVAILABLE or DEADLINE_EXCEEDED is retried with the same request_id.
#pragma once

#include <atomic>
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

#include "scenario/scenario.h"

namespace grpc {
class ClientContext;
}

namespace pf::cli {

struct LoadGeneratorOptions {
  std::string target;  // the gateway, HOST:PORT
  scenario::Demand demand;
  double horizon_s = 0;   // scenario seconds of one pass over the demand
  double time_scale = 1;  // scenario seconds per wall second
  std::uint64_t seed = 0;
  int max_pending = 10;                  // Curio's [Cuzk] MaxPending
  std::int64_t miner_id = 1000;          // request_id "porep-<miner>-<sector>"
  std::int64_t first_sector = 1;         // distinct per run: a request_id seen after its proof
                                         // was delivered means "rejected" to the gateway
  std::size_t vanilla_bytes = 16 << 10;  // random bytes in each job's C1 envelope
  double prove_timeout_s = 1800;         // Curio's ProveTimeout (wall seconds)
  std::function<void(const std::string&)> log;  // failures worth a line; may be empty
};

struct LoadStats {
  std::int64_t arrived = 0;    // arrivals so far
  std::int64_t proved = 0;     // calls answered COMPLETED with a proof
  std::int64_t failed = 0;     // answered with an error that is not retried
  std::int64_t retries = 0;    // calls retried (UNAVAILABLE, DEADLINE_EXCEEDED)
  std::int64_t waiting = 0;    // arrived, not yet sent (MaxPending reached)
  std::int64_t in_flight = 0;  // calls waiting for their proof
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
  struct Stub;
  struct Arrival {
    std::int64_t sector = 0;
  };

  void run_arrivals();
  void run_sender();
  void prove(std::int64_t sector);
  void note(const std::string& line) const;

  LoadGeneratorOptions o_;
  std::unique_ptr<Stub> stub_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<Arrival> waiting_;
  std::set<grpc::ClientContext*> calls_;  // in flight, for stop()'s TryCancel
  LoadStats stats_;
  std::vector<std::thread> threads_;
};

}  // namespace pf::cli
