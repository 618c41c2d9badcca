// The chaos run. Sequence:
//  1. market-sim (a scenario where every host is healthy, --faults, --spawn-agents) and serve
//     (autopilot on, lifecycle deadlines scaled to the time scale as `proverfleet demo` does)
//     on a fixed port, so agents reach the restarted manager at the URL they were given.
//  2. Run; observe the manager and the market every few seconds.
//  3. SIGKILL serve; wait longer than the heartbeat timeout; restart it on the same database.
//  4. Run; observe.
//  5. Pause the autopilot, destroy every live instance through the operator API, wait.
//  6. Figures from the market while market-sim still holds its state: leaked instances,
//     duplicate rentals, destroyed-but-billing (also sampled during 2-4), false destroys of
//     healthy instances (silence or deadline causes, automatic bad hosts).
//  7. Quiet market-sim's faults (this phase counts orphans, not retries: with faults each create
//     took 1 to 97 s of retries and label reads), deploy two instances through the operator
//     API, wait for their agents (none alive is a failed run: nothing would be tested), SIGKILL
//     market-sim, stop serve, and count the processes of the run still alive (orphans).
//  8. Secrets: the operator token, the market key and every deployment secret market-sim saw,
//     in serve's and market-sim's output, the data directory and any command line.
#include "reliability/chaos.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include "reliability/fleet.h"
#include "reliability/fleet_checks.h"
#include "support/free_port.h"

namespace pf::reliability {
namespace {

std::string fixed0(double v) {
  return std::to_string(static_cast<long long>(std::llround(v)));
}

// The manager settings for a scaled-time fleet, as `proverfleet demo` writes them (deadlines
// divided by the time scale, with floors for real process start-up).
std::string chaos_config(double scale, int heartbeat_timeout_s) {
  auto scaled = [scale](double seconds, double floor_s) {
    return fixed0(std::max(floor_s, seconds / scale));
  };
  std::string t =
      "[jobs]\nproof_check = \"sim\"\n\n"  // market-sim's agents run the sim prover
      "[deploy]\nheartbeat_s = 2\n\n"
      // market-sim's 429s here are drawn at random, not by rate: pacing to vast's limits
      // cannot avoid them and only slows every retry (the demo test and VastMarketSimTest run
      // serve's pacing against market-sim's limits).
      "[market]\nrate_limits = \"off\"\n\n"
      "[autopilot]\nenabled = true\ninterval_s = 5\nmax_instances = 4\n"
      "max_concurrent_benchmarks = 3\nmax_rents_per_decision = 2\n\n[lifecycle]\n";
  t += "boot_loading_max_s = " + scaled(30 * 60, 60) + "\n";
  t += "boot_register_grace_s = " + scaled(20 * 60, 60) + "\n";
  t += "heartbeat_timeout_s = " + std::to_string(heartbeat_timeout_s) + "\n";
  t += "market_unknown_grace_s = " + scaled(10 * 60, 30) + "\n";
  t += "destroy_retry_s = 3\n";
  return t;
}

class ChaosRun {
 public:
  explicit ChaosRun(const ChaosOptions& o)
      : o_(o), dir_("chaos"), began_(std::chrono::steady_clock::now()) {
    dir_.keep = o.keep_dir;
  }

  Figures run() {
    start();
    HealthProbe health(figures_);
    health.start(port_);

    log("running with the autopilot for " + std::to_string(o_.before_kill_s) + " s");
    run_for(o_.before_kill_s);

    log("SIGKILL serve (pid " + std::to_string(serve_->process.pid()) + ")");
    health.pause();
    ::kill(serve_->process.pid(), SIGKILL);
    serve_->process.wait_exit(10s);
    serve_logs_ += all_output(serve_->process);
    serve_.reset();
    sleep_observing_market(o_.serve_down_s);
    start_serve();
    health.resume();
    log("serve restarted on the same database; running for " + std::to_string(o_.after_restart_s) +
        " s");
    run_for(o_.after_restart_s);

    cleanup();
    health.stop();
    market_figures();
    false_destroys();
    scan_command_lines(figures_, secret_map());  // while market-sim and serve still run
    kill_market_sim_with_agents_alive();
    scan_secrets(
        figures_, secret_map(),
        {{"serve's output", serve_logs_}, {"market-sim's output", all_output(sim_->process)}},
        dir_.path() / "data", {"operator.token"});
    log(std::to_string(api_->market_busy_replies()) +
        " requests were answered 503 market busy (allowed)");
    return figures_;
  }

 private:
  // Each line says when (seconds since the run began): where a slow run spent its time.
  void log(const std::string& line) {
    const std::chrono::duration<double> since = std::chrono::steady_clock::now() - began_;
    std::fprintf(stderr, "chaos: [%6.1f s] %s\n", since.count(), line.c_str());
  }

  void start() {
    std::mt19937_64 rng(std::random_device{}());
    char key[40];
    std::snprintf(key, sizeof key, "mkt-%016llx%08llx", static_cast<unsigned long long>(rng()),
                  static_cast<unsigned long long>(rng() & 0xffffffff));
    market_key_ = key;
    fs::create_directories(dir_.path() / "data");
    std::ofstream(dir_.path() / "proverfleet.toml")
        << chaos_config(o_.time_scale, o_.heartbeat_timeout_s);
    const std::string scenario =
        o_.scenario.empty() ? o_.source_dir + "/tests/fixtures/scenarios/chaos-healthy.json"
                            : o_.scenario;
    std::vector<std::string> args = {o_.binary,
                                     "market-sim",
                                     "--scenario",
                                     scenario,
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--time-scale",
                                     fixed0(o_.time_scale),
                                     "--spawn-agents",
                                     "--work-dir",
                                     (dir_.path() / "market-sim").string(),
                                     "--faults",
                                     o_.faults,
                                     "--fault-seed",
                                     std::to_string(rng() % 1000000)};
    auto passing = market_sim_key(o_.binary, market_key_, dir_.path());
    for (auto& a : passing.args) args.push_back(a);
    sim_.emplace(start_service(args, passing.spawn, "market-sim listening on"));
    market_.emplace(sim_->url, market_key_);
    port_ = test::free_port();  // fixed: serve must come back on the same one
    start_serve();
    api_.emplace(figures_, serve_->url, read_operator_token(dir_.path() / "data"));
  }

  void start_serve() {
    test::SpawnOptions opt;
    opt.env["VAST_API_KEY"] = market_key_;
    opt.env["PROVERFLEET_TOKEN"] = std::nullopt;
    // One flag and its value per pair reads better than one word per line.
    // clang-format off
    serve_.emplace(
        start_service({o_.binary, "serve", "--config", (dir_.path() / "proverfleet.toml").string(),
                       "--listen", "127.0.0.1:" + std::to_string(port_), "--grpc-listen",
                       "127.0.0.1:0", "--db", (dir_.path() / "data" / "pf.db").string(),
                       "--vast-url", sim_->url.str(),
                       "--params-manifest", sim_->url.str() + "/proverfleet-sim/params.json",
                       "--autopilot", "true", "--reconcile-interval", "2", "--tick-interval", "1"},
                      opt, "proverfleet serve listening on"));
    // clang-format on
  }

  // Runs for `seconds`, observing every 3 s and checking both services are alive.
  void run_for(int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      check_alive();
      observe(true);
      std::this_thread::sleep_for(3s);
    }
  }

  void sleep_observing_market(int seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < end) {
      observe(false);
      std::this_thread::sleep_for(3s);
    }
  }

  void check_alive() {
    if (serve_ && !serve_->process.running()) {
      figures_.finding(Figure::Crashes,
                       "serve exited on its own: " + tail(serve_->process.stderr_text()));
      serve_logs_ += all_output(serve_->process);
      start_serve();
    }
    if (!sim_->process.running()) {
      figures_.finding(Figure::Crashes,
                       "market-sim exited on its own: " + tail(sim_->process.stderr_text()));
      throw std::runtime_error("market-sim died; the chaos run cannot go on");
    }
  }

  static std::string tail(const std::string& s) {
    return s.size() > 300 ? s.substr(s.size() - 300) : s;
  }

  // Rows first, then the market: a row destroyed before the list was taken cannot still be
  // listed by it unless the destroy never happened.
  void observe(bool with_manager) {
    json rows = json::array();
    if (with_manager) {
      auto r = api_->call("GET", "/api/v1/instances?all=true");
      if (r && r->first == 200 && r->second.is_array()) rows = r->second;
    }
    std::vector<json> listed;
    try {
      listed = market_->instances();
    } catch (const std::exception& e) {
      log(std::string("market list failed: ") + e.what());
      return;
    }
    check_market(rows, listed);
  }

  void check_market(const json& rows, const std::vector<json>& listed) {
    for (const auto& i : listed) {
      if (!ours(i)) continue;
      const auto env = env_of(i);
      if (auto it = env.find("PROVERFLEET_SECRET"); it != env.end())
        deployment_secrets_.insert(it->second);
    }
    record(check_observation(rows, listed));
  }

  // Counts each finding's key once over the whole run.
  void record(const std::vector<Finding>& findings) {
    for (const auto& f : findings) {
      if (seen_.insert(std::to_string(static_cast<int>(f.figure)) + ":" + f.key).second) {
        figures_.finding(f.figure, f.what);
      }
    }
  }

  void cleanup() {
    log("pausing the autopilot and destroying every instance through the manager");
    api_->call("POST", "/api/v1/autopilot", json{{"paused", true}});
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(o_.cleanup_timeout_s);
    std::set<std::int64_t> asked;
    while (std::chrono::steady_clock::now() < end) {
      check_alive();
      const json rows = api_->get("/api/v1/instances?all=true");
      int live = 0;
      for (const auto& row : rows) {
        if (row.value("state", "") == "destroyed") continue;
        ++live;
        const std::int64_t id = row.value("id", std::int64_t{0});
        if (row.value("state", "") != "destroying" && asked.insert(id).second) {
          api_->call("DELETE", "/api/v1/instances/" + std::to_string(id));
        }
      }
      std::vector<json> listed;
      try {
        listed = market_->instances();
      } catch (const std::exception&) {
        continue;
      }
      check_market(rows, listed);
      const auto ours_listed = std::count_if(listed.begin(), listed.end(), ours);
      if (live == 0 && ours_listed == 0) {
        log("every instance destroyed and gone from the market");
        return;
      }
      std::this_thread::sleep_for(2s);
    }
  }

  void market_figures() {
    const json rows = api_->get("/api/v1/instances?all=true");
    const auto listed = market_->instances();
    check_market(rows, listed);
    record(leaked_instances(rows, listed));
  }

  void false_destroys() {
    const json rows = api_->get("/api/v1/instances?all=true");
    summarise(rows);
    record(pf::reliability::false_destroys(rows, api_->get("/api/v1/bad-hosts")));
  }

  // What the run did, so its zeros can be read: how many rentals, how far they got, and why
  // they ended.
  void summarise(const json& rows) {
    if (!rows.is_array()) return;
    int judged = 0;
    std::map<std::string, int> reasons;
    for (const auto& row : rows) {
      if (row.contains("verdict") && row["verdict"].is_object()) ++judged;
      std::string reason = row.value("destroy_reason", std::string());
      if (reason.size() > 48) reason = reason.substr(0, 48) + "...";
      if (!reason.empty()) ++reasons[reason];
    }
    std::string line = std::to_string(rows.size()) + " rentals, " + std::to_string(judged) +
                       " with a benchmark verdict; destroy reasons:";
    for (const auto& [reason, n] : reasons) line += " [" + reason + "] x" + std::to_string(n);
    log(line);
  }

  // Waits until no process mentions `needle` (a quarter-second poll: each look reads /proc).
  static void gone_within(const std::string& needle, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!processes_mentioning(needle).empty() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(250ms);
    }
  }

  void kill_market_sim_with_agents_alive() {
    // Two fresh instances so agents are alive when market-sim dies.
    log("quieting the market's faults; deploying two instances to kill market-sim under their "
        "agents");
    market_->set_faults("none");
    const json offers = api_->get("/api/v1/offers?limit=20");
    int deployed = 0;
    for (const auto& offer : offers.is_array() ? offers : json::array()) {
      if (deployed == 2) break;
      for (int attempt = 0; attempt < 5; ++attempt) {
        auto r = api_->call("POST", "/api/v1/instances",
                            json{{"offer_id", offer.value("id", std::int64_t{0})}});
        if (r && r->first == 201) {
          ++deployed;
          break;
        }
        if (r && r->first >= 400 && r->first < 500 && r->first != 429) break;
        std::this_thread::sleep_for(1s);
      }
    }
    log(std::to_string(deployed) + " instances deployed; waiting for their agents");
    const std::string work = (dir_.path() / "market-sim").string();
    int agents = 0;
    for (int i = 0; i < 60 && agents == 0; ++i) {
      std::this_thread::sleep_for(1s);
      for (pid_t pid : processes_mentioning(work)) {
        if (command_of(pid).find(" agent") != std::string::npos) ++agents;
      }
    }
    log(std::to_string(deployed) + " instances deployed, " + std::to_string(agents) +
        " agent processes alive; SIGKILL market-sim");

    ::kill(sim_->process.pid(), SIGKILL);
    sim_->process.wait_exit(10s);
    // Its agents notice and exit on their own; whatever is still alive after the bounds below
    // is an orphan.
    gone_within(work, 10s);
    serve_->process.terminate();
    serve_logs_ += all_output(serve_->process);
    gone_within(dir_.path().string(), 5s);
    for (pid_t pid : processes_mentioning(dir_.path().string())) {
      figures_.finding(Figure::OrphanProcesses,
                       "pid " + std::to_string(pid) + " still alive: " + command_of(pid));
      ::kill(pid, SIGKILL);  // ours: the run started it (its environment names the run directory)
    }
    if (agents == 0) {
      throw std::runtime_error("no agent came alive within 60 s of " + std::to_string(deployed) +
                               " deploys: the orphan check tested nothing");
    }
  }

  std::map<std::string, std::string> secret_map() const {
    std::map<std::string, std::string> s = {{"operator token", api_->token()},
                                            {"market API key", market_key_}};
    int n = 0;
    for (const auto& secret : deployment_secrets_)
      s["deployment secret #" + std::to_string(++n)] = secret;
    return s;
  }

  ChaosOptions o_;
  RunDir dir_;
  std::chrono::steady_clock::time_point began_;
  Figures figures_;
  std::string market_key_;
  int port_ = 0;
  std::optional<Service> sim_;
  std::optional<Service> serve_;
  std::optional<MarketView> market_;
  std::optional<OperatorApi> api_;
  std::string serve_logs_;
  std::set<std::string> deployment_secrets_;
  std::set<std::string> seen_;  // figure:key of every finding counted
};

}  // namespace

Figures run_chaos(const ChaosOptions& options) {
  ChaosRun run(options);
  return run.run();
}

}  // namespace pf::reliability
