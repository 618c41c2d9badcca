// `proverfleet agent`: what every rented instance runs (src/agent/agent.h).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/secrets.h"
#include "cli/serving.h"
#include "core/planner.h"

namespace pf::cli {
namespace {

struct AgentCliOptions {
  agent::AgentOptions agent;
  int partitions = 0;
  int concurrency = 0;
  bool no_progress = false;
  RefusedSecretFlag secret_flag{"--secret", "$PROVERFLEET_SECRET", std::nullopt};
};

std::string default_state_dir() {
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.proverfleet/agent";
  }
  return "proverfleet-agent";
}

// "@path" reads the file; anything else is the text itself.
std::string text_or_file(const std::string& value, const char* option) {
  if (value.empty() || value.front() != '@') return value;
  std::ifstream in(value.substr(1));
  if (!in) throw CommandFailed(std::string(option) + ": cannot read " + value.substr(1));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void run_agent(AgentCliOptions& cli) {
  check_refused_secret_flag(cli.secret_flag);
  agent::AgentOptions& o = cli.agent;
  if (o.manager_url.empty()) {
    throw CommandFailed("missing --manager (or PROVERFLEET_MANAGER): the manager's URL");
  }
  if (o.manager_url.rfind("http://", 0) != 0 && o.manager_url.rfind("https://", 0) != 0) {
    throw CommandFailed("--manager must be an http:// or https:// URL, got '" + o.manager_url +
                        "'");
  }
  if (o.deployment.empty()) {
    throw CommandFailed("missing --deployment (or PROVERFLEET_DEPLOYMENT): the deployment id");
  }
  o.secret = secret_from_env("PROVERFLEET_SECRET").value_or("");
  if (o.secret.empty()) {
    throw CommandFailed(
        "missing PROVERFLEET_SECRET: the registration secret (from the env the "
        "instance was created with)");
  }
  if (!std::isfinite(o.time_scale) || o.time_scale <= 0) {
    throw CommandFailed("--time-scale must be a positive number");
  }
  if (o.download_connections < 1 || o.download_connections > 64) {
    throw CommandFailed("--connections must be in [1, 64]");
  }
  if (o.download_chunk_mib < 1 || o.download_chunk_mib > 4096) {
    throw CommandFailed("--download-chunk-mib must be in [1, 4096]");
  }
  if (!o.prover.empty() && o.prover != "cuzk" && o.prover != "sim" && o.prover != "command") {
    throw CommandFailed("--prover must be cuzk, sim or command, got '" + o.prover + "'");
  }
  if (cli.partitions < 0) throw CommandFailed("--partitions must be >= 1");
  if (cli.concurrency < 0 || cli.concurrency > 256) {
    throw CommandFailed("--concurrency must be in [1, 256]");
  }
  if (cli.partitions > 0) o.partitions = cli.partitions;
  if (cli.concurrency > 0) o.concurrency = cli.concurrency;
  if (o.state_dir.empty()) o.state_dir = default_state_dir();
  o.sim_truth = text_or_file(o.sim_truth, "--sim-truth");
  o.progress_bar = !cli.no_progress && isatty(STDERR_FILENO) == 1;

  // Before the agent exists, so that every thread it starts inherits the blocked mask; the run
  // loop is on its own thread because this one must keep taking signals to stop it.
  BlockedStopSignals stop_signals;
  ::signal(SIGPIPE, SIG_IGN);

  agent::Agent a(o);
  int code = 0;
  std::atomic<bool> done{false};
  std::thread runner([&] {
    code = a.run();
    done = true;
  });
  while (!done) {
    const int sig = stop_signals.wait(std::chrono::milliseconds(200));
    if (sig != 0) a.request_stop(sig == SIGTERM ? "SIGTERM" : "SIGINT");
  }
  runner.join();
  if (code != agent::kAgentStopped) {
    throw CommandFailed("the agent stopped after a fatal error (see the log above)", code);
  }
}

}  // namespace

void register_agent(CLI::App& app) {
  auto cli = std::make_shared<AgentCliOptions>();
  agent::AgentOptions& o = cli->agent;
  CLI::App* cmd = app.add_subcommand(
      "agent", "Run on a rented instance: probe, plan, fetch parameters, prove, report");
  cmd->footer(
      "Registers with the manager using the deployment id and the secret ($PROVERFLEET_SECRET,\n"
      "single-use: it binds the agent's own token, kept 0600 in --state-dir) the instance was\n"
      "created with, fetches and verifies the proof parameters, plans the prover from the\n"
      "machine's real limits (cgroup memory, CPU quota, GPUs), warms it up and keeps proofs in\n"
      "flight, reporting heartbeats, events and logs. Re-plans smaller after an OOM kill;\n"
      "restarts the prover after a crash; exits 0 on the manager's stop command or\n"
      "SIGTERM/SIGINT, 1 when the manager refuses its token and its registration.\n"
      "State (token, event journal, plan caps, cuzk.toml) lives in --state-dir and survives\n"
      "restarts.\n"
      "Provers: cuzk (spawns the daemon `cuzk` from PATH), sim (market-sim instances:\n"
      "--sim-truth), command (runs --prover-command once per proof).");
  cmd->add_option("--manager", o.manager_url, "Manager URL")->envname("PROVERFLEET_MANAGER");
  cmd->add_option("--deployment", o.deployment, "Deployment id")->envname("PROVERFLEET_DEPLOYMENT");
  add_refused_secret_flag(cmd, cli->secret_flag);
  cmd->add_option("--state-dir", o.state_dir,
                  "Agent state directory (default ~/.proverfleet/agent)")
      ->envname("PROVERFLEET_STATE_DIR");
  cmd->add_option("--param-dir", o.param_dir,
                  "Where parameters go; cuzk's param_cache (default STATE_DIR/params)")
      ->envname("PROVERFLEET_PARAM_DIR");
  cmd->add_option("--probe-root", o.probe_root,
                  "Root under which /proc and /sys/fs/cgroup are read (fixtures, market-sim); "
                  "when not /, GPUs come from ROOT/nvidia-smi.csv")
      ->envname("PROVERFLEET_PROBE_ROOT")
      ->capture_default_str();
  cmd->add_option("--nvidia-smi", o.nvidia_smi, "nvidia-smi program")->capture_default_str();
  cmd->add_option("--prover", o.prover,
                  "cuzk, sim or command (default: the manager's prover.kind, else cuzk)")
      ->envname("PROVERFLEET_PROVER");
  cmd->add_option("--time-scale", o.time_scale,
                  "Simulated seconds per wall second (sim: reported times are simulated)")
      ->envname("PROVERFLEET_TIME_SCALE")
      ->check(finite_positive(1e6))
      ->capture_default_str();
  cmd->add_option("--sim-truth", o.sim_truth,
                  "sim prover: the offer's scenario truth as JSON, or @FILE")
      ->envname("PROVERFLEET_SIM_TRUTH");
  cmd->add_option("--prover-command", o.prover_command,
                  "command prover: shell command run once per proof")
      ->envname("PROVERFLEET_PROVER_COMMAND");
  cmd->add_option("--cuzk-daemon", o.cuzk_daemon,
                  "cuzk: daemon program (default cuzk, as curio's make install-cuzk installs it)");
  cmd->add_option("--cuzk-listen", o.cuzk_listen, "cuzk: gRPC address (default 127.0.0.1:9820)");
  cmd->add_option("--cuzk-status-listen", o.cuzk_status_listen,
                  "cuzk: HTTP /status address (default 127.0.0.1:9821)");
  cmd->add_flag("--cuzk-external", o.cuzk_external,
                "cuzk: use a daemon already running at the listen address; do not spawn one");
  cmd->add_option("--c1", o.c1_path, "cuzk: benchmark input (C1 envelope JSON)");
  cmd->add_option("--connections", o.download_connections, "Parallel ranged downloads per file")
      ->capture_default_str();
  cmd->add_option("--download-chunk-mib", o.download_chunk_mib,
                  "Size of one ranged download; the unit of resume after a restart")
      ->capture_default_str();
  cmd->add_option("--partitions", cli->partitions, "Upper bound on concurrent partitions")
      ->check(finite_range(1, core::kMaxPlanGpus * 1000));
  cmd->add_option("--concurrency", cli->concurrency, "Proofs in flight (default: the plan's)");
  cmd->add_option("--max-restarts", o.max_restarts,
                  "Prover failures in a row, without a proof, before giving up")
      ->capture_default_str();
  cmd->add_flag("--exit-on-failure", o.exit_on_failure,
                "Exit 1 after a fatal error instead of reporting and waiting for stop");
  cmd->add_flag("--no-progress", cli->no_progress, "No progress bar, even on a terminal");
  cmd->callback([cli] { run_agent(*cli); });
}

}  // namespace pf::cli
