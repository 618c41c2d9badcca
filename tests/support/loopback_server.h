// Test helper: serves an httplib::Server (or SSLServer) on 127.0.0.1, on a free port, on its
// own thread, from construction until destruction. Header-only.
#pragma once

#include <httplib.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace pf::test {

class LoopbackServing {
 public:
  // Throws std::runtime_error when no port can be bound. The server must outlive this object.
  explicit LoopbackServing(httplib::Server& server) : server_(server) {
    port_ = server_.bind_to_any_port("127.0.0.1");
    if (port_ <= 0) throw std::runtime_error("cannot bind 127.0.0.1 to a free port");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // httplib ignores stop() before its listen loop runs, so the destructor must not race it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~LoopbackServing() {
    server_.stop();
    thread_.join();
  }
  LoopbackServing(const LoopbackServing&) = delete;
  LoopbackServing& operator=(const LoopbackServing&) = delete;

  int port() const { return port_; }

 private:
  httplib::Server& server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace pf::test
