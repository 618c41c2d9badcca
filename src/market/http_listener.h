// Binding, serving and stopping one cpp-httplib server (HTTP or HTTPS): market-sim's server
// (the manager serves with net::HttpServer). Header-only so that pf_market itself needs no
// httplib; only the .cpp files that already include <httplib.h> (and link it) include this.
#pragma once

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <tl/expected.hpp>

namespace pf::market {

// Serves `server` on the calling thread until stop() is called from another one. Not owning:
// the server must outlive this object (declare it after the server, so it is destroyed first
// and its destructor's stop() runs while the server still exists).
//
// Two socket settings differ from httplib's defaults:
//  - no SO_REUSEPORT: a second manager started on the same port must fail to bind, not
//    silently share the port (and the fleet) with the first;
//  - a listen backlog of kListenBacklog instead of the 5 compiled into Debian's libcpp-httplib:
//    a burst of clients connecting at once would otherwise overflow it and see failed reads.
//    Linux lets listen() be called again on a listening socket to change it.
class HttpListener {
 public:
  static constexpr int kListenBacklog = 1024;

  explicit HttpListener(httplib::Server& server)
      : server_(server), socket_(std::make_shared<std::atomic<int>>(-1)) {
    server_.set_socket_options([socket = socket_](socket_t sock) {
      int yes = 1;
      ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
      socket->store(sock);
    });
  }
  ~HttpListener() { stop(); }
  HttpListener(const HttpListener&) = delete;
  HttpListener& operator=(const HttpListener&) = delete;

  // Binds host:port; port 0 picks a free one. Returns the bound port.
  tl::expected<int, std::string> bind(const std::string& host, int port) {
    if (port < 0 || port > 65535) {
      return tl::unexpected("port out of range: " + std::to_string(port));
    }
    int bound = port;
    if (port == 0) {
      bound = server_.bind_to_any_port(host);
      if (bound <= 0) return tl::unexpected("cannot listen on " + host + ": no free port");
    } else if (!server_.bind_to_port(host, port)) {
      return tl::unexpected("cannot listen on " + host + ":" + std::to_string(port) +
                            " (address in use or not available)");
    }
    const int fd = socket_->load();
    if (fd >= 0 && ::listen(fd, kListenBacklog) != 0) {
      return tl::unexpected("cannot widen the listen backlog on " + host + ":" +
                            std::to_string(bound));
    }
    return bound;
  }

  // Serves until stop(); bind() first. Returns false if serving failed.
  bool serve() {
    serving_ = true;
    if (stop_requested_) {
      serving_ = false;
      return true;
    }
    const bool ok = server_.listen_after_bind();
    serving_ = false;
    return ok || stop_requested_;
  }

  // Thread-safe; makes serve() return, and keeps a serve() that has not started yet from
  // serving at all.
  void stop() {
    stop_requested_ = true;
    // httplib ignores stop() until its listen loop runs; repeat until serve() has returned.
    while (serving_) {
      server_.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  httplib::Server& server_;
  std::shared_ptr<std::atomic<int>> socket_;  // the listening socket, once bound
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serving_{false};
};

}  // namespace pf::market
