// reliability_suite: the standing reliability runs and their figures table.
//   reliability_suite http-corpus --binary PROVERFLEET --source REPO [--figures-out FILE] [--keep]
//   reliability_suite chaos --binary PROVERFLEET --source REPO [--time-scale N] [--before-kill-s N]
//                     [--serve-down-s N] [--after-restart-s N] [--cleanup-timeout-s N]
//                     [--faults SPEC] [--scenario FILE] [--figures-out FILE] [--keep]
//   reliability_suite table TITLE FIGURES.json...   (sums figure files, prints the table)
// Exit status: 0 when every figure except "requests tried" is 0, 1 when one is not, 2 when the
// run itself could not be carried out (the message says why).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "reliability/chaos.h"
#include "reliability/http_corpus.h"

namespace {

using pf::reliability::Figures;

struct Args {
  std::map<std::string, std::string> values;
  std::vector<std::string> positional;
  bool has(const std::string& k) const { return values.count(k) > 0; }
  std::string get(const std::string& k, const std::string& fallback = "") const {
    auto it = values.find(k);
    return it == values.end() ? fallback : it->second;
  }
  int integer(const std::string& k, int fallback) const {
    return has(k) ? std::stoi(values.at(k)) : fallback;
  }
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--keep") {
      a.values["--keep"] = "1";
    } else if (arg.rfind("--", 0) == 0) {
      if (i + 1 >= argc) throw std::runtime_error(arg + " needs a value");
      a.values[arg] = argv[++i];
    } else {
      a.positional.push_back(arg);
    }
  }
  return a;
}

int finish(const Figures& f, const std::string& title, const Args& a) {
  std::printf("%s", f.table(title).c_str());
  std::fflush(stdout);
  if (a.has("--figures-out")) {
    std::ofstream out(a.get("--figures-out"));
    out << f.to_json().dump(1) << "\n";
    if (!out) throw std::runtime_error("cannot write " + a.get("--figures-out"));
  }
  return f.passed() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s http-corpus|chaos|table ...\n", argv[0]);
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    const Args a = parse_args(argc, argv);
    if (cmd == "http-corpus") {
      pf::reliability::HttpCorpusOptions o;
      o.binary = a.get("--binary");
      o.source_dir = a.get("--source");
      o.workers = a.integer("--workers", o.workers);
      o.slow_clients = a.integer("--slow-clients", o.slow_clients);
      o.slow_seconds = a.integer("--slow-seconds", o.slow_seconds);
      o.keep_dir = a.has("--keep");
      if (o.binary.empty() || o.source_dir.empty())
        throw std::runtime_error("--binary and --source are required");
      return finish(pf::reliability::run_http_corpus(o), "bad-input HTTP corpus", a);
    }
    if (cmd == "chaos") {
      pf::reliability::ChaosOptions o;
      o.binary = a.get("--binary");
      o.source_dir = a.get("--source");
      o.scenario = a.get("--scenario");
      o.faults = a.get("--faults", o.faults);
      o.time_scale = std::stod(a.get("--time-scale", "60"));
      o.before_kill_s = a.integer("--before-kill-s", o.before_kill_s);
      o.serve_down_s = a.integer("--serve-down-s", o.serve_down_s);
      o.after_restart_s = a.integer("--after-restart-s", o.after_restart_s);
      o.cleanup_timeout_s = a.integer("--cleanup-timeout-s", o.cleanup_timeout_s);
      o.heartbeat_timeout_s = a.integer("--heartbeat-timeout-s", o.heartbeat_timeout_s);
      o.keep_dir = a.has("--keep");
      if (o.binary.empty() || o.source_dir.empty())
        throw std::runtime_error("--binary and --source are required");
      return finish(pf::reliability::run_chaos(o), "chaos run", a);
    }
    if (cmd == "table") {
      if (a.positional.empty()) throw std::runtime_error("table TITLE FIGURES.json...");
      Figures total;
      for (std::size_t i = 1; i < a.positional.size(); ++i) {
        std::ifstream in(a.positional[i]);
        if (!in) throw std::runtime_error("cannot read " + a.positional[i]);
        total.merge_json(nlohmann::json::parse(in));
      }
      return finish(total, a.positional[0], a);
    }
    std::fprintf(stderr, "unknown command %s\n", cmd.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "reliability_suite %s: could not run: %s\n", cmd.c_str(), e.what());
    return 2;
  }
}
