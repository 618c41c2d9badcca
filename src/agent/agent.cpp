#include "agent/agent.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "agent/clock.h"
#include "agent/log_buffer.h"
#include "agent/manager_client.h"
#include "agent/outbox.h"
#include "agent/params.h"
#include "agent/plan_json.h"
#include "agent/private_file.h"
#include "agent/probe.h"
#include "agent/prover_command.h"
#include "agent/prover_cuzk.h"
#include "agent/prover_sim.h"
#include "agent/work_client.h"
#include "agent/work_loop.h"
#include "core/hearing.h"
#include "core/oom_memory.h"
#include "core/planner.h"
#include "core/text.h"
#include "market/backoff.h"
#include "util/bounded_json.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

// agent.json holds one small object of our own making.
constexpr util::JsonLimits kStateFileLimits{
    .max_bytes = 64u << 10, .max_depth = 8, .max_values = 1000, .max_string_bytes = 4096};

constexpr std::size_t kEventsPerPost = 100;
constexpr std::size_t kLogChunkBytes = 64u << 10;
constexpr int kFailedProofsBeforeRestart = 5;

double steady_seconds() {
  return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count();
}

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return core::fixed(bytes, u == 0 ? 0 : 1) + " " + units[u];
}

std::string human_duration(double s) {
  if (!(s >= 0) || !std::isfinite(s)) return "?";
  const auto total = static_cast<long long>(s);
  char buf[32];
  if (total >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", total / 3600, (total / 60) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", total / 60, total % 60);
  }
  return buf;
}

template <typename T>
std::optional<T> setting(const json& settings, const char* key) {
  if (!settings.is_object()) return std::nullopt;
  auto it = settings.find(key);
  if (it == settings.end() || it->is_null()) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

// 32 bytes from the OS in hex: the agent's own bearer token.
tl::expected<std::string, std::string> random_token_hex() {
  unsigned char bytes[32];
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    return tl::unexpected(std::string("cannot read /dev/urandom for a token"));
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(digits[b >> 4]);
    out.push_back(digits[b & 15]);
  }
  return out;
}

bool is_token_hex(const std::string& text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

struct Agent::Impl {
  explicit Impl(AgentOptions options) : o(std::move(options)), clock(o.time_scale) {
    if (o.param_dir.empty()) o.param_dir = o.state_dir + "/params";
  }

  AgentOptions o;
  AgentClock clock;
  LogBuffer logs;
  std::unique_ptr<EventOutbox> outbox;
  std::unique_ptr<ManagerClient> manager;
  // Jobs from the manager (issue 12); made with the manager client, before anything proves.
  std::unique_ptr<WorkClient> work_client;
  std::unique_ptr<WorkLoop> work;
  ProbeResult probe;  // main thread only; the reporter reads probe_has_gpus
  std::atomic<bool> probe_has_gpus{false};
  json register_body;
  json params_manifest = json::array();
  json prover_settings = json::object();
  int machine_oom_partitions = 0;  // the manager's word: plan below this (0: no OOM known)
  double heartbeat_s = 10;
  int max_samples = 0;
  std::unique_ptr<Prover> prover;
  std::atomic<Prover*> prover_ptr{nullptr};  // what the reporter may use, once it exists
  std::mt19937_64 rng{std::random_device{}()};

  // Shared with the reporter and the proof workers.
  std::mutex mu;
  std::condition_variable cv;
  std::string phase = "starting";
  bool stop_requested = false;
  std::string stop_reason;
  bool replan_requested = false;
  std::optional<int> concurrency_command;
  int in_flight = 0, completed = 0, failed = 0, measured = 0;
  int consecutive_failed_proofs = 0;
  double peak_memory_gib = 0;
  std::optional<core::ProverPlan> plan;
  int running_partitions = 0;
  FetchProgress fetch_progress;
  std::atomic<bool> fetch_started{false};
  std::atomic<std::int64_t> next_proof_index{1};

  std::mutex reporter_mu;
  std::condition_variable reporter_cv;
  bool reporter_stop = false;
  bool reporter_wake = false;
  std::atomic<bool> heartbeat_due{true};  // a phase change is reported at once
  // Set when the manager refused our token and our registration: nothing we send counts any
  // more, so the agent stops (with kAgentFailed) instead of retrying forever.
  std::atomic<bool> credentials_refused{false};
  std::thread reporter;
  std::mutex stderr_mu;
  std::atomic<bool> bar_active{false};

  // --- logging -----------------------------------------------------------------------------

  void log(const std::string& message) {
    const std::string line = timestamp() + " agent: " + message;
    logs.append_line(line);
    if (o.log_sink) {
      o.log_sink(line);
      return;
    }
    std::lock_guard lock(stderr_mu);
    if (bar_active) std::cerr << "\r\033[K";
    std::cerr << line << "\n";
  }

  void log_prover_line(const std::string& line) {
    logs.append_line(line);
    if (o.log_sink) o.log_sink(line);
  }

  // --- state ---------------------------------------------------------------------------------

  bool stopping() {
    std::lock_guard lock(mu);
    return stop_requested;
  }

  void set_phase(const std::string& p) {
    {
      std::lock_guard lock(mu);
      if (phase == p) return;
      phase = p;
    }
    log("phase: " + p);
    heartbeat_due = true;
    wake_reporter();
  }

  void wake_reporter() {
    {
      std::lock_guard lock(reporter_mu);
      reporter_wake = true;
    }
    reporter_cv.notify_all();
  }

  // Waits up to `sim_seconds` of agent time; false when a stop was requested meanwhile.
  bool pause(double sim_seconds) {
    std::unique_lock lock(mu);
    cv.wait_for(lock, clock.real(sim_seconds), [&] { return stop_requested; });
    return !stop_requested;
  }

  void emit(json event) {
    event["at"] = clock.now();
    auto r = outbox->add(std::move(event));
    if (!r) log("cannot record an event: " + r.error());
    wake_reporter();
  }

  void emit_simple(const std::string& type, const std::string& message,
                   json data = json::object()) {
    json e = {{"type", type}, {"message", message.substr(0, 4000)}};
    if (!data.empty()) e["data"] = std::move(data);
    emit(std::move(e));
  }

  std::string agent_state_path() const { return o.state_dir + "/agent.json"; }

  std::optional<int> load_partition_cap() {
    // Absent, torn or hostile: the cap is learned again.
    const json s = util::parse_json_file(agent_state_path(), kStateFileLimits).value_or(json());
    if (!s.is_object()) return std::nullopt;
    auto cap = setting<int>(s, "partition_cap");
    if (cap && *cap > 0) return cap;
    return std::nullopt;
  }

  void save_partition_cap(int cap) {
    const std::string tmp = agent_state_path() + ".tmp";
    {
      std::ofstream out(tmp, std::ios::trunc);
      out << json{{"partition_cap", cap}}.dump() << "\n";
    }
    std::error_code ec;
    fs::rename(tmp, agent_state_path(), ec);
    if (ec) log("cannot save " + agent_state_path() + ": " + ec.message());
  }

  // --- registration ----------------------------------------------------------------------

  std::string agent_token_path() const { return o.state_dir + "/agent-token"; }

  // The agent's bearer token: the one kept in the state dir (a restart), else a new one, saved
  // (0600) before it is first sent. The manager binds the deployment secret to the first token
  // it sees, so a retry after a lost register reply, or a restarted agent, registers again with
  // the same token; a lost state dir means the instance cannot be re-joined (by design: the
  // secret is readable in the market's instance list).
  tl::expected<std::string, std::string> load_or_create_token() {
    const std::string path = agent_token_path();
    std::error_code ec;
    if (fs::exists(path, ec)) {
      std::ifstream in(path);
      std::string token;
      std::getline(in, token);
      if (!is_token_hex(token)) {
        return tl::unexpected(path + " does not hold an agent token (64 hex digits); remove it " +
                              "only if this instance never registered");
      }
      // Someone loosened it: tighten rather than refuse (the token is ours either way).
      fs::permissions(path, fs::perms::owner_read | fs::perms::owner_write,
                      fs::perm_options::replace, ec);
      if (ec) log("warning: cannot make " + path + " private (chmod 600): " + ec.message());
      return token;
    }
    auto token = random_token_hex();
    if (!token) return token;
    if (auto w = write_private_file(path, *token + "\n"); !w) return tl::unexpected(w.error());
    return token;
  }

  // Registers (again). Returns the exit code to leave with when registration cannot succeed.
  std::optional<int> register_until_done() {
    for (int attempt = 0;; ++attempt) {
      auto r = manager->register_agent(register_body);
      if (r) {
        manager->set_token((*r)["token"].get<std::string>());
        const json& reply = *r;
        if (auto hb = setting<double>(reply, "heartbeat_s"); hb && *hb > 0) heartbeat_s = *hb;
        if (reply.contains("prover") && reply["prover"].is_object())
          prover_settings = reply["prover"];
        params_manifest = reply.contains("params") && !reply["params"].is_null() ? reply["params"]
                                                                                 : json::array();
        machine_oom_partitions = 0;
        if (reply.contains("machine") && reply["machine"].is_object()) {
          const int known = setting<int>(reply["machine"], "oom_partitions").value_or(0);
          if (known > 0 && known <= core::kMaxPlanPartitions) machine_oom_partitions = known;
        }
        if (reply.contains("benchmark")) {
          max_samples = setting<int>(reply["benchmark"], "max_samples").value_or(0);
        }
        log("registered as instance " +
            (reply.contains("instance_id") ? reply["instance_id"].dump() : std::string("?")) +
            " (heartbeat every " + core::fixed(heartbeat_s, 1) + " s)");
        return std::nullopt;
      }
      const CallError& e = r.error();
      if (e.kind == CallError::Kind::Gone) {
        log("the manager is destroying this instance: " + e.message);
        return kAgentStopped;
      }
      if (!e.retryable()) {
        log("registration refused: " + e.message);
        return kAgentFailed;
      }
      const double delay =
          market::full_jitter_delay_s(std::min(attempt, 6), 1, core::kAgentRetryMaxS, rng);
      log("cannot register yet (" + e.message + "); retrying in " + core::fixed(delay, 1) + " s");
      if (!pause(delay * clock.scale())) return kAgentStopped;
    }
  }

  // --- reporter thread ---------------------------------------------------------------------

  json heartbeat_body() {
    json body;
    std::optional<core::ProverPlan> p;
    Prover* current = prover_ptr.load();
    {
      std::lock_guard lock(mu);
      body["phase"] = phase;
      body["prover"] = {{"kind", current ? current->kind() : std::string()},
                        {"in_flight", in_flight},
                        {"completed", completed},
                        {"failed", failed},
                        {"peak_memory_gib", peak_memory_gib}};
      p = plan;
      if (p) {
        body["prover"]["partitions"] = running_partitions;
        body["prover"]["model_peak_gib"] = p->expected_peak_gib;
      }
    }
    if (fetch_started) {
      const auto s = fetch_progress.snapshot(steady_seconds());
      body["params"] = {{"done", s.done_bytes},
                        {"total", s.total_bytes},
                        {"bytes_per_s", s.bytes_per_s},
                        {"files_done", s.files_done},
                        {"files_total", s.files_total}};
      if (s.eta_s) body["params"]["eta_s"] = *s.eta_s;
    }
    if (work) {
      body["phase"] = work->phase_for(body["phase"].get<std::string>());
      body["jobs"] = work->held_json();
    }
    std::optional<std::vector<GpuInfo>> gpus;
    if (current) {
      gpus = current->gpu_samples();
      json status = current->status_json();
      if (!status.is_null()) body["prover"]["status"] = std::move(status);
    }
    if (!gpus && probe_has_gpus) {
      ProbeOptions po{o.probe_root, o.nvidia_smi, ""};
      if (auto g = query_gpus(po)) gpus = std::move(*g);
    }
    if (gpus) {
      json arr = json::array();
      for (const auto& g : *gpus) arr.push_back(heartbeat_json(g));
      body["gpus"] = std::move(arr);
    }
    return body;
  }

  void handle_commands(const json& commands) {
    for (const auto& c : commands) {
      std::string name;
      std::optional<int> value;
      if (c.is_string()) {
        name = c.get<std::string>();
        if (const auto colon = name.find(':'); colon != std::string::npos) {
          try {
            value = std::stoi(name.substr(colon + 1));
          } catch (const std::exception&) {
          }
          name = name.substr(0, colon);
        }
      } else if (c.is_object()) {
        name = setting<std::string>(c, "name").value_or(
            setting<std::string>(c, "command").value_or(""));
        value = setting<int>(c, "value");
      }
      if (name == "stop") {
        request_stop("the manager sent stop");
      } else if (name == "replan") {
        log("the manager asked for a re-plan");
        std::lock_guard lock(mu);
        replan_requested = true;
        cv.notify_all();
      } else if (name == "set_concurrency" && value && *value >= 1 && *value <= 256) {
        log("the manager set proofs in flight to " + std::to_string(*value));
        std::lock_guard lock(mu);
        concurrency_command = *value;
        cv.notify_all();
      } else {
        log("ignoring unknown manager command " + c.dump());
      }
    }
  }

  // A 401 means the manager does not know our token (its database was restored from before
  // we registered, say). Registering again with the same token settles it: the manager either
  // takes it (the secret was not used yet, or is bound to this very token) or refuses for good
  // (the secret was spent by someone else), and then nothing we send counts: stop, once.
  void on_unauthorized(const CallError& e) {
    if (credentials_refused) return;
    log("the manager rejected our token (" + e.message + "); registering again with it");
    auto r = manager->register_agent(register_body);
    if (r) {
      manager->set_token((*r)["token"].get<std::string>());
      log("registered again with our token");
    } else if (r.error().kind == CallError::Kind::Gone) {
      request_stop("the manager is destroying this instance");
    } else if (r.error().retryable()) {
      log("re-registration failed, will retry on the next refusal: " + r.error().message);
    } else {
      credentials_refused = true;
      log("error: the manager refused our token and our registration (" + r.error().message +
          "); stopping: this agent can no longer report for the instance");
      request_stop("the manager refused our token and our registration");
    }
  }

  bool send_heartbeat() {
    auto r = manager->heartbeat(heartbeat_body());
    if (r) {
      handle_commands(r->commands);
      if (work) work->on_heartbeat(r->work, r->drop_jobs);
      return true;
    }
    if (r.error().kind == CallError::Kind::Unauthorized) on_unauthorized(r.error());
    if (r.error().kind == CallError::Kind::Gone)
      request_stop("the manager is destroying this instance");
    return false;
  }

  // Sends one batch; true when the manager took it (or it can never be taken).
  bool flush_events() {
    const auto batch = outbox->pending(kEventsPerPost);
    if (batch.empty()) return true;
    auto r = manager->send_events(json(batch));
    const std::int64_t last = batch.back()["seq"].get<std::int64_t>();
    if (r) {
      if (auto ack = outbox->acknowledge(last); !ack) log(ack.error());
      return true;
    }
    const CallError& e = r.error();
    if (e.kind == CallError::Kind::Unauthorized) {
      on_unauthorized(e);
      return false;
    }
    if (e.kind == CallError::Kind::Rejected) {
      // The manager will never accept this batch; holding it would block every later event.
      log("the manager rejected events " + batch.front()["seq"].dump() + ".." +
          std::to_string(last) + " (" + e.message + "); dropping them");
      if (auto ack = outbox->acknowledge(last); !ack) log(ack.error());
      return true;
    }
    if (e.kind == CallError::Kind::Gone) request_stop("the manager is destroying this instance");
    return false;
  }

  bool push_logs() {
    const auto chunk = logs.peek(kLogChunkBytes);
    if (chunk.text.empty()) return true;
    auto r = manager->send_logs(chunk.text);
    if (r) {
      logs.consume(chunk);
      return true;
    }
    if (r.error().kind == CallError::Kind::Rejected) {
      logs.consume(chunk);  // e.g. too large for this manager: never deliverable
      return true;
    }
    return false;
  }

  void reporter_loop() {
    const double period_s =
        std::clamp(heartbeat_s / clock.scale(), 0.25, std::max(0.25, heartbeat_s));
    double next_hb = 0, next_events = 0, next_logs = 0;
    int event_failures = 0, log_failures = 0;
    std::mt19937_64 jitter(std::random_device{}());
    while (true) {
      {
        std::unique_lock lock(reporter_mu);
        if (reporter_stop) break;
      }
      const double now = steady_seconds();
      if (now >= next_hb || heartbeat_due.exchange(false)) {
        if (send_heartbeat() && (event_failures > 0 || log_failures > 0)) {
          // The manager is back (a restart, say): what waited on it goes now, not after the
          // rest of a backoff that was meant for an unreachable manager.
          event_failures = log_failures = 0;
          next_events = next_logs = 0;
        }
        next_hb = now + period_s;
      }
      if (outbox->pending_count() > 0 && steady_seconds() >= next_events) {
        if (flush_events()) {
          event_failures = 0;
          next_events = 0;
        } else {
          next_events =
              steady_seconds() + market::full_jitter_delay_s(std::min(event_failures, 6), 0.5,
                                                             core::kAgentRetryMaxS, jitter);
          ++event_failures;
        }
      }
      if (logs.size() > 0 && steady_seconds() >= next_logs) {
        if (push_logs()) {
          log_failures = 0;
          next_logs = logs.size() > kLogChunkBytes ? 0 : steady_seconds() + period_s;
        } else {
          next_logs = steady_seconds() + market::full_jitter_delay_s(std::min(log_failures, 6), 0.5,
                                                                     core::kAgentRetryMaxS, jitter);
          ++log_failures;
        }
      }
      double wake = next_hb;
      if (outbox->pending_count() > 0)
        wake = std::min(wake, std::max(next_events, steady_seconds()));
      if (logs.size() > 0) wake = std::min(wake, std::max(next_logs, steady_seconds()));
      std::unique_lock lock(reporter_mu);
      const double wait_s = std::max(0.0, wake - steady_seconds());
      reporter_cv.wait_for(lock, std::chrono::duration<double>(wait_s),
                           [&] { return reporter_stop || reporter_wake || heartbeat_due; });
      reporter_wake = false;
    }
  }

  void start_reporter() {
    reporter = std::thread([this] { reporter_loop(); });
  }

  void stop_reporter() {
    {
      std::lock_guard lock(reporter_mu);
      reporter_stop = true;
    }
    reporter_cv.notify_all();
    if (reporter.joinable()) reporter.join();
  }

  // After the reporter stopped: tries for up to `seconds` (real) to deliver every event and
  // the log tail. Whatever is left stays journaled for the next run.
  void drain(double seconds) {
    if (credentials_refused) return;  // nothing would be taken; events stay journaled
    const double end = steady_seconds() + seconds;
    while (outbox->pending_count() > 0 && steady_seconds() < end) {
      if (!flush_events()) std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    for (int i = 0; i < 4 && logs.size() > 0 && steady_seconds() < end; ++i) {
      if (!push_logs()) break;
    }
  }

  // --- jobs ----------------------------------------------------------------------------------

  void start_work() {
    WorkClientOptions wo;
    wo.cache_dir = o.state_dir + "/job-inputs";
    wo.retry_max_s = core::kAgentRetryMaxS;
    wo.log = [this](const std::string& line) { log(line); };
    wo.on_unauthorized = [this](const CallError& e) { on_unauthorized(e); };
    wo.wait = [this](double seconds) {
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return stop_requested; });
      return !stop_requested;
    };
    work_client = std::make_unique<WorkClient>(*manager, std::move(wo));
    WorkLoopOptions lo;
    lo.lease_retry_max_s = core::kAgentRetryMaxS;
    lo.log = [this](const std::string& line) { log(line); };
    work = std::make_unique<WorkLoop>(*work_client, std::move(lo));
  }

  // --- parameters --------------------------------------------------------------------------

  void draw_progress_bar() {
    const auto s = fetch_progress.snapshot(steady_seconds());
    if (s.total_bytes == 0) return;
    const double frac = static_cast<double>(s.done_bytes) / static_cast<double>(s.total_bytes);
    constexpr int kWidth = 30;
    const int filled = std::clamp(static_cast<int>(frac * kWidth), 0, kWidth);
    std::string bar = "[" + std::string(filled, '#') + std::string(kWidth - filled, '-') + "] ";
    bar += core::fixed(frac * 100, 1) + "% " + human_bytes(static_cast<double>(s.done_bytes)) +
           " / " + human_bytes(static_cast<double>(s.total_bytes)) + "  " +
           human_bytes(s.bytes_per_s) + "/s  ETA " + (s.eta_s ? human_duration(*s.eta_s) : "?");
    std::lock_guard lock(stderr_mu);
    std::cerr << "\r\033[K" << bar << std::flush;
  }

  tl::expected<void, std::string> fetch_parameters() {
    auto files = parse_param_manifest(params_manifest);
    if (!files) return tl::unexpected("bad parameter manifest from the manager: " + files.error());
    set_phase("fetching_params");
    FetchOptions fo;
    fo.dir = o.param_dir;
    fo.connections = std::max(1, o.download_connections);
    fo.chunk_bytes = static_cast<std::uint64_t>(std::max(1, o.download_chunk_mib)) << 20;
    fo.free_gib = o.free_gib;
    fo.cancelled = [this] { return stopping(); };
    fo.log = [this](const std::string& line) { log(line); };
    fetch_started = true;
    std::atomic<bool> fetch_done{false};
    std::thread bar;
    if (o.progress_bar) {
      bar_active = true;
      bar = std::thread([&] {
        while (!fetch_done) {
          draw_progress_bar();
          std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
      });
    }
    const double t0 = clock.now();
    auto r = fetch_params(*files, fo, fetch_progress);
    fetch_done = true;
    if (bar.joinable()) {
      bar.join();
      draw_progress_bar();
      std::lock_guard lock(stderr_mu);
      std::cerr << "\n";
      bar_active = false;
    }
    if (!r) return tl::unexpected(r.error());
    log("parameters ready: " + std::to_string(files->size()) + " files, " +
        human_bytes(static_cast<double>(r->bytes)) + " (" +
        human_bytes(static_cast<double>(r->downloaded)) + " downloaded)");
    emit_simple("params_done", "parameters fetched and verified",
                {{"files", files->size()},
                 {"bytes", r->bytes},
                 {"downloaded", r->downloaded},
                 {"refetched", r->refetched},
                 {"seconds", clock.now() - t0}});
    return {};
  }

  // --- the prover ----------------------------------------------------------------------------

  tl::expected<std::unique_ptr<Prover>, std::string> make_prover(const std::string& kind) {
    if (o.make_prover) {
      auto p = o.make_prover(kind);
      if (!p) return tl::unexpected("no prover of kind '" + kind + "'");
      return p;
    }
    if (kind == "sim") {
      if (o.sim_truth.empty()) {
        return tl::unexpected(std::string(
            "the sim prover needs the scenario truth: --sim-truth JSON or PROVERFLEET_SIM_TRUTH"));
      }
      const auto t = util::parse_json(o.sim_truth);
      if (!t) return tl::unexpected("--sim-truth is not valid JSON: " + t.error());
      auto truth = parse_sim_truth(*t);
      if (!truth) return tl::unexpected(truth.error());
      return std::make_unique<SimProver>(*truth, clock);
    }
    if (kind == "command") {
      CommandProverOptions co;
      co.command = !o.prover_command.empty()
                       ? o.prover_command
                       : setting<std::string>(prover_settings, "command").value_or("");
      if (co.command.empty()) {
        return tl::unexpected(
            std::string("the command prover needs --prover-command (or prover.command)"));
      }
      co.probe_root = o.probe_root;
      co.env["PF_PARAM_DIR"] = o.param_dir;
      if (auto t = setting<double>(prover_settings, "prove_timeout_s")) co.proof_timeout_s = *t;
      return std::make_unique<CommandProver>(co, clock);
    }
    if (kind == "cuzk") {
      CuzkOptions co;
      co.daemon = o.cuzk_external ? std::string()
                  : !o.cuzk_daemon.empty()
                      ? o.cuzk_daemon
                      : setting<std::string>(prover_settings, "cuzk_daemon").value_or(kCuzkProgram);
      co.listen = !o.cuzk_listen.empty()
                      ? o.cuzk_listen
                      : setting<std::string>(prover_settings, "listen").value_or("127.0.0.1:9820");
      co.status_listen =
          !o.cuzk_status_listen.empty()
              ? o.cuzk_status_listen
              : setting<std::string>(prover_settings, "status_listen").value_or("127.0.0.1:9821");
      co.param_dir = o.param_dir;
      co.config_path = o.state_dir + "/cuzk.toml";
      std::string c1 = !o.c1_path.empty()
                           ? o.c1_path
                           : setting<std::string>(prover_settings, "c1_file").value_or("");
      if (!c1.empty() && c1.front() != '/') c1 = o.param_dir + "/" + c1;
      co.c1_path = c1;
      if (auto v = setting<std::uint64_t>(prover_settings, "registered_proof"))
        co.registered_proof = *v;
      if (auto v = setting<std::uint64_t>(prover_settings, "sector_number")) co.sector_number = *v;
      if (auto v = setting<std::uint64_t>(prover_settings, "miner_id")) co.miner_id = *v;
      if (auto v = setting<double>(prover_settings, "prove_timeout_s")) co.prove_timeout_s = *v;
      if (auto v = setting<std::string>(prover_settings, "log_level")) co.log_level = *v;
      co.probe_root = o.probe_root;
      co.log = [this](const std::string& line) { log_prover_line(line); };
      return std::make_unique<CuzkProver>(co);
    }
    return tl::unexpected("unknown prover '" + kind + "': expected cuzk, sim or command");
  }

  core::PlanInput plan_input() {
    core::PlanInput in;
    in.ram_gib = probe.memory.usable_gib;
    in.cores = probe.cpu.usable;
    in.gpus = std::max<int>(1, static_cast<int>(probe.gpus.size()));
    in.pce_cached = !prover->needs_cache_warmup();
    return in;
  }

  core::PlanLimits plan_limits(std::optional<int> oom_cap) {
    core::PlanLimits lim;
    std::optional<int> cap = oom_cap;
    auto tighten = [&](std::optional<int> c) {
      if (c && *c > 0) cap = cap ? std::min(*cap, *c) : *c;
    };
    tighten(o.partitions);
    tighten(setting<int>(prover_settings, "partitions"));
    if (cap) lim.partition_cap = *cap;
    return lim;
  }

  int proofs_in_flight(const core::ProverPlan& p) {
    std::lock_guard lock(mu);
    if (concurrency_command) return *concurrency_command;
    if (o.concurrency && *o.concurrency > 0) return *o.concurrency;
    if (auto c = setting<int>(prover_settings, "concurrency"); c && *c > 0) return *c;
    return std::max(1, p.proofs_in_flight);
  }

  void note_peak() {
    if (auto peak = prover->peak_memory_gib()) {
      std::lock_guard lock(mu);
      peak_memory_gib = std::max(peak_memory_gib, *peak);
    }
  }

  void record_completed(const ProofOutcome& out, bool warmup) {
    {
      std::lock_guard lock(mu);
      completed++;
      consecutive_failed_proofs = 0;
      if (!warmup) measured++;
      if (!warmup && phase == "benchmarking" && max_samples > 0 && measured >= max_samples) {
        phase = "proving";
        heartbeat_due = true;
      }
    }
    note_peak();
    json e = {{"type", "proof_done"},
              {"seconds", std::max(out.seconds, 1e-3)},
              {"gpu_ms", out.gpu_ms},
              {"queue_ms", out.queue_ms},
              {"phase", warmup ? "warmup" : "measured"}};
    emit(std::move(e));
  }

  // Returns true when too many proofs failed in a row: the prover is unusable as it is.
  bool record_failed(const ProofOutcome& out) {
    int streak = 0;
    {
      std::lock_guard lock(mu);
      failed++;
      streak = ++consecutive_failed_proofs;
    }
    log("proof failed: " + out.message);
    emit_simple("error", "proof failed: " + out.message, {{"consecutive", streak}});
    return streak >= kFailedProofsBeforeRestart;
  }

  ProofOutcome run_proof(ProofJob job) {
    {
      std::lock_guard lock(mu);
      in_flight++;
    }
    job.index = next_proof_index.fetch_add(1);
    ProofOutcome out = prover->prove(job);
    std::lock_guard lock(mu);
    in_flight--;
    return out;
  }

  struct SessionEnd {
    enum class Why { Stop, Replan, Died } why = Why::Stop;
    ProofOutcome outcome;  // Died: the failure that ended it
    ProverHealth health;   // Died: read before the prover was stopped
  };

  // Waits (briefly) for a failing prover to finish dying, so its exit status says why.
  ProverHealth settled_health() {
    ProverHealth h = prover->health();
    for (int i = 0; i < 50 && h.running; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      h = prover->health();
    }
    return h;
  }

  // Keeps the planned proofs in flight until a stop, a re-plan or the prover's death.
  SessionEnd run_session(const core::ProverPlan& p) {
    std::optional<SessionEnd> end;
    int target = proofs_in_flight(p);
    std::vector<std::thread> workers;
    auto worker = [this, &end, &target](int id) {
      while (true) {
        {
          std::unique_lock lock(mu);
          cv.wait(lock, [&] { return end.has_value() || stop_requested || id < target; });
          if (end || stop_requested) return;
        }
        // Once the manager has work for us, the slots take its jobs instead of the benchmark.
        ProofOutcome out;
        if (work && work->wants_workers()) {
          auto job_out = work->prove_next(
              std::chrono::milliseconds(250), [this](ProofJob job) { return run_proof(job); },
              [this, &end] {
                std::lock_guard lock(mu);
                return end.has_value() || stop_requested;
              });
          if (!job_out) continue;
          out = std::move(*job_out);
        } else {
          out = run_proof(ProofJob{});
        }
        switch (out.kind) {
          case ProofOutcome::Kind::Completed:
            record_completed(out, false);
            break;
          case ProofOutcome::Kind::Failed:
            if (record_failed(out)) {
              std::lock_guard lock(mu);
              if (!end) {
                ProofOutcome why = out;
                why.kind = ProofOutcome::Kind::Transport;
                why.message = std::to_string(kFailedProofsBeforeRestart) +
                              " proofs failed in a row; last: " + out.message;
                end = SessionEnd{SessionEnd::Why::Died, why, {}};
              }
              cv.notify_all();
              return;
            }
            break;
          case ProofOutcome::Kind::Transport:
          case ProofOutcome::Kind::OutOfMemory: {
            std::lock_guard lock(mu);
            if (!end) end = SessionEnd{SessionEnd::Why::Died, out, {}};
            cv.notify_all();
            return;
          }
          case ProofOutcome::Kind::Stopped:
            return;
        }
      }
    };
    for (int i = 0; i < target; ++i) workers.emplace_back(worker, i);
    if (work) work->set_slots(target);
    log("proving with " + std::to_string(target) + " proofs in flight");
    SessionEnd result;
    {
      std::unique_lock lock(mu);
      while (true) {
        cv.wait(lock, [&] {
          return end.has_value() || stop_requested || replan_requested ||
                 (concurrency_command && *concurrency_command != target);
        });
        if (end) {
          result = *end;
          break;
        }
        if (stop_requested) {
          end = SessionEnd{SessionEnd::Why::Stop, {}, {}};
          result = *end;
          break;
        }
        if (replan_requested) {
          replan_requested = false;
          end = SessionEnd{SessionEnd::Why::Replan, {}, {}};
          result = *end;
          break;
        }
        target = *concurrency_command;
        if (work) work->set_slots(target);
        while (static_cast<int>(workers.size()) < target) {
          workers.emplace_back(worker, static_cast<int>(workers.size()));
        }
        cv.notify_all();
      }
    }
    cv.notify_all();
    if (work) work->set_slots(0);  // held jobs keep their leases until the prover is back
    if (result.why == SessionEnd::Why::Died) result.health = settled_health();
    note_peak();
    prover->stop();
    for (auto& w : workers) w.join();
    return result;
  }

  // After the prover died: an OOM re-plans smaller, anything else restarts it. Returns an error
  // when nothing more can be done.
  tl::expected<void, std::string> after_death(const ProofOutcome& outcome,
                                              const ProverHealth& health, int& crash_streak) {
    const bool oom = outcome.kind == ProofOutcome::Kind::OutOfMemory || health.oom;
    const std::string message = !health.message.empty() && health.message != "running"
                                    ? health.message + "; " + outcome.message
                                    : outcome.message;
    if (oom) {
      const int ran = running_partitions;
      auto next = core::plan_after_oom(plan_input(), plan_limits(std::nullopt), ran);
      json data = {{"partitions", ran},
                   {"usable_ram_gib", probe.memory.usable_gib},
                   {"model_peak_gib", plan ? plan->expected_peak_gib : 0.0}};
      if (auto peak = prover->peak_memory_gib()) data["observed_peak_gib"] = *peak;
      if (!next) {
        emit_simple("oom", message, data);
        return tl::unexpected(next.error());
      }
      data["next_partitions"] = next->partitions;
      emit_simple("oom", message, data);
      log("killed for memory at " + std::to_string(ran) + " partitions; re-planned to " +
          std::to_string(next->partitions));
      save_partition_cap(next->partitions);
      std::lock_guard lock(mu);
      plan = *next;
      return {};
    }
    ++crash_streak;
    emit_simple("prover_crashed", message, {{"restarts_in_a_row", crash_streak}});
    log("prover crashed (" + message + ")");
    if (crash_streak > o.max_restarts) {
      return tl::unexpected("the prover failed " + std::to_string(crash_streak) +
                            " times in a row without a proof; last: " + message);
    }
    pause(std::min(60.0, std::pow(2.0, crash_streak)));
    return {};
  }

  // Runs the prover until a stop; an error when it cannot go on.
  tl::expected<void, std::string> supervise() {
    const std::string kind = !o.prover.empty()
                                 ? o.prover
                                 : setting<std::string>(prover_settings, "kind").value_or("cuzk");
    auto made = make_prover(kind);
    if (!made) return tl::unexpected(made.error());
    prover = std::move(*made);
    prover_ptr = prover.get();
    if (probe.gpus.empty()) log("no GPU found by the probe; planning for one");
    // This instance's own lesson (its state dir) first, else what the manager knows of the
    // machine's earlier rentals.
    const auto cap = load_partition_cap();
    auto first = cap ? core::plan_prover(plan_input(), plan_limits(cap))
                     : core::plan_for_machine(plan_input(), plan_limits(std::nullopt),
                                              machine_oom_partitions);
    if (!first) return tl::unexpected("no prover plan fits this machine: " + first.error());
    {
      std::lock_guard lock(mu);
      plan = *first;
    }
    for (const auto& r : first->reasons) log("plan: " + r);

    int crash_streak = 0;
    bool cache_warmed = false;
    while (!stopping()) {
      core::ProverPlan p;
      {
        std::lock_guard lock(mu);
        p = *plan;
      }
      const bool warm = !cache_warmed && prover->needs_cache_warmup();
      {
        std::lock_guard lock(mu);
        running_partitions = warm ? p.warmup_partitions : p.partitions;
      }
      set_phase("warming_up");
      auto started = prover->start(p, warm);
      if (!started) {
        if (stopping()) break;
        auto r = after_death(
            {ProofOutcome::Kind::Transport, 0, 0, 0, "start failed: " + started.error()}, {},
            crash_streak);
        if (!r) return r;
        continue;
      }
      log("prover started: " + *started);
      json data = {{"plan", plan_to_json(p)},
                   {"warmup_plan", warm},
                   {"prover", prover->kind()},
                   {"partitions", warm ? p.warmup_partitions : p.partitions}};
      emit_simple("prover_started", *started, data);

      ProofJob warmup_job;
      warmup_job.warmup = true;
      ProofOutcome warmup = run_proof(warmup_job);
      if (warmup.kind == ProofOutcome::Kind::Stopped || stopping()) break;
      if (warmup.kind == ProofOutcome::Kind::Failed) {
        // The prover is alive but could not prove: start it again, within the same limit.
        record_failed(warmup);
        prover->stop();
        if (++crash_streak > o.max_restarts) {
          return tl::unexpected("the warm-up proof failed " + std::to_string(crash_streak) +
                                " times in a row; last: " + warmup.message);
        }
        pause(std::min(60.0, std::pow(2.0, crash_streak)));
        continue;
      }
      if (warmup.kind != ProofOutcome::Kind::Completed) {
        const ProverHealth h = settled_health();
        prover->stop();
        auto r = after_death(warmup, h, crash_streak);
        if (!r) return r;
        continue;
      }
      record_completed(warmup, true);
      crash_streak = 0;
      if (warm) {
        cache_warmed = true;
        prover->stop();
        if (prover->needs_cache_warmup()) {
          log("warning: the PCE file is still missing after the warm-up proof; starting the "
              "full plan anyway");
        } else {
          log("PCE file written; restarting at the full plan");
        }
        continue;
      }
      note_peak();
      {
        json check = {{"partitions", p.partitions},
                      {"model_peak_gib", p.expected_peak_gib},
                      {"usable_ram_gib", p.usable_ram_gib}};
        std::string msg = "model peak " + core::fixed(p.expected_peak_gib, 1) + " GiB";
        if (auto peak = prover->peak_memory_gib()) {
          check["observed_peak_gib"] = *peak;
          check["ratio"] = p.expected_peak_gib > 0 ? *peak / p.expected_peak_gib : 0;
          msg = "observed peak " + core::fixed(*peak, 1) + " GiB vs " + msg;
        } else {
          msg = "observed peak unknown; " + msg;
        }
        emit_simple("memory_check", msg, check);
      }
      bool enough = false;
      {
        std::lock_guard lock(mu);
        enough = max_samples > 0 && measured >= max_samples;
      }
      set_phase(enough ? "proving" : "benchmarking");

      SessionEnd end = run_session(p);
      if (end.why == SessionEnd::Why::Stop) break;
      if (end.why == SessionEnd::Why::Replan) {
        probe = probe_machine({o.probe_root, o.nvidia_smi, o.param_dir});
        probe_has_gpus = !probe.gpus.empty();
        auto next = core::plan_prover(plan_input(), plan_limits(load_partition_cap()));
        if (!next) return tl::unexpected("re-plan failed: " + next.error());
        emit_simple("replan", std::to_string(next->partitions) + " partitions",
                    {{"plan", plan_to_json(*next)}});
        std::lock_guard lock(mu);
        plan = *next;
        continue;
      }
      auto r = after_death(end.outcome, end.health, crash_streak);
      if (!r) return r;
    }
    return {};
  }

  // --- run -----------------------------------------------------------------------------------

  int shutdown(int code) {
    set_phase("exiting");
    if (prover) prover->stop();
    // Proofs already made are worth delivering; unfinished jobs' leases end with this agent.
    if (work) work->stop(std::chrono::milliseconds(static_cast<std::int64_t>(o.drain_s * 1000)));
    std::string reason;
    {
      std::lock_guard lock(mu);
      reason = stop_reason.empty() ? "exiting" : stop_reason;
    }
    log("exiting: " + reason);
    emit_simple("exiting", reason);
    stop_reporter();
    drain(o.drain_s);
    return credentials_refused ? kAgentFailed : code;
  }

  int fail(const std::string& message) {
    log("error: " + message);
    emit_simple("error", message);
    set_phase("failed");
    if (o.exit_on_failure) return shutdown(kAgentFailed);
    // Stay observable: heartbeats go on until the manager sends stop (or a signal comes).
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return stop_requested; });
    lock.unlock();
    return shutdown(kAgentStopped);
  }

  int run() {
    if (o.manager_url.empty() || o.deployment.empty() || o.secret.empty()) {
      log("error: the manager URL, deployment id and secret are required");
      return kAgentFailed;
    }
    std::error_code ec;
    if (fs::create_directories(o.state_dir, ec) && !ec) {
      // It will hold our bearer token and the event journal: ours alone.
      fs::permissions(o.state_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
    }
    if (ec) {
      log("error: cannot create the state directory " + o.state_dir + ": " + ec.message());
      return kAgentFailed;
    }
    auto token = load_or_create_token();
    if (!token) {
      log("error: " + token.error());
      return kAgentFailed;
    }
    const auto epoch_ms =
        static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::system_clock::now().time_since_epoch())
                                      .count());
    auto box = EventOutbox::open(o.state_dir, epoch_ms);
    if (!box) {
      log("error: " + box.error());
      return kAgentFailed;
    }
    outbox = std::move(*box);
    if (outbox->pending_count() > 0) {
      log(std::to_string(outbox->pending_count()) +
          " events from an earlier run wait for delivery");
    }
    market::HttpOptions http;
    http.connect_timeout_s = 10;
    http.request_timeout_s = 30;  // a hung manager must not stall heartbeats for long
    manager = std::make_unique<ManagerClient>(o.manager_url, http);
    start_work();

    probe = probe_machine({o.probe_root, o.nvidia_smi, o.param_dir});
    probe_has_gpus = !probe.gpus.empty();
    log("probe: memory " + core::fixed(probe.memory.usable_gib, 1) + " GiB usable (" +
        probe.memory.usable_source + "), " + core::fixed(probe.cpu.usable, 1) + " cores (" +
        probe.cpu.usable_source + "), " + std::to_string(probe.gpus.size()) + " GPU(s)" +
        (probe.disk ? ", " + core::fixed(probe.disk->free_gib, 1) + " GiB free disk" : ""));
    for (const auto& w : probe.warnings) log("probe: " + w);

    register_body = {{"deployment", o.deployment},
                     {"secret", o.secret},
                     {"hardware", to_json(probe)},
                     {"agent_version", o.agent_version},
                     {"token", *token}};
    if (auto code = register_until_done()) {
      if (*code == kAgentStopped) return kAgentStopped;
      return *code;
    }
    start_reporter();

    if (stopping()) return shutdown(kAgentStopped);
    if (auto r = fetch_parameters(); !r) {
      if (stopping()) return shutdown(kAgentStopped);
      return fail("parameters: " + r.error());
    }
    if (stopping()) return shutdown(kAgentStopped);
    if (auto r = supervise(); !r) {
      if (stopping()) return shutdown(kAgentStopped);
      return fail(r.error());
    }
    return shutdown(kAgentStopped);
  }

  void request_stop(const std::string& reason) {
    {
      std::lock_guard lock(mu);
      if (stop_requested) return;
      stop_requested = true;
      stop_reason = reason;
    }
    cv.notify_all();
    wake_reporter();
  }
};

Agent::Agent(AgentOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
Agent::~Agent() {
  impl_->stop_reporter();
  if (impl_->work) impl_->work->stop(std::chrono::milliseconds(0));
}

int Agent::run() {
  return impl_->run();
}

void Agent::request_stop(const std::string& reason) {
  impl_->log("stop requested: " + reason);
  impl_->request_stop(reason);
}

}  // namespace pf::agent
