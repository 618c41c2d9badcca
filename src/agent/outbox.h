// Events on their way to the manager, journaled on disk so that none is lost while the
// manager is unreachable or the agent restarts, and none is sent under two numbers. Each event
// gets the next sequence number when it is journaled; the manager applies (instance, seq) at
// most once, so re-sending after an unclear failure is safe.
//
// Files in the state directory: events.jsonl (one event per line, appended and flushed) and
// events.state ({"next_seq", "acked_through"}, replaced atomically). A fresh directory starts
// its numbers at the epoch time in milliseconds, so an agent whose state was wiped can never
// reuse a number it sent before.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>
#include <vector>

namespace pf::agent {

class EventOutbox {
 public:
  // Opens (creating when missing) the journal in `dir`; `epoch_ms` seeds a fresh sequence.
  static tl::expected<std::unique_ptr<EventOutbox>, std::string> open(const std::string& dir,
                                                                      std::int64_t epoch_ms);
  ~EventOutbox();
  EventOutbox(const EventOutbox&) = delete;
  EventOutbox& operator=(const EventOutbox&) = delete;

  // Numbers `event` (sets "seq") and journals it durably. Returns the number.
  tl::expected<std::int64_t, std::string> add(nlohmann::json event);
  // The oldest undelivered events, at most `max`, in sequence order.
  std::vector<nlohmann::json> pending(std::size_t max) const;
  std::size_t pending_count() const;
  // Everything up to and including `seq` reached the manager.
  tl::expected<void, std::string> acknowledge(std::int64_t seq);
  std::int64_t next_seq() const;

 private:
  EventOutbox() = default;
  tl::expected<void, std::string> write_state();

  mutable std::mutex mu_;
  std::string dir_;
  int journal_fd_ = -1;
  std::int64_t next_seq_ = 1;
  std::int64_t acked_through_ = 0;
  std::deque<nlohmann::json> pending_;
};

}  // namespace pf::agent
