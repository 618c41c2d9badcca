// Integration tests that run market-sim and `proverfleet serve` as processes (the manager end to
// end, replicas): starting them, on the database a test chose. Header-only.
//
//   pf::test::ServeDatabase db(pf::testing::Backend::Postgres);  // or Backend::Sqlite
//   auto sim = pf::test::start_market_sim(kKey);
//   auto manager = pf::test::start_serve({.db = db, .config = path, .vast_url = sim.url,
//                                         .vast_key = kKey});
//   std::string token = pf::test::read_operator_token(db.dir());
//
// Every serve of one ServeDatabase runs in its directory, so the operator token lies there
// whichever the database (SQLite: next to the file; PostgreSQL: serve's working directory).
#pragma once

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/proverfleet_cli.h"
#include "support/store_backends.h"
#include "support/subprocess.h"

namespace pf::test {

// What `serve --db` gets: a SQLite file in a private directory, or a fresh PostgreSQL database
// on the run's test server (trust authentication: no password on the command line).
class ServeDatabase {
 public:
  explicit ServeDatabase(pf::testing::Backend backend) : db_(backend) {
    url_ = backend == pf::testing::Backend::Postgres ? db_.url() : db_.dir().file("pf.db");
  }
  const std::string& url() const { return url_; }
  std::filesystem::path dir() const { return db_.dir().path(); }
  bool is_postgres() const { return db_.is_postgres(); }

 private:
  pf::testing::TestDatabase db_;
  std::string url_;
};

struct MarketSimProcess {
  Subprocess process;
  Url url;
};

// `proverfleet market-sim` over `scenario` (default: scenarios/demo-small.json) on a free port,
// time scale 60, with `api_key`; `extra` flags appended. Throws when it does not start.
inline MarketSimProcess start_market_sim(
    const std::string& api_key, const std::vector<std::string>& extra = {},
    const std::string& scenario = std::string(PF_SOURCE_DIR) + "/scenarios/demo-small.json") {
  SpawnOptions options;
  options.env["PROVERFLEET_MARKET_SIM_API_KEY"] = api_key;
  std::vector<std::string> argv = {PF_BINARY,  "market-sim",  "--scenario",   scenario,
                                   "--listen", "127.0.0.1:0", "--time-scale", "60"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto process = Subprocess::spawn(argv, options);
  auto line = process.wait_for_line("market-sim listening on", std::chrono::seconds(20));
  if (!line) throw std::runtime_error("market-sim did not start: " + process.stderr_text());
  const Url url = parse_url(line->line);
  return {std::move(process), url};
}

struct ServeSpawn {
  const ServeDatabase* db = nullptr;
  std::filesystem::path config = {};  // --config
  Url vast_url = {};                  // market-sim
  std::string vast_key = {};
  // --listen, --grpc-listen (off by default) and the loop intervals; `extra` is appended.
  std::string listen = "127.0.0.1:0";
  std::string grpc_listen = {};
  std::string reconcile_interval = "0.5";
  std::string tick_interval = "0.25";
  std::vector<std::string> extra = {};
  // Also wait until it leads (GET /healthz/leader answers 200): a lone serve takes the lease
  // just after it starts listening, and job routes answer 503 until then.
  bool wait_leading = false;
};

struct ServeProcess {
  Subprocess process;
  Url url;
};

// `proverfleet serve` on spawn.db, run in the database's directory; waits for its "listening"
// line. Throws (with its stderr) when it does not start within `limit`.
inline ServeProcess start_serve(const ServeSpawn& spawn,
                                std::chrono::seconds limit = std::chrono::seconds(30)) {
  if (spawn.db == nullptr) throw std::invalid_argument("start_serve: no database");
  SpawnOptions options;
  options.env["VAST_API_KEY"] = spawn.vast_key;
  options.env["PROVERFLEET_TOKEN"] = std::nullopt;
  options.env["PROVERFLEET_DB"] = std::nullopt;
  options.working_dir = spawn.db->dir().string();
  std::vector<std::string> argv = {PF_BINARY,
                                   "serve",
                                   "--config",
                                   spawn.config.string(),
                                   "--listen",
                                   spawn.listen,
                                   "--grpc-listen",
                                   spawn.grpc_listen,
                                   "--db",
                                   spawn.db->url(),
                                   "--vast-url",
                                   spawn.vast_url.str(),
                                   "--reconcile-interval",
                                   spawn.reconcile_interval,
                                   "--tick-interval",
                                   spawn.tick_interval};
  argv.insert(argv.end(), spawn.extra.begin(), spawn.extra.end());
  auto process = Subprocess::spawn(argv, options);
  auto line = process.wait_for_line("proverfleet serve listening on", limit);
  if (!line) throw std::runtime_error("serve did not start: " + process.stderr_text());
  const Url url = parse_url(line->line);
  if (spawn.wait_leading) {
    const auto by = std::chrono::steady_clock::now() + limit;
    while (true) {
      httplib::Client c(url.host, url.port);
      c.set_connection_timeout(2);
      c.set_read_timeout(5);
      const auto reply = c.Get("/healthz/leader");
      if (reply && reply->status == 200) break;
      if (std::chrono::steady_clock::now() > by) {
        throw std::runtime_error("serve did not lead: " + process.stderr_text());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return {std::move(process), url};
}

}  // namespace pf::test
