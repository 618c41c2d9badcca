// heartbeat_vs_bare_ratio: sustained agent heartbeat + event ingestion (authenticated,
// persisted to a file-backed SQLite store) from 200 concurrent simulated agents, divided by the
// throughput of a bare handler returning 200 on the same server stack, in the same process.
// Target ≥ 0.5. Also prints p99 latencies.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "manager/http_api.h"
#include "manager/manager.h"
#include "net/http_server.h"
#include "store/store.h"
#include "support/unreachable_market.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

using pf::testing::UnreachableMarket;

// Requests of one kind, summed over rounds.
struct Tally {
  double seconds = 0;
  std::size_t requests = 0;
  std::size_t failures = 0;
  std::vector<double> latencies_ms;

  // Answered requests per second: a refused connection is not throughput.
  double throughput() const { return static_cast<double>(requests - failures) / seconds; }
  double p99_ms() {
    if (latencies_ms.empty()) return 0;
    std::sort(latencies_ms.begin(), latencies_ms.end());
    return latencies_ms[std::min(latencies_ms.size() - 1, latencies_ms.size() * 99 / 100)];
  }
};

// `agents` threads each send requests built by `next(agent)` for `seconds`; adds to `tally`.
template <typename Next>
void load(int port, int agents, double seconds, Next next, Tally& tally) {
  std::vector<std::thread> threads;
  std::mutex mu;
  std::atomic<std::size_t> failures{0};
  auto start = Clock::now();
  auto end = start + std::chrono::duration<double>(seconds);
  for (int a = 0; a < agents; ++a) {
    threads.emplace_back([&, a] {
      httplib::Client c("127.0.0.1", port);
      // One connection per request: keep-alive races the server closing idle connections.
      c.set_keep_alive(false);
      c.set_read_timeout(30, 0);
      std::vector<double> mine;
      while (Clock::now() < end) {
        auto [path, token, body] = next(a);
        httplib::Headers h{{"Authorization", "Bearer " + token}};
        auto t0 = Clock::now();
        auto r = c.Post(path.c_str(), h, body, "application/json");
        mine.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        if (!r || r->status != 200) {
          if (failures++ < 3) {
            std::fprintf(stderr, "# failed %s: %s\n", path.c_str(),
                         r ? (std::to_string(r->status) + " " + r->body).c_str()
                           : httplib::to_string(r.error()).c_str());
          }
        }
      }
      std::lock_guard lock(mu);
      tally.latencies_ms.insert(tally.latencies_ms.end(), mine.begin(), mine.end());
      tally.requests += mine.size();
    });
  }
  for (auto& t : threads) t.join();
  tally.seconds += std::chrono::duration<double>(Clock::now() - start).count();
  tally.failures += failures;
}

}  // namespace

int main() {
  const int agents = 200;
  const int rounds = 4;
  const double round_seconds = 1;
  auto dir = std::filesystem::temp_directory_path() / ("pf-hb-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto store = pf::store::open_store((dir / "bench.db").string());
  UnreachableMarket market;
  pf::manager::ManagerConfig cfg;
  pf::manager::Manager manager(*store, market, cfg, [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  });

  // 200 instances already registered and fetching parameters.
  std::vector<std::string> tokens;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (int a = 0; a < agents; ++a) {
    pf::core::InstanceRecord r;
    r.deployment_id = "bench-" + std::to_string(a);
    r.offer.id = 1000 + a;
    r.offer.machine_id = 5000 + a;
    r.offer.gpu_name = "RTX 4090";
    r.offer.num_gpus = 1;
    r.offer.dph_total = 0.4;
    r.state = pf::core::InstanceState::FetchingParams;
    r.created_at = r.state_since = r.last_heartbeat_at = now;
    tokens.push_back(pf::manager::random_token());
    r.token_hash = pf::manager::hash_token(tokens.back());
    store->insert_instance(r);
  }

  pf::net::HttpServer server;
  pf::manager::ApiOptions opts;
  opts.operator_token_hash = pf::manager::hash_token("bench-operator");
  // Every simulated agent connects from 127.0.0.1: the per-address cap must admit them all.
  opts.http.max_connections_per_address = opts.http.max_connections;
  pf::manager::HttpApi api(manager, opts);
  api.mount(server);
  // On the agents' lane: the same stack, minus authentication and the store.
  server.route(
      "POST", "/bare",
      [](const pf::net::HttpRequest&, pf::net::HttpResponse& res) {
        res.set_content("{}", "application/json");
      },
      "agent");
  // The server the manager serves with (its listen backlog matters for 200 agents at once).
  auto bound = server.bind("127.0.0.1", 0);
  if (!bound) {
    std::fprintf(stderr, "cannot listen on 127.0.0.1: %s\n", bound.error().c_str());
    return 2;
  }
  const int port = *bound;
  server.start();

  const json heartbeat = {{"phase", "fetching_params"},
                          {"params", {{"done", 1e9}, {"total", 47e9}, {"bytes_per_s", 1e8}}},
                          {"prover", {{"in_flight", 0}, {"completed", 0}, {"failed", 0}}},
                          {"gpus", json::array({{{"util", 0}}})}};
  const std::string hb_body = heartbeat.dump();
  // Each agent alternates heartbeat and event batch (one warm-up proof), across rounds.
  std::vector<std::int64_t> sent(agents, 0);
  std::vector<std::int64_t> seq(agents, 0);
  auto agent_request = [&](int a) {
    if (sent[a]++ % 2 == 0) {
      return std::make_tuple(std::string("/api/v1/agent/heartbeat"), tokens[a], hb_body);
    }
    ++seq[a];
    json ev = {{"events", json::array({{{"seq", seq[a]},
                                        {"type", "proof_done"},
                                        {"phase", "warmup"},
                                        {"seconds", 300},
                                        {"at", now + static_cast<double>(seq[a])}}})}};
    return std::make_tuple(std::string("/api/v1/agent/events"), tokens[a], ev.dump());
  };
  auto bare_request = [&](int a) {
    return std::make_tuple(std::string("/bare"), tokens[a], hb_body);
  };

  // Short rounds, alternating, summed per kind: the machine is shared, and a change of its load
  // between two long phases would move the ratio more than what is measured here.
  Tally bare;
  Tally agent;
  for (int round = 0; round < rounds; ++round) {
    load(port, agents, round_seconds, bare_request, bare);
    load(port, agents, round_seconds, agent_request, agent);
  }
  server.stop();
  std::filesystem::remove_all(dir);

  std::printf("heartbeat_vs_bare_ratio: %.3f\n", agent.throughput() / bare.throughput());
  std::printf("heartbeat_p99_ms: %.1f\n", agent.p99_ms());
  std::printf("bare_p99_ms: %.1f\n", bare.p99_ms());
  std::printf(
      "# %d agents, %d rounds of %.0f s each: agent %.0f req/s (%zu failed), bare %.0f req/s "
      "(%zu failed)\n",
      agents, rounds, round_seconds, agent.throughput(), agent.failures, bare.throughput(),
      bare.failures);
  return agent.failures == 0 && bare.failures == 0 ? 0 : 1;
}
