// `proverfleet agent`: turns a rented machine into a measured, self-protecting prover.
// Probe the real limits, register with the manager, fetch and verify the parameters, plan the
// prover from the memory model, warm it up, keep the planned proofs in flight and report
// everything (design §6–§7). After an OOM kill it re-plans smaller and restarts; after a
// crash it restarts; a manager "stop" (or SIGTERM) shuts the prover down and exits 0.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "agent/prover.h"

namespace pf::agent {

inline constexpr const char* kAgentVersion = "0.1.0";

struct AgentOptions {
  std::string manager_url;
  std::string deployment;
  std::string secret;
  std::string state_dir;  // journal, plan state, cuzk config; created if missing
  std::string param_dir;  // empty: <state_dir>/params
  std::string probe_root = "/";
  std::string nvidia_smi = "nvidia-smi";
  std::string prover;  // cuzk | sim | command; empty: the manager's prover.kind, else cuzk
  double time_scale = 1;
  std::string sim_truth;           // JSON object (the scenario truth) for `sim`
  std::string prover_command;      // for `command`
  std::string cuzk_daemon;         // empty: prover.cuzk_daemon from the manager, else cuzk
  std::string cuzk_listen;         // empty: prover.listen, else 127.0.0.1:9820
  std::string cuzk_status_listen;  // empty: prover.status_listen, else 127.0.0.1:9821
  bool cuzk_external = false;      // use a daemon already running at the listen address
  std::string c1_path;             // empty: prover.c1_file (relative to the parameter dir)
  int download_connections = 4;
  int download_chunk_mib = 64;     // unit of resume for parameter downloads
  std::optional<int> partitions;   // upper bound on concurrent partitions
  std::optional<int> concurrency;  // proofs in flight, replacing the plan's
  bool exit_on_failure = false;    // exit 1 after a fatal error instead of waiting for "stop"
  bool progress_bar = false;       // draw a parameter progress bar on stderr
  int max_restarts = 5;            // prover failures in a row (without a proof) before giving up
  double drain_s = 10;             // at exit, how long to keep trying to deliver events (real s)
  std::string agent_version = kAgentVersion;

  // Seams for tests: replace the prover factory, the free-space probe and the log sink.
  std::function<std::unique_ptr<Prover>(const std::string& kind)> make_prover;
  std::function<std::optional<double>(const std::string& dir)> free_gib;
  std::function<void(const std::string& line)> log_sink;  // default: stderr
};

// Exit codes of run().
inline constexpr int kAgentStopped = 0;  // stopped by the manager, a signal, or a 410
inline constexpr int kAgentFailed = 1;   // could not register, or a fatal error (exit_on_failure)

class Agent {
 public:
  explicit Agent(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Runs until stopped; returns an exit code.
  int run();
  // Thread-safe; makes run() shut the prover down, report "exiting" and return.
  void request_stop(const std::string& reason);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::agent
