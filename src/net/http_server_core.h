// The HTTP server's core: what its two translation units share (net/ only; nothing outside
// includes this). ServerCore holds the routes, the hooks, the lanes and the connection registry;
// net/http_session.cpp is one connection's state machine (Session<Stream>) and how a
// connection is admitted; net/http_server.cpp is HttpServer around it (configuration,
// listening, start, stop, the handover to a successor). Both include Boost.Asio with Beast's
// parser, which is slow to compile: the unity build puts them in one translation unit
// (cmake/fast_build.cmake), so the split costs no compile time.
#pragma once

#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "net/http_server.h"
#include "net/lane.h"

namespace pf::net::detail {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

struct Route {
  std::string method;
  // Set when the pattern has no regex syntax: compared as text (most routes; std::regex costs
  // microseconds a match, on the IO thread).
  std::optional<std::string> literal;
  std::regex pattern;
  Handler handler;
  Lane* lane = nullptr;  // nullptr: inline, on the IO thread
};

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void start() = 0;
  // Thread-safe: closes the connection on its own strand.
  virtual void shut() = 0;
};

// Between a stream thread's sink and the IO strand that writes for it.
struct StreamChannel {
  std::mutex mu;
  std::condition_variable done;
  bool pending = false;  // a piece handed to the IO strand and not yet written
  bool gone = false;     // the client left, a write failed, or the server stops
};

// Everything a session needs from its server (HttpServer::Impl is this, under a private name).
struct ServerCore {
  explicit ServerCore(ServerOptions o) : options(std::move(o)) {
    lanes.emplace(std::string(kDefaultLane),
                  std::make_unique<Lane>(std::string(kDefaultLane), options.default_lane_threads,
                                         options.default_lane_queue));
  }

  ServerOptions options;
  std::optional<asio::ssl::context> tls;
  std::vector<Route> routes;
  HeadFilter head_filter;
  ErrorHandler error_handler;
  ExceptionHandler exception_handler;
  PostRoutingHandler post_routing;
  Logger logger;
  EventHook event_hook;

  std::atomic<bool> stopping{false};
  // stop_accepting(): a successor accepts now; every reply from here on closes its connection so
  // that the client's next request reaches the successor.
  std::atomic<bool> handed_over{false};
  std::atomic<std::size_t> streams_open{0};

  // Connection registry: guards the four below.
  mutable std::mutex conn_mu;
  std::condition_variable conn_changed;
  std::size_t open_total = 0;
  std::unordered_map<std::string, std::size_t> open_by_address;
  std::unordered_map<SessionBase*, std::weak_ptr<SessionBase>> sessions;

  // Start/stop state: guards the three below.
  std::mutex state_mu;
  std::condition_variable state_changed;
  bool started = false;
  bool stop_requested = false;
  bool stopped = false;

  // Destroyed before the registry above (session destructors unregister).
  asio::io_context ioc;
  tcp::acceptor acceptor{asio::make_strand(ioc)};
  asio::steady_timer accept_retry{acceptor.get_executor()};
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::map<std::string, std::unique_ptr<Lane>, std::less<>> lanes;
  std::unique_ptr<Lane> stream_lane;
  std::vector<std::thread> io_threads;

  void event(FrontEvent what, std::string_view detail) {
    if (!event_hook) return;
    try {
      event_hook(what, detail);
    } catch (...) {
    }
  }

  const Route* match(HttpRequest& req) const {
    for (const auto& route : routes) {
      if (route.method != req.method) continue;
      if (route.literal) {
        if (*route.literal != req.path) continue;
        req.matches.assign(1, MatchGroup{req.path});
        return &route;
      }
      std::smatch m;
      if (!std::regex_match(req.path, m, route.pattern)) continue;
      req.matches.clear();
      for (const auto& group : m) req.matches.push_back(MatchGroup{group.str()});
      return &route;
    }
    return nullptr;
  }

  HttpResponse run_handler(const Route& route, const HttpRequest& req) {
    HttpResponse res;
    try {
      route.handler(req, res);
    } catch (...) {
      res = HttpResponse{};
      res.status = 500;
      if (exception_handler) {
        try {
          exception_handler(req, res, std::current_exception());
        } catch (...) {
          res.status = 500;
        }
      }
    }
    return res;
  }

  // The hooks every reply passes through before it is sent.
  void finish(const HttpRequest& req, HttpResponse& res) {
    try {
      if (res.status >= 400 && error_handler) error_handler(req, res);
      if (post_routing) post_routing(req, res);
      if (logger) logger(req, res);
    } catch (const std::exception& e) {
      res = HttpResponse{};
      res.status = 500;
      res.set_content(std::string("internal error in a server hook: ") + e.what(), "text/plain");
    }
  }

  // A reply the server makes itself (404, 408, 411, 413, 431, 503, ...).
  HttpResponse refusal(const HttpRequest& req, int status) {
    HttpResponse res;
    res.status = status;
    if (status == 503) res.set_header("Retry-After", "1");
    finish(req, res);
    return res;
  }

  bool reserve_stream() {
    std::size_t open = streams_open.load();
    while (open < options.stream_threads) {
      if (streams_open.compare_exchange_weak(open, open + 1)) return true;
    }
    return false;
  }
  void release_stream() { --streams_open; }

  void unregister(SessionBase* session, const std::string& address) {
    std::lock_guard lock(conn_mu);
    sessions.erase(session);
    --open_total;
    auto it = open_by_address.find(address);
    if (it != open_by_address.end() && --it->second == 0) open_by_address.erase(it);
    conn_changed.notify_all();
  }

  void accept();
  void admit(tcp::socket socket);
};

}  // namespace pf::net::detail
