// The agent's log: every line goes to the buffer the reporter ships to the manager, and to
// stderr (or a test's sink instead). The parameter progress bar redraws one stderr line in
// place; a log line written meanwhile clears it first, so the two never share a line.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <string>

#include "agent/log_buffer.h"

namespace pf::agent {

class AgentLog {
 public:
  using Sink = std::function<void(const std::string& line)>;
  // `sink` empty: stderr.
  explicit AgentLog(Sink sink) : sink_(std::move(sink)) {}

  // "<UTC time> agent: <message>".
  void line(const std::string& message);
  // A line of the prover's own output, kept as it is (on stderr only through a sink: the
  // prover writes its own).
  void prover_line(const std::string& line);

  // The progress bar: begin_bar(), draw_bar() as often as wanted, end_bar() ends its line.
  void begin_bar() { bar_active_ = true; }
  void draw_bar(const std::string& bar);
  void end_bar();

  // What waits to be shipped to the manager.
  LogBuffer& buffer() { return buffer_; }

 private:
  Sink sink_;
  LogBuffer buffer_;
  std::mutex stderr_mu_;  // one writer of stderr at a time: lines and the bar
  std::atomic<bool> bar_active_{false};
};

}  // namespace pf::agent
