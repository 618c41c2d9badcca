// `proverfleet demo` as a user runs it: it prints the dashboard URL and the token, the
// autopilot rents from market-sim, market-sim starts agents, instances move through their
// states; SIGTERM stops every process it started — none is left behind; no key or secret is
// on a command line and the database and tokens are owner-only.
#include <dirent.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.h"
#include "support/proverfleet_cli.h"
#include "support/subprocess.h"

namespace {

using pf::test::eventually;

namespace fs = std::filesystem;
using nlohmann::json;
using pf::test::Subprocess;

// Empty when it cannot be read: a process exiting while its /proc files are read fails the read
// (ESRCH), which libstdc++'s filebuf throws; for the scans below that is a process gone.
std::string read_all(const fs::path& path) {
  try {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), {}};
  } catch (const std::exception&) {
    return {};
  }
}

// Processes (other than this test) whose command line or environment mentions `marker`.
std::vector<std::string> processes_mentioning(const std::string& marker) {
  std::vector<std::string> found;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == self) continue;
    const std::string status = read_all(entry.path() / "status");
    if (status.find("State:\tZ") != std::string::npos) continue;  // exited, awaiting reaping
    const std::string cmdline = read_all(entry.path() / "cmdline");
    const std::string environ = read_all(entry.path() / "environ");
    if (cmdline.find(marker) != std::string::npos || environ.find(marker) != std::string::npos) {
      std::string shown = cmdline;
      for (auto& c : shown) c = c == '\0' ? ' ' : c;
      found.push_back(pid + ": " + shown);
    }
  }
  return found;
}

// The value of `name` in a NUL-separated /proc/PID/environ, or "".
std::string environ_value(const std::string& environ, const std::string& name) {
  const std::string prefix = name + "=";
  std::size_t at = 0;
  while (at < environ.size()) {
    const std::size_t end = std::min(environ.find('\0', at), environ.size());
    if (environ.compare(at, prefix.size(), prefix) == 0) {
      return environ.substr(at + prefix.size(), end - at - prefix.size());
    }
    at = end + 1;
  }
  return "";
}

// The secrets the demo's processes hold in their environments (the market key, deployment
// secrets) and every command line mentioning `marker`.
struct SecretsSeen {
  std::set<std::string> secrets;
  std::vector<std::string> cmdlines;
};
SecretsSeen secrets_of_processes_mentioning(const std::string& marker) {
  SecretsSeen seen;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = read_all(entry.path() / "cmdline");
    const std::string environ = read_all(entry.path() / "environ");
    if (cmdline.find(marker) == std::string::npos && environ.find(marker) == std::string::npos) {
      continue;
    }
    seen.cmdlines.push_back(cmdline);
    for (const char* name :
         {"PROVERFLEET_MARKET_SIM_API_KEY", "VAST_API_KEY", "PROVERFLEET_SECRET"}) {
      if (auto v = environ_value(environ, name); !v.empty()) seen.secrets.insert(v);
    }
  }
  return seen;
}

fs::perms mode_of(const fs::path& path) {
  return fs::status(path).permissions() & fs::perms::all;
}

TEST(Demo, FleetEvolvesAndSigtermLeavesNoProcessBehind) {
  const fs::path data =
      fs::temp_directory_path() / ("proverfleet-demo-test-" + std::to_string(::getpid()));
  fs::remove_all(data);
  auto demo =
      Subprocess::spawn({PF_BINARY, "demo", "--listen", "127.0.0.1:0", "--data", data.string(),
                         "--time-scale", "120", "--status-every", "2", "--scenario",
                         std::string(PF_SOURCE_DIR) + "/scenarios/demo-small.json"});
  auto url_line =
      demo.wait_for_line(std::regex(R"(dashboard:\s+(http://\S+)/)"), std::chrono::seconds(60));
  ASSERT_TRUE(url_line) << demo.stderr_text();
  const std::string url = url_line->groups.at(1);
  auto token_line =
      demo.wait_for_line(std::regex(R"(operator token:\s+(\S+))"), std::chrono::seconds(5));
  ASSERT_TRUE(token_line);
  const std::string token = token_line->groups.at(1);

  const pf::test::Url manager = pf::test::parse_url(url);
  httplib::Client client(manager.host, manager.port);
  client.set_bearer_token_auth(token.c_str());

  // The autopilot rents, agents start, states change: wait for an instance past booting.
  const std::set<std::string> agent_states = {"registered", "fetching_params", "warming_up",
                                              "benchmarking", "proving"};
  std::set<std::string> seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  bool agent_running = false;
  while (std::chrono::steady_clock::now() < deadline && !agent_running) {
    auto r = client.Get("/api/v1/instances?all=true");
    if (r && r->status == 200) {
      for (const auto& inst : json::parse(r->body)) {
        const std::string state = inst.value("state", "");
        seen.insert(state);
        if (agent_states.count(state)) agent_running = true;
      }
    }
    if (!agent_running) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  std::string states;
  for (const auto& s : seen) states += s + " ";
  ASSERT_TRUE(agent_running) << "states seen: " << states << "\n"
                             << demo.stderr_text() << read_all(data / "serve.log");
  // The check below can only mean something if it sees the demo's processes while it runs.
  EXPECT_GE(processes_mentioning(data.string()).size(), 3u)
      << "expected market-sim, serve and at least one agent";

  // Reproduction (issue 10): market-sim got its API key as `--api-key KEY`, readable by every
  // local user in ps. No key or secret is on any command line of the demo's processes.
  const SecretsSeen seen_secrets = secrets_of_processes_mentioning(data.string());
  EXPECT_GE(seen_secrets.secrets.size(), 2u) << "expected the market key and a deployment secret";
  for (const auto& cmdline : seen_secrets.cmdlines) {
    std::string shown = cmdline;
    for (auto& c : shown) c = c == '\0' ? ' ' : c;
    EXPECT_EQ(shown.find("--api-key"), std::string::npos) << shown;
    for (const auto& secret : seen_secrets.secrets) {
      EXPECT_EQ(cmdline.find(secret), std::string::npos)
          << "a secret on the command line: " << shown;
    }
  }
  // The database (token hashes, events), its WAL/SHM and the agents' tokens are owner-only.
  const auto owner_rw = fs::perms::owner_read | fs::perms::owner_write;
  EXPECT_EQ(mode_of(data), fs::perms::owner_all);
  for (const char* f :
       {"proverfleet.db", "proverfleet.db-wal", "proverfleet.db-shm", "operator.token"}) {
    EXPECT_EQ(mode_of(data / f), owner_rw) << f;
  }
  int tokens = 0;
  for (const auto& inst : fs::directory_iterator(data / "market-sim" / "instances")) {
    const fs::path token_file = inst.path() / "state" / "agent-token";
    if (!fs::exists(token_file)) continue;
    ++tokens;
    EXPECT_EQ(mode_of(token_file), owner_rw) << token_file;
  }
  EXPECT_GE(tokens, 1) << "no agent kept its token";

  ASSERT_EQ(::kill(demo.pid(), SIGTERM), 0);
  auto code = demo.wait_exit(std::chrono::seconds(60));
  ASSERT_TRUE(code) << "demo did not stop on SIGTERM";
  EXPECT_EQ(*code, 0) << demo.stderr_text();

  // market-sim holds the demo to vast's per-endpoint rate limits, and serve paces its calls to
  // them: the autopilot's searches and rentals draw no 429.
  const std::string sim_log = read_all(data / "market-sim.log");
  EXPECT_NE(sim_log.find("rate limits (per caller, wall clock): search=10/60s,create=4.5s"),
            std::string::npos)
      << sim_log.substr(0, 2000);
  EXPECT_NE(sim_log.find("PUT /api/v0/asks/"), std::string::npos) << "the demo rented nothing";
  EXPECT_EQ(sim_log.find("-> 429"), std::string::npos)
      << sim_log.substr(sim_log.find("-> 429") > 400 ? sim_log.find("-> 429") - 400 : 0, 800);

  std::vector<std::string> left;
  eventually(
      [&] {
        left = processes_mentioning(data.string());
        return left.empty();
      },
      std::chrono::seconds(5));
  std::string listing;
  for (const auto& p : left) listing += p + "\n";
  EXPECT_TRUE(left.empty()) << "processes left behind:\n" << listing;
  fs::remove_all(data);
}

// The demo is a business serving work: its built-in client sends the default (/2) scenario's
// job arrivals to serve's gateway and the fleet proves them; the status line counts them and
// the operator's job list shows them done.
TEST(Demo, ServesTheScenariosJobsThroughTheGateway) {
  const fs::path data =
      fs::temp_directory_path() / ("proverfleet-demo-load-test-" + std::to_string(::getpid()));
  fs::remove_all(data);
  auto demo = Subprocess::spawn({PF_BINARY, "demo", "--listen", "127.0.0.1:0", "--data",
                                 data.string(), "--time-scale", "120", "--status-every", "2"},
                                {{}, PF_SOURCE_DIR});
  auto url_line =
      demo.wait_for_line(std::regex(R"(dashboard:\s+(http://\S+)/)"), std::chrono::seconds(60));
  ASSERT_TRUE(url_line) << demo.stderr_text();
  auto token_line =
      demo.wait_for_line(std::regex(R"(operator token:\s+(\S+))"), std::chrono::seconds(5));
  ASSERT_TRUE(token_line);
  auto gateway_line = demo.wait_for_line(
      std::regex(R"(gateway:\s+127\.0\.0\.1:[0-9]+ .*2 Curio nodes)"), std::chrono::seconds(5));
  ASSERT_TRUE(gateway_line) << "the demo names its gateway and its Curio nodes";
  auto post_line = demo.wait_for_line(
      std::regex(R"(PoSt:\s+relayed to the operator's cuzk at 127\.0\.0\.1:[0-9]+)"),
      std::chrono::seconds(5));
  ASSERT_TRUE(post_line) << "the demo's PoSt goes to the operator's own cuzk (a stand-in)";

  // "| curio: T tasks, P proved (F by the fleet, ...": Curio's tasks got the fleet's proofs
  // through the gateway.
  auto proved = demo.wait_for_line(
      std::regex(R"(curio: [0-9]+ tasks, [0-9]+ proved \(([1-9][0-9]*) by the fleet)"),
      std::chrono::seconds(300));
  ASSERT_TRUE(proved) << demo.stderr_text() << read_all(data / "serve.log").substr(0, 20000);

  const pf::test::Url manager = pf::test::parse_url(url_line->groups.at(1));
  httplib::Client client(manager.host, manager.port);
  client.set_bearer_token_auth(token_line->groups.at(1).c_str());
  auto r = client.Get("/api/v1/jobs?state=done&limit=1000");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json done = json::parse(r->body);
  ASSERT_TRUE(done.is_array());
  EXPECT_GE(done.size(), 1u);
  for (const auto& job : done) {
    // PoSt never enters the fleet's queue: only PoRep and SnapDeals jobs, named as Curio names
    // them.
    const std::string kind = job.value("kind", "");
    const std::string id = job.value("request_id", "");
    EXPECT_TRUE(kind == "porep-c2" || kind == "snap-update") << job.dump();
    EXPECT_TRUE(id.rfind(kind == "porep-c2" ? "porep-1000-" : "snap-1000-", 0) == 0) << job.dump();
  }

  ASSERT_EQ(::kill(demo.pid(), SIGTERM), 0);
  auto code = demo.wait_exit(std::chrono::seconds(60));
  ASSERT_TRUE(code) << "demo did not stop on SIGTERM";
  EXPECT_EQ(*code, 0) << demo.stderr_text();
  fs::remove_all(data);
}

}  // namespace
