// market-sim --spawn-agents: acts out each created instance's container on this machine.
// After the offer truth's boot time (scaled) the instance's `onstart` runs under /bin/sh -c in
// its own process group, with the create's env plus what makes `proverfleet agent` behave as
// the truth says (PROVERFLEET_PROVER=sim, a probe tree, the truth, state and parameter dirs
// under <work_dir>/instances/<id>/; PATH starts with this very binary's directory). Destroy:
// SIGTERM to the group, SIGKILL after a grace. Truth failures crash/offline: SIGKILL when the
// truth model's timeline says (InstanceLaunch::failure_h; a vanished host gives no grace).
// never_boots: nothing ever starts.
// stop_all() (market-sim exiting) ends every group; children are always reaped.
//
// The onstart's shell is the container's first process: when it exits, whatever it left
// running in its group is killed too. market-sim becomes a child subreaper so that those
// orphans are its to reap (no zombies left to an init that may not reap them). Each group has
// a watchdog process (agent::ChildOptions::group_watchdog) that SIGKILLs it when market-sim
// dies in any way, SIGKILL included: no spawned agent outlives market-sim.
//
// Stop and start, as a container is stopped and started: while the market has the instance
// stopped (its client's PUT state "stopped", or the market's own stop: outbid, contract ended;
// AgentSpawnerOptions::container_stopped) its group gets SIGTERM, SIGKILL after the grace, and
// the instance directory is kept (a stopped container keeps its disk); when it runs again the
// onstart runs again in that directory, as vast runs it on every container start.
// What it does not act out: runtype "args" (only onstart runs), the image.
//
// Per instance directory:
//   probe/     PROVERFLEET_PROBE_ROOT: sys/fs/cgroup (v2: memory.max = ram_visible, cpu.max =
//              cores_visible), proc/meminfo (the whole host), proc/self/status (affinity =
//              every host CPU), proc/self/cgroup, nvidia-smi.csv (one line per GPU)
//   state/     PROVERFLEET_STATE_DIR      params/  PROVERFLEET_PARAM_DIR
//   truth.json PROVERFLEET_SIM_TRUTH=@truth.json   agent.log  the onstart's stdout and stderr
//   co_tenants our other instances on the machine now (rewritten as they come and go)
// The directory is emptied when the instance boots: a fresh machine every time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "market_sim/market_sim.h"
#include "scenario/scenario.h"

namespace pf::market_sim {

// --- pure parts ------------------------------------------------------------------------------

// The files the agent's probe reads for this offer, path relative to the probe root ->
// content. Host RAM (MemTotal) is the advertised cpu_ram scaled up from the offer's core share
// to the whole machine (vast slices RAM with cores), and never below the visible RAM.
std::map<std::string, std::string> probe_tree_files(const ScenarioOffer& offer);

// What the agent's sim prover takes (PROVERFLEET_SIM_TRUTH): the scenario truth's keys, plus
// the neighbours at create (co_tenants) and a seed. The spawner adds co_tenants_file: the
// instance directory's kCoTenantsFile, rewritten as our instances on the machine come and go.
inline constexpr const char* kCoTenantsFile = "co_tenants";
nlohmann::json sim_truth_json(const Truth& truth, int co_tenants, std::uint64_t seed);

// Wall seconds from scenario hour now_h until at_h at `time_scale` scenario seconds per wall
// second: 0 when at_h has passed, +inf when at_h is +inf.
double wall_seconds_until(double at_h, double now_h, double time_scale);

struct LaunchEnvironment {
  std::map<std::string, std::string> env;
  std::vector<std::string> notes;  // entries skipped or replaced, and why
};

// The create's env (entries whose key is a variable name and whose value is a string; vast
// also carries docker flags such as "-p 8000:8000" there) overlaid with `ours`, which wins.
LaunchEnvironment launch_environment(const nlohmann::json& create_env,
                                     const std::map<std::string, std::string>& ours);

// --- the spawner -----------------------------------------------------------------------------

struct AgentSpawnerOptions {
  std::string work_dir;  // must exist; instances go to <work_dir>/instances/<id>
  std::string bin_dir;   // put first in PATH, so "proverfleet" is the running binary
  std::string path_after_bin_dir = "/usr/local/bin:/usr/bin:/bin";
  double time_scale = 1;
  std::uint64_t seed = 0;  // mixed with the instance id into the sim prover's seed
  std::chrono::milliseconds term_grace{3000};
  std::function<double()> clock_h;  // scenario hour now; required
  std::function<void(const std::string&)> log;
  // Whether the market has instance `id`'s container stopped now (MarketSimServer::
  // container_stopped). Unset: never stopped. Called from the supervising thread.
  std::function<bool(std::int64_t id)> container_stopped;
};

enum class SpawnState {
  Waiting,   // created, not booted yet (never_boots: for ever)
  Running,   // onstart started
  Stopping,  // signalled, not reaped yet
  Stopped,   // its container stopped: no process, its directory kept; runs again on start
  Ended,     // reaped, or never started
};
const char* to_string(SpawnState state);

struct SpawnedInstance {
  std::int64_t id = 0;
  SpawnState state = SpawnState::Waiting;
  int pid = 0;  // the process group's leader (/bin/sh) once started
  std::string dir;
  std::string outcome;  // once ended: how
};

class AgentSpawner {
 public:
  explicit AgentSpawner(AgentSpawnerOptions options);
  ~AgentSpawner();  // stop_all()
  AgentSpawner(const AgentSpawner&) = delete;
  AgentSpawner& operator=(const AgentSpawner&) = delete;

  // Thread-safe and quick (the market-sim server calls them under its lock).
  void on_created(const InstanceLaunch& launch, const ScenarioOffer& offer);
  void on_destroyed(std::int64_t id);

  // Ends every process group (SIGTERM, SIGKILL after the grace), reaps them and stops the
  // supervising thread. Blocks; idempotent.
  void stop_all();

  // As of the supervisor's last pass (every 50 ms), by id.
  std::vector<SpawnedInstance> instances() const;
  std::string instance_dir(std::int64_t id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::market_sim
