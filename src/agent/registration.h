// Joining the manager. The agent's own bearer token is kept in its state dir, so a retry
// after a lost reply, or a restarted agent, registers as the same agent (the manager binds
// the single-use deployment secret to the first token it sees). Registration retries what
// can be retried; its reply sets the terms the agent runs by. A 401 later is settled here
// too: register again with the same token, or stop for good when that is refused.
#pragma once

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <tl/expected.hpp>

#include "agent/agent_log.h"
#include "agent/manager_client.h"

namespace pf::agent {

// What the manager's register reply tells the agent.
struct ManagerTerms {
  double heartbeat_s = 10;
  nlohmann::json prover_settings = nlohmann::json::object();
  nlohmann::json params_manifest = nlohmann::json::array();
  nlohmann::json benchmark_input_offer;  // null: none offered
  int max_samples = 0;                   // the benchmark's sample cap (0: none given)
  // What earlier rentals of this machine taught: plan below this many partitions (0: no OOM
  // known), and the memory model learned from peaks seen on it or its GPU model (0: the
  // planner's own; it only ever raises the per-partition figure).
  int machine_oom_partitions = 0;
  double machine_per_partition_gib = 0;
  std::string machine_memory_reason;
};

// The terms in a register reply; values missing or out of range keep their defaults.
ManagerTerms parse_register_reply(const nlohmann::json& reply);

// The token kept in `state_dir` (a restart), else a new one from /dev/urandom, saved (0600)
// before it is first sent. A lost state dir means the instance cannot be re-joined, by design:
// the secret is readable in the market's instance list.
tl::expected<std::string, std::string> load_or_create_agent_token(const std::string& state_dir,
                                                                  AgentLog& log);

class Registration {
 public:
  using RequestStop = std::function<void(const std::string& reason)>;
  // `manager` and `log` must outlive this object.
  Registration(ManagerClient& manager, AgentLog& log, RequestStop request_stop)
      : manager_(manager), log_(log), request_stop_(std::move(request_stop)) {}

  // Registers with `body`, retrying unreachable and busy managers with jittered backoff
  // (`pause` waits simulated seconds; false: a stop came). Returns the exit code to leave with
  // when registration cannot succeed; nullopt once registered, with `terms` set.
  std::optional<int> register_until_done(nlohmann::json body, ManagerTerms& terms,
                                         const std::function<bool(double)>& pause,
                                         double time_scale);

  // A 401 means the manager does not know our token (its database was restored from before
  // we registered, say). Registering again with the same token settles it: the manager
  // either takes it (the secret was not used yet, or is bound to this very token) or refuses
  // for good (the secret was spent by someone else), and then nothing we send counts: stop,
  // once. Called from any thread.
  void on_unauthorized(const CallError& error);
  // The manager refused our token and our registration: nothing more would be taken.
  bool credentials_refused() const { return credentials_refused_; }

 private:
  ManagerClient& manager_;
  AgentLog& log_;
  RequestStop request_stop_;
  nlohmann::json body_;  // set before the first register, then only read
  std::mt19937_64 rng_{std::random_device{}()};
  std::atomic<bool> credentials_refused_{false};
};

}  // namespace pf::agent
