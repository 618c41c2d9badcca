// agent_rss_mib: peak RSS (VmHWM) of an agent process (the same Agent, run in a child process
// started from this bench's executable) through a 64 MiB parameter fetch and 50 sim proofs.
// Target ≤ 30.
// agent_cpu_pct: its CPU (user + system) between its first and its 50th measured proof, as a
// percentage of one core. Target ≤ 1.
//
// The child talks to an in-process fake manager (register, heartbeat, events, logs) and a
// parameter server. It runs in scaled time (--time-scale 10: heartbeats every second, a proof
// every 0.5 s), which is 10× a real agent's heartbeat rate and ~100× its proof rate, so the CPU
// figure is an upper bound of what an instance sees.
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kProofs = 50;
constexpr std::size_t kParamBytes = 64u << 20;

int run_child(int argc, char** argv) {
  if (argc < 6) return 2;
  pf::agent::AgentOptions o;
  o.manager_url = argv[2];
  o.deployment = "bench";
  o.secret = "bench-secret";
  o.state_dir = argv[3];
  o.probe_root = argv[4];
  o.prover = "sim";
  o.sim_truth = json{
      {"rate_full", 720},
      {"partitions_full", 10},
      {"ram_visible_gib", 256},
      {"proof_time_cv", 0.1},
      {"warmup_min",
       0.1}}.dump();
  o.time_scale = 10;
  o.download_connections = 4;
  o.log_sink = [](const std::string&) {};
  pf::agent::Agent agent(o);
  const int code = agent.run();
  // The peak of this process image only: ru_maxrss would also count the parent's pages the
  // child shared before exec.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) std::ofstream(argv[5]) << line.substr(6) << "\n";
  }
  return code;
}

// utime + stime of a process, seconds.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(text.substr(paren + 2));
  std::string f;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stod(f);
    if (i == 15) stime = std::stod(f);
  }
  return (utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

std::string random_bytes(std::size_t n) {
  std::mt19937_64 rng(1);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--child") return run_child(argc, argv);

  const fs::path dir = fs::temp_directory_path() / ("pf_agent_bench_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "probe" / "proc" / "self");
  std::ofstream(dir / "probe" / "proc" / "meminfo") << "MemTotal:       268435456 kB\n";
  std::ofstream(dir / "probe" / "proc" / "self" / "status") << "Cpus_allowed_list:\t0-31\n";
  std::ofstream(dir / "probe" / "nvidia-smi.csv")
      << "0, NVIDIA GeForce RTX 4090, 24564, 1, 4, 4, 16, 210, 3120, 0, 34, 21.50, 0x0\n";

  const auto content = std::make_shared<const std::string>(random_bytes(kParamBytes));
  std::mutex mu;
  int measured = 0;
  std::optional<Clock::time_point> first_at, last_at;
  std::atomic<pid_t> child{0};
  double cpu_first = 0, cpu_last = 0;

  httplib::Server server;
  server.Get("/p/params", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content_provider(content->size(), "application/octet-stream",
                             [content](std::size_t off, std::size_t len, httplib::DataSink& sink) {
                               return sink.write(content->data() + off,
                                                 std::min<std::size_t>(len, 1 << 16));
                             });
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  server.Post("/api/v1/agent/register", [&](const httplib::Request&, httplib::Response& res) {
    const json reply = {{"instance_id", 1},
                        {"token", "t"},
                        {"heartbeat_s", 10},
                        {"params",
                         {{{"name", "bench.params"},
                           {"url", url + "/p/params"},
                           {"bytes", kParamBytes},
                           {"digest", nullptr}}}},
                        {"prover", json::object()},
                        {"benchmark", {{"max_samples", 20}}}};
    res.set_content(reply.dump(), "application/json");
  });
  server.Post("/api/v1/agent/heartbeat", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(mu);
    res.set_content(
        json{{"commands", measured >= kProofs ? json::array({"stop"}) : json::array()}}.dump(),
        "application/json");
  });
  server.Post("/api/v1/agent/events", [&](const httplib::Request& req, httplib::Response& res) {
    const json body = json::parse(req.body, nullptr, false);
    std::lock_guard lock(mu);
    if (body.is_object() && body.contains("events")) {
      for (const auto& e : body["events"]) {
        if (e.value("type", "") != "proof_done" || e.value("phase", "") != "measured") continue;
        ++measured;
        if (measured == 1) {
          first_at = Clock::now();
          cpu_first = cpu_seconds(child.load());
        }
        if (measured == kProofs) {
          last_at = Clock::now();
          cpu_last = cpu_seconds(child.load());
        }
      }
    }
    res.set_content(R"({"accepted": 1, "duplicates": 0})", "application/json");
  });
  server.Post("/api/v1/agent/logs", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{}", "application/json");
  });
  std::thread serving([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  const std::string self = fs::read_symlink("/proc/self/exe").string();
  const std::string state = (dir / "state").string();
  const std::string probe = (dir / "probe").string();
  // posix_spawn, not fork: a forked child's RSS starts as a copy of this process (64 MiB of
  // parameter content), and ru_maxrss would report that instead of the agent's own peak.
  const std::string hwm_path = (dir / "vmhwm").string();
  std::vector<std::string> args = {self, "--child", url, state, probe, hwm_path};
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argp.data(), environ) != 0) {
    std::fprintf(stderr, "agent_bench: cannot start %s\n", self.c_str());
    return 1;
  }
  child = pid;
  int status = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  server.stop();
  serving.join();
  double hwm_kib = 0;
  std::ifstream(hwm_path) >> hwm_kib;
  fs::remove_all(dir);

  std::lock_guard lock(mu);
  if (!first_at || !last_at || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr,
                 "agent_bench: the agent did not finish %d proofs (exit status %d, %d seen)\n",
                 kProofs, status, measured);
    return 1;
  }
  const double wall = std::chrono::duration<double>(*last_at - *first_at).count();
  std::printf("agent_rss_mib: %.1f\n", hwm_kib / 1024.0);
  std::printf("agent_cpu_pct: %.2f\n", wall > 0 ? 100.0 * (cpu_last - cpu_first) / wall : 0.0);
  std::printf(
      "# %d MiB parameter fetch, %d sim proofs at time scale 10; proving phase %.1f s wall\n",
      static_cast<int>(kParamBytes >> 20), kProofs, wall);
  return 0;
}
