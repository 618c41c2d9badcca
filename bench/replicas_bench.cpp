// replicas_two_vs_one_ratio: proof jobs per second the fleet carries when Curio's calls come to two
// serve replicas sharing one PostgreSQL database — half to the leader's gateway, half to a
// follower's, which relays each call to the leader (gateway/leader_proxy.h) — over the same
// calls all sent to one replica. jobs_per_s_one_replica / jobs_per_s_two_replicas: the rates.
//
// What it measures is the control plane (issue 29: what a second replica costs or gives): the
// fake cuzk proves at once, so a job's time is the call, the input written to the database, the
// lease, the agent's download, the proof's report and the reply. The leader keeps the one queue
// in either case (followers relay, they do not dispatch), so two replicas buy availability, not
// throughput; the ratio shows what the relay hop costs. Both replicas' gateways, the queue, the
// agent and the database share this machine's cores, so the relay's CPU is paid here too,
// where a deployment pays it on the follower's host.
//
// kClients threads (two Curio nodes at Curio's default MaxPending of 10, deps/config/types.go)
// send kJobs PoRep-shaped Prove calls with kInputBytes inputs; the rounds alternate one, two,
// one, … and each rate is the best of kRounds.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway/gateway_server.h"
#include "support/fake_cuzk.h"
#include "support/in_process_fleet.h"
#include "support/pg_server.h"
#include "support/porep_calls.h"
#include "support/timing.h"

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kInputBytes = 1'000'000;
constexpr int kJobs = 120;
constexpr int kClients = 20;
constexpr int kSlots = 8;
constexpr int kRounds = 3;
constexpr const char* kReplicaToken = "bench-replicas-token";

// kJobs calls from kClients threads, thread t calling ports[t % ports.size()]; jobs per second,
// or < 0 when a call failed.
double jobs_per_s(const std::vector<int>& ports, const std::string& round,
                  const std::vector<cuzk::v1::ProveRequest>& requests) {
  std::vector<std::unique_ptr<cuzk::v1::ProvingEngine::Stub>> stubs;
  for (int port : ports) {
    stubs.push_back(pf::bench::proving_stub("127.0.0.1:" + std::to_string(port), 64 << 20));
  }
  std::atomic<int> next{0}, failed{0};
  const auto start = pf::bench::SteadyClock::now();
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      auto& stub = *stubs[static_cast<std::size_t>(t) % stubs.size()];
      for (int i = next++; i < kJobs; i = next++) {
        cuzk::v1::ProveRequest req = requests[static_cast<std::size_t>(i)];
        req.mutable_submit()->set_request_id("porep-" + round + "-" + std::to_string(i));
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
        cuzk::v1::ProveResponse resp;
        const auto st = stub.Prove(&ctx, req, &resp);
        if (!st.ok() || resp.result().status() != cuzk::v1::AwaitProofResponse::COMPLETED ||
            resp.result().proof().size() != 1920) {
          std::fprintf(stderr, "%s job %d: %s %s\n", round.c_str(), i, st.error_message().c_str(),
                       resp.result().error_message().c_str());
          ++failed;
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  const double s = pf::bench::seconds_since(start);
  return failed.load() == 0 ? kJobs / s : -1;
}

}  // namespace

int main() {
  spdlog::set_level(spdlog::level::warn);  // the figures alone on stdout
  const fs::path dir =
      fs::temp_directory_path() / ("pf-replicas-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  int status = 0;
  try {
    std::vector<cuzk::v1::ProveRequest> requests;
    for (int j = 0; j < kJobs; ++j)
      requests.push_back(pf::bench::porep_prove_request(j, kInputBytes, 7));
    pf::test::PgServer server;
    pf::test::FakeCuzk cuzk;  // proves at once
    auto fleet = pf::bench::InProcessFleet::start(
        {server.url("postgres"), dir, cuzk.address(), kSlots, 1.0});
    if (!fleet) {
      std::fprintf(stderr, "%s\n", fleet.error().c_str());
      return 2;
    }
    pf::gateway::GatewayConfig gc;
    gc.listen = "127.0.0.1:0";
    gc.max_input_bytes = 64 << 20;
    gc.curio_nodes = 2;
    // The leader: a replica's gateway that serves the queue (it relays nothing while it does).
    auto leader = pf::gateway::start_replica_gateway(
        gc, {"replica-a",
             [] { return tl::expected<std::string, std::string>(tl::unexpect, "this one leads"); },
             kReplicaToken});
    if (!leader) {
      std::fprintf(stderr, "leader gateway: %s\n", leader.error().c_str());
      return 2;
    }
    (*leader)->serve_queue((*fleet)->queue());
    const std::string leader_address = "127.0.0.1:" + std::to_string((*leader)->port());
    auto follower = pf::gateway::start_replica_gateway(
        gc, {"replica-b",
             [leader_address] { return tl::expected<std::string, std::string>(leader_address); },
             kReplicaToken});
    if (!follower) {
      std::fprintf(stderr, "follower gateway: %s\n", follower.error().c_str());
      return 2;
    }
    double one = -1, two = -1;
    for (int round = 0; round < kRounds && status == 0; ++round) {
      const double a = jobs_per_s({(*leader)->port()}, "one-" + std::to_string(round), requests);
      const double b = jobs_per_s({(*leader)->port(), (*follower)->port()},
                                  "two-" + std::to_string(round), requests);
      if (a < 0 || b < 0) status = 1;
      one = std::max(one, a);
      two = std::max(two, b);
    }
    const auto relayed = (*follower)->relayed();
    (*follower)->shutdown();
    (*leader)->shutdown();
    (*fleet)->stop();
    if (status == 0 && relayed < static_cast<std::uint64_t>(kJobs / 4 * kRounds)) {
      std::fprintf(stderr, "the follower relayed only %llu calls\n",
                   static_cast<unsigned long long>(relayed));
      status = 1;
    }
    if (status == 0) {
      pf::bench::print_figure("jobs_per_s_one_replica", one, 1);
      pf::bench::print_figure("jobs_per_s_two_replicas", two, 1);
      pf::bench::print_figure("replicas_two_vs_one_ratio", two / one, 3);
      std::printf(
          "# %d jobs of %.1f MB per round from %d clients, best of %d; PostgreSQL (fsync off); "
          "%llu calls relayed by the follower\n",
          kJobs, kInputBytes / 1e6, kClients, kRounds, static_cast<unsigned long long>(relayed));
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "replicas_bench: %s\n", error.what());
    status = 1;
  }
  fs::remove_all(dir);
  return status;
}
