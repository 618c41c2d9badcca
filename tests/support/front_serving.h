// Test helper: serves a net::HttpServer (the manager's HTTP front) on 127.0.0.1, on a free port,
// from construction until destruction. Header-only.
#pragma once

#include <stdexcept>
#include <string>

#include "net/http_server.h"

namespace pf::test {

class FrontServing {
 public:
  // Throws std::runtime_error when no port can be bound. The server must outlive this object,
  // and is stopped for good by its destruction.
  explicit FrontServing(net::HttpServer& server) : server_(server) {
    auto port = server_.bind("127.0.0.1", 0);
    if (!port) throw std::runtime_error("cannot bind 127.0.0.1: " + port.error());
    port_ = *port;
    server_.start();
  }
  ~FrontServing() { server_.stop(); }
  FrontServing(const FrontServing&) = delete;
  FrontServing& operator=(const FrontServing&) = delete;

  int port() const { return port_; }

 private:
  net::HttpServer& server_;
  int port_ = 0;
};

}  // namespace pf::test
