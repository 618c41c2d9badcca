// `proverfleet demo`: the whole system on one machine, nothing rented. Starts `market-sim` (a
// test double of vast.ai whose instances run real `proverfleet agent` processes with the sim
// prover) in compressed time, and `serve` with the autopilot on against it; prints the
// dashboard URL and the operator token, and a one-line fleet summary every few seconds.
// serve's cuzk-compatible gateway listens on a free loopback port, and a built-in client
// (cli/load_generator.h) sends it the scenario's job arrivals, time-scaled, as Curio would
// (--no-load turns it off), so the dashboard shows the fleet serving work.
// SIGINT/SIGTERM stop everything it started (the children also die with it: PR_SET_PDEATHSIG).
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/process.h"
#include "cli/commands.h"
#include "cli/config.h"
#include "cli/demo_local_cuzk.h"
#include "cli/flag_checks.h"
#include "cli/load_generator.h"
#include "cli/manager_client.h"
#include "cli/serving.h"
#include "core/text.h"
#include "manager/manager.h"

namespace pf::cli {
namespace {

namespace fs = std::filesystem;

struct DemoOptions {
  std::optional<std::string> scenario;
  std::optional<std::string> data_dir;
  double time_scale = 60;
  std::string listen = "127.0.0.1:8470";
  double status_every_s = 5;
  bool quiet = false;
  bool no_load = false;  // no client load through the gateway
  int load_max_pending = 10;
  int curio_nodes = 2;
  bool no_local_cuzk = false;  // PoSt refused at the gateway instead of relayed
};

// The lines the demo's children print once they listen (market_sim_cmd.cpp, serve_cmd.cpp,
// serve_leader_term.cpp).
constexpr const char* kSimListening = "market-sim listening on ";
constexpr const char* kServeListening = "proverfleet serve listening on ";
constexpr const char* kGatewayListening = "proverfleet gateway listening on ";

// A started child: its output goes to a log file; the first line starting with each of
// `watched` is kept (its "listening on ADDRESS" lines).
class LoggedChild {
 public:
  LoggedChild(const std::string& name, std::vector<std::string> argv, const fs::path& log_path,
              std::map<std::string, std::string> env, std::vector<std::string> watched)
      : name_(name), log_path_(log_path) {
    for (auto& prefix : watched) seen_.emplace(std::move(prefix), std::nullopt);
    log_ = std::make_shared<std::ofstream>(log_path, std::ios::app);
    if (!*log_) throw CommandFailed("cannot write " + log_path.string());
    agent::ChildOptions options;
    options.argv = std::move(argv);
    options.env = std::move(env);
    options.on_line = [this, log = log_](const std::string& line, bool) {
      {
        std::lock_guard lock(mu_);
        *log << line << '\n';
        log->flush();
        for (auto& [prefix, word] : seen_) {
          if (word || line.rfind(prefix, 0) != 0) continue;
          word = line.substr(prefix.size());
          const auto space = word->find(' ');
          if (space != std::string::npos) word->resize(space);
        }
      }
      seen_cv_.notify_all();
    };
    auto child = agent::ChildProcess::spawn(std::move(options));
    if (!child) throw CommandFailed("cannot start " + name_ + ": " + child.error());
    child_ = std::move(*child);
  }
  ~LoggedChild() { stop(); }
  LoggedChild(const LoggedChild&) = delete;
  LoggedChild& operator=(const LoggedChild&) = delete;

  // The word after `prefix` (one of `watched`: the address the child printed), once it printed
  // it; throws when the child exits first or takes too long.
  std::string wait_for(const std::string& prefix, std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    const auto& word = seen_.at(prefix);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!word) {
      if (seen_cv_.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() +
                                                           std::chrono::milliseconds(200))) ==
              std::cv_status::timeout &&
          std::chrono::steady_clock::now() >= deadline) {
        throw CommandFailed(name_ + " did not print '" + prefix + "' within " +
                            std::to_string(timeout.count()) + " s; see " + log_path_.string());
      }
      lock.unlock();
      const auto status = child_->poll();
      lock.lock();
      if (status && !word) {
        throw CommandFailed(name_ + " exited (" + status->describe() + "); see " +
                            log_path_.string());
      }
    }
    return *word;
  }

  std::optional<agent::ExitStatus> exited() { return child_ ? child_->poll() : std::nullopt; }

  void stop() {
    if (child_) child_->terminate(std::chrono::seconds(10));
  }

 private:
  std::string name_;
  fs::path log_path_;
  std::shared_ptr<std::ofstream> log_;
  std::mutex mu_;
  std::condition_variable seen_cv_;
  std::map<std::string, std::optional<std::string>> seen_;  // watched prefix -> word after it
  std::unique_ptr<agent::ChildProcess> child_;
};

fs::path self_executable() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw CommandFailed("cannot find this program's path: " + ec.message());
  return exe;
}

fs::path find_scenario(const std::optional<std::string>& given, const fs::path& exe) {
  if (given) {
    if (!fs::is_regular_file(*given)) throw CommandFailed("no scenario file '" + *given + "'");
    return *given;
  }
  // From the repository root (make demo), or next to a build directory inside it.
  for (const fs::path& candidate : {fs::path("scenarios/demo-small-v2.json"),
                                    exe.parent_path() / "../scenarios/demo-small-v2.json",
                                    fs::path("../shared/scenarios/demo-small-v2.json")}) {
    if (fs::is_regular_file(candidate)) return fs::weakly_canonical(candidate);
  }
  throw CommandFailed(
      "cannot find scenarios/demo-small-v2.json (run from the repository root or pass --scenario)");
}

// Deadlines are wall-clock seconds while the simulated market runs `scale` times faster:
// scaled down so a stuck instance is seen while the demo runs, with floors that leave room
// for real process start-up and heartbeats.
std::string demo_config(double scale, int curio_nodes, int max_pending,
                        const std::string& local_cuzk) {
  auto scaled = [scale](double seconds, double floor_s) {
    return core::fixed(std::max(floor_s, seconds / scale), 0);
  };
  core::LifecycleConfig l;
  core::AcceptanceConfig a;
  std::string text = "# Written by `proverfleet demo`: the demo's manager settings (time scale " +
                     core::fixed(scale, 0) +
                     "x).\n"
                     "[deploy]\n"
                     "heartbeat_s = 2\n\n"
                     "[jobs]\n"
                     "proof_check = \"sim\"  # market-sim's agents run the sim prover\n\n"
                     "[autopilot]\n"
                     "enabled = true\n"
                     "interval_s = 5\n"
                     "max_instances = 8\n"
                     "max_concurrent_benchmarks = 4\n"
                     "max_rents_per_decision = 3\n\n"
                     "[gateway]\n"
                     "curio_nodes = " +
                     std::to_string(curio_nodes) +
                     "\n"
                     "curio_max_pending = " +
                     std::to_string(max_pending) +
                     "\n"
                     "local_cuzk = \"" +
                     local_cuzk +
                     "\"\n\n"
                     "[lifecycle]\n";
  text += "boot_loading_max_s = " + scaled(l.boot_loading_max_s, 60) + "\n";
  text += "boot_register_grace_s = " + scaled(l.boot_register_grace_s, 60) + "\n";
  text += "registered_max_s = " + scaled(l.registered_max_s, 60) + "\n";
  text += "params_min_s = " + scaled(l.params_min_s, 60) + "\n";
  text += "params_max_s = " + scaled(l.params_max_s, 120) + "\n";
  text += "warmup_max_s = " + scaled(l.warmup_max_s, 60) + "\n";
  text += "bench_min_s = " + scaled(l.bench_min_s, 60) + "\n";
  text += "bench_max_s = " + scaled(l.bench_max_s, 120) + "\n";
  text += "heartbeat_timeout_s = 30\n";
  text += "market_unknown_grace_s = " + scaled(l.market_unknown_grace_s, 30) + "\n";
  text += "market_stopped_grace_s = " + scaled(l.market_stopped_grace_s, 30) + "\n";
  text += "destroy_retry_s = 5\n\n[acceptance]\n";
  text += "max_seconds = " + scaled(a.max_seconds, 120) + "\n";
  return text;
}

// The built-in Curio: the scenario's job arrivals through the gateway (nullptr when the
// scenario states no demand).
std::unique_ptr<LoadGenerator> start_load(const fs::path& scenario_path, double time_scale,
                                          const std::string& gateway, int nodes, int max_pending) {
  auto sc = scenario::load_scenario(scenario_path.string());
  if (!sc) throw CommandFailed(sc.error());
  auto demand = load_demand(*sc);
  if (!demand) return nullptr;
  LoadGeneratorOptions o;
  o.target = gateway;
  o.demand = *demand;
  o.horizon_s = sc->hours * 3600;
  o.time_scale = time_scale;
  const auto now_s = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  o.seed = sc->seed ^ static_cast<std::uint64_t>(now_s);
  // Sectors numbered from the start time: a reused --data never sees a request_id again
  // (one coming back after its proof was delivered means the client rejected that proof).
  o.first_sector = now_s * 1000;
  o.nodes = nodes;
  o.max_pending = max_pending;
  // Curio's work through one address: mostly PoRep, some SnapDeals, and the PoSt that the
  // gateway keeps off rented machines (relayed to the operator's cuzk, or refused).
  o.mix = {0.85, 0.10, 0.03, 0.02};
  o.prove_timeout_s = std::max(
      60.0, demand->deadline_min > 0 ? demand->deadline_min * 60 / time_scale : 1800 / time_scale);
  o.log = [](const std::string& line) { spdlog::warn("{}", line); };
  auto gen = std::make_unique<LoadGenerator>(std::move(o));
  gen->start();
  return gen;
}

std::string load_line(const LoadStats& s) {
  return " | curio: " + std::to_string(s.arrived) + " tasks, " + std::to_string(s.proved) +
         " proved (" + std::to_string(s.proved - s.proved_post) + " by the fleet, " +
         std::to_string(s.proved_post) + " PoSt by the operator's cuzk), " +
         std::to_string(s.in_flight) + " in flight, " + std::to_string(s.waiting) + " waiting, " +
         std::to_string(s.retries) + " retried (" + std::to_string(s.retries_elsewhere) +
         " on another node)" +
         (s.post_refused ? ", " + std::to_string(s.post_refused) + " PoSt refused" : "") +
         (s.failed ? ", " + std::to_string(s.failed) + " gave up" : "");
}

std::string fleet_line(const nlohmann::json& fleet) {
  std::string states;
  const nlohmann::json by_state = fleet.value("by_state", nlohmann::json::object());
  for (const auto& [name, count] : by_state.items()) {
    if (!count.is_number_integer() || count.get<int>() == 0) continue;
    states += (states.empty() ? "" : ", ") + std::to_string(count.get<int>()) + " " + name;
  }
  std::string line = states.empty() ? "no instances yet" : states;
  line += " | " + core::fixed(fleet.value("proofs_per_hour", 0.0), 1) + " proofs/h, $" +
          core::fixed(fleet.value("dollars_per_hour", 0.0), 2) + "/h, profit $" +
          core::fixed(fleet.value("profit_per_hour", 0.0), 2) + "/h";
  return line;
}

void run_demo(const DemoOptions& o) {
  if (!std::isfinite(o.time_scale) || o.time_scale < 1 || o.time_scale > 3600) {
    throw CommandFailed("--time-scale must be between 1 and 3600");
  }
  if (!parse_listen(o.listen)) {
    throw CommandFailed("--listen: expected HOST:PORT (port 0 = any free), got \"" + o.listen +
                        "\"");
  }
  const fs::path exe = self_executable();
  const fs::path scenario = find_scenario(o.scenario, exe);

  // A temporary directory is removed at exit; --data is kept (and reused).
  bool temporary = false;
  fs::path data;
  if (o.data_dir) {
    data = *o.data_dir;
    std::error_code ec;
    // It holds the database, the operator token and the agents' tokens: ours alone.
    if (fs::create_directories(data, ec) && !ec) {
      fs::permissions(data, fs::perms::owner_all, fs::perm_options::replace, ec);
    }
    if (ec) throw CommandFailed("cannot create --data " + data.string() + ": " + ec.message());
  } else {
    std::string pattern = (fs::temp_directory_path() / "proverfleet-demo.XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw CommandFailed("cannot create a temporary directory");
    data = pattern;
    temporary = true;
  }
  data = fs::absolute(data);
  struct RemoveAtExit {
    fs::path dir;
    bool active;
    ~RemoveAtExit() {
      std::error_code ec;
      if (active) fs::remove_all(dir, ec);
    }
  } cleanup{data, temporary};

  // market-sim's API key: random, and handed to both children in their environment, never on
  // a command line (which every local user can read).
  const std::string key = manager::random_token();
  // The operator's own cuzk for PoSt (set-up 1 of docs/gateway.md), or none (set-up 2: the
  // gateway refuses PoSt at once).
  std::unique_ptr<DemoLocalCuzk> local_cuzk;
  if (!o.no_local_cuzk) local_cuzk = std::make_unique<DemoLocalCuzk>();
  {
    std::ofstream cfg(data / "proverfleet.toml");
    cfg << demo_config(o.time_scale, o.curio_nodes, o.load_max_pending,
                       local_cuzk ? local_cuzk->address() : "");
    if (!cfg) throw CommandFailed("cannot write " + (data / "proverfleet.toml").string());
  }

  BlockedStopSignals stop_signals;  // children start with a clean mask (agent/process.cpp)

  const fs::path sim_log = data / "market-sim.log";
  LoggedChild sim("market-sim",
                  {exe.string(), "market-sim", "--scenario", scenario.string(), "--listen",
                   "127.0.0.1:0", "--time-scale", core::fixed(o.time_scale, 3), "--spawn-agents",
                   "--work-dir", (data / "market-sim").string(), "--rate-limits", "vast"},
                  sim_log, {{"PROVERFLEET_MARKET_SIM_API_KEY", key}}, {kSimListening});
  const std::string market_url = sim.wait_for(kSimListening, std::chrono::seconds(30));

  const fs::path serve_log = data / "serve.log";
  LoggedChild serve("serve",
                    {exe.string(),
                     "serve",
                     "--config",
                     (data / "proverfleet.toml").string(),
                     "--listen",
                     o.listen,
                     "--grpc-listen",
                     "127.0.0.1:0",
                     "--db",
                     (data / "proverfleet.db").string(),
                     "--vast-url",
                     market_url,
                     "--params-manifest",
                     market_url + "/proverfleet-sim/params.json",
                     "--autopilot",
                     "true",
                     "--reconcile-interval",
                     "2",
                     "--tick-interval",
                     "1"},
                    serve_log, {{"VAST_API_KEY", key}}, {kServeListening, kGatewayListening});
  const std::string manager_url = serve.wait_for(kServeListening, std::chrono::seconds(30));
  // Serve's own port for the gateway (port 0: one the kernel gave it, never one another process
  // may take between our choosing it and serve binding it).
  const std::string gateway = serve.wait_for(kGatewayListening, std::chrono::seconds(30));

  std::ifstream token_file(data / "operator.token");
  std::string token;
  std::getline(token_file, token);
  if (token.empty())
    throw CommandFailed("serve wrote no operator token; see " + serve_log.string());

  std::cout << "proverfleet demo: a simulated market (" << scenario.filename().string() << ", "
            << core::fixed(o.time_scale, 0) << "x time) and a manager with the autopilot on\n"
            << "  dashboard:      " << manager_url << "/\n"
            << "  operator token: " << token << "\n"
            << "  data:           " << data.string() << (temporary ? " (removed at exit)" : "")
            << "\n"
            << "  logs:           " << serve_log.string() << ", " << sim_log.string() << "\n"
            << "  gateway:        " << gateway << " (cuzk.v1.ProvingEngine; "
            << (o.no_load ? "no load: --no-load"
                          : std::to_string(o.curio_nodes) +
                                " Curio nodes send the scenario's job "
                                "arrivals")
            << ")\n"
            << "  PoSt:           "
            << (local_cuzk ? "relayed to the operator's cuzk at " + local_cuzk->address() +
                                 " (a stand-in; --no-local-cuzk: refused at once)"
                           : std::string("refused at once (no [gateway] local_cuzk)"))
            << "\n"
            << "  CLI:            PROVERFLEET_MANAGER=" << manager_url
            << " PROVERFLEET_TOKEN_FILE=" << (data / "operator.token").string()
            << " proverfleet status\n"
            << "Ctrl-C stops everything.\n"
            << std::flush;

  std::unique_ptr<LoadGenerator> load;
  if (!o.no_load) {
    load = start_load(scenario, o.time_scale, gateway, o.curio_nodes, o.load_max_pending);
    if (!load) std::cout << "the scenario states no demand: no client load\n" << std::flush;
  }

  std::optional<ManagerClient> client;
  if (auto c = ManagerClient::create(ManagerEndpoint{manager_url, token})) client = std::move(*c);
  auto last_status = std::chrono::steady_clock::now();
  int signal_received = 0;
  std::string failure;
  while (signal_received == 0) {
    signal_received = stop_signals.wait(std::chrono::milliseconds(250));
    if (auto st = sim.exited()) failure = "market-sim exited (" + st->describe() + ")";
    if (auto st = serve.exited()) failure = "serve exited (" + st->describe() + ")";
    if (!failure.empty()) break;
    if (!o.quiet && client &&
        std::chrono::steady_clock::now() - last_status >=
            std::chrono::milliseconds(static_cast<long long>(o.status_every_s * 1000))) {
      last_status = std::chrono::steady_clock::now();
      if (auto fleet = client->get("/api/v1/fleet")) {
        std::cout << fleet_line(*fleet) << (load ? load_line(load->stats()) : "") << std::endl;
      }
    }
  }
  if (signal_received != 0) std::cout << "stopping (signal " << signal_received << ")" << std::endl;
  load.reset();  // the clients first: their calls end with the gateway
  serve.stop();  // first the manager, so it does not see the market vanish
  sim.stop();    // market-sim stops the agents it spawned
  if (!failure.empty()) throw CommandFailed(failure + "; see " + data.string());
  std::cout << "stopped" << std::endl;
}

}  // namespace

void register_demo(CLI::App& app) {
  auto o = std::make_shared<DemoOptions>();
  auto* cmd = app.add_subcommand(
      "demo",
      "Run the whole system locally with nothing rented: market-sim (simulated vast.ai whose\n"
      "instances run real agents with the sim prover) in compressed time, and the manager with\n"
      "the autopilot on. Prints the dashboard URL and the operator token.");
  cmd->footer("Ctrl-C (SIGINT) or SIGTERM stops every process it started.");
  cmd->add_option("--scenario", o->scenario,
                  "Market scenario (default: scenarios/demo-small-v2.json: a /2 scenario, whose "
                  "job arrivals the built-in client sends)");
  cmd->add_option("--data", o->data_dir,
                  "Keep the database, logs and agents' files here (default: a temporary "
                  "directory removed at exit)");
  cmd->add_option("--time-scale", o->time_scale, "Simulated seconds per wall second")
      ->capture_default_str();
  cmd->add_option("--listen", o->listen, "Dashboard/manager address, HOST:PORT (0 = any port)")
      ->capture_default_str();
  cmd->add_option("--status-every", o->status_every_s, "Seconds between fleet summary lines")
      ->capture_default_str()
      ->check(finite_range(0.1, 86400));
  cmd->add_flag("--quiet", o->quiet, "No fleet summary lines");
  cmd->add_flag("--no-load", o->no_load,
                "No client load: by default a built-in Curio sends the scenario's job arrivals "
                "(time-scaled) to the gateway");
  cmd->add_option("--load-max-pending", o->load_max_pending,
                  "Each built-in Curio node's [Cuzk] MaxPending: Prove calls it keeps open")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  cmd->add_option("--curio-nodes", o->curio_nodes,
                  "Built-in Curio nodes (each its own connection; a failed task's retry usually "
                  "runs on another)")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  cmd->add_flag("--no-local-cuzk", o->no_local_cuzk,
                "No stand-in for the operator's own cuzk: the gateway refuses WindowPoSt and "
                "WinningPoSt at once instead of relaying them");
  cmd->callback([o] { run_demo(*o); });
}

}  // namespace pf::cli
