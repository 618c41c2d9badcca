#include "market_sim/agent_spawner.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "agent/process.h"
#include "core/text.h"

namespace pf::market_sim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr double kGiB = 1024.0 * 1024 * 1024;
constexpr double kKiBPerGiB = 1024.0 * 1024;
constexpr auto kPollPeriod = std::chrono::milliseconds(50);
// A rate of 0 is a host that never finishes a proof; the sim prover needs a positive rate.
constexpr double kMinSimRate = 1e-6;

std::string integer_text(double v) {
  return std::to_string(std::llround(v));
}

// Shortest text that reads back as the same double.
std::string number_text(double v) {
  std::ostringstream ss;
  ss.precision(17);
  ss << v;
  return ss.str();
}

bool is_variable_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

const char* failure_words(FailureKind kind) {
  switch (kind) {
    case FailureKind::Crash:
      return "the container crashed (truth failure crash)";
    case FailureKind::Offline:
      return "the host went offline (truth failure offline)";
    default:
      return "the host failed";
  }
}

std::uint64_t mix_seed(std::uint64_t seed, std::int64_t id) {
  std::uint64_t z = seed ^ (static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return (z ^ (z >> 31)) >> 1;  // a JSON integer the agent reads without sign trouble
}

// How long the remains of a group (processes whose leader is reaped) may take to die.
constexpr auto kRemainsPatience = std::chrono::seconds(5);

// After the group's leader (the shell) is reaped, what is left of the group (the agent it ran)
// has been reparented to us, the child subreaper: kill it and reap it, as a container's init
// would. True once nothing of the group is left. While a member exists, even a zombie, the
// kernel keeps the group id from being reused, so signalling it reaches only the group.
bool reap_group_remains(pid_t pgid) {
  if (::kill(-pgid, 0) != 0 && errno == ESRCH) return true;
  ::kill(-pgid, SIGKILL);
  while (true) {
    siginfo_t info{};
    if (::waitid(P_PGID, static_cast<id_t>(pgid), &info, WEXITED | WNOHANG) != 0) break;
    if (info.si_pid == 0) break;
  }
  return ::kill(-pgid, 0) != 0 && errno == ESRCH;
}

// The onstart's output file; the child's reader thread and the supervisor both write it.
struct InstanceLog {
  std::mutex mu;
  std::ofstream out;

  void line(const std::string& text) {
    std::lock_guard lock(mu);
    out << text << "\n";
    out.flush();
  }
};

tl::expected<void, std::string> write_file(const fs::path& path, const std::string& content) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec)
    return tl::unexpected("cannot create " + path.parent_path().string() + ": " + ec.message());
  std::ofstream out(path, std::ios::trunc | std::ios::binary);
  out << content;
  out.close();
  if (!out) return tl::unexpected("cannot write " + path.string());
  return {};
}

}  // namespace

// --- pure parts ------------------------------------------------------------------------------

std::map<std::string, std::string> probe_tree_files(const ScenarioOffer& scenario_offer) {
  const core::Offer& offer = scenario_offer.offer;
  const Truth& truth = scenario_offer.truth;
  std::map<std::string, std::string> files;

  // cgroup v2 as a container with its own cgroup namespace sees it: limits at the mount root.
  files["sys/fs/cgroup/cgroup.controllers"] = "cpuset cpu io memory hugetlb pids rdma misc\n";
  files["sys/fs/cgroup/memory.max"] = integer_text(truth.ram_visible_gib * kGiB) + "\n";
  files["sys/fs/cgroup/cpu.max"] = integer_text(truth.cores_visible * 100000) + " 100000\n";
  files["sys/fs/cgroup/memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n";
  files["proc/self/cgroup"] = "0::/\n";

  const double share = offer.cpu_cores > 0 && offer.cpu_cores_effective > 0
                           ? std::max(1.0, offer.cpu_cores / offer.cpu_cores_effective)
                           : 1.0;
  const double host_ram_gib = std::max(offer.cpu_ram_gib * share, truth.ram_visible_gib);
  const double total_kib = host_ram_gib * kKiBPerGiB;
  files["proc/meminfo"] = "MemTotal:       " + integer_text(total_kib) +
                          " kB\n"
                          "MemFree:        " +
                          integer_text(total_kib * 0.9) +
                          " kB\n"
                          "MemAvailable:   " +
                          integer_text(total_kib * 0.95) + " kB\n";

  // A container with a CPU quota still has every host CPU in its affinity mask.
  const long host_cpus =
      std::max(1L, offer.cpu_cores > 0 ? std::lround(offer.cpu_cores)
                                       : std::lround(std::ceil(truth.cores_visible)));
  files["proc/self/status"] =
      "Name:\tproverfleet\nState:\tS (sleeping)\nCpus_allowed_list:\t" +
      (host_cpus == 1 ? std::string("0") : "0-" + std::to_string(host_cpus - 1)) + "\n";

  // nvidia-smi --query-gpu=<agent::kNvidiaSmiQuery> --format=csv,noheader,nounits: what the
  // offer shows is known; live readings are not, and nvidia-smi says so itself with [N/A].
  std::string csv;
  const int gpus = std::max(0, offer.num_gpus);
  for (int i = 0; i < gpus; ++i) {
    csv += std::to_string(i) + ", " + offer.gpu_name + ", " +
           integer_text(offer.gpu_ram_gib * 1024) + ", 0, " + std::to_string(offer.pci_gen) + ", " +
           std::to_string(offer.pci_gen) +
           ", 16, [N/A], [N/A], 0, [N/A], [N/A], 0x0000000000000000\n";
  }
  files["nvidia-smi.csv"] = csv;
  return files;
}

json sim_truth_json(const Truth& truth, int co_tenants, std::uint64_t seed) {
  json t = {
      {"rate_full", std::max(truth.rate_full, kMinSimRate)},
      {"partitions_full", truth.partitions_full},
      {"ram_visible_gib", truth.ram_visible_gib},
      {"cores_visible", truth.cores_visible},
      {"proof_time_cv", truth.proof_time_cv},
      {"boot_min", truth.boot_min},
      {"download_mbps", truth.download_mbps},
      {"warmup_min", truth.warmup_min},
      {"contention", truth.contention},
      {"throttle", nullptr},
      {"failure", {{"kind", to_string(truth.failure.kind)}, {"after_h", truth.failure.after_h}}},
      {"mem_base_gib", truth.mem_base_gib},
      {"mem_per_partition_gib", truth.mem_per_partition_gib},
      {"warmup_proofs", truth.warmup_proofs},
      {"co_tenants", std::max(0, co_tenants)},
      {"seed", seed}};
  if (truth.throttle) {
    t["throttle"] = {{"after_h", truth.throttle->after_h},
                     {"factor", truth.throttle->factor},
                     {"reported", truth.throttle->reported}};
  }
  return t;
}

double wall_seconds_until(double at_h, double now_h, double time_scale) {
  if (std::isinf(at_h) && at_h > 0) return std::numeric_limits<double>::infinity();
  if (!(at_h > now_h) || !(time_scale > 0)) return 0;
  return (at_h - now_h) * 3600 / time_scale;
}

LaunchEnvironment launch_environment(const json& create_env,
                                     const std::map<std::string, std::string>& ours) {
  LaunchEnvironment out;
  if (create_env.is_object()) {
    for (const auto& [key, value] : create_env.items()) {
      if (!is_variable_name(key)) {
        out.notes.push_back("env entry \"" + key +
                            "\" skipped: not a variable name (a docker flag such as -p?)");
        continue;
      }
      if (!value.is_string()) {
        out.notes.push_back("env " + key + " skipped: its value is not a string");
        continue;
      }
      if (ours.count(key) != 0) {
        out.notes.push_back("env " + key + " from the create replaced by market-sim's value");
        continue;
      }
      out.env[key] = value.get<std::string>();
    }
  } else if (!create_env.is_null()) {
    out.notes.push_back("env skipped: not a JSON object");
  }
  for (const auto& [key, value] : ours) out.env[key] = value;
  return out;
}

const char* to_string(SpawnState state) {
  switch (state) {
    case SpawnState::Waiting:
      return "waiting";
    case SpawnState::Running:
      return "running";
    case SpawnState::Stopping:
      return "stopping";
    case SpawnState::Stopped:
      return "stopped";
    case SpawnState::Ended:
      return "ended";
  }
  return "?";
}

// --- the spawner -----------------------------------------------------------------------------

struct AgentSpawner::Impl {
  // A create or destroy, queued by the server's threads for the supervisor.
  struct Request {
    bool destroy = false;
    std::int64_t id = 0;
    InstanceLaunch launch;
    std::int64_t machine_id = 0;
    FailureKind failure = FailureKind::None;
    std::map<std::string, std::string> probe_files;
    std::string truth;
  };

  // Owned by the supervisor thread alone.
  struct Entry {
    InstanceLaunch launch;
    std::int64_t machine_id = 0;
    FailureKind failure = FailureKind::None;
    std::map<std::string, std::string> probe_files;
    std::string truth;
    SpawnState state = SpawnState::Waiting;
    bool destroy_requested = false;
    std::unique_ptr<agent::ChildProcess> child;
    std::shared_ptr<InstanceLog> log;
    SteadyClock::time_point kill_at;
    std::optional<agent::ExitStatus> leader_status;  // once the group's leader is reaped
    std::string outcome;
    int pid = 0;
    bool stopping_container = false;  // the stop under way is the container's, not its end
    int starts = 0;                   // onstart runs: the first boots, the others resume
  };

  explicit Impl(AgentSpawnerOptions o) : options(std::move(o)) {}

  void say(const std::string& line) const {
    if (options.log) options.log(line);
  }

  std::string dir_of(std::int64_t id) const {
    return (fs::path(options.work_dir) / "instances" / std::to_string(id)).string();
  }

  void enqueue(Request r) {
    {
      std::lock_guard lock(mu);
      if (stop_requested) return;
      queue.push_back(std::move(r));
    }
    cv.notify_all();
  }

  void end(std::int64_t id, Entry& e, const std::string& outcome) {
    e.state = SpawnState::Ended;
    e.outcome = outcome;
    if (e.log) e.log->line("market-sim: " + outcome);
    say("instance " + std::to_string(id) + ": " + outcome);
    e.child.reset();  // joins its output reader; the process is reaped already
  }

  bool container_stopped(std::int64_t id) const {
    return options.container_stopped && options.container_stopped(id);
  }

  // The first boot: a fresh machine (the directory emptied, the probe tree and truth written),
  // then the onstart.
  void start(std::int64_t id, Entry& e) {
    const fs::path dir = dir_of(id);
    std::error_code ec;
    fs::remove_all(dir, ec);
    for (const char* sub : {"probe", "state", "params"}) {
      fs::create_directories(dir / sub, ec);
      if (ec) {
        end(id, e, "not started: cannot create " + (dir / sub).string() + ": " + ec.message());
        return;
      }
    }
    for (const auto& [rel, content] : e.probe_files) {
      if (auto w = write_file(dir / "probe" / rel, content); !w) {
        end(id, e, "not started: " + w.error());
        return;
      }
    }
    if (auto w = write_file(dir / "truth.json", e.truth); !w) {
      end(id, e, "not started: " + w.error());
      return;
    }
    e.log = std::make_shared<InstanceLog>();
    e.log->out.open(dir / "agent.log", std::ios::app);
    if (!e.log->out) {
      end(id, e, "not started: cannot write " + (dir / "agent.log").string());
      return;
    }
    run_onstart(id, e);
  }

  // The onstart in the instance's directory as it is: at boot, and again each time the
  // container starts after a stop (its disk kept).
  void run_onstart(std::int64_t id, Entry& e) {
    const fs::path dir = dir_of(id);
    if (auto w = write_co_tenants(id, e); !w) {
      end(id, e, "not started: " + w.error());
      return;
    }
    if (e.launch.onstart.empty()) {
      end(id, e, "booted with no onstart: nothing to run");
      return;
    }

    const std::map<std::string, std::string> ours = {
        {"PATH", options.bin_dir.empty() ? options.path_after_bin_dir
                                         : options.bin_dir + ":" + options.path_after_bin_dir},
        {"HOME", dir.string()},
        {"PROVERFLEET_PROVER", "sim"},
        {"PROVERFLEET_PROBE_ROOT", (dir / "probe").string()},
        {"PROVERFLEET_STATE_DIR", (dir / "state").string()},
        {"PROVERFLEET_PARAM_DIR", (dir / "params").string()},
        {"PROVERFLEET_TIME_SCALE", number_text(options.time_scale)},
        {"PROVERFLEET_SIM_TRUTH", "@" + (dir / "truth.json").string()},
    };
    LaunchEnvironment env = launch_environment(e.launch.env, ours);
    for (const auto& note : env.notes) {
      e.log->line("market-sim: " + note);
      say("instance " + std::to_string(id) + ": " + note);
    }

    agent::ChildOptions co;
    co.argv = {"/bin/sh", "-c", e.launch.onstart};
    co.env = std::move(env.env);
    co.inherit_env = false;
    // PR_SET_PDEATHSIG ends only the shell when market-sim is SIGKILLed; the agent it started
    // would be re-parented and keep running. The watchdog ends the whole group instead.
    co.group_watchdog = true;
    co.working_dir = dir.string();
    co.on_line = [log = e.log](const std::string& line, bool) { log->line(line); };
    const bool resumed = e.starts++ > 0;
    e.log->line("market-sim: instance " + std::to_string(id) +
                (resumed ? " started again; running onstart" : " booted; running onstart"));
    auto child = agent::ChildProcess::spawn(std::move(co));
    if (!child) {
      end(id, e, "not started: " + child.error());
      return;
    }
    e.child = std::move(*child);
    e.pid = static_cast<int>(e.child->pid());
    e.state = SpawnState::Running;
    say("instance " + std::to_string(id) +
        (resumed ? ": started again, onstart running as process group "
                 : ": booted, onstart running as process group ") +
        std::to_string(e.pid) + " (log " + (dir / "agent.log").string() + ")");
  }

  // SIGTERM (or SIGKILL) to the group; the next passes reap it, SIGKILLing what is left once
  // the grace is over.
  void begin_stop(std::int64_t id, Entry& e, int sig, const std::string& why) {
    e.outcome = why;
    e.state = SpawnState::Stopping;
    e.kill_at =
        SteadyClock::now() + (sig == SIGKILL ? std::chrono::milliseconds(0) : options.term_grace);
    e.child->signal_group(sig);
    if (e.log)
      e.log->line("market-sim: " + why + std::string(sig == SIGKILL ? ": SIGKILL" : ": SIGTERM"));
    say("instance " + std::to_string(id) + ": " + why +
        (sig == SIGKILL ? ": SIGKILL to its process group" : ": SIGTERM to its process group"));
  }

  void finish_stopping(std::int64_t id, Entry& e) {
    const auto now = SteadyClock::now();
    if (!e.leader_status) {
      // Not polled before: reaping the leader (the shell) SIGKILLs the group, which would cut
      // the agent's grace short.
      if (now < e.kill_at && agent::group_has_live_members(e.pid)) return;
      e.child->signal_group(SIGKILL);
      e.leader_status = e.child->poll();
      if (!e.leader_status) return;
    }
    const bool gone = reap_group_remains(e.pid);
    if (!gone && now < e.kill_at + kRemainsPatience) return;
    const std::string how =
        e.outcome + " (" + e.leader_status->describe() + ")" +
        (gone ? "" : "; processes of its group are left that market-sim cannot reap");
    if (e.stopping_container && !e.destroy_requested) {
      container_down(id, e, how);
    } else {
      end(id, e, how);
    }
  }

  // The container stopped: no process left, the directory kept for its next start.
  void container_down(std::int64_t id, Entry& e, const std::string& how) {
    e.state = SpawnState::Stopped;
    e.outcome = how;
    e.stopping_container = false;
    e.leader_status.reset();
    if (e.log) e.log->line("market-sim: " + how);
    say("instance " + std::to_string(id) + ": " + how);
    e.child.reset();
  }

  void step(std::int64_t id, Entry& e, double now_h) {
    switch (e.state) {
      case SpawnState::Waiting:
        if (e.destroy_requested) {
          end(id, e, "destroyed before it booted");
        } else if (now_h >= e.launch.boot_h && !container_stopped(id)) {
          start(id, e);
        }
        return;
      case SpawnState::Running:
        if (auto status = e.child->poll()) {
          // The container's first process is gone, and with it the container: poll() has
          // SIGKILLed the rest of the group; Stopping reaps it.
          e.leader_status = status;
          e.outcome = "onstart ended";
          e.state = SpawnState::Stopping;
          e.kill_at = SteadyClock::now();
          finish_stopping(id, e);
        } else if (e.destroy_requested) {
          begin_stop(id, e, SIGTERM, "destroyed");
        } else if (now_h >= e.launch.failure_h) {
          begin_stop(id, e, SIGKILL, failure_words(e.failure));
        } else if (container_stopped(id)) {
          begin_stop(id, e, SIGTERM, "container stopped");
          e.stopping_container = true;
        }
        return;
      case SpawnState::Stopping:
        finish_stopping(id, e);
        return;
      case SpawnState::Stopped:
        if (e.destroy_requested) {
          end(id, e, "destroyed while stopped");
        } else if (now_h >= e.launch.failure_h) {
          end(id, e, std::string(failure_words(e.failure)) + " while stopped");
        } else if (!container_stopped(id)) {
          run_onstart(id, e);
        }
        return;
      case SpawnState::Ended:
        return;
    }
  }

  // Our instances on the machine that are not destroyed, besides `id`: its contention now.
  int co_tenants_of(std::int64_t id, const Entry& e) const {
    return static_cast<int>(std::count_if(entries.begin(), entries.end(), [&](const auto& kv) {
      return kv.first != id && kv.second.machine_id == e.machine_id && !kv.second.destroy_requested;
    }));
  }

  // The count the instance's sim prover re-reads for each proof; replaced whole (rename), so
  // it never reads half a number.
  tl::expected<void, std::string> write_co_tenants(std::int64_t id, const Entry& e) const {
    const fs::path dir = dir_of(id);
    const fs::path tmp = dir / "co_tenants.tmp";
    if (auto w = write_file(tmp, std::to_string(co_tenants_of(id, e)) + "\n"); !w) return w;
    std::error_code ec;
    fs::rename(tmp, dir / kCoTenantsFile, ec);
    if (ec)
      return tl::unexpected("cannot write " + (dir / kCoTenantsFile).string() + ": " +
                            ec.message());
    return {};
  }

  // An instance came or went: its running neighbours' contention changed.
  void machine_changed(std::int64_t machine) {
    for (const auto& [id, e] : entries) {
      if (e.machine_id != machine || e.state != SpawnState::Running) continue;
      if (auto w = write_co_tenants(id, e); !w)
        say("instance " + std::to_string(id) + ": " + w.error());
    }
  }

  void apply(Request& r) {
    if (r.destroy) {
      auto it = entries.find(r.id);
      if (it != entries.end()) {
        it->second.destroy_requested = true;
        machine_changed(it->second.machine_id);
      }
      return;
    }
    Entry e;
    e.launch = std::move(r.launch);
    e.machine_id = r.machine_id;
    e.failure = r.failure;
    e.probe_files = std::move(r.probe_files);
    e.truth = std::move(r.truth);
    if (std::isinf(e.launch.boot_h)) {
      say("instance " + std::to_string(r.id) +
          ": created; never boots (truth failure never_boots)");
    } else {
      say("instance " + std::to_string(r.id) + ": created; boots in " +
          core::fixed(wall_seconds_until(e.launch.boot_h, options.clock_h(), options.time_scale),
                      1) +
          " s");
    }
    const std::int64_t machine = e.machine_id;
    entries[r.id] = std::move(e);
    machine_changed(machine);
  }

  void publish() {
    std::vector<SpawnedInstance> snap;
    for (const auto& [id, e] : entries) {
      snap.push_back({id, e.state, e.pid, dir_of(id), e.outcome});
    }
    std::lock_guard lock(snapshot_mu);
    snapshot = std::move(snap);
  }

  void run() {
    std::unique_lock lock(mu);
    while (!stop_requested) {
      std::vector<Request> incoming;
      incoming.swap(queue);
      lock.unlock();
      for (auto& r : incoming) apply(r);
      const double now_h = options.clock_h();
      for (auto& [id, e] : entries) step(id, e, now_h);
      publish();
      lock.lock();
      cv.wait_for(lock, kPollPeriod, [&] { return stop_requested || !queue.empty(); });
    }
    lock.unlock();
    shut_down();
    publish();
  }

  void shut_down() {
    for (auto& [id, e] : entries) {
      if (e.state == SpawnState::Running) begin_stop(id, e, SIGTERM, "market-sim is stopping");
      if (e.state == SpawnState::Waiting) end(id, e, "market-sim stopped before it booted");
    }
    while (std::any_of(entries.begin(), entries.end(),
                       [](const auto& kv) { return kv.second.state == SpawnState::Stopping; })) {
      for (auto& [id, e] : entries) step(id, e, options.clock_h());
      publish();
      std::this_thread::sleep_for(kPollPeriod);
    }
  }

  AgentSpawnerOptions options;
  std::map<std::int64_t, Entry> entries;  // supervisor thread only

  std::mutex mu;
  std::condition_variable cv;
  std::vector<Request> queue;
  bool stop_requested = false;

  mutable std::mutex snapshot_mu;
  std::vector<SpawnedInstance> snapshot;

  std::once_flag stop_once;
  // Last member: the children it spawns get SIGKILL if this thread ends (PR_SET_PDEATHSIG),
  // so it lives as long as the spawner.
  std::thread supervisor;
};

AgentSpawner::AgentSpawner(AgentSpawnerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  if (!impl_->options.clock_h) {
    throw std::invalid_argument("AgentSpawner needs a clock (options.clock_h)");
  }
  if (!(impl_->options.time_scale > 0)) {
    throw std::invalid_argument("AgentSpawner: the time scale must be > 0");
  }
  // The agents run in their own directories: relative paths would point elsewhere there.
  std::error_code ec;
  const auto absolute = fs::absolute(impl_->options.work_dir, ec);
  if (ec || impl_->options.work_dir.empty()) {
    throw std::invalid_argument("AgentSpawner: bad work directory '" + impl_->options.work_dir +
                                "'");
  }
  impl_->options.work_dir = absolute.string();
  // Orphans of a killed group (the agent its shell ran) must come to us to be reaped, not to
  // init, which in a container may never reap them. Process-wide; market-sim has no other
  // children, so nothing else changes.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0 && impl_->options.log) {
    impl_->options.log(std::string("cannot become a child subreaper (") + std::strerror(errno) +
                       "): orphaned agent processes go to init");
  }
  impl_->supervisor = std::thread([impl = impl_.get()] { impl->run(); });
}

AgentSpawner::~AgentSpawner() {
  stop_all();
}

void AgentSpawner::on_created(const InstanceLaunch& launch, const ScenarioOffer& offer) {
  Impl::Request r;
  r.id = launch.id;
  r.launch = launch;
  r.machine_id = offer.offer.machine_id;
  r.failure = offer.truth.failure.kind;
  r.probe_files = probe_tree_files(offer);
  json truth =
      sim_truth_json(offer.truth, launch.co_tenants, mix_seed(impl_->options.seed, launch.id));
  truth["co_tenants_file"] = (fs::path(impl_->dir_of(launch.id)) / kCoTenantsFile).string();
  r.truth = truth.dump(2) + "\n";
  impl_->enqueue(std::move(r));
}

void AgentSpawner::on_destroyed(std::int64_t id) {
  Impl::Request r;
  r.destroy = true;
  r.id = id;
  impl_->enqueue(std::move(r));
}

void AgentSpawner::stop_all() {
  std::call_once(impl_->stop_once, [this] {
    {
      std::lock_guard lock(impl_->mu);
      impl_->stop_requested = true;
    }
    impl_->cv.notify_all();
    if (impl_->supervisor.joinable()) impl_->supervisor.join();
  });
}

std::vector<SpawnedInstance> AgentSpawner::instances() const {
  std::lock_guard lock(impl_->snapshot_mu);
  return impl_->snapshot;
}

std::string AgentSpawner::instance_dir(std::int64_t id) const {
  return impl_->dir_of(id);
}

}  // namespace pf::market_sim
