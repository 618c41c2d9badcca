// Bench helper: a fleet of one accepted instance in this process — the Manager, its job queue
// and HTTP API over a store, and one agent (its job client, work loop and cuzk prover) proving on
// a cuzk daemon already listening (a fake one: tests/support/fake_cuzk.h) — so a bench can send
// proof requests to a gateway over the queue and time them. Header-only.
//
//   pf::test::FakeCuzk cuzk;
//   auto fleet = pf::bench::InProcessFleet::start({store_url, dir, cuzk.address(), slots, 20});
//   if (!fleet) { std::fprintf(stderr, "%s\n", fleet.error().c_str()); return 2; }
//   auto gateway = pf::gateway::start_gateway((*fleet)->queue(), config);
//   ...
//   gateway->shutdown();  // before the fleet goes: its handlers wait on the queue
//
// Everything runs over loopback, so on a small machine the bench also pays for CPU the real
// deployment spends on other hosts (the agent's, the database's).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tl/expected.hpp>
#include <utility>
#include <vector>

#include "agent/manager_client.h"
#include "agent/prover_cuzk.h"
#include "agent/work_client.h"
#include "agent/work_loop.h"
#include "jobs/job_queue.h"
#include "manager/manager.h"
#include "served_api.h"
#include "store/store.h"
#include "support/accepted_instance.h"
#include "support/unreachable_market.h"
#include "timing.h"

namespace pf::bench {

struct InProcessFleetOptions {
  std::string store_url;          // what serve's --db takes
  std::filesystem::path dir;      // the queue's data_dir and the agent's cache go below it
  std::string cuzk_address;       // HOST:PORT of a cuzk daemon already listening
  int slots = 2;                  // proofs the agent keeps in flight (its plan)
  double seconds_per_proof = 20;  // what the queue's dispatch believes of the instance
};

class InProcessFleet {
 public:
  static tl::expected<std::unique_ptr<InProcessFleet>, std::string> start(
      InProcessFleetOptions options) {
    std::unique_ptr<InProcessFleet> fleet(new InProcessFleet(std::move(options)));
    if (auto started = fleet->start_parts(); !started) return tl::unexpected(started.error());
    return fleet;
  }

  ~InProcessFleet() { stop(); }
  InProcessFleet(const InProcessFleet&) = delete;
  InProcessFleet& operator=(const InProcessFleet&) = delete;

  jobs::JobQueue& queue() { return *queue_; }
  store::Store& store() { return *store_; }

  // Idempotent. Shut the gateways over queue() down first.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    done_ = true;
    if (work_) work_->stop(std::chrono::milliseconds(2000));
    for (auto& t : workers_) t.join();
    workers_.clear();
    if (prover_) prover_->stop();
    if (queue_) queue_->shutdown();
    if (served_) served_->stop();
  }

 private:
  explicit InProcessFleet(InProcessFleetOptions options) : options_(std::move(options)) {}

  tl::expected<void, std::string> start_parts() {
    store_ = store::open_store(options_.store_url);
    manager_ =
        std::make_unique<manager::Manager>(*store_, market_, manager::ManagerConfig{}, epoch_now);
    const auto accepted = testing::insert_accepted_instance(*store_, "bench-fleet", epoch_now());
    const std::int64_t instance = accepted.id;

    jobs::JobQueueConfig qc;
    qc.data_dir = (options_.dir / "data").string();
    jobs::JobQueueHooks hooks;
    hooks.workers = [instance, this] {
      core::WorkerView w;
      w.instance_id = instance;
      w.seconds_per_proof = options_.seconds_per_proof;
      w.slots = options_.slots;
      return std::vector<core::WorkerView>{w};
    };
    hooks.strike = [](std::int64_t, const core::Strike&) {};
    hooks.event = [](std::int64_t, const std::string&) {};
    queue_ = std::make_unique<jobs::JobQueue>(*store_, qc, hooks, epoch_now);
    manager_->attach_jobs(*queue_);

    auto served = ServedApi::start(*manager_, queue_.get());
    if (!served) return tl::unexpected(served.error());
    served_ = std::move(*served);

    // The agent: its job client and work loop, its cuzk prover on the daemon.
    agent_http_ = std::make_unique<agent::ManagerClient>("http://127.0.0.1:" +
                                                         std::to_string(served_->port()));
    agent_http_->set_token(accepted.token);
    agent::WorkClientOptions wo;
    wo.cache_dir = (options_.dir / "agent" / "job-inputs").string();
    wo.lease_wait =
        std::chrono::milliseconds(2000);  // a short long-poll: the end is not waited for
    work_client_ = std::make_unique<agent::WorkClient>(*agent_http_, wo);
    work_ = std::make_unique<agent::WorkLoop>(*work_client_, agent::WorkLoopOptions{});
    agent::CuzkOptions co;
    co.daemon = "";  // the daemon already listens
    co.listen = options_.cuzk_address;
    co.status_listen = "";
    co.c1_path = (options_.dir / "c1.json").string();  // the benchmark input: unused once jobs come
    std::ofstream(co.c1_path) << R"({"SectorNum":1,"Phase1Out":"e30=","SectorSize":34359738368})";
    prover_ = std::make_unique<agent::CuzkProver>(co);
    core::ProverPlan plan;
    plan.proofs_in_flight = options_.slots;
    if (auto started = prover_->start(plan, false); !started) {
      return tl::unexpected("prover: " + started.error());
    }
    work_->set_slots(options_.slots);
    work_->on_heartbeat(true, {});
    for (int i = 0; i < options_.slots; ++i) {
      workers_.emplace_back([this] {
        while (!done_) {
          work_->prove_next(
              std::chrono::milliseconds(250),
              [this](agent::ProofJob job) { return prover_->prove(job); },
              [this] { return done_.load(); });
        }
      });
    }
    return {};
  }

  InProcessFleetOptions options_;
  testing::UnreachableMarket market_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<manager::Manager> manager_;
  std::unique_ptr<jobs::JobQueue> queue_;
  std::unique_ptr<ServedApi> served_;
  std::unique_ptr<agent::ManagerClient> agent_http_;
  std::unique_ptr<agent::WorkClient> work_client_;
  std::unique_ptr<agent::WorkLoop> work_;
  std::unique_ptr<agent::CuzkProver> prover_;
  std::vector<std::thread> workers_;
  std::atomic<bool> done_{false};
  bool stopped_ = false;
};

}  // namespace pf::bench
