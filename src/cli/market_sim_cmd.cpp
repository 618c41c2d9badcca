// `proverfleet market-sim`: serve a scenario's market over the vast.ai REST API. A test double
// and demo backend: nothing real is rented, instances only follow the scenario's truth.
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/secrets.h"
#include "cli/serving.h"
#include "core/text.h"
#include "market/rate_limits.h"
#include "market_sim/agent_spawner.h"
#include "market_sim/faults.h"
#include "market_sim/market_sim.h"
#include "market_sim/market_sim_server.h"
#include "market_sim/param_stand_ins.h"
#include "scenario/scenario.h"

namespace pf::cli {
namespace {

constexpr const char* kApiKeyEnv = "PROVERFLEET_MARKET_SIM_API_KEY";
constexpr const char* kApiKeyFrom = "$PROVERFLEET_MARKET_SIM_API_KEY or --api-key-file PATH";

// The key clients must send, from the file or the environment (never a flag value); none
// when neither is given.
std::optional<std::string> market_sim_api_key(const std::optional<std::string>& key_file) {
  if (key_file) return read_secret_file(*key_file, "--api-key-file");
  return secret_from_env(kApiKeyEnv);
}

struct MarketSimCliOptions {
  std::string scenario_path;
  std::string listen = "127.0.0.1:0";
  double time_scale = 1;
  double start_h = 0;
  std::string faults;
  std::uint64_t fault_seed = 1;
  std::string rate_limits = "off";
  RefusedSecretFlag api_key_flag{"--api-key", kApiKeyFrom, std::nullopt};
  std::optional<std::string> api_key_file;
  double balance_usd = 1000;
  bool quiet = false;
  bool spawn_agents = false;
  std::string work_dir;
  double param_stand_in_mib = 4;
  double param_min_kib_s = 64;
};

// The default work directory: fresh, and gone when market-sim exits (with everything its
// instances wrote).
class TempWorkDir {
 public:
  TempWorkDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "proverfleet-market-sim-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw CommandFailed("cannot create a work directory under " +
                          std::filesystem::temp_directory_path().string() + ": " +
                          std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempWorkDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempWorkDir(const TempWorkDir&) = delete;
  TempWorkDir& operator=(const TempWorkDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The directory of the running executable, so that an onstart's "proverfleet" is this binary.
std::string own_bin_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw CommandFailed("--spawn-agents: cannot find this executable: " + ec.message());
  return exe.parent_path().string();
}

std::string money(double usd) {
  return "$" + core::fixed(usd, 2);
}

// Numeric flags were range-checked by their validators (cli/flag_checks.h) before this runs.
void run_market_sim(const MarketSimCliOptions& o) {
  auto listen = parse_listen(o.listen);
  if (!listen) {
    throw CommandFailed(
        "--listen: expected HOST:PORT (e.g. 127.0.0.1:8700, port 0 = any free), "
        "got \"" +
        o.listen + "\"");
  }
  check_refused_secret_flag(o.api_key_flag);
  const std::optional<std::string> api_key = market_sim_api_key(o.api_key_file);
  auto faults = market_sim::parse_fault_spec(o.faults);
  if (!faults) throw CommandFailed("--faults: " + faults.error());
  auto rate_limits = market::parse_rate_limits(o.rate_limits);
  if (!rate_limits) throw CommandFailed("--rate-limits: " + rate_limits.error());
  if (!o.work_dir.empty() && !o.spawn_agents) {
    throw CommandFailed("--work-dir holds the spawned agents' files: it needs --spawn-agents");
  }
  auto scenario = scenario::load_scenario(o.scenario_path);
  if (!scenario) throw CommandFailed(scenario.error());
  const std::string scenario_name = scenario->name;
  const std::size_t offer_count = scenario->offers.size();
  const double horizon_h = scenario->hours;

  market_sim::ParamStandInOptions param_options;
  param_options.total_mib = o.param_stand_in_mib;
  param_options.real_bytes = scenario->params_bytes;
  param_options.time_scale = o.time_scale;
  param_options.min_bytes_per_s = o.param_min_kib_s * 1024;
  auto stand_ins = market_sim::ParamStandIns::make(param_options);
  if (!stand_ins)
    throw CommandFailed("parameter stand-ins (--param-stand-in-mib): " + stand_ins.error());
  auto params = std::make_shared<const market_sim::ParamStandIns>(std::move(*stand_ins));

  BlockedStopSignals stop_signals;
  ::signal(SIGPIPE, SIG_IGN);  // a client hanging up must not kill the server

  const auto wall_start = std::chrono::steady_clock::now();
  const double time_scale = o.time_scale;
  const double start_h = o.start_h;
  auto clock_h = [wall_start, time_scale, start_h] {
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - wall_start;
    return start_h + elapsed.count() * time_scale / 3600.0;
  };

  market_sim::MarketSimOptions sim_options;
  sim_options.start_balance_usd = o.balance_usd;
  sim_options.epoch_s_per_h = 3600.0 / time_scale;
  const double epoch_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  sim_options.epoch_at_zero_s = epoch_now - start_h * sim_options.epoch_s_per_h;

  auto log_mutex = std::make_shared<std::mutex>();
  auto log = [log_mutex, clock_h](const std::string& line) {
    std::lock_guard lock(*log_mutex);
    std::cerr << "[t=" << core::fixed(clock_h(), 3) << "h] " << line << "\n";
  };

  market_sim::MarketSimServerOptions server_options;
  server_options.api_key = api_key;
  server_options.faults = *faults;
  server_options.fault_seed = o.fault_seed;
  server_options.rate_limits = *rate_limits;
  server_options.clock_h = clock_h;
  server_options.params = params;
  if (!o.quiet) server_options.log = log;

  // Declared before the server so that they outlive its threads.
  std::optional<TempWorkDir> temp_work_dir;
  // The server, once made, for the spawner's question whether a container is stopped (the
  // spawner is stopped before the server goes).
  std::atomic<const market_sim::MarketSimServer*> server_for_spawner{nullptr};
  std::unique_ptr<market_sim::AgentSpawner> spawner;
  std::string work_dir = o.work_dir;
  if (o.spawn_agents) {
    if (work_dir.empty()) {
      temp_work_dir.emplace();
      work_dir = temp_work_dir->path();
    } else {
      std::error_code ec;
      std::filesystem::create_directories(work_dir, ec);
      if (ec) throw CommandFailed("--work-dir " + work_dir + ": " + ec.message());
    }
    market_sim::AgentSpawnerOptions spawn_options;
    spawn_options.work_dir = work_dir;
    spawn_options.bin_dir = own_bin_dir();
    if (const char* path = std::getenv("PATH"); path != nullptr && *path != '\0') {
      spawn_options.path_after_bin_dir = path;
    }
    spawn_options.time_scale = time_scale;
    spawn_options.seed = scenario->seed;
    spawn_options.clock_h = clock_h;
    spawn_options.log = log;  // even with --quiet: a handful of lines per instance
    spawn_options.container_stopped = [&server_for_spawner](std::int64_t id) {
      const market_sim::MarketSimServer* server = server_for_spawner.load();
      return server != nullptr && server->container_stopped(id);
    };
    spawner = std::make_unique<market_sim::AgentSpawner>(std::move(spawn_options));
    server_options.on_created = [s = spawner.get()](const market_sim::InstanceLaunch& launch,
                                                    const scenario::ScenarioOffer& offer) {
      s->on_created(launch, offer);
    };
    server_options.on_destroyed = [s = spawner.get()](std::int64_t id) { s->on_destroyed(id); };
  }

  market_sim::MarketSimServer server(market_sim::MarketSim(std::move(*scenario), sim_options),
                                     server_options);
  server_for_spawner = &server;
  // However this function leaves, the spawner's thread ends before the server it asks goes.
  struct SpawnerStopsFirst {
    market_sim::AgentSpawner* spawner;
    ~SpawnerStopsFirst() {
      if (spawner != nullptr) spawner->stop_all();
    }
  } spawner_stops_first{spawner.get()};
  auto port = server.bind(listen->host, listen->port);
  if (!port) throw CommandFailed(port.error());

  const std::string shown_host =
      listen->host.find(':') != std::string::npos ? "[" + listen->host + "]" : listen->host;
  std::cout << "market-sim listening on http://" << shown_host << ":" << *port << std::endl;
  const auto at_start = server.status();
  std::cout << "scenario " << scenario_name << ": " << offer_count << " offers ("
            << at_start.listed_offers << " listed now), horizon " << core::fixed(horizon_h, 1)
            << " h\n"
            << "time: scale " << time_scale << " (1 wall second = " << time_scale
            << " scenario seconds), starting at hour " << start_h << "\n"
            << "auth: "
            << (server_options.api_key ? "Bearer key required (offer search is open)" : "none")
            << "\n"
            << "faults: " << faults->to_string();
  if (faults->any()) std::cout << " (seed " << o.fault_seed << ")";
  std::cout << "\nrate limits (per caller, wall clock): " << rate_limits->describe();
  std::cout << "\nbalance: " << money(o.balance_usd) << "\n";
  std::cout << "params: " << params->files().size() << " stand-in files, "
            << core::fixed(static_cast<double>(params->total_bytes()) / (1024.0 * 1024), 1)
            << " MiB, manifest at http://" << shown_host << ":" << *port
            << "/proverfleet-sim/params.json\n";
  if (spawner) {
    std::cout << "agents: each instance's onstart runs after its boot time (work dir " << work_dir
              << ")" << std::endl;
  } else {
    std::cout << "agents: not spawned (--spawn-agents runs each instance's onstart)" << std::endl;
  }

  std::atomic<bool> finished{false};
  bool served_ok = true;
  std::thread serving([&] {
    served_ok = server.serve();
    finished = true;
  });
  int signal_received = 0;
  while (!finished && signal_received == 0) {
    signal_received = stop_signals.wait(std::chrono::milliseconds(200));
  }
  // Agents first: the server's stop can wait seconds for idle keep-alive connections, and no
  // agent may outlive market-sim, even one killed meanwhile. Creates arriving after this
  // start nothing.
  if (spawner) spawner->stop_all();
  server.stop();
  serving.join();

  const auto at_end = server.status();
  std::cerr << "market-sim stopped at scenario hour " << core::fixed(at_end.now_h, 3) << ": "
            << at_end.instances_created << " instances created, " << at_end.live_instances
            << " still live, spent " << money(at_end.spent_usd) << ", balance "
            << money(at_end.balance_usd) << "\n";
  if (!served_ok && signal_received == 0) throw CommandFailed("market-sim: the server failed");
}

}  // namespace

void register_market_sim(CLI::App& app) {
  auto options = std::make_shared<MarketSimCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "market-sim",
      "Serve a scenario's offers over the vast.ai API (a test double and demo backend)");
  cmd->footer(
      "Endpoints (vast.ai wire format): POST /api/v0/bundles/ (search), PUT /api/v0/asks/ID/\n"
      "(create), GET /api/v1/instances/ (paged list), GET|PUT|DELETE /api/v0/instances/ID/,\n"
      "GET /api/v0/users/current/ (balance), GET /healthz.\n"
      "Instances follow the scenario's hidden truth: loading for boot_min, then running\n"
      "(never_boots stays loading; crash -> exited, offline -> offline after failure.after_h\n"
      "hours). dph_total is billed per scenario hour while running or exited.\n"
      "With --spawn-agents each instance's onstart really runs (/bin/sh -c, own process group)\n"
      "once it boots, as a simulated machine: PROVERFLEET_PROVER=sim, a probe tree, the offer's\n"
      "truth, PATH led by this binary's directory; destroy sends SIGTERM (SIGKILL after 3 s),\n"
      "crash/offline SIGKILL. Parameter stand-ins: GET /proverfleet-sim/params.json.\n"
      "Prints 'market-sim listening on http://HOST:PORT' once ready; SIGINT/SIGTERM stop it.");
  cmd->add_option("--scenario", options->scenario_path,
                  "Scenario file (proverfleet-scenario/1, /2 or /3: contract ends and bid markets)")
      ->required();
  cmd->add_option("--listen", options->listen,
                  "Address to serve on, HOST:PORT; port 0 picks a free port")
      ->capture_default_str();
  cmd->add_option("--time-scale", options->time_scale,
                  "Scenario seconds per wall second (60: one scenario hour per minute)")
      ->check(finite_positive(1e6))
      ->capture_default_str();
  cmd->add_option("--start-h", options->start_h, "Scenario hour at which the server starts")
      ->check(finite_range(0, scenario::kMaxScenarioHours))
      ->capture_default_str();
  cmd->add_option("--faults", options->faults,
                  "Injected failures, e.g. 429=0.2,500=0.05,drop_create_reply=0.1,slow_ms=300 "
                  "(probabilities per request; drop_create_reply executes the create and cuts "
                  "its reply)");
  cmd->add_option("--fault-seed", options->fault_seed, "Seed of the fault draws")
      ->capture_default_str();
  cmd->add_option("--rate-limits", options->rate_limits,
                  "vast's per-endpoint limits, per caller (key and address), in wall-clock "
                  "seconds: \"vast\" (search 10/60 s, create 4.5 s apart, list 1, show 2, "
                  "destroy 3, label 1, bid 5.5; `demo` runs with it), \"off\", or "
                  "ENDPOINT=SECONDS / ENDPOINT=CALLS/SECONDS entries; a call over its limit is "
                  "answered 429 in plain text, no Retry-After. Off by default: tests that watch "
                  "the market with serve's key would share its allowance")
      ->capture_default_str();
  cmd->add_option("--api-key-file", options->api_key_file,
                  "File holding the key to require as 'Authorization: Bearer KEY' on every "
                  "endpoint but offer search (not readable by other users); or set "
                  "$PROVERFLEET_MARKET_SIM_API_KEY. Never logged");
  add_refused_secret_flag(cmd, options->api_key_flag);
  cmd->add_option("--balance", options->balance_usd, "Starting account balance, USD")
      ->check(finite_range(-1e9, 1e9))
      ->capture_default_str();
  cmd->add_flag("--quiet", options->quiet, "Do not log requests to stderr");
  cmd->add_flag("--spawn-agents", options->spawn_agents,
                "Run each created instance's onstart (with the create's env) after its boot "
                "time, as a simulated machine; off by default because it executes what "
                "clients send");
  cmd->add_option("--work-dir", options->work_dir,
                  "Where spawned instances keep their files (instances/ID/); default: a fresh "
                  "temporary directory removed at exit");
  cmd->add_option("--param-stand-in-mib", options->param_stand_in_mib,
                  "Size of the parameter stand-ins served at /proverfleet-sim/params.json "
                  "(0: an empty manifest)")
      ->check(finite_range(0, 1e5))
      ->capture_default_str();
  cmd->add_option("--param-min-kib-s", options->param_min_kib_s,
                  "Floor of the per-connection stand-in download rate, KiB/s (the rate "
                  "otherwise makes them take the scaled time the real parameters would)")
      ->check(finite_positive(1e9))
      ->capture_default_str();
  cmd->callback([options] { run_market_sim(*options); });
}

}  // namespace pf::cli
