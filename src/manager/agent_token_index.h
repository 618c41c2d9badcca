// Which instance an agent's bearer token belongs to. Every agent call authenticates: the index
// remembers token hash -> instance id, so only a token's first call reads a row. A part of the
// manager with its own state and lock (not the manager's): authenticating never waits on a
// reconcile or a tick.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace pf::store {
class InstanceStore;
}

namespace pf::manager {

class AgentTokenIndex {
 public:
  explicit AgentTokenIndex(store::InstanceStore& store) : store_(store) {}

  // The instance whose agent holds `token`, or nullopt (empty, unknown). A token stays its
  // instance's for the instance's life: an agent registering again presents the same one
  // (Manager::agent_register), so a remembered entry never goes stale.
  std::optional<std::int64_t> instance_of(const std::string& token);

 private:
  store::InstanceStore& store_;
  std::mutex mu_;
  std::map<std::string, std::int64_t> ids_;  // token hash -> instance id
};

}  // namespace pf::manager
