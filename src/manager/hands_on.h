// What the manager holds in memory about each running instance for an operator working by
// hand, between the agent's heartbeats: the agent's last live report of its prover and GPUs, the
// market's SSH endpoints, and the operator's tune commands waiting for the next heartbeat. The
// live report and SSH endpoints are refilled within a heartbeat and a reconcile after a restart;
// the tune commands are an operator's acknowledged request, so the Manager also keeps them in the
// store (the setting kPendingCommandsSetting, written with each change: pending_json() /
// restore()) and a restart or a new leader sends them all the same. Its own lock: an operator's
// read never waits behind a reconcile holding the Manager's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/ssh_access.h"

namespace pf::manager {

// What the agent's last heartbeat said about its prover and GPUs, kept for the instance page
// (bounded copies of the heartbeat's "prover" object, its cuzk "status" and the "gpus" list).
struct LiveStatus {
  double at = 0;
  nlohmann::json prover = nlohmann::json::object();
  nlohmann::json gpus = nlohmann::json::array();
};
// The bounded copy: scalars only (strings cut to 200 bytes), at most 32 keys per object and
// kMaxLiveGpus GPUs, so an agent cannot make the manager keep or serve more than a few kB.
inline constexpr std::size_t kMaxLiveGpus = 64;
LiveStatus live_status_from_heartbeat(const nlohmann::json& body, double at);

// The setting holding every instance's tune commands not yet sent: {"<instance id>": [command]}.
inline constexpr const char* kPendingCommandsSetting = "hands_on.pending_commands";
// A stored list's bounds, as a tune makes them (two commands per instance).
inline constexpr std::size_t kMaxPendingCommands = 8;
inline constexpr std::size_t kMaxCommandBytes = 64;

class HandsOn {
 public:
  // Queues the operator's commands for the instance's next heartbeat; a newer setting replaces a
  // queued one of the same command ("replan:N", "set_concurrency:N").
  void queue_commands(std::int64_t id, const std::vector<std::string>& commands);
  // The queued commands, taken: the heartbeat reply carries them once.
  std::vector<std::string> take_commands(std::int64_t id);
  std::vector<std::string> pending_commands(std::int64_t id) const;
  // Replaces the instance's queued commands (an undo when storing them failed).
  void set_commands(std::int64_t id, std::vector<std::string> commands);
  // Every instance's queued commands as kPendingCommandsSetting holds them, and back: entries
  // that are not an instance id with a list of short strings are skipped (the setting is ours,
  // but a hand-edited database must not stop the manager).
  nlohmann::json pending_json() const;
  void restore(const nlohmann::json& pending);
  void heard(std::int64_t id, LiveStatus status);
  std::optional<LiveStatus> live_status(std::int64_t id) const;
  void listed(std::int64_t id, core::SshEndpoints endpoints);
  std::optional<core::SshEndpoints> ssh_endpoints(std::int64_t id) const;
  // The instance is destroyed: nothing of it is kept. Returns whether commands were queued.
  bool forget(std::int64_t id);

 private:
  mutable std::mutex mu_;
  std::map<std::int64_t, std::vector<std::string>> commands_;
  std::map<std::int64_t, LiveStatus> live_;
  std::map<std::int64_t, core::SshEndpoints> ssh_;
};

}  // namespace pf::manager
