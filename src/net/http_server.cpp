// HttpServer: configuration, listening (bind, or a socket handed over), the IO threads, stop
// and the handover to a successor, around the server core (net/http_server_core.h: routes,
// hooks, lanes, the connection registry). One connection's state machine is in
// net/http_session.cpp, the message types in net/http_message.cpp, the wire format in
// net/http_wire.cpp, the lanes in net/lane.cpp.
#include "net/http_server.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <fstream>
#include <future>
#include <stdexcept>
#include <utility>

#include "net/http_server_core.h"

namespace pf::net {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

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

struct HttpServer::Impl : detail::ServerCore {
  using ServerCore::ServerCore;
};

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
  impl_->routes.push_back(detail::Route{std::move(method), std::move(literal), std::regex(pattern),
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
  std::vector<std::shared_ptr<detail::SessionBase>> open;
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
