// Shared by the long-running commands (serve, market-sim, demo, agent): where to listen, and
// how to stop.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <ctime>
#include <optional>
#include <string>

namespace pf::cli {

struct ListenAddress {
  std::string host;
  int port = 0;
};

// "HOST:PORT" or "[IPv6]:PORT".
inline std::optional<ListenAddress> parse_listen(const std::string& text) {
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
  ListenAddress address;
  address.host = text.substr(0, colon);
  if (address.host.size() >= 2 && address.host.front() == '[' && address.host.back() == ']') {
    address.host = address.host.substr(1, address.host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  address.port = std::stoi(port);
  if (address.port > 65535 || address.host.empty()) return std::nullopt;
  return address;
}

// SIGINT/SIGTERM (and SIGHUP, `with_reload`: serve's reload) are blocked in every thread (the
// server's pool inherits the mask) and taken synchronously by the main thread, so no handler
// runs in a signal context.
class BlockedStopSignals {
 public:
  explicit BlockedStopSignals(bool with_reload = false) {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    if (with_reload) sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &previous_);
  }
  ~BlockedStopSignals() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  BlockedStopSignals(const BlockedStopSignals&) = delete;
  BlockedStopSignals& operator=(const BlockedStopSignals&) = delete;

  // The signal received within `timeout`, or 0.
  int wait(std::chrono::milliseconds timeout) const {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    ts.tv_nsec = static_cast<long>((timeout.count() % 1000) * 1'000'000);
    int sig = sigtimedwait(&set_, nullptr, &ts);
    return sig > 0 ? sig : 0;
  }

 private:
  sigset_t set_{};
  sigset_t previous_{};
};

}  // namespace pf::cli
