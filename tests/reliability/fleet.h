// What the reliability runs share: a run directory, market-sim and `serve` as child processes,
// the operator API and the market-sim API with retries, a /healthz prober, the secrets scan
// and the process scan. Header-only; uses tests/support (Subprocess, raw HTTP).
#pragma once

#include <dirent.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "reliability/figures.h"
#include "reliability/fleet_checks.h"
#include "support/raw_http.h"
#include "support/subprocess.h"

namespace pf::reliability {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

struct Url {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string str() const { return "http://" + host + ":" + std::to_string(port); }
};

inline Url url_in(const std::string& line) {
  std::smatch m;
  static const std::regex re(R"(http://([0-9.]+):([0-9]+))");
  if (!std::regex_search(line, m, re)) throw std::runtime_error("no URL in: " + line);
  return {m[1].str(), std::stoi(m[2].str())};
}

// Empty when it cannot be read. A /proc file of a process that exits while it is read fails
// the read (ESRCH), which libstdc++'s filebuf throws as "basic_filebuf::underflow error reading
// the file": a vanishing process is routine for the scans below, never a failed run.
inline std::string read_text(const fs::path& path) {
  try {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  } catch (const std::exception&) {
    return {};
  }
}

// The operator token `serve` wrote next to its database; empty when there is none.
inline std::string read_operator_token(const fs::path& data_dir) {
  std::ifstream in(data_dir / "operator.token");
  std::string token;
  std::getline(in, token);
  return token;
}

// A fresh directory under the system temp dir, removed at the end unless `keep`.
class RunDir {
 public:
  explicit RunDir(const std::string& name) {
    path_ =
        fs::temp_directory_path() / ("pf-reliability-" + name + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~RunDir() {
    if (!keep) {
      std::error_code ec;
      fs::remove_all(path_, ec);
    }
  }
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;
  const fs::path& path() const { return path_; }
  bool keep = false;

 private:
  fs::path path_;
};

// How market-sim gets its API key, as an operator would give it: a key file when this
// market-sim knows --api-key-file, else the environment when it reads
// PROVERFLEET_MARKET_SIM_API_KEY, else --api-key (visible in ps: the secrets scan reports it).
struct KeyPassing {
  std::vector<std::string> args;
  test::SpawnOptions spawn;
};

inline KeyPassing market_sim_key(const std::string& binary, const std::string& key,
                                 const fs::path& dir) {
  auto help = test::Subprocess::spawn({binary, "market-sim", "--help"});
  help.wait_exit(30s);
  std::string text;
  for (const auto& l : help.stdout_lines()) text += l + "\n";
  KeyPassing k;
  if (text.find("--api-key-file") != std::string::npos) {
    const fs::path file = dir / "market-sim.key";
    { std::ofstream(file) << key << "\n"; }
    fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write);
    k.args = {"--api-key-file", file.string()};
  } else if (text.find("PROVERFLEET_MARKET_SIM_API_KEY") != std::string::npos) {
    k.spawn.env["PROVERFLEET_MARKET_SIM_API_KEY"] = key;
  } else {
    k.args = {"--api-key", key};
  }
  return k;
}

// A started child and the URL it printed.
struct Service {
  test::Subprocess process;
  Url url;
};

inline Service start_service(const std::vector<std::string>& argv, const test::SpawnOptions& opt,
                             const std::string& ready_line) {
  auto p = test::Subprocess::spawn(argv, opt);
  auto line = p.wait_for_line(ready_line, 60s);
  if (!line) {
    throw std::runtime_error(argv[1] + " did not start: " + p.stderr_text());
  }
  return Service{std::move(p), url_in(line->line)};
}

// Calls the operator API, counting every request and 5xx reply into `figures` (a 503 "market
// busy" reply is counted apart: see is_market_busy_reply).
class OperatorApi {
 public:
  OperatorApi(Figures& figures, Url url, std::string token)
      : figures_(figures), url_(std::move(url)), token_(std::move(token)) {}

  void set_url(Url url) { url_ = std::move(url); }
  const Url& url() const { return url_; }
  const std::string& token() const { return token_; }
  int market_busy_replies() const { return market_busy_.load(); }

  // The reply's status and JSON body; nullopt when the manager did not answer.
  std::optional<std::pair<int, json>> call(const std::string& method, const std::string& path,
                                           const json& body = nullptr) {
    httplib::Client c(url_.host, url_.port);
    c.set_connection_timeout(5);
    c.set_read_timeout(30);
    c.set_bearer_token_auth(token_.c_str());
    figures_.add(Figure::RequestsTried);
    httplib::Result r = method == "GET"    ? c.Get(path.c_str())
                        : method == "POST" ? c.Post(path.c_str(), body.dump(), "application/json")
                                           : c.Delete(path.c_str());
    if (!r) return std::nullopt;
    if (is_market_busy_reply(r->status, r->has_header("Retry-After"), r->body)) {
      ++market_busy_;
    } else if (r->status >= 500) {
      figures_.finding(
          Figure::ServerErrors,
          method + " " + path + " -> " + std::to_string(r->status) + " " + r->body.substr(0, 200));
    }
    json j = json::parse(r->body, nullptr, false);
    return std::make_pair(r->status, j.is_discarded() ? json(r->body) : j);
  }

  // GET that must succeed (retried while the manager is briefly unreachable).
  json get(const std::string& path) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      auto r = call("GET", path);
      if (r && r->first == 200) return r->second;
      std::this_thread::sleep_for(500ms);
    }
    throw std::runtime_error("operator API GET " + path + " kept failing");
  }

 private:
  Figures& figures_;
  Url url_;
  std::string token_;
  std::atomic<int> market_busy_{0};
};

// market-sim's vast API (our test double's view of the truth), retried through injected
// 429/500 faults.
class MarketView {
 public:
  MarketView(Url url, std::string key) : url_(std::move(url)), key_(std::move(key)) {}

  json request(const std::string& method, const std::string& path, const json& body = nullptr) {
    for (int attempt = 0; attempt < 40; ++attempt) {
      httplib::Client c(url_.host, url_.port);
      c.set_connection_timeout(5);
      c.set_read_timeout(30);
      c.set_bearer_token_auth(key_.c_str());
      httplib::Result r = method == "GET"   ? c.Get(path.c_str())
                          : method == "PUT" ? c.Put(path.c_str(), body.dump(), "application/json")
                                            : c.Delete(path.c_str());
      if (r && r->status < 300) {
        json j = json::parse(r->body, nullptr, false);
        if (!j.is_discarded()) return j;
      }
      std::this_thread::sleep_for(100ms);
    }
    throw std::runtime_error("market-sim " + method + " " + path + " kept failing");
  }

  // Every instance market-sim lists (all pages).
  std::vector<json> instances() {
    std::vector<json> out;
    std::string token;
    for (int page = 0; page < 1000; ++page) {
      std::string path = "/api/v1/instances/?limit=25";
      if (!token.empty()) path += "&after_token=" + token;
      json j = request("GET", path);
      for (const auto& i : j.value("instances", json::array())) out.push_back(i);
      if (!j.contains("next_token") || !j["next_token"].is_string()) break;
      token = j["next_token"].get<std::string>();
      if (token.empty()) break;
    }
    return out;
  }

  // Replaces market-sim's injected faults ("none": no faults; its control route, not vast's
  // API, so no fault applies to this call).
  void set_faults(const std::string& spec) {
    httplib::Client c(url_.host, url_.port);
    c.set_connection_timeout(5);
    c.set_read_timeout(30);
    c.set_bearer_token_auth(key_.c_str());
    auto r = c.Put("/proverfleet-sim/faults", spec, "text/plain");
    if (!r || r->status != 200) {
      throw std::runtime_error("market-sim refused faults '" + spec +
                               "': " + (r ? r->body : httplib::to_string(r.error())));
    }
  }

  // The create's env of one instance (where the deployment secret travels).
  json instance(std::int64_t id) {
    return request("GET", "/api/v0/instances/" + std::to_string(id) + "/")
        .value("instances", json());
  }

 private:
  Url url_;
  std::string key_;
};

// The create's environment of a market instance: vast's "extra_env" ([[name, value], ...]) or
// an "env" object.
inline std::map<std::string, std::string> env_of(const json& market_instance) {
  std::map<std::string, std::string> env;
  const json extra = market_instance.value("extra_env", json());
  if (extra.is_array()) {
    for (const auto& kv : extra) {
      if (kv.is_array() && kv.size() == 2 && kv[0].is_string() && kv[1].is_string()) {
        env[kv[0].get<std::string>()] = kv[1].get<std::string>();
      }
    }
  }
  const json obj = market_instance.value("env", json());
  if (obj.is_object()) {
    for (const auto& [k, v] : obj.items()) {
      if (v.is_string()) env[k] = v.get<std::string>();
    }
  }
  return env;
}

// Polls GET /healthz every interval on its own thread; a reply that is not a 200 within
// `limit` is a hang. pause()/resume() around deliberate outages.
class HealthProbe {
 public:
  HealthProbe(Figures& figures, std::chrono::milliseconds interval = 500ms,
              std::chrono::milliseconds limit = 5000ms)
      : figures_(figures), interval_(interval), limit_(limit) {}
  ~HealthProbe() { stop(); }
  HealthProbe(const HealthProbe&) = delete;
  HealthProbe& operator=(const HealthProbe&) = delete;

  void start(int port) {
    port_ = port;
    thread_ = std::thread([this] { run(); });
  }
  void set_port(int port) { port_ = port; }
  void pause() { paused_ = true; }
  void resume() { paused_ = false; }
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int probes() const { return probes_; }

 private:
  void run() {
    while (!stopping_) {
      if (!paused_) {
        const auto r = test::exchange(
            port_, "GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n", limit_);
        ++probes_;
        if (!paused_ && r.status != 200) {
          figures_.finding(Figure::Hangs, "/healthz did not answer 200 within " +
                                              std::to_string(limit_.count()) + " ms (" +
                                              (r.timed_out ? "timed out"
                                               : r.status  ? std::to_string(r.status)
                                                           : "connection failed") +
                                              ")");
        }
      }
      std::this_thread::sleep_for(interval_);
    }
  }

  Figures& figures_;
  std::chrono::milliseconds interval_, limit_;
  std::atomic<int> port_{0};
  std::atomic<bool> paused_{false}, stopping_{false};
  std::atomic<int> probes_{0};
  std::thread thread_;
};

// Pids of live processes (other than this one) whose command line or environment contains
// `needle` (a run directory: every process a run starts names it somewhere).
inline std::vector<pid_t> processes_mentioning(const std::string& needle) {
  std::vector<pid_t> out;
  const pid_t self = ::getpid();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (pid == self) continue;
    const std::string stat = read_text(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') continue;
    if (read_text(entry.path() / "cmdline").find(needle) != std::string::npos ||
        read_text(entry.path() / "environ").find(needle) != std::string::npos) {
      out.push_back(pid);
    }
  }
  return out;
}

inline std::string command_of(pid_t pid) {
  std::string cmd = read_text("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : cmd) {
    if (c == '\0') c = ' ';
  }
  return cmd.substr(0, 160);
}

// Counts every (secret, place) where a secret's text appears: the given logs and every file
// under `files_root` (the database and its WAL included) except those named in skip_names.
inline void scan_secrets(Figures& figures, const std::map<std::string, std::string>& secrets,
                         const std::map<std::string, std::string>& logs, const fs::path& files_root,
                         const std::vector<std::string>& skip_names = {}) {
  auto check = [&](const std::string& place, const std::string& text) {
    for (const auto& [what, value] : secrets) {
      if (value.size() >= 8 && text.find(value) != std::string::npos) {
        figures.finding(Figure::SecretsFound, what + " in " + place);
      }
    }
  };
  for (const auto& [name, text] : logs) check(name, text);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(files_root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string name = it->path().filename().string();
    if (std::find(skip_names.begin(), skip_names.end(), name) != skip_names.end()) continue;
    check(it->path().string(), read_text(it->path()));
  }
}

// Counts every process whose command line (what `ps` shows anyone on the machine) holds a
// secret; run while the services are up.
inline void scan_command_lines(Figures& figures,
                               const std::map<std::string, std::string>& secrets) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = read_text(entry.path() / "cmdline");
    for (char& c : cmd) {
      if (c == '\0') c = ' ';
    }
    for (const auto& [what, value] : secrets) {
      const auto at = value.size() >= 8 ? cmd.find(value) : std::string::npos;
      if (at == std::string::npos) continue;
      std::string shown = cmd;
      shown.replace(at, value.size(), "<" + what + ">");
      figures.finding(Figure::SecretsFound,
                      what + " in the command line of pid " + name + ": " + shown.substr(0, 160));
    }
  }
}

inline std::string all_output(const test::Subprocess& p) {
  std::string text;
  for (const auto& l : p.stdout_lines()) text += l + "\n";
  return text + p.stderr_text();
}

}  // namespace pf::reliability
