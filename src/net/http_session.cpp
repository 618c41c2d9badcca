// One HTTP connection (Session<Stream>, plain or TLS): reads a head and a body under
// deadlines, hands the request to its route's lane, writes the reply (whole, streamed or
// deferred) and waits for the next request or closes; and ServerCore::admit, which counts a new
// connection against the caps and starts its session. The server core is in
// net/http_server_core.h, HttpServer in net/http_server.cpp.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <deque>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "net/deferred_reply.h"
#include "net/http_server_core.h"
#include "net/http_wire.h"

namespace pf::net::detail {
namespace {

using PlainStream = tcp::socket;
using TlsStream = asio::ssl::stream<tcp::socket>;

// Whether the peer of connected socket `fd` has closed its side (or the socket is gone):
// a zero-timeout poll, never a read (the bytes of a next request stay where they are).
bool peer_hung_up(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

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
    // While the handler runs nothing reads this connection: a hang-up shows only in the
    // socket's state. The number is read here, on the strand; should the connection close
    // meanwhile, poll() says POLLNVAL (gone) or, the number reused, answers for another socket
    // — a lease then returns empty to a caller that is gone anyway, or is handed out as before.
    req->caller_gone = [fd = socket().native_handle()] { return peer_hung_up(fd); };
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

void ServerCore::admit(tcp::socket socket) {
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

}  // namespace pf::net::detail
