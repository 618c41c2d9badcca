// The manager's HTTP/1.1 server: event-driven (Boost.Beast on Asio, all of it inside
// http_server.cpp), so a connection costs a socket and a little memory, never a thread. The
// request and reply types are in net/http_message.h, the bytes on the wire in net/http_wire.h,
// the lanes' workers in net/lane.h.
//
//  - IO threads only read heads and bodies and write replies, each phase under a whole-phase
//    deadline (core/http_limits.h): a slow client holds its own connection, nothing else.
//  - A complete request is handed to the lane its route names. A lane is a few worker threads
//    with a bounded queue; a full queue answers 503 with Retry-After at once. Routes on the
//    inline lane (kInlineLane) are answered on the IO thread and must be cheap and lock-free
//    (/healthz). Requests that match no route are answered inline too (404).
//  - A streaming reply (set_chunked_content_provider) runs its producer on one of a bounded set
//    of stream threads; the producer's sink blocks until the IO thread has written each chunk
//    (backpressure) and fails once the client is gone.
//  - Connections are capped in all and per client address; excess ones are closed at once.
//  - Chunked request bodies are refused with 411; a declared body over the limit with 413,
//    before a byte of it is read.
//
//  - A deferred reply (HttpResponse::defer) frees its lane's thread when the handler returns;
//    whoever resumes it runs the reply hooks, and the IO thread writes it.
//
// Invariant: hooks and handlers never run on an IO thread except for inline routes, server
// refusals (404, 408, 411, 413, 431, 503) and head filters, which is why those must be cheap.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "core/http_limits.h"
#include "net/http_message.h"
#include "util/unique_fd.h"

namespace pf::net {

// Runs on the IO thread once a request head is read, before any of its body: returns true when
// it answered (the body is then never read and the connection closes after the reply).
using HeadFilter = std::function<bool(const HttpRequest&, HttpResponse&)>;
// For every reply with status >= 400 (the server's own refusals included), before it is sent.
using ErrorHandler = std::function<void(const HttpRequest&, HttpResponse&)>;
using ExceptionHandler = std::function<void(const HttpRequest&, HttpResponse&, std::exception_ptr)>;
// For every reply, after the error handler and before the reply is sent.
using PostRoutingHandler = std::function<void(const HttpRequest&, HttpResponse&)>;
using Logger = std::function<void(const HttpRequest&, const HttpResponse&)>;

// Things the server did on its own, for the operator's metrics.
enum class FrontEvent {
  RefusedTooManyConnections,  // the global connection cap
  RefusedTooManyFromAddress,  // the per-address connection cap
  HeadTimeout,                // the head (or TLS handshake) missed its deadline
  BodyTimeout,
  WriteTimeout,
  LaneFull,     // 503: the route's lane queue was full
  StreamsFull,  // 503: every stream thread was busy
};
const char* to_string(FrontEvent event);
using EventHook = std::function<void(FrontEvent, std::string_view detail)>;

struct TlsFiles {
  std::string cert_path;  // PEM certificate (chain)
  std::string key_path;   // PEM private key
};

inline constexpr std::string_view kInlineLane = "inline";
inline constexpr std::string_view kDefaultLane = "default";

struct ServerOptions {
  core::HttpLimits limits;
  std::size_t io_threads = 1;
  // The "default" lane, which routes use unless they name another.
  std::size_t default_lane_threads = 4;
  std::size_t default_lane_queue = 64;
  // Streaming replies open at once, each on its own thread while it lasts.
  std::size_t stream_threads = 16;
};

class HttpServer {
 public:
  // Plain HTTP.
  explicit HttpServer(ServerOptions options = {});
  // HTTPS; fails with a message naming the file when a TLS file is unreadable or invalid.
  static tl::expected<std::unique_ptr<HttpServer>, std::string> with_tls(
      const TlsFiles& tls, ServerOptions options = {});
  // Stops (see stop()).
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Configuration: before start().
  void set_options(ServerOptions options);
  const ServerOptions& options() const;
  // A lane of `threads` workers and at most `queue` waiting requests. Names are unique;
  // "inline" and "default" are taken.
  void add_lane(std::string name, std::size_t threads, std::size_t queue);
  // `pattern` must match the whole decoded path; its groups end up in HttpRequest::matches.
  void route(std::string method, const std::string& pattern, Handler handler,
             std::string_view lane = kDefaultLane);
  void set_head_filter(HeadFilter filter);
  void set_error_handler(ErrorHandler handler);
  void set_exception_handler(ExceptionHandler handler);
  void set_post_routing_handler(PostRoutingHandler handler);
  void set_logger(Logger logger);
  void set_event_hook(EventHook hook);

  // Binds host:port (port 0 picks a free one) and listens. Returns the bound port.
  tl::expected<int, std::string> bind(const std::string& host, int port);
  // Instead of bind(): serves on a socket already listening (socket activation,
  // net/listen_fds.h); the server owns the descriptor from here on. Returns its port.
  tl::expected<int, std::string> adopt(int listening_fd);
  // Serves on background threads; bind() first. Returns at once.
  void start();
  // start(), then waits until stop(). Returns false if serving could not start.
  bool serve();
  // Thread-safe and idempotent; not from a handler. Stops accepting, closes every connection
  // (open streams' sinks fail), joins every thread. A serve() not yet started then returns
  // at once.
  void stop();

  // A second descriptor of the listening socket (close-on-exec), for a successor process
  // (net/socket_handover.h); an error once it stopped accepting.
  tl::expected<util::UniqueFd, std::string> duplicate_listening_socket();
  // Stops accepting and closes this process's descriptor of the listening socket; the
  // connections it has are served on, each closed after its next reply (Connection: close), so
  // that the client's next request reaches the successor. Thread-safe.
  void stop_accepting();

  // Connections open now (for tests and metrics).
  std::size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::net
