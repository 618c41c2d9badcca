// Test helpers for integration tests that run the built `proverfleet` (PF_BINARY) as processes:
// where a server started with --listen 127.0.0.1:0 listens, the operator token `serve` writes,
// the fleet CLI and the operator API against that manager. Header-only.
#pragma once

#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/subprocess.h"

namespace pf::test {

struct Url {
  std::string host;
  int port = 0;
  std::string str() const { return "http://" + host + ":" + std::to_string(port); }
};

// The first "http://IPv4:PORT" in `line` (a server's "listening on" line). Throws
// std::runtime_error naming the line when there is none.
inline Url parse_url(const std::string& line) {
  std::smatch m;
  static const std::regex re(R"(http://([0-9.]+):([0-9]+))");
  if (!std::regex_search(line, m, re)) throw std::runtime_error("no URL in: " + line);
  return {m[1].str(), std::stoi(m[2].str())};
}

// The operator token `proverfleet serve` wrote into its data folder; empty when there is none.
inline std::string read_operator_token(const std::filesystem::path& data_dir) {
  std::ifstream in(data_dir / "operator.token");
  std::string token;
  std::getline(in, token);
  return token;
}

struct CliRun {
  int code = -1;    // -1: it did not exit within the limit
  std::string out;  // stdout only: what --json prints
  std::string err;
};

// Runs `proverfleet ARGS` against the manager at `manager`, as the operator with `token`.
inline CliRun run_cli(std::vector<std::string> args, const Url& manager, const std::string& token) {
  args.insert(args.begin(), PF_BINARY);
  SpawnOptions opt;
  opt.env["PROVERFLEET_MANAGER"] = manager.str();
  opt.env["PROVERFLEET_TOKEN"] = token;
  auto p = Subprocess::spawn(args, opt);
  CliRun run;
  run.code = p.wait_exit(std::chrono::seconds(30)).value_or(-1);
  for (const auto& l : p.stdout_lines()) run.out += l + "\n";
  run.err = p.stderr_text();
  return run;
}

// One operator API call (GET, POST with a JSON body, or DELETE); the reply's body as JSON.
// Throws std::runtime_error when the manager does not answer.
inline nlohmann::json operator_api(const Url& manager, const std::string& token,
                                   const std::string& method, const std::string& path,
                                   const nlohmann::json& body = nullptr) {
  httplib::Client c(manager.host, manager.port);
  c.set_bearer_token_auth(token.c_str());
  httplib::Result r = method == "GET"    ? c.Get(path.c_str())
                      : method == "POST" ? c.Post(path.c_str(), body.dump(), "application/json")
                                         : c.Delete(path.c_str());
  if (!r) throw std::runtime_error("manager unreachable for " + path);
  return nlohmann::json::parse(r->body);
}

}  // namespace pf::test
