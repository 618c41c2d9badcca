// `proverfleet serve`: the manager service. Opens the store, talks to the market, serves the
// operator and agent APIs (+ /metrics, /healthz), and runs the reconcile and tick loops until
// SIGINT/SIGTERM. stdout carries exactly one line, the "listening" line, so scripts can wait
// for it; everything else is logged to stderr.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/params.h"
#include "cli/commands.h"
#include "cli/config.h"
#include "cli/jobs_settings.h"
#include "cli/operator_token.h"
#include "cli/serve_gateway.h"
#include "cli/serve_leader_term.h"
#include "cli/serve_ops.h"
#include "cli/serve_takeover.h"
#include "cli/service_notify.h"
#include "cli/serving.h"
#include "core/http_limits.h"
#include "core/leader_lease.h"
#include "gateway/gateway_server.h"
#include "gateway/listen_exposure.h"
#include "jobs/job_queue.h"
#include "manager/autopilot.h"
#include "manager/fenced_market.h"
#include "manager/http_api.h"
#include "manager/job_signal.h"
#include "manager/leader_forward.h"
#include "manager/leadership.h"
#include "manager/manager.h"
#include "market/http_client.h"
#include "market/query.h"
#include "market/vast_market.h"
#include "net/listen_fds.h"
#include "net/socket_handover.h"
#include "store/store.h"
#include "store/store_url.h"
#include "util/bounded_json.h"

namespace pf::cli {
namespace {

struct ServeOptions {
  std::optional<std::string> config_path;
  std::string listen = "127.0.0.1:8470";
  std::string db = "./proverfleet.db";
  std::optional<std::string> public_url;
  std::optional<std::string> replica_url;
  std::optional<std::string> replica_grpc;
  std::optional<std::string> vast_url;
  std::optional<std::string> vast_key_file;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> params_manifest;
  std::optional<bool> autopilot;
  std::optional<std::size_t> max_connections_per_address;  // overrides http.*
  std::optional<std::string> grpc_listen;                  // overrides gateway.listen
  bool grpc_allow_any = false;
  bool takeover = false;
  std::optional<std::string> takeover_socket;
  double drain_limit_s = 3600;
  double reconcile_interval_s = 30;
  double tick_interval_s = 5;
};

constexpr std::chrono::milliseconds kSelfCheckInterval{5000};
// The self-check loop running this much later than due means the process itself stood still.
constexpr std::chrono::milliseconds kSelfStallGap{30000};

// Whether the manager's own front answers /healthz as an agent would reach it. A TLS
// verification failure still proves the front answered (a self-signed certificate on
// loopback); a refused connection or a timeout does not.
bool front_answers(const std::string& health_url) {
  market::HttpOptions options;
  options.connect_timeout_s = 5;
  options.request_timeout_s = 5;
  options.max_body_bytes = 4096;
  market::HttpRequest request;
  request.url = health_url;
  const auto reply = market::http_perform(options, request);
  if (reply) return reply->status == 200;
  return reply.error().failure == market::HttpFailure::Other;
}

// Runs `fn` now and then every `interval` until stopped. A failing run is logged and the loop
// goes on: one bad market reply must not stop destroys from being retried.
class PeriodicTask {
 public:
  PeriodicTask(std::string name, std::chrono::milliseconds interval, std::function<void()> fn)
      : name_(std::move(name)), interval_(interval), fn_(std::move(fn)) {
    thread_ = std::thread([this] { run(); });
  }
  ~PeriodicTask() { stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  // Runs `fn` again now rather than at the end of the interval (a new leader's first round).
  void wake() {
    {
      std::lock_guard lock(mutex_);
      woken_ = true;
    }
    wake_.notify_all();
  }

 private:
  void run() {
    while (true) {
      try {
        fn_();
      } catch (const std::exception& e) {
        spdlog::error("{} failed: {}", name_, e.what());
      } catch (...) {
        spdlog::error("{} failed with an unknown exception", name_);
      }
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, interval_, [this] { return stopping_ || woken_; });
      if (stopping_) return;
      woken_ = false;
    }
  }

  std::string name_;
  std::chrono::milliseconds interval_;
  std::function<void()> fn_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool woken_ = false;
  std::thread thread_;
};

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void install_stderr_logger() {
  auto logger = std::make_shared<spdlog::logger>(
      "serve", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  spdlog::set_default_logger(std::move(logger));
}

std::chrono::milliseconds interval(double seconds, const char* flag) {
  if (!std::isfinite(seconds) || seconds < 0.1 || seconds > 86400) {
    throw CommandFailed(std::string(flag) + " must be between 0.1 and 86400 seconds");
  }
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

// The parameter manifest agents are handed: fetched from a URL or read from a file once at
// start, and checked with the parser the agents use, so a bad manifest stops the manager here
// instead of failing every agent later.
std::vector<manager::ParamFile> load_params_manifest(const std::string& where,
                                                     const std::string& gateway) {
  std::string text;
  const auto builtin = agent::builtin_param_manifest(where);
  if (!builtin) throw CommandFailed("deploy.params_manifest: " + builtin.error());
  if (*builtin) {
    text = std::string(**builtin);
  } else if (where.rfind("http://", 0) == 0 || where.rfind("https://", 0) == 0) {
    market::HttpRequest request;
    request.url = where;
    auto reply = market::http_perform(market::HttpOptions{}, request);
    if (!reply) {
      throw CommandFailed("parameter manifest " + where + ": " + reply.error().message);
    }
    if (reply->status != 200) {
      throw CommandFailed("parameter manifest " + where + ": HTTP " +
                          std::to_string(reply->status));
    }
    text = std::move(reply->body);
  } else {
    auto file = util::read_bounded_file(where, agent::kManifestLimits.max_bytes);
    if (!file) {
      throw CommandFailed("cannot read parameter manifest file '" + where + "': " + file.error());
    }
    text = std::move(*file);
  }
  auto files = agent::parse_param_manifest_text(text, {.gateway = gateway});
  if (!files) throw CommandFailed("parameter manifest " + where + ": " + files.error());
  std::vector<manager::ParamFile> out;
  for (const auto& f : *files) {
    out.push_back({f.name, f.url, static_cast<std::int64_t>(f.bytes), f.digest, f.cid});
  }
  return out;
}

// deploy.benchmark_input, read once: agents fetch these bytes, checked against this digest.
manager::BenchmarkInput load_benchmark_input(const std::string& path) {
  auto file = util::read_bounded_file(path, manager::kMaxBenchmarkInputBytes);
  if (!file) {
    throw CommandFailed("cannot read deploy.benchmark_input '" + path + "': " + file.error());
  }
  if (file->empty()) throw CommandFailed("deploy.benchmark_input '" + path + "' is empty");
  manager::BenchmarkInput input;
  input.name = std::filesystem::path(path).filename().string();
  const bool plain = !input.name.empty() && input.name.front() != '.' &&
                     std::all_of(input.name.begin(), input.name.end(), [](unsigned char c) {
                       return std::isalnum(c) || c == '.' || c == '-' || c == '_';
                     });
  if (!plain) input.name = "benchmark-input";
  input.digest = agent::param_digest_of(*file);
  input.bytes = std::make_shared<const std::string>(std::move(*file));
  return input;
}

// sd_notify(3) (cli/service_notify.h); a failure is worth a line, never a stop.
void tell_service_manager(const std::string& state) {
  if (auto told = notify_service_manager(state); !told) spdlog::warn("{}", told.error());
}

void log_line(bool warning, const std::string& line) {
  if (warning) {
    spdlog::warn("{}", line);
  } else {
    spdlog::info("{}", line);
  }
}

// The successor's side once it serves the sockets as a follower: the predecessor resigns (a
// replica that was not leading resigns nothing), and once the fleet is led again, by this serve
// or by another replica, this one says so and the predecessor drains and exits. A predecessor
// that does not resign leaves this one a follower (it leads if the other stops); one that
// resigned and hears nothing leads again.
void take_over(TakeoverRequest& takeover, manager::Leadership& leadership,
               PeriodicTask& leadership_loop) {
  if (auto resigned = takeover.listening(); !resigned) {
    spdlog::warn("takeover: {}; this serve follows the one that leads", resigned.error());
    return;
  }
  // The predecessor's row, if it led, now reads expired: a live leader is another process. A
  // live row naming this replica is this serve's own take, written before its term is held in
  // memory: wait for leading() then, or the predecessor would be told of another leader.
  const auto led = [&leadership] {
    if (leadership.leading()) return true;
    const manager::LeaderView view = leadership.view();
    return core::has_live_leader(view.lease, view.now) && view.lease->holder != view.replica_id;
  };
  leadership_loop.wake();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!led() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    leadership_loop.wake();
  }
  if (!led()) {
    spdlog::warn("takeover: nobody took the lease within 30 s: {}", leadership.view().reason);
    return;
  }
  if (auto told = takeover.leading(); !told) spdlog::warn("takeover: {}", told.error());
  if (leadership.leading()) {
    spdlog::info("takeover: this serve leads; the one before it drains its calls and exits");
  } else {
    spdlog::info(
        "takeover: another replica leads; this serve follows it in place of the one before, "
        "which drains its calls and exits");
  }
  // Under systemd (a reload started this process): the unit's main process is this one now.
  tell_service_manager("MAINPID=" + std::to_string(::getpid()) + "\nREADY=1");
}

// SIGHUP (`systemctl reload`): starts the successor unless one is starting already. Its pid.
int start_successor(const tl::expected<OwnCommand, std::string>& own, const TakeoverOffer* offer,
                    int running) {
  if (running > 0) {
    spdlog::warn("reload: the successor started before (pid {}) has not taken over yet", running);
    return running;
  }
  if (!own) {
    spdlog::error("reload: cannot start a successor: {}", own.error());
    return 0;
  }
  if (offer == nullptr) {
    spdlog::error("reload: this serve offers no takeover socket (see above); not reloading");
    return 0;
  }
  auto pid = spawn_successor(*own);
  if (!pid) {
    spdlog::error("reload: {}", pid.error());
    return 0;
  }
  spdlog::info("reload: started pid {} ({} --takeover); it takes over once it serves", *pid,
               own->path);
  return *pid;
}

// A successor that exited before it took over (its own log says why).
int reap_successor(int pid) {
  if (pid <= 0) return 0;
  int status = 0;
  if (::waitpid(pid, &status, WNOHANG) != pid) return pid;
  spdlog::warn(
      "reload: the successor (pid {}) exited with {} {} before it took over; this serve "
      "goes on",
      pid, WIFEXITED(status) ? "code" : "signal",
      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return 0;
}

// Listens for a successor at `path`. The predecessor it replaced may still hold the path for a
// moment after it said it leads; another serve that answers there (a replica on this host with
// the same data directory) keeps it, and this one offers none.
std::unique_ptr<TakeoverOffer> offer_takeover(const std::string& path, TakeoverHooks hooks) {
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (true) {
    auto listener = net::HandoverListener::listen(path);
    if (listener) {
      spdlog::info("takeover: a successor may take over at {} (serve --takeover)", path);
      return std::make_unique<TakeoverOffer>(std::move(*listener), std::move(hooks));
    }
    if (std::chrono::steady_clock::now() >= give_up) {
      spdlog::warn("takeover: none offered ({}); set --takeover-socket to offer one",
                   listener.error());
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// A predecessor that handed over answers the calls it still holds (their jobs are answered by
// the successor: gateway_front.h) and stays until every client connection it has was told to go
// ([gateway] max_connection_age_s: the clients' next calls go to the successor), or the limit
// passes. Stopping the gRPC server any earlier could cancel a call that reaches it in that
// instant. The signal that cut it short, or 0.
int drain_after_handover(LeaderTerm& term, BlockedStopSignals& stop_signals, double limit_s,
                         std::chrono::milliseconds told_to_go, const std::string& successor) {
  const auto started = std::chrono::steady_clock::now();
  const auto limit = std::chrono::duration<double>(limit_s);
  spdlog::info(
      "handed over to pid {}: {} calls still open here; answering them, and telling every "
      "client to reconnect (at least {} s, at most {:.0f} s)",
      successor, term.open_calls(),
      std::chrono::duration_cast<std::chrono::seconds>(told_to_go).count(), limit_s);
  int signal_received = 0;
  while (signal_received == 0) {
    const auto waited = std::chrono::steady_clock::now() - started;
    if (waited >= limit) break;
    if (term.open_calls() == 0 && waited >= told_to_go) break;
    const int received = stop_signals.wait(std::chrono::milliseconds(200));
    if (received != SIGHUP) signal_received = received;  // handed over already: no reload
  }
  const int left = term.open_calls();
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (left == 0) {
    spdlog::info("drained in {:.1f} s", took);
  } else {
    spdlog::warn("{} calls still open after {:.0f} s{}: they end UNAVAILABLE (their jobs are kept)",
                 left, took, signal_received != 0 ? " and a signal" : "");
    term.end_held_calls();
  }
  return signal_received;
}

void run_serve(const ServeOptions& o) {
  install_stderr_logger();
  // Read now: a reload starts the binary then installed at this path with these arguments.
  const auto own_command = read_own_command();
  // Sockets a supervisor bound and keeps across restarts (systemd socket activation,
  // net/listen_fds.h, deploy/systemd/): served instead of binding --listen / --grpc-listen.
  const auto activated = net::take_listen_fds();
  if (!activated) throw CommandFailed("socket activation: " + activated.error());
  if (!std::isfinite(o.drain_limit_s) || o.drain_limit_s < 0 || o.drain_limit_s > 86400) {
    throw CommandFailed("--drain-limit must be between 0 and 86400 seconds");
  }
  auto listen = parse_listen(o.listen);
  if (!listen) {
    throw CommandFailed(
        "--listen: expected HOST:PORT (e.g. 127.0.0.1:8470, port 0 = any free), "
        "got \"" +
        o.listen + "\"");
  }
  const auto reconcile_every = interval(o.reconcile_interval_s, "--reconcile-interval");
  const auto tick_every = interval(o.tick_interval_s, "--tick-interval");
  if (o.tls_cert.has_value() != o.tls_key.has_value()) {
    throw CommandFailed("--tls-cert and --tls-key go together: give both or neither");
  }
  std::optional<manager::TlsFiles> tls;
  if (o.tls_cert) tls = manager::TlsFiles{*o.tls_cert, *o.tls_key};
  if (o.public_url && o.public_url->rfind("http://", 0) != 0 &&
      o.public_url->rfind("https://", 0) != 0) {
    throw CommandFailed("--public-url must start with http:// or https://, got \"" + *o.public_url +
                        "\"");
  }

  if (o.replica_url && o.replica_url->rfind("http://", 0) != 0 &&
      o.replica_url->rfind("https://", 0) != 0) {
    throw CommandFailed("--replica-url must start with http:// or https://, got \"" +
                        *o.replica_url + "\"");
  }
  if (o.replica_grpc && !gateway::listen_host(*o.replica_grpc)) {
    throw CommandFailed("--replica-grpc: expected HOST:PORT (e.g. 10.0.0.5:9820), got \"" +
                        *o.replica_grpc + "\"");
  }

  auto cfg = load_config(o.config_path);
  if (!cfg) throw CommandFailed(cfg.error());
  spdlog::info("config: {}", cfg->source);
  // The gateway's job queue: its rows in the same store, inputs beside the database.
  const jobs::JobQueueConfig jobs_config = job_queue_config(cfg->jobs, o.db);
  // It holds the takeover socket (below) and, after an upgrade from file inputs, the files the
  // first term imports: made here, whether or not this replica ever leads.
  if (std::error_code made;
      !std::filesystem::create_directories(jobs_config.data_dir, made) && made) {
    throw CommandFailed("[jobs] data_dir '" + jobs_config.data_dir +
                        "' cannot be created: " + made.message());
  }
  // Planned restarts (cli/serve_takeover.h): this serve offers its sockets to a successor here,
  // and --takeover asks the running serve here for them.
  const std::string takeover_path =
      o.takeover_socket.value_or(jobs_config.data_dir + "/serve-takeover.sock");
  std::optional<TakeoverRequest> takeover;
  if (o.takeover) {
    if (*activated) {
      throw CommandFailed(
          "--takeover: this serve was also handed sockets by a supervisor (LISTEN_FDS); it takes "
          "its sockets from one place");
    }
    auto asked = TakeoverRequest::start(takeover_path);
    if (!asked) throw CommandFailed("--takeover: " + asked.error());
    takeover = std::move(*asked);
    spdlog::info("takeover: the serve at {} handed over its sockets; starting beside it",
                 takeover_path);
  }
  const std::optional<net::ListenFds> handed =
      takeover ? std::optional<net::ListenFds>(takeover->sockets()) : *activated;
  const auto handed_fd = [&](const char* name) -> std::optional<int> {
    if (!handed) return std::nullopt;
    const auto it = handed->find(name);
    return it == handed->end() ? std::nullopt : std::optional<int>(it->second);
  };

  // TLS files and the port are checked before anything is created on disk.
  auto server = manager::ApiServer::create(tls);
  if (!server) throw CommandFailed(server.error());
  tl::expected<int, std::string> port = 0;
  if (const auto fd = handed_fd("http")) {
    const auto where = net::socket_address(*fd);
    if (!where) throw CommandFailed("the \"http\" socket handed over: " + where.error());
    listen->host = where->host;
    port = (*server)->adopt(*fd);
    if (port) spdlog::info("http: serving the socket handed over (fd {}, {})", *fd, where->text());
  } else {
    port = (*server)->bind(listen->host, listen->port);
  }
  if (!port) throw CommandFailed(port.error());

  // Checked here, before anything is created on disk; started with the replica's LeaderTerm.
  const auto gateway_cfg = gateway_config(*cfg, o.grpc_listen, o.grpc_allow_any, handed_fd("grpc"));

  auto vast_cfg =
      market::vast_config_from_env(o.vast_url ? o.vast_url : cfg->market.vast_url,
                                   o.vast_key_file ? o.vast_key_file : cfg->market.key_file);
  if (!vast_cfg) throw CommandFailed(vast_cfg.error());
  vast_cfg->pacing = cfg->market.rate_limits;
  if (vast_cfg->api_key.empty()) {
    spdlog::warn(
        "no vast.ai API key (VAST_API_KEY or --vast-key-file): searches work, but "
        "deploys and destroys will fail");
  }
  spdlog::info("market: {} ({}; calls paced to {})", vast_cfg->base_url,
               vast_cfg->api_key.empty() ? "no API key" : "API key set",
               vast_cfg->pacing.describe());
  market::VastMarket vast(*vast_cfg);

  // A database password rides in $PROVERFLEET_DB, PGPASSFILE or $PGPASSWORD, never on the
  // command line (every local user can read it there), and is never shown.
  const char* db_from_env = std::getenv("PROVERFLEET_DB");
  if (store::url_has_password(o.db) && (db_from_env == nullptr || o.db != db_from_env)) {
    throw CommandFailed(
        "--db: a password in a database URL is refused on the command line (every local user "
        "can read it); put it in PGPASSFILE (a 0600 file), $PGPASSWORD, or the whole URL in "
        "$PROVERFLEET_DB");
  }
  const std::string shown_db = store::redacted_url(o.db);
  std::unique_ptr<store::Store> store;
  try {
    store = store::open_store(o.db);
  } catch (const std::exception& e) {
    throw CommandFailed("cannot open the database " + shown_db + ": " + e.what());
  }
  spdlog::info("database: {}", shown_db);
  const std::string operator_token_hash = fleet_operator_token_hash(*store, o.db);

  // Blocked before any thread starts, so the server's pool and the loops inherit the mask.
  BlockedStopSignals stop_signals(/*with_reload=*/true);
  ::signal(SIGPIPE, SIG_IGN);  // a client hanging up must not kill the server

  const std::string scheme = tls ? "https" : "http";
  const std::string shown_host =
      listen->host.find(':') != std::string::npos ? "[" + listen->host + "]" : listen->host;
  const std::string own_url = scheme + "://" + shown_host + ":" + std::to_string(*port);

  // Replicas (issue 14): every serve process on this database competes for one lease; only the
  // holder runs the loops, the job queue and the gateway, and every market mutation is fenced
  // by the term it acts under (FencedMarket), so a paused ex-leader cannot rent or destroy.
  manager::LeadershipConfig leadership_config;
  leadership_config.replica_id = manager::replica_id_for_this_process();
  leadership_config.url = o.replica_url.value_or(own_url);
  leadership_config.timing.ttl_s = cfg->replicas.lease_ttl_s;
  leadership_config.timing.guard_s = std::min(2.0, cfg->replicas.lease_ttl_s / 5);
  leadership_config.log = log_line;
  manager::Leadership leadership(*store, leadership_config, epoch_now);
  manager::FencedMarket market(vast, leadership,
                               [](const std::string& line) { spdlog::warn("{}", line); });
  spdlog::info(
      "replica {} (reached by other replicas at {}): lease of {:.0f} s renewed every {:.1f} s; "
      "a dead leader is replaced within {:.0f} s",
      leadership_config.replica_id, leadership_config.url, leadership_config.timing.ttl_s,
      leadership_config.timing.renew_every_s(), leadership_config.timing.failover_bound_s());

  // The same settings `sim` measures (cli::fleet_settings).
  const FleetSettings fleet_cfg = fleet_settings(*cfg);
  manager::ManagerConfig manager_config;
  manager_config.rank = cfg->rank;
  manager_config.lifecycle = fleet_cfg.lifecycle;
  manager_config.hearing = cfg->hearing;
  manager_config.acceptance = fleet_cfg.acceptance;
  manager_config.sprt = fleet_cfg.sprt;
  manager_config.blocklist = fleet_cfg.policy.blocklist;
  manager_config.bids = cfg->bids;
  manager_config.profit_objective = fleet_cfg.profit_objective;
  manager_config.image = cfg->deploy.image;
  manager_config.disk_gb = cfg->deploy.disk_gb;
  manager_config.onstart = cfg->deploy.onstart;
  manager_config.heartbeat_s = cfg->deploy.heartbeat_s;
  manager_config.log_ring_bytes = static_cast<std::size_t>(cfg->deploy.log_kib_per_instance) * 1024;
  manager_config.log_retention_s = cfg->deploy.log_retention_days * 86400;
  manager_config.event_retention_s = cfg->deploy.event_retention_days * 86400;
  manager_config.public_url = o.public_url.value_or(own_url);
  const std::string manifest = o.params_manifest.value_or(cfg->deploy.params_manifest);
  if (!manifest.empty()) {
    manager_config.params = load_params_manifest(manifest, cfg->deploy.params_gateway);
    std::int64_t total = 0;
    std::size_t unsized = 0;
    for (const auto& f : manager_config.params) {
      total += f.bytes;
      if (f.bytes == 0) ++unsized;
    }
    spdlog::info("parameters: {} files, {:.1f} GB{}, from {}", manager_config.params.size(),
                 static_cast<double>(total) / 1e9,
                 unsized > 0 ? " + " + std::to_string(unsized) + " sized by their source" : "",
                 manifest);
  } else {
    spdlog::warn("no parameter manifest (deploy.params_manifest): agents fetch no parameters");
  }
  if (!cfg->deploy.benchmark_input.empty()) {
    manager_config.benchmark_input = load_benchmark_input(cfg->deploy.benchmark_input);
    spdlog::info("benchmark input: {} ({} bytes, digest {})", cfg->deploy.benchmark_input,
                 manager_config.benchmark_input->bytes->size(),
                 manager_config.benchmark_input->digest);
  } else {
    spdlog::warn("no benchmark input (deploy.benchmark_input): cuzk agents cannot benchmark");
  }
  manager::AutopilotConfig autopilot_config;
  autopilot_config.enabled = o.autopilot.value_or(cfg->autopilot.enabled);
  autopilot_config.policy = fleet_cfg.policy;  // the operator cooldown included
  autopilot_config.offers_max_age_s = cfg->autopilot.offers_max_age_s;
  {
    auto query = market::parse_query(cfg->autopilot.query, true);
    if (!query) throw CommandFailed("autopilot.query: " + query.error());
    autopilot_config.filters = query->filters;
  }
  if (!o.public_url && (listen->host == "0.0.0.0" || listen->host == "::")) {
    spdlog::warn("agents will be told to call {}, which they cannot reach; set --public-url",
                 own_url);
  }
  spdlog::info("agents call {}", manager_config.public_url);
  manager_config.still_leading = [&leadership] { return leadership.leading(); };
  manager::Manager fleet(*store, market, manager_config, epoch_now);
  // The job queue is loaded from the store for each term this replica leads; the gateway
  // listens on every replica and relays to the leader's while this one does not lead.
  LeaderTerm term(fleet, *store, jobs_config, gateway_cfg, leadership, epoch_now, o.replica_grpc);
  // Webhooks and the fleet watch (alerts for every instance, whoever rented it).
  ServeOps ops = make_serve_ops(fleet, *cfg, fleet_cfg, epoch_now);
  if (!gateway_cfg) spdlog::info("gateway: off ([gateway] listen / --grpc-listen)");
  spdlog::info(
      "jobs: inputs in the database (at most {} MiB each), leases of {:.0f} s, proofs "
      "checked: {}",
      cfg->jobs.max_input_mib, jobs_config.lease_s, jobs::to_string(jobs_config.proof_check));
  if (jobs_config.proof_check == jobs::ProofCheck::None) {
    spdlog::warn(
        "jobs: [jobs] proof_check = \"none\": proofs from rented machines reach clients "
        "unchecked (Curio itself does not verify SnapDeals proofs)");
  }
  // Once jobs come through the gateway, the autopilot sizes the fleet for its queue; a full
  // admission window (the gateway's max_pending_window) means demand is at least what it sees.
  manager::Autopilot autopilot(
      fleet, market, autopilot_config, epoch_now,
      manager::job_signal(fleet, gateway_cfg ? gateway::open_call_window(*gateway_cfg) : 0));
  if (autopilot_config.enabled) {
    const auto st = autopilot.status();
    if (st.paused) {
      spdlog::warn("autopilot: enabled but paused ({}); resume with `proverfleet autopilot resume`",
                   st.paused_by.empty() ? "earlier" : st.paused_by);
    } else {
      spdlog::info("autopilot: on, every {:.0f} s, at most {} instances and ${:.2f}/hour",
                   cfg->autopilot.interval_s, autopilot_config.policy.max_instances,
                   autopilot_config.policy.max_dollars_per_hour);
    }
  } else {
    spdlog::info("autopilot: off (deploys only on the operator's word)");
  }

  manager::ApiOptions api_options;
  api_options.operator_token_hash = operator_token_hash;
  api_options.clock = epoch_now;
  api_options.autopilot = &autopilot;
  api_options.jobs_report.prices = cfg->prices;  // revenue of delivered jobs ([prices])
  api_options.http = cfg->http.limits;
  api_options.agent_lane_threads = static_cast<std::size_t>(cfg->http.agent_lane_threads);
  api_options.agent_lane_queue = static_cast<std::size_t>(cfg->http.agent_lane_queue);
  api_options.operator_lane_threads = static_cast<std::size_t>(cfg->http.operator_lane_threads);
  api_options.operator_lane_queue = static_cast<std::size_t>(cfg->http.operator_lane_queue);
  if (o.max_connections_per_address) {
    if (*o.max_connections_per_address == 0) {
      throw CommandFailed("--max-connections-per-address must be at least 1");
    }
    api_options.http.max_connections_per_address = *o.max_connections_per_address;
  }
  // Operator changes are worth a line each; reads and the agents' steady traffic are not.
  api_options.log = [](const std::string& line, int status) {
    const bool routine =
        line.rfind("GET ", 0) == 0 || line.find(" /api/v1/agent/") != std::string::npos;
    // A load balancer's leader check answers 503 on every follower, as it should.
    if (line.rfind("GET /healthz/leader ", 0) == 0) {
      spdlog::debug("{}", line);
    } else if (status >= 500) {
      spdlog::error("{}", line);
    } else if (status >= 400) {
      spdlog::warn("{}", line);
    } else if (routine) {
      spdlog::debug("{}", line);
    } else {
      spdlog::info("{}", line);
    }
  };
  // A follower forwards agent calls, job routes and operator changes to the leader; a lease
  // long-poll may take max_lease_wait_ms, so a forwarded exchange may take that and more.
  manager::LeaderForward forward(
      leadership, static_cast<double>(api_options.max_lease_wait_ms) / 1000.0 + 15.0);
  api_options.forward = [&forward](const net::HttpRequest& req, const std::string& route) {
    return forward(req, route);
  };
  api_options.leader = [&leadership] { return leadership.view(); };
  manager::HttpApi api(fleet, api_options);
  (*server)->mount(api);

  std::atomic<bool> finished{false};
  bool served_ok = true;
  std::thread serving([&] {
    served_ok = (*server)->serve();
    finished = true;
  });
  std::cout << "proverfleet serve listening on " << own_url << std::endl;

  // The leader-only loops: each round starts only while this replica holds an unexpired lease.
  PeriodicTask reconcile_loop("reconcile", reconcile_every, [&fleet, &leadership] {
    if (!leadership.leading()) return;
    fleet.reconcile();
    const std::string error = fleet.last_reconcile_error();
    if (!error.empty()) spdlog::warn("reconcile: market list failed: {}", error);
  });
  PeriodicTask tick_loop("tick", tick_every, [&fleet, &leadership] {
    if (leadership.leading()) fleet.tick();
  });
  PeriodicTask watch_loop("alerts", interval(cfg->alerts.interval_s, "alerts.interval_s"),
                          [&ops, &leadership] {
                            if (leadership.leading()) ops.watch->run_once();
                          });
  // The manager's hearing (core/hearing.h): it asks its own front for /healthz the way an
  // agent would reach it, and watches its own loop run on time. While the front does not
  // answer, or after the process stood still, silence is not evidence against any host.
  const std::string probe_host = (listen->host == "0.0.0.0" || listen->host.empty()) ? "127.0.0.1"
                                 : listen->host == "::"                              ? "[::1]"
                                                                                     : shown_host;
  const std::string health_url =
      scheme + "://" + probe_host + ":" + std::to_string(*port) + "/healthz";
  PeriodicTask hearing_loop(
      "self-check", kSelfCheckInterval,
      [&fleet, health_url, last = std::chrono::steady_clock::time_point{},
       serving = true]() mutable {
        const auto started = std::chrono::steady_clock::now();
        if (last.time_since_epoch().count() != 0 && started - last > kSelfStallGap) {
          spdlog::warn("the manager stood still for {:.0f} s; agents' silence is counted afresh",
                       std::chrono::duration<double>(started - last).count());
          fleet.listening_interrupted();
        }
        last = started;
        const bool ok = front_answers(health_url);
        if (ok != serving) {
          if (ok) {
            spdlog::info("self-check: the front answers again; silence is counted afresh");
          } else {
            spdlog::error("self-check: {} does not answer; no agent is judged by silence",
                          health_url);
          }
          fleet.set_serving(ok);
          serving = ok;
        }
        last = std::chrono::steady_clock::now();
      });
  PeriodicTask autopilot_loop(
      "autopilot", interval(cfg->autopilot.interval_s, "autopilot.interval_s"),
      [&autopilot, &leadership] {
        if (!leadership.leading()) return;
        for (const auto& d : autopilot.run_once()) {
          if (d.ok) {
            spdlog::info("autopilot: {} offer {} (instance {}): {}", d.action, d.offer_id,
                         d.instance_id, d.reason);
          } else {
            spdlog::warn("autopilot: {} offer {}: {}", d.action, d.offer_id, d.reason);
          }
        }
        const auto st = autopilot.status();
        if (!st.last_error.empty()) spdlog::warn("autopilot: {}", st.last_error);
      });

  // Leadership last: a term's first round wakes the loops above at once.
  leadership.set_hooks({.elected =
                            [&](std::int64_t epoch) {
                              term.begin(epoch);
                              reconcile_loop.wake();
                              tick_loop.wake();
                              watch_loop.wake();
                              autopilot_loop.wake();
                            },
                        .stepped_down = [&term](const std::string& reason) { term.end(reason); }});
  PeriodicTask leadership_loop("leadership",
                               std::chrono::milliseconds(static_cast<long long>(
                                   leadership_config.timing.renew_every_s() * 1000)),
                               [&leadership, &term] {
                                 leadership.step();
                                 // A gateway whose port was still held (another serve on this
                                 // host) starts late.
                                 term.start_gateway_if_missing();
                               });

  if (takeover) take_over(*takeover, leadership, leadership_loop);
  // Offered from now on: a successor (`serve --takeover`) takes these sockets and the fleet.
  std::unique_ptr<TakeoverOffer> offer = offer_takeover(
      takeover_path, {.sockets =
                          [&] {
                            std::vector<std::pair<std::string, util::UniqueFd>> sockets;
                            if (auto http = (*server)->duplicate_listening_socket()) {
                              sockets.emplace_back("http", std::move(*http));
                            }
                            if (auto grpc = term.duplicate_gateway_socket()) {
                              sockets.emplace_back("grpc", std::move(*grpc));
                            }
                            return sockets;
                          },
                      .retire = [&leadership] { leadership.retire(); },
                      .rejoin =
                          [&leadership, &leadership_loop] {
                            leadership.rejoin();
                            leadership_loop.wake();
                          },
                      .stop_accepting =
                          [&] {
                            (*server)->stop_accepting();
                            forward.stopped_accepting();
                            term.stop_accepting();
                          },
                      .log = log_line});

  if (!takeover) tell_service_manager("READY=1");

  int signal_received = 0;
  int successor = 0;  // started by a reload, not taken over yet
  while (!finished && signal_received == 0 && !(offer && offer->handed_over())) {
    const int received = stop_signals.wait(std::chrono::milliseconds(200));
    if (received == SIGHUP) {
      successor = start_successor(own_command, offer.get(), successor);
    } else {
      signal_received = received;
    }
    successor = reap_successor(successor);
  }
  if (signal_received != 0) {
    spdlog::info("signal {}: stopping", signal_received);
    tell_service_manager("STOPPING=1");
  }
  if (offer && offer->handed_over() && signal_received == 0) {
    signal_received =
        drain_after_handover(term, stop_signals, o.drain_limit_s,
                             gateway_cfg ? gateway::all_connections_told_to_go(*gateway_cfg)
                                         : std::chrono::milliseconds::zero(),
                             offer->successor());
  }
  if (offer) offer->stop();
  // First: the gateway's waiting calls end (their jobs stay queued for the clients' retries),
  // then long-polls and awaits wake, so the server's workers are free to stop.
  term.shutdown();
  (*server)->stop();
  serving.join();
  leadership_loop.stop();
  autopilot_loop.stop();
  hearing_loop.stop();
  reconcile_loop.stop();
  tick_loop.stop();
  watch_loop.stop();
  // A planned stop hands over at once: a follower takes the lease at its next try.
  leadership.resign();
  ops.webhooks->stop();  // what is still queued is dropped
  spdlog::info("stopped");
  if (!served_ok && signal_received == 0) throw CommandFailed("serve: the HTTP server failed");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand(
      "serve",
      "Run the manager: operator API, agent API, /metrics, /healthz, and the loops that\n"
      "reconcile with the market and enforce deadlines. Every flag can also be set in the\n"
      "environment as PROVERFLEET_<FLAG> (e.g. PROVERFLEET_LISTEN, PROVERFLEET_DB).");
  cmd->footer(
      "Operator token: created on first start as operator.token next to the database (mode\n"
      "0600) and reused afterwards; every /api/v1 operator route needs it as a bearer token.\n"
      "Vast key: $VAST_API_KEY or --vast-key-file, never logged.\n"
      "Prints 'proverfleet serve listening on http://HOST:PORT' once ready, and 'proverfleet\n"
      "gateway listening on HOST:PORT' once the gateway listens (later, if its port was held);\n"
      "SIGINT/SIGTERM stop it.\n"
      "Socket activation: started by systemd (or any supervisor) with LISTEN_PID, LISTEN_FDS\n"
      "and LISTEN_FDNAMES, serve takes the sockets named http and grpc instead of binding\n"
      "--listen and --grpc-listen, so calls made while it restarts wait instead of failing\n"
      "(units in deploy/systemd/; docs/operating.md, \"Restarts and upgrades\").\n"
      "Planned restart or upgrade: start the new binary with --takeover (same config and\n"
      "--db), or send the running serve SIGHUP (systemctl reload) to have it start that itself;\n"
      "the new one receives the running serve's sockets and leads, and the old one answers the\n"
      "calls it holds, then exits: no call fails.");
  cmd->add_option("--config", o->config_path, "Config file (default: ./proverfleet.toml)")
      ->envname("PROVERFLEET_CONFIG");
  cmd->add_option("--listen", o->listen, "Address to serve on, HOST:PORT; port 0 picks one")
      ->envname("PROVERFLEET_LISTEN")
      ->capture_default_str();
  cmd->add_option("--db", o->db,
                  "Database: a SQLite file path (or sqlite:PATH), or postgres://USER@HOST/DB "
                  "shared by replicas (password from PGPASSFILE/$PGPASSWORD)")
      ->envname("PROVERFLEET_DB")
      ->capture_default_str();
  cmd->add_option("--public-url", o->public_url,
                  "URL agents on rented machines call (default: the listen address)")
      ->envname("PROVERFLEET_PUBLIC_URL");
  cmd->add_option("--replica-url", o->replica_url,
                  "URL other serve replicas on this database forward agent calls and operator "
                  "changes to while this one leads (default: the listen address)")
      ->envname("PROVERFLEET_REPLICA_URL");
  cmd->add_option("--replica-grpc", o->replica_grpc,
                  "HOST:PORT other serve replicas relay Curio's gRPC calls to while this one "
                  "leads (default: the gRPC listen address)")
      ->envname("PROVERFLEET_REPLICA_GRPC");
  cmd->add_option("--vast-url", o->vast_url, "Market API base URL")
      ->envname("PROVERFLEET_VAST_URL");
  cmd->add_option("--vast-key-file", o->vast_key_file, "File holding the vast.ai API key")
      ->envname("PROVERFLEET_VAST_KEY_FILE");
  cmd->add_option("--tls-cert", o->tls_cert, "PEM certificate: serve HTTPS (with --tls-key)")
      ->envname("PROVERFLEET_TLS_CERT");
  cmd->add_option("--tls-key", o->tls_key, "PEM private key for --tls-cert")
      ->envname("PROVERFLEET_TLS_KEY");
  cmd->add_option("--params-manifest", o->params_manifest,
                  "Parameter manifest for agents: builtin:NAME, URL or file (overrides "
                  "deploy.params_manifest)")
      ->envname("PROVERFLEET_PARAMS_MANIFEST");
  cmd->add_option("--autopilot", o->autopilot,
                  "true/false: run the autopilot (overrides autopilot.enabled)")
      ->envname("PROVERFLEET_AUTOPILOT");
  cmd->add_option("--max-connections-per-address", o->max_connections_per_address,
                  "Open connections one client address may hold; more are closed at once (rented "
                  "machines behind one NAT address share it)")
      ->envname("PROVERFLEET_MAX_CONNECTIONS_PER_ADDRESS");
  cmd->add_option("--grpc-listen", o->grpc_listen,
                  "cuzk-compatible gRPC endpoint for Curio's [Cuzk] Address, HOST:PORT "
                  "(default: gateway.listen, 127.0.0.1:9820); \"\" or off: none")
      ->envname("PROVERFLEET_GRPC_LISTEN");
  cmd->add_flag("--grpc-allow-any", o->grpc_allow_any,
                "Serve the gateway on a non-loopback address without an allow-list or TLS (the "
                "cuzk protocol has no credentials: only behind a firewall)")
      ->envname("PROVERFLEET_GRPC_ALLOW_ANY");
  cmd->add_flag("--takeover", o->takeover,
                "Take over from the serve running on this fleet: receive its listening sockets "
                "(no port is bound here), lead once it resigns; it answers the calls it holds, "
                "then exits. A planned restart or upgrade that fails no call")
      ->envname("PROVERFLEET_TAKEOVER");
  cmd->add_option("--takeover-socket", o->takeover_socket,
                  "Unix socket where this serve offers its sockets to a successor and where "
                  "--takeover asks for them (default: DATA_DIR/serve-takeover.sock, DATA_DIR "
                  "being [jobs] data_dir or the database's directory)")
      ->envname("PROVERFLEET_TAKEOVER_SOCKET");
  cmd->add_option("--drain-limit", o->drain_limit_s,
                  "Seconds a serve that handed over waits for the calls it still holds to be "
                  "answered before it exits (they then end UNAVAILABLE; their jobs are kept)")
      ->envname("PROVERFLEET_DRAIN_LIMIT")
      ->capture_default_str();
  cmd->add_option("--reconcile-interval", o->reconcile_interval_s,
                  "Seconds between reconciliations with the market's instance list")
      ->envname("PROVERFLEET_RECONCILE_INTERVAL")
      ->capture_default_str();
  cmd->add_option("--tick-interval", o->tick_interval_s,
                  "Seconds between lifecycle ticks (deadlines, spend, destroy retries)")
      ->envname("PROVERFLEET_TICK_INTERVAL")
      ->capture_default_str();
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace pf::cli
