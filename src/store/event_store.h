// Each instance's audit trail and its agent's log, kept across restarts. Part of the Store
// (store.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/fleet.h"
#include "store/transactions.h"

namespace pf::store {

// Chunks (agent log pushes) kept per instance at most, whatever their size.
inline constexpr std::size_t kMaxAgentLogChunks = 1024;

class EventStore : public virtual Transactions {
 public:
  ~EventStore() override = default;

  // --- audit trail ---------------------------------------------------------------------------
  virtual std::int64_t append_event(const core::InstanceEvent& event) = 0;
  // Newest last; at most `limit` most recent (0 = all).
  virtual std::vector<core::InstanceEvent> events(std::int64_t instance_id, std::size_t limit) = 0;

  // --- agent logs (bounded per instance, kept across restarts) ---------------------------------
  // Appends a chunk of the instance's agent log, then drops its oldest chunks until what is
  // kept is at most `max_bytes` (a larger chunk keeps its newest bytes) and at most
  // kMaxAgentLogChunks chunks. The instance must exist.
  virtual void append_agent_log(std::int64_t instance_id, double at, std::string_view text,
                                std::size_t max_bytes) = 0;
  // What is kept of the instance's log, oldest first ("" when nothing).
  virtual std::string agent_log(std::int64_t instance_id) = 0;

  // --- retention (issue 29: [deploy] log_retention_days, event_retention_days) ----------------
  // Remove the agent logs, or the audit trails, of instances destroyed before `destroyed_before`
  // (epoch s); a live instance's are kept whatever their age. The instance rows stay (the
  // money pages count them). Return how many rows went.
  virtual std::int64_t drop_agent_logs(double destroyed_before) = 0;
  virtual std::int64_t drop_events(double destroyed_before) = 0;
};

}  // namespace pf::store
