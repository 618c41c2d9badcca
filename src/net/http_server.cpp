// The only translation unit that includes Boost.Asio with Beast's parser (slow to compile).
// Layout: the server core (routes, hooks, the connection registry), Session<Stream> (one
// connection's state machine on its own strand), then HttpServer. The message types are in
// net/http_message.cpp, the wire format in net/http_wire.cpp, the lanes in net/lane.cpp.
#include "net/http_server.h"

#include <fcntl.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "net/deferred_reply.h"
#include "net/http_wire.h"
#include "net/lane.h"

namespace pf::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;

const char* to_string(FrontEvent event) {
  switch (event) {
    case FrontEvent::RefusedTooManyConnections:
      return "refused_too_many_connections";
    case FrontEvent::RefusedTooManyFromAddress:
      return "refused_too_many_from_address";
    case FrontEvent::HeadTimeout:
      return "head_timeout";
    case FrontEvent::BodyTimeout:
      return "body_timeout";
    case FrontEvent::WriteTimeout:
      return "write_timeout";
    case FrontEvent::LaneFull:
      return "lane_full";
    case FrontEvent::StreamsFull:
      return "streams_full";
  }
  return "unknown";
}

namespace {

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

}  // namespace

// ---- the server core ------------------------------------------------------------------------

namespace detail {

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

}  // namespace detail

struct HttpServer::Impl : detail::ServerCore {
  using ServerCore::ServerCore;
};

namespace {

using PlainStream = tcp::socket;
using TlsStream = asio::ssl::stream<tcp::socket>;

enum class Phase { Head, Idle, Body, Handling, Write, Stream, Linger };

// One connection: reads a head and a body under deadlines, hands the request to its lane,
// writes the reply, and either waits for the next request or closes. Every member is touched
// only on the connection's strand, except through post().
template <class Stream>
class Session final : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kPlain = std::is_same_v<Stream, PlainStream>;
  static constexpr std::size_t kLingerBytes = 1u << 20;
  static constexpr std::chrono::seconds kLingerTime{2};

 public:
  Session(detail::ServerCore& server, Stream stream, std::string address)
      : server_(server),
        limits_(server.options.limits),
        stream_(std::move(stream)),
        executor_(socket().get_executor()),
        timer_(executor_),
        buffer_(std::max<std::size_t>(limits_.max_head_bytes, 8192) + (64u << 10)),
        address_(std::move(address)) {}

  ~Session() override { server_.unregister(this, address_); }

  void start() override {
    arm(Phase::Head, SteadyClock::now() + limits_.head_timeout);
    if constexpr (kPlain) {
      read_head();
    } else {
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec || self->closed_) return self->close();
                                self->read_head();
                              });
    }
  }

  void shut() override {
    // A deferred reply's delivery holds this connection: let it go, so that the server's
    // stop is not left waiting for a reply that may be resumed only after it.
    std::shared_ptr<DeferredReply> deferred;
    {
      std::lock_guard lock(deferred_mu_);
      deferred = std::move(deferred_);
    }
    if (deferred) deferred->detach();
    asio::post(executor(), [self = this->shared_from_this()] { self->close(); });
  }

 private:
  tcp::socket& socket() { return beast::get_lowest_layer(stream_); }
  // The connection's strand; safe to use from any thread (it never changes).
  const asio::any_io_executor& executor() const { return executor_; }

  // ---- deadlines ----

  void arm(Phase phase, SteadyClock::time_point deadline) {
    phase_ = phase;
    timed_out_ = false;
    const std::uint64_t generation = ++timer_generation_;
    timer_.expires_at(deadline);
    timer_.async_wait([self = this->shared_from_this(), generation](beast::error_code ec) {
      // A timer that fired just before it was re-armed still runs: the generation tells.
      if (ec || generation != self->timer_generation_ || self->closed_) return;
      self->on_timeout();
    });
  }

  void disarm() {
    ++timer_generation_;
    timer_.cancel();
  }

  void on_timeout() {
    switch (phase_) {
      case Phase::Head:
        server_.event(FrontEvent::HeadTimeout, address_);
        break;
      case Phase::Body:
        server_.event(FrontEvent::BodyTimeout, address_);
        break;
      case Phase::Write:
      case Phase::Stream:
        server_.event(FrontEvent::WriteTimeout, address_);
        break;
      case Phase::Idle:
      case Phase::Handling:
      case Phase::Linger:
        break;
    }
    // A plain connection still reading its request gets a 408 (the pending read is cancelled
    // and its handler answers); a TLS record cut in the middle cannot be followed by a reply.
    if (kPlain && (phase_ == Phase::Head || phase_ == Phase::Body)) {
      timed_out_ = true;
      beast::error_code ignored;
      socket().cancel(ignored);
      return;
    }
    close();
  }

  // ---- reading a request ----

  void read_head() {
    if (closed_) return;
    if (!first_request_) {
      if (kPlain && buffer_.size() == 0) {
        // Idle until the next request's first byte; its head deadline starts there.
        arm(Phase::Idle, SteadyClock::now() + limits_.keep_alive_timeout);
        socket().async_wait(
            tcp::socket::wait_read, [self = this->shared_from_this()](beast::error_code ec) {
              if (ec || self->closed_) return self->close();
              self->arm(Phase::Head, SteadyClock::now() + self->limits_.head_timeout);
              self->start_head_read();
            });
        return;
      }
      // TLS may hold decrypted bytes the socket no longer shows: idle time counts as head time.
      arm(Phase::Head, SteadyClock::now() + limits_.head_timeout +
                           (kPlain ? std::chrono::milliseconds(0) : limits_.keep_alive_timeout));
    }
    start_head_read();
  }

  void start_head_read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(
        std::min<std::size_t>(limits_.max_head_bytes, std::numeric_limits<std::uint32_t>::max())));
    parser_->body_limit(limits_.max_body_bytes);
    request_ = std::make_shared<HttpRequest>();
    request_->remote_address = address_;
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                              self->on_head(ec);
                            });
  }

  // Answers a read that failed: 408 after our deadline, 431/413/400 for what the parser
  // refused, nothing when the client just went away.
  void on_read_error(beast::error_code ec, bool in_body) {
    if (timed_out_) return refuse(408);
    if (ec == http::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == asio::ssl::error::stream_truncated) {
      return close();
    }
    if (ec == http::error::header_limit || (!in_body && ec == http::error::buffer_overflow)) {
      return refuse(431);
    }
    if (ec == http::error::body_limit || (in_body && ec == http::error::buffer_overflow)) {
      return refuse(413);
    }
    if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
      return refuse(400);
    }
    close();
  }

  void on_head(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read_error(ec, false);
    const auto& head = parser_->get();
    HttpRequest& req = *request_;
    req.method = std::string(head.method_string());
    req.target = std::string(head.target());
    const auto question = req.target.find('?');
    req.path = percent_decode(std::string_view(req.target).substr(0, question), false);
    if (question != std::string::npos) {
      req.params = parse_query(std::string_view(req.target).substr(question + 1));
    }
    std::size_t count = 0;
    for (const auto& field : head) {
      req.headers.emplace(std::string(field.name_string()), std::string(field.value()));
      ++count;
    }
    keep_alive_ = head.keep_alive();
    if (count > limits_.max_header_count) return refuse(431);

    if (server_.head_filter) {
      HttpResponse res;
      bool answered = false;
      try {
        answered = server_.head_filter(req, res);
      } catch (...) {
        res = HttpResponse{};
        res.status = 500;
        answered = true;
      }
      if (answered) {
        body_unread_ = true;
        server_.finish(req, res);
        return write_reply(std::move(res));
      }
    }
    if (parser_->chunked()) return refuse(411);
    const auto length = parser_->content_length();
    if (length && *length > limits_.max_body_bytes) return refuse(413);
    if (parser_->is_done()) return on_body({});

    arm(Phase::Body, SteadyClock::now() +
                         core::transfer_allowance(limits_, limits_.body_timeout,
                                                  static_cast<std::size_t>(length.value_or(0))));
    const std::string expect = req.get_header_value("Expect");
    if (beast::iequals(expect, "100-continue")) {
      auto text = std::make_shared<const std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      asio::async_write(stream_, asio::buffer(*text),
                        [self = this->shared_from_this(), text](beast::error_code e, std::size_t) {
                          if (e || self->closed_) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                       self->on_body(ec);
                     });
  }

  void on_body(beast::error_code ec) {
    if (closed_) return;
    if (ec) return on_read_error(ec, true);
    disarm();
    phase_ = Phase::Handling;
    request_->body = std::move(parser_->get().body());
    parser_.reset();
    dispatch(std::move(request_));
  }

  // ---- handing a request on ----

  void dispatch(std::shared_ptr<HttpRequest> req) {
    const Route* route = server_.match(*req);
    if (!route) return write_reply(server_.refusal(*req, 404));
    if (!route->lane) {
      HttpResponse res = server_.run_handler(*route, *req);
      // A stream needs a thread of its own, a deferred reply a thread to resume it; inline
      // routes have neither.
      if (res.content_provider || res.deferred) {
        res = HttpResponse{};
        res.status = 500;
      }
      server_.finish(*req, res);
      return write_reply(std::move(res));
    }
    auto job = [self = this->shared_from_this(), req, route] { self->handle(*route, req); };
    if (!route->lane->try_submit(std::move(job))) {
      server_.event(FrontEvent::LaneFull, route->lane->name());
      return write_reply(server_.refusal(*req, 503));
    }
  }

  // On a lane thread.
  void handle(const Route& route, const std::shared_ptr<HttpRequest>& req) {
    HttpResponse res = server_.run_handler(route, *req);
    if (res.deferred && res.content_provider) {
      res = HttpResponse{};
      res.status = 500;
    }
    if (res.deferred) return defer(req, std::move(res));
    if (res.content_provider && !server_.reserve_stream()) {
      server_.event(FrontEvent::StreamsFull, route.lane->name());
      res = HttpResponse{};
      res.status = 503;
      res.set_header("Retry-After", "1");
    }
    server_.finish(*req, res);
    if (res.content_provider) {
      auto job = [self = this->shared_from_this(), res] {
        self->run_stream(res);
        self->server_.release_stream();
      };
      // Cannot be refused for room (reserve_stream bounds the jobs), only when stopping.
      if (!server_.stream_lane->try_submit(std::move(job))) {
        server_.release_stream();
        shut();
      }
      return;
    }
    asio::post(executor(), [self = this->shared_from_this(), reply = std::move(res)]() mutable {
      self->write_reply(std::move(reply));
    });
  }

  // On a lane thread: the reply goes out when it is resumed (HttpResponse::defer).
  void defer(const std::shared_ptr<HttpRequest>& req, HttpResponse res) {
    std::shared_ptr<DeferredReply> deferred = std::move(res.deferred);
    res.deferred = nullptr;
    {
      std::lock_guard lock(deferred_mu_);
      deferred_ = deferred;
    }
    deferred->take_over([self = this->shared_from_this(), req,
                         res = std::move(res)](Resume::Finish finish) mutable {
      if (finish) {
        try {
          finish(res);
        } catch (const std::exception& e) {
          res = HttpResponse{};
          res.status = 500;
          res.set_content(std::string("internal error finishing the reply: ") + e.what(),
                          "text/plain");
        }
      }
      self->server_.finish(*req, res);
      asio::post(self->executor(),
                 [self, reply = std::move(res)]() mutable { self->write_reply(std::move(reply)); });
    });
    // Stopping began meanwhile: shut() may have looked before the delivery was set.
    if (server_.stopping.load()) deferred->detach();
  }

  // ---- writing a reply ----

  void refuse(int status) {
    body_unread_ = true;  // the request was not read to its end: the connection cannot go on
    write_reply(server_.refusal(request_ ? *request_ : HttpRequest{}, status));
  }

  void write_reply(HttpResponse res) {
    if (closed_) return;
    const bool close_after = !keep_alive_ || body_unread_ || server_.stopping.load() ||
                             server_.handed_over.load() ||
                             beast::iequals(res.get_header_value("Connection"), "close");
    auto text = std::make_shared<const std::string>(serialize_reply(res, close_after));
    arm(Phase::Write, SteadyClock::now() +
                          core::transfer_allowance(limits_, limits_.write_timeout, text->size()));
    asio::async_write(
        stream_, asio::buffer(*text),
        [self = this->shared_from_this(), text, close_after](beast::error_code ec, std::size_t) {
          if (self->closed_) return;
          self->disarm();
          if (ec) return self->close();
          if (close_after) return self->linger_close();
          self->first_request_ = false;
          self->request_.reset();
          self->read_head();
        });
  }

  // Sends FIN after the reply, then reads and drops what the client still sends for a moment:
  // closing with unread bytes would reset the connection and could destroy the reply before
  // the client reads it (a 413 sent before its body arrived).
  void linger_close() {
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_send, ignored);
    arm(Phase::Linger, SteadyClock::now() + kLingerTime);
    drain();
  }

  void drain() {
    socket().async_read_some(asio::buffer(scratch_), [self = this->shared_from_this()](
                                                         beast::error_code ec, std::size_t n) {
      self->drained_ += n;
      if (ec || self->closed_ || self->drained_ > kLingerBytes) {
        return self->close();
      }
      self->drain();
    });
  }

  // ---- streaming replies ----

  class Sink final : public DataSink {
   public:
    Sink(Session& session, std::shared_ptr<StreamChannel> channel)
        : session_(session), channel_(std::move(channel)) {}
    bool write(const char* data, std::size_t size) override {
      if (size == 0) return is_writable();
      return session_.send_blocking(channel_, chunk(data, size));
    }
    bool is_writable() const override {
      std::lock_guard lock(channel_->mu);
      return !channel_->gone;
    }

   private:
    Session& session_;
    std::shared_ptr<StreamChannel> channel_;
  };

  // On a stream thread: the head, the producer's chunks, the last chunk; then the connection
  // closes.
  void run_stream(const HttpResponse& res) {
    auto channel = std::make_shared<StreamChannel>();
    if (send_blocking(channel, serialize_stream_head(res))) {
      Sink sink(*this, channel);
      std::size_t offset = 0;
      while (sink.is_writable()) {
        bool more = false;
        try {
          more = res.content_provider(offset, sink);
        } catch (...) {
          more = false;
        }
        if (!more) break;
        ++offset;
      }
      if (sink.is_writable()) send_blocking(channel, "0\r\n\r\n");
    }
    shut();
  }

  // Hands `text` to the IO strand and waits until it is written; false once the client is
  // gone or the server stops.
  bool send_blocking(const std::shared_ptr<StreamChannel>& channel, std::string text) {
    {
      std::lock_guard lock(channel->mu);
      if (channel->gone) return false;
      channel->pending = true;
    }
    asio::post(executor(), [self = this->shared_from_this(), channel,
                            piece = std::make_shared<const std::string>(std::move(text))] {
      self->write_piece(channel, piece);
    });
    std::unique_lock lock(channel->mu);
    while (channel->pending && !channel->gone) {
      channel->done.wait_for(lock, std::chrono::milliseconds(200));
      if (server_.stopping.load()) channel->gone = true;
    }
    return !channel->gone;
  }

  void write_piece(const std::shared_ptr<StreamChannel>& channel,
                   const std::shared_ptr<const std::string>& piece) {
    channel_ = channel;
    if (closed_) return mark_gone();
    if (!watching_) {
      // The client never sends anything on a stream: a read completes only when it leaves.
      watching_ = true;
      watch_for_close();
    }
    arm(Phase::Stream, SteadyClock::now() +
                           core::transfer_allowance(limits_, limits_.write_timeout, piece->size()));
    asio::async_write(
        stream_, asio::buffer(*piece),
        [self = this->shared_from_this(), channel, piece](beast::error_code ec, std::size_t) {
          if (!self->closed_) self->disarm();
          {
            std::lock_guard lock(channel->mu);
            channel->pending = false;
            if (ec) channel->gone = true;
          }
          channel->done.notify_all();
          if (ec) self->close();
        });
  }

  void watch_for_close() {
    socket().async_read_some(asio::buffer(scratch_),
                             [self = this->shared_from_this()](beast::error_code ec, std::size_t) {
                               if (ec || self->closed_) return self->close();
                               self->watch_for_close();
                             });
  }

  void mark_gone() {
    if (!channel_) return;
    {
      std::lock_guard lock(channel_->mu);
      channel_->gone = true;
    }
    channel_->done.notify_all();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    disarm();
    beast::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
    mark_gone();
  }

  detail::ServerCore& server_;
  const core::HttpLimits& limits_;
  Stream stream_;
  const asio::any_io_executor executor_;
  asio::steady_timer timer_;
  std::uint64_t timer_generation_ = 0;
  Phase phase_ = Phase::Head;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<HttpRequest> request_;
  std::string address_;
  bool first_request_ = true;
  bool keep_alive_ = true;
  bool body_unread_ = false;
  bool timed_out_ = false;
  bool closed_ = false;
  bool watching_ = false;
  std::size_t drained_ = 0;
  std::array<char, 4096> scratch_{};
  std::shared_ptr<StreamChannel> channel_;
  std::mutex deferred_mu_;
  std::shared_ptr<DeferredReply> deferred_;  // the reply last deferred (shut lets it go)
};

// "::ffff:10.0.0.1" on a dual-stack socket is the IPv4 client 10.0.0.1: one address, one cap.
std::string client_address(const tcp::endpoint& endpoint) {
  auto address = endpoint.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).to_string();
  }
  return address.to_string();
}

}  // namespace

void detail::ServerCore::accept() {
  acceptor.async_accept(asio::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (stopping.load() || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors and the like: try again shortly rather than spin.
      accept_retry.expires_after(std::chrono::milliseconds(50));
      accept_retry.async_wait([this](beast::error_code e) {
        if (!e) accept();
      });
      return;
    }
    admit(std::move(socket));
    accept();
  });
}

void detail::ServerCore::admit(tcp::socket socket) {
  beast::error_code ec;
  const auto endpoint = socket.remote_endpoint(ec);
  if (ec) return;
  const std::string address = client_address(endpoint);
  std::optional<core::ConnectionRefusal> refused;
  {
    std::lock_guard lock(conn_mu);
    auto it = open_by_address.find(address);
    refused = core::refuse_connection(options.limits, open_total,
                                      it == open_by_address.end() ? 0 : it->second);
    if (!refused) {
      ++open_total;
      ++open_by_address[address];
    }
  }
  if (refused) {
    event(*refused == core::ConnectionRefusal::TooManyFromAddress
              ? FrontEvent::RefusedTooManyFromAddress
              : FrontEvent::RefusedTooManyConnections,
          address);
    socket.close(ec);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  std::shared_ptr<SessionBase> session;
  if (tls) {
    session =
        std::make_shared<Session<TlsStream>>(*this, TlsStream(std::move(socket), *tls), address);
  } else {
    session = std::make_shared<Session<PlainStream>>(*this, std::move(socket), address);
  }
  {
    std::lock_guard lock(conn_mu);
    sessions.emplace(session.get(), session);
  }
  session->start();
}

// ---- HttpServer -----------------------------------------------------------------------------

HttpServer::HttpServer(ServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() {
  stop();
}

tl::expected<std::unique_ptr<HttpServer>, std::string> HttpServer::with_tls(const TlsFiles& files,
                                                                            ServerOptions options) {
  auto unreadable = [](const std::string& path) { return path.empty() || !std::ifstream(path); };
  if (unreadable(files.cert_path)) {
    return tl::unexpected("cannot read TLS certificate file '" + files.cert_path + "'");
  }
  if (unreadable(files.key_path)) {
    return tl::unexpected("cannot read TLS key file '" + files.key_path + "'");
  }
  asio::ssl::context context(asio::ssl::context::tls_server);
  context.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                      asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                      asio::ssl::context::no_tlsv1_1);
  beast::error_code ec;
  context.use_certificate_chain_file(files.cert_path, ec);
  if (!ec) context.use_private_key_file(files.key_path, asio::ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(context.native_handle()) != 1) {
    return tl::unexpected("cannot use TLS certificate '" + files.cert_path + "' with key '" +
                          files.key_path +
                          "': not PEM, or the key does not belong to the certificate");
  }
  auto server = std::make_unique<HttpServer>(std::move(options));
  server->impl_->tls.emplace(std::move(context));
  return server;
}

void HttpServer::set_options(ServerOptions options) {
  impl_->options = std::move(options);
  impl_->lanes.at(std::string(kDefaultLane))
      ->resize(impl_->options.default_lane_threads, impl_->options.default_lane_queue);
}

const ServerOptions& HttpServer::options() const {
  return impl_->options;
}

void HttpServer::add_lane(std::string name, std::size_t threads, std::size_t queue) {
  if (name == kInlineLane || impl_->lanes.count(name)) {
    throw std::invalid_argument("HTTP lane '" + name + "' exists already");
  }
  auto lane = std::make_unique<Lane>(name, threads, queue);
  impl_->lanes.emplace(std::move(name), std::move(lane));
}

void HttpServer::route(std::string method, const std::string& pattern, Handler handler,
                       std::string_view lane) {
  Lane* target = nullptr;
  if (lane != kInlineLane) {
    auto it = impl_->lanes.find(lane);
    if (it == impl_->lanes.end()) {
      throw std::invalid_argument("no HTTP lane '" + std::string(lane) + "' for " + pattern);
    }
    target = it->second.get();
  }
  std::optional<std::string> literal;
  if (pattern.find_first_of("()[]{}*+?.\\^$|") == std::string::npos) literal = pattern;
  impl_->routes.push_back(Route{std::move(method), std::move(literal), std::regex(pattern),
                                std::move(handler), target});
}

void HttpServer::set_head_filter(HeadFilter filter) {
  impl_->head_filter = std::move(filter);
}
void HttpServer::set_error_handler(ErrorHandler handler) {
  impl_->error_handler = std::move(handler);
}
void HttpServer::set_exception_handler(ExceptionHandler handler) {
  impl_->exception_handler = std::move(handler);
}
void HttpServer::set_post_routing_handler(PostRoutingHandler handler) {
  impl_->post_routing = std::move(handler);
}
void HttpServer::set_logger(Logger logger) {
  impl_->logger = std::move(logger);
}
void HttpServer::set_event_hook(EventHook hook) {
  impl_->event_hook = std::move(hook);
}

tl::expected<int, std::string> HttpServer::bind(const std::string& host, int port) {
  if (port < 0 || port > 65535) return tl::unexpected("port out of range: " + std::to_string(port));
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code ec;
  const auto address = asio::ip::make_address(host, ec);
  if (ec) return tl::unexpected("cannot listen on " + where + ": not an IP address");
  const tcp::endpoint endpoint(address, static_cast<std::uint16_t>(port));
  auto& acceptor = impl_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  // SO_REUSEADDR only (never SO_REUSEPORT): a second manager on the same port must fail to
  // bind, not silently share the port and the fleet with the first.
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  // A burst of agents connecting at once must not overflow the backlog.
  if (!ec) acceptor.listen(1024, ec);
  if (ec) {
    beast::error_code ignored;
    acceptor.close(ignored);
    return tl::unexpected("cannot listen on " + where + " (" + ec.message() + ")");
  }
  return static_cast<int>(acceptor.local_endpoint().port());
}

tl::expected<int, std::string> HttpServer::adopt(int listening_fd) {
  sockaddr_storage address{};
  socklen_t size = sizeof address;
  if (::getsockname(listening_fd, reinterpret_cast<sockaddr*>(&address), &size) != 0 ||
      (address.ss_family != AF_INET && address.ss_family != AF_INET6)) {
    return tl::unexpected("the socket handed over (fd " + std::to_string(listening_fd) +
                          ") is not a TCP socket");
  }
  beast::error_code ec;
  auto& acceptor = impl_->acceptor;
  acceptor.assign(address.ss_family == AF_INET ? tcp::v4() : tcp::v6(), listening_fd, ec);
  if (ec) return tl::unexpected("cannot serve on the socket handed over: " + ec.message());
  const auto endpoint = acceptor.local_endpoint(ec);
  if (ec) return tl::unexpected("cannot serve on the socket handed over: " + ec.message());
  return static_cast<int>(endpoint.port());
}

namespace {
// Runs `fn` on the acceptor's executor (where accept() and stop() touch the acceptor) and waits
// for it; false when it did not run within two seconds (the server is not running).
template <typename Fn>
bool on_acceptor(detail::ServerCore& s, Fn fn) {
  auto ran = std::make_shared<std::promise<void>>();
  auto done = ran->get_future();
  asio::post(s.acceptor.get_executor(), [fn = std::move(fn), ran]() mutable {
    fn();
    ran->set_value();
  });
  return done.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
}
}  // namespace

tl::expected<util::UniqueFd, std::string> HttpServer::duplicate_listening_socket() {
  Impl& s = *impl_;
  auto copy = std::make_shared<int>(-1);
  const bool ran = on_acceptor(s, [&s, copy] {
    if (s.acceptor.is_open() && !s.stopping.load()) {
      *copy = ::fcntl(s.acceptor.native_handle(), F_DUPFD_CLOEXEC, 0);
    }
  });
  util::UniqueFd fd(ran ? *copy : -1);
  if (fd.get() < 0) return tl::unexpected(std::string("the HTTP front no longer accepts"));
  return fd;
}

void HttpServer::stop_accepting() {
  Impl& s = *impl_;
  s.handed_over = true;
  on_acceptor(s, [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);  // close(2) only: a successor's descriptor keeps listening
    s.accept_retry.cancel();
  });
}

void HttpServer::start() {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.state_mu);
    if (s.started || s.stop_requested) return;
    s.started = true;
  }
  for (auto& [name, lane] : s.lanes) lane->start();
  s.stream_lane =
      std::make_unique<Lane>("streams", s.options.stream_threads, s.options.stream_threads);
  s.stream_lane->start();
  s.work.emplace(s.ioc.get_executor());
  asio::post(s.acceptor.get_executor(), [&s] { s.accept(); });
  for (std::size_t i = 0; i < std::max<std::size_t>(s.options.io_threads, 1); ++i) {
    s.io_threads.emplace_back([&s] {
      while (true) {
        try {
          s.ioc.run();
          return;
        } catch (...) {
          // A handler threw (none should): keep serving the other connections.
        }
      }
    });
  }
}

bool HttpServer::serve() {
  Impl& s = *impl_;
  if (!s.acceptor.is_open()) {
    std::lock_guard lock(s.state_mu);
    return s.stop_requested;
  }
  start();
  std::unique_lock lock(s.state_mu);
  s.state_changed.wait(lock, [&s] { return s.stopped; });
  return true;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  {
    std::unique_lock lock(s.state_mu);
    if (s.stop_requested) {
      s.state_changed.wait(lock, [&s] { return s.stopped; });
      return;
    }
    s.stop_requested = true;
    s.state_changed.notify_all();
    if (!s.started) {
      beast::error_code ignored;
      s.acceptor.close(ignored);
      s.stopped = true;
      s.state_changed.notify_all();
      return;
    }
  }
  s.stopping = true;
  asio::post(s.acceptor.get_executor(), [&s] {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    s.accept_retry.cancel();
  });
  std::vector<std::shared_ptr<SessionBase>> open;
  {
    std::lock_guard lock(s.conn_mu);
    for (auto& [raw, weak] : s.sessions) {
      if (auto session = weak.lock()) open.push_back(std::move(session));
    }
  }
  for (auto& session : open) session->shut();
  open.clear();
  // Stream producers see their sinks fail once their connection is closed (or stopping).
  s.stream_lane->stop();
  for (auto& [name, lane] : s.lanes) lane->stop();
  {
    std::unique_lock lock(s.conn_mu);
    s.conn_changed.wait_for(lock, std::chrono::seconds(2), [&s] { return s.open_total == 0; });
  }
  s.work.reset();
  s.ioc.stop();
  for (auto& t : s.io_threads) {
    if (t.joinable()) t.join();
  }
  s.io_threads.clear();
  std::lock_guard lock(s.state_mu);
  s.stopped = true;
  s.state_changed.notify_all();
}

std::size_t HttpServer::open_connections() const {
  std::lock_guard lock(impl_->conn_mu);
  return impl_->open_total;
}

}  // namespace pf::net
