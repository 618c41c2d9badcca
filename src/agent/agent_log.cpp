#include "agent/agent_log.h"

#include <chrono>
#include <ctime>
#include <iostream>

namespace pf::agent {
namespace {

std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

void AgentLog::line(const std::string& message) {
  const std::string text = timestamp() + " agent: " + message;
  buffer_.append_line(text);
  if (sink_) {
    sink_(text);
    return;
  }
  std::lock_guard lock(stderr_mu_);
  if (bar_active_) std::cerr << "\r\033[K";
  std::cerr << text << "\n";
}

void AgentLog::prover_line(const std::string& line) {
  buffer_.append_line(line);
  if (sink_) sink_(line);
}

void AgentLog::draw_bar(const std::string& bar) {
  std::lock_guard lock(stderr_mu_);
  std::cerr << "\r\033[K" << bar << std::flush;
}

void AgentLog::end_bar() {
  std::lock_guard lock(stderr_mu_);
  std::cerr << "\n";
  bar_active_ = false;
}

}  // namespace pf::agent
