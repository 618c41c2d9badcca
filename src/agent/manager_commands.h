// The commands a heartbeat reply carries, read into one typed list: "stop", "replan" or
// "replan:N" (at most N partitions), "set_concurrency:N" (proofs in flight), or the object
// form {"name"|"command": ..., "value": N}. A value out of its range makes set_concurrency
// unknown and a replan unbounded; what is unknown is kept for the log, never acted on.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace pf::agent {

inline constexpr int kMaxReplanPartitions = 640;
inline constexpr int kMaxSetConcurrency = 256;

struct ManagerCommand {
  enum class Kind { Stop, Replan, SetConcurrency, Unknown };
  Kind kind = Kind::Unknown;
  std::optional<int> value;  // Replan: the partition cap, if any; SetConcurrency: always
  nlohmann::json raw;        // as the manager sent it
};

std::vector<ManagerCommand> parse_manager_commands(const nlohmann::json& commands);

}  // namespace pf::agent
