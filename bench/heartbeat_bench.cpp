// heartbeat_vs_bare_ratio (SQLite) and heartbeat_vs_bare_ratio_pg (PostgreSQL): sustained agent
// heartbeat + event ingestion (authenticated, persisted to the store serve opens for --db) from
// 200 concurrent simulated agents, divided by the throughput of a bare handler returning 200 on
// the same server stack, in the same process. The stores: a SQLite file, and a PostgreSQL
// database on a local server this bench starts (tests/support/pg_server.h: initdb in a temp dir,
// fsync off). Target ≥ 0.5 on each. Also prints p99 latencies.
//
// Usage: heartbeat_bench [--db URL] [--rounds N] [--agent-threads N]
//   --db: only that store (its suffix from the URL); --rounds: bare/agent round pairs (4);
//   --agent-threads: the agents' lane of the API (its default otherwise).
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "manager/http_api.h"
#include "manager/manager.h"
#include "net/http_server.h"
#include "store/store.h"
#include "support/bench_stores.h"
#include "support/temp_dir.h"
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

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Figures {
  Tally agent;
  Tally bare;
};

struct Options {
  std::string db;  // empty: both stores
  int rounds = 4;
  std::optional<std::size_t> agent_threads;
};

// Alternating bare and agent rounds against a Manager over the store at `db`.
Figures measure(const std::string& db, const Options& o) {
  const int rounds = o.rounds;
  const int agents = 200;
  const double round_seconds = 1;
  auto store = pf::store::open_store(db);
  UnreachableMarket market;
  pf::manager::ManagerConfig cfg;
  pf::manager::Manager manager(*store, market, cfg, epoch_now);

  // 200 instances already registered and fetching parameters.
  std::vector<std::string> tokens;
  const double now = epoch_now();
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
  if (o.agent_threads) opts.agent_lane_threads = *o.agent_threads;
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
  if (!bound) throw std::runtime_error("cannot listen on 127.0.0.1: " + bound.error());
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
  Figures f;
  for (int round = 0; round < rounds; ++round) {
    load(port, agents, round_seconds, bare_request, f.bare);
    load(port, agents, round_seconds, agent_request, f.agent);
  }
  server.stop();
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--db" && has_value) {
      opt.db = argv[++i];
    } else if (arg == "--rounds" && has_value && std::atoi(argv[i + 1]) > 0) {
      opt.rounds = std::atoi(argv[++i]);
    } else if (arg == "--agent-threads" && has_value && std::atoi(argv[i + 1]) > 0) {
      opt.agent_threads = static_cast<std::size_t>(std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: heartbeat_bench [--db URL] [--rounds N] [--agent-threads N]\n");
      return 2;
    }
  }
  const int rounds = opt.rounds;
  pf::testing::TempDir dir("pf-hb-bench");
  int failed_requests = 0;
  const int status = pf::bench::on_bench_stores(
      "heartbeat_bench", opt.db, dir, [&](const std::string& suffix, const std::string& url) {
        Figures f = measure(url, opt);
        // SQLite's figure keeps the name it had before PostgreSQL was measured too.
        const std::string tail = suffix == "sqlite" ? "" : "_" + suffix;
        std::printf("heartbeat_vs_bare_ratio%s: %.3f\n", tail.c_str(),
                    f.agent.throughput() / f.bare.throughput());
        std::printf("heartbeat_p99_ms%s: %.1f\n", tail.c_str(), f.agent.p99_ms());
        std::printf("bare_p99_ms%s: %.1f\n", tail.c_str(), f.bare.p99_ms());
        std::printf(
            "# %s: 200 agents, %d rounds of 1 s each: agent %.0f req/s (%zu failed), bare %.0f "
            "req/s (%zu failed)\n",
            suffix.c_str(), rounds, f.agent.throughput(), f.agent.failures, f.bare.throughput(),
            f.bare.failures);
        std::fflush(stdout);
        if (f.agent.failures != 0 || f.bare.failures != 0) failed_requests = 1;
      });
  return status != 0 ? status : failed_requests;
}
