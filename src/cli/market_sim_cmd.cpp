// `proverfleet market-sim`: serve a scenario's market over the vast.ai REST API. A test double
// and demo backend: nothing real is rented, instances only follow the scenario's truth.
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/serving.h"
#include "core/text.h"
#include "sim/faults.h"
#include "sim/market_sim.h"
#include "sim/market_sim_server.h"
#include "sim/scenario.h"

namespace pf::cli {
namespace {

struct MarketSimCliOptions {
  std::string scenario_path;
  std::string listen = "127.0.0.1:0";
  double time_scale = 1;
  double start_h = 0;
  std::string faults;
  std::uint64_t fault_seed = 1;
  std::string api_key;
  double balance_usd = 1000;
  bool quiet = false;
};

std::string money(double usd) {
  return "$" + core::fixed(usd, 2);
}

void run_market_sim(const MarketSimCliOptions& o) {
  if (!std::isfinite(o.time_scale) || o.time_scale <= 0) {
    throw CommandFailed("--time-scale must be a positive number");
  }
  if (!std::isfinite(o.start_h) || o.start_h < 0) {
    throw CommandFailed("--start-h must be a number >= 0");
  }
  if (!std::isfinite(o.balance_usd)) throw CommandFailed("--balance must be a number");
  auto listen = parse_listen(o.listen);
  if (!listen) {
    throw CommandFailed(
        "--listen: expected HOST:PORT (e.g. 127.0.0.1:8700, port 0 = any free), "
        "got \"" +
        o.listen + "\"");
  }
  auto faults = sim::parse_fault_spec(o.faults);
  if (!faults) throw CommandFailed("--faults: " + faults.error());
  auto scenario = sim::load_scenario(o.scenario_path);
  if (!scenario) throw CommandFailed(scenario.error());
  const std::string scenario_name = scenario->name;
  const std::size_t offer_count = scenario->offers.size();
  const double horizon_h = scenario->hours;

  BlockedStopSignals stop_signals;
  ::signal(SIGPIPE, SIG_IGN);  // a client hanging up must not kill the server

  const auto wall_start = std::chrono::steady_clock::now();
  const double time_scale = o.time_scale;
  const double start_h = o.start_h;
  auto clock_h = [wall_start, time_scale, start_h] {
    std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - wall_start;
    return start_h + elapsed.count() * time_scale / 3600.0;
  };

  sim::MarketSimOptions sim_options;
  sim_options.start_balance_usd = o.balance_usd;
  sim_options.epoch_s_per_h = 3600.0 / time_scale;
  const double epoch_now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  sim_options.epoch_at_zero_s = epoch_now - start_h * sim_options.epoch_s_per_h;

  sim::MarketSimServerOptions server_options;
  if (!o.api_key.empty()) server_options.api_key = o.api_key;
  server_options.faults = *faults;
  server_options.fault_seed = o.fault_seed;
  server_options.clock_h = clock_h;
  if (!o.quiet) {
    auto log_mutex = std::make_shared<std::mutex>();
    server_options.log = [log_mutex, clock_h](const std::string& line) {
      std::lock_guard lock(*log_mutex);
      std::cerr << "[t=" << core::fixed(clock_h(), 3) << "h] " << line << "\n";
    };
  }

  sim::MarketSimServer server(sim::MarketSim(std::move(*scenario), sim_options), server_options);
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
  std::cout << "\nbalance: " << money(o.balance_usd) << std::endl;

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
      "Prints 'market-sim listening on http://HOST:PORT' once ready; SIGINT/SIGTERM stop it.");
  cmd->add_option("--scenario", options->scenario_path, "Scenario file (proverfleet-scenario/1)")
      ->required();
  cmd->add_option("--listen", options->listen,
                  "Address to serve on, HOST:PORT; port 0 picks a free port")
      ->capture_default_str();
  cmd->add_option("--time-scale", options->time_scale,
                  "Scenario seconds per wall second (60: one scenario hour per minute)")
      ->capture_default_str();
  cmd->add_option("--start-h", options->start_h, "Scenario hour at which the server starts")
      ->capture_default_str();
  cmd->add_option("--faults", options->faults,
                  "Injected failures, e.g. 429=0.2,500=0.05,drop_create_reply=0.1,slow_ms=300 "
                  "(probabilities per request; drop_create_reply executes the create and cuts "
                  "its reply)");
  cmd->add_option("--fault-seed", options->fault_seed, "Seed of the fault draws")
      ->capture_default_str();
  cmd->add_option("--api-key", options->api_key,
                  "Require 'Authorization: Bearer KEY' on every endpoint but offer search "
                  "(never logged)")
      ->envname("PROVERFLEET_MARKET_SIM_API_KEY");
  cmd->add_option("--balance", options->balance_usd, "Starting account balance, USD")
      ->capture_default_str();
  cmd->add_flag("--quiet", options->quiet, "Do not log requests to stderr");
  cmd->callback([options] { run_market_sim(*options); });
}

}  // namespace pf::cli
