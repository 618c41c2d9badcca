// The manager's HTTP front (net::HttpServer) under hostile and slow clients, over loopback with
// raw sockets so a test decides every byte and every pause: whole-phase deadlines on head and
// body, connection caps, head and body limits, keep-alive, lanes that keep /healthz and agents
// answered while slow clients hold connections, streams that end when their client leaves, TLS,
// and a clean stop with connections open. Timings are generous: the machine may be loaded.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/http_limits.h"
#include "manager/http_api.h"
#include "net/http_server.h"
#include "support/eventually.h"
#include "support/front_serving.h"
#include "support/manager_fixture.h"

namespace pf::net {
namespace {

using pf::test::eventually;
using pf::test::holds_for;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// One client connection over a raw socket.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      close();
    }
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return fd_ >= 0; }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // false once the server closed the connection (or it never opened).
  bool send(const std::string& bytes) {
    if (fd_ < 0) return false;
    return ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }

  // Reads what is there within `timeout`; false when the server closed the connection.
  bool read_some(std::chrono::milliseconds timeout) {
    if (fd_ < 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return true;
    char buffer[8192];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) {
      closed_by_peer_ = true;
      return false;
    }
    received_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  // Waits until the server closes the connection; false at the timeout.
  bool wait_closed(std::chrono::milliseconds timeout) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (!read_some(100ms)) return true;
    }
    return false;
  }

  // One complete reply (head and Content-Length body), removed from what was received; "" at
  // the timeout.
  std::string reply(std::chrono::milliseconds timeout = 10s) {
    const auto end = Clock::now() + timeout;
    while (true) {
      const auto head_end = received_.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        std::size_t length = 0;
        const auto at = lowercase(received_.substr(0, head_end)).find("content-length: ");
        if (at != std::string::npos) length = std::stoul(received_.substr(at + 16));
        if (received_.size() >= head_end + 4 + length) {
          std::string out = received_.substr(0, head_end + 4 + length);
          received_.erase(0, out.size());
          return out;
        }
      }
      if (Clock::now() >= end || !read_some(100ms)) return "";
    }
  }

  const std::string& received() const { return received_; }

 private:
  static std::string lowercase(std::string text) {
    for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  }

  int fd_ = -1;
  bool closed_by_peer_ = false;
  std::string received_;
};

std::string get_request(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n";
}

// ---- pure policy ----------------------------------------------------------------------------

TEST(HttpLimits, ConnectionsAreRefusedAtEitherCap) {
  core::HttpLimits limits;
  limits.max_connections = 10;
  limits.max_connections_per_address = 3;
  EXPECT_EQ(core::refuse_connection(limits, 0, 0), std::nullopt);
  EXPECT_EQ(core::refuse_connection(limits, 9, 2), std::nullopt);
  EXPECT_EQ(core::refuse_connection(limits, 9, 3), core::ConnectionRefusal::TooManyFromAddress);
  EXPECT_EQ(core::refuse_connection(limits, 10, 0), core::ConnectionRefusal::TooManyConnections);
  EXPECT_STREQ(core::to_string(core::ConnectionRefusal::TooManyFromAddress),
               "too_many_from_address");
}

TEST(HttpLimits, TransferAllowanceGrowsWithTheSizeAndNeverOverflows) {
  core::HttpLimits limits;
  limits.min_transfer_bytes_per_s = 64 * 1024;
  EXPECT_EQ(core::transfer_allowance(limits, 10s, 0), 10s);
  EXPECT_EQ(core::transfer_allowance(limits, 10s, 64 * 1024), 11s);
  EXPECT_EQ(core::transfer_allowance(limits, 10s, 640 * 1024), 20s);
  EXPECT_LE(core::transfer_allowance(limits, 10s, std::numeric_limits<std::size_t>::max()),
            10s + 24h);
}

// ---- the server on its own, with small limits -----------------------------------------------

class FrontTest : public ::testing::Test {
 protected:
  void start(ServerOptions options) {
    server_ = std::make_unique<HttpServer>(options);
    server_->route("GET", "/ok", [](const HttpRequest& req, HttpResponse& res) {
      res.set_content("ok " + req.get_param_value("n"), "text/plain");
    });
    server_->route("POST", "/echo", [this](const HttpRequest& req, HttpResponse& res) {
      ++echo_calls_;
      res.set_content(req.body, "text/plain");
    });
    server_->route(
        "GET", "/healthz",
        [](const HttpRequest&, HttpResponse& res) { res.set_content("{}", "application/json"); },
        kInlineLane);
    server_->route("GET", "/ticks", [this](const HttpRequest&, HttpResponse& res) {
      ++streams_started_;
      res.set_chunked_content_provider("text/event-stream", [this](std::size_t, DataSink& sink) {
        ++provider_calls_;
        std::this_thread::sleep_for(20ms);
        return sink.write("data: tick\n\n", 12);
      });
    });
    server_->set_event_hook([this](FrontEvent event, std::string_view) {
      std::lock_guard lock(events_mu_);
      events_.push_back(event);
    });
    serving_.emplace(*server_);
    port_ = serving_->port();
  }

  static ServerOptions small() {
    ServerOptions options;
    options.limits.head_timeout = 1500ms;
    options.limits.body_timeout = 1500ms;
    options.limits.keep_alive_timeout = 3s;
    options.limits.max_head_bytes = 4096;
    options.limits.max_header_count = 50;
    options.limits.max_body_bytes = 64 * 1024;
    options.limits.max_connections_per_address = 32;
    return options;
  }

  bool saw(FrontEvent event) {
    std::lock_guard lock(events_mu_);
    return std::find(events_.begin(), events_.end(), event) != events_.end();
  }

  void TearDown() override { serving_.reset(); }

  std::unique_ptr<HttpServer> server_;
  std::optional<pf::test::FrontServing> serving_;
  int port_ = 0;
  std::atomic<int> echo_calls_{0};
  std::atomic<int> streams_started_{0};
  std::atomic<int> provider_calls_{0};
  std::mutex events_mu_;
  std::vector<FrontEvent> events_;
};

// Sends `bytes` one at a time, `pause` apart, until the connection closes or `limit` passes;
// returns how long the connection stayed open.
std::chrono::milliseconds trickle(RawConnection& c, const std::string& bytes,
                                  std::chrono::milliseconds pause,
                                  std::chrono::milliseconds limit) {
  const auto start = Clock::now();
  std::size_t i = 0;
  while (Clock::now() - start < limit) {
    // Past the end of `bytes`, its last byte again: the head (or body) goes on and on.
    if (!c.send(std::string(1, bytes[std::min(i, bytes.size() - 1)]))) break;
    ++i;
    if (!c.read_some(pause)) break;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

TEST_F(FrontTest, SlowHeadIsClosedAtItsDeadlineThoughBytesKeepComing) {
  start(small());
  RawConnection slow(port_);
  ASSERT_TRUE(slow.connected());
  // An endless header, one byte every 200 ms: each read makes progress, the head never ends.
  const auto open_for =
      trickle(slow, "GET /ok HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaa", 200ms, 20s);
  EXPECT_LT(open_for, 10s) << "head deadline 1.5 s";
  EXPECT_GE(open_for, 1s);
  EXPECT_THAT(slow.received(), StartsWith("HTTP/1.1 408"));
  EXPECT_TRUE(saw(FrontEvent::HeadTimeout));
}

TEST_F(FrontTest, SlowBodyIsClosedAtItsDeadlineThoughBytesKeepComing) {
  start(small());
  RawConnection slow(port_);
  ASSERT_TRUE(slow.connected());
  ASSERT_TRUE(slow.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n"));
  // 1000 bytes at the minimum rate take 15 ms; at 5 bytes a second, 200 s.
  const auto open_for = trickle(slow, "x", 200ms, 20s);
  EXPECT_LT(open_for, 10s) << "body deadline 1.5 s + 1000 B at 64 KiB/s";
  EXPECT_THAT(slow.received(), StartsWith("HTTP/1.1 408"));
  EXPECT_EQ(echo_calls_, 0);
  EXPECT_TRUE(saw(FrontEvent::BodyTimeout));
}

TEST_F(FrontTest, IdleKeptAliveConnectionIsClosedWithoutCountingATimeout) {
  ServerOptions options = small();
  options.limits.keep_alive_timeout = 500ms;
  start(options);
  RawConnection c(port_);
  ASSERT_TRUE(c.send(get_request("/ok")));
  EXPECT_THAT(c.reply(), StartsWith("HTTP/1.1 200"));
  EXPECT_TRUE(c.wait_closed(10s));
  EXPECT_FALSE(saw(FrontEvent::HeadTimeout));  // idling between requests is no timeout
}

// A process that handed its socket to a successor (serve --takeover) answers the requests on
// the connections it has, and closes each after its reply so that the client reconnects to the
// successor; it accepts no new connection.
TEST_F(FrontTest, AfterHandingOverEachKeptConnectionClosesAfterItsNextReply) {
  start(small());
  RawConnection kept(port_);
  ASSERT_TRUE(kept.send(get_request("/ok?n=1")));
  const std::string first = kept.reply();
  EXPECT_THAT(first, StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(first.find("Connection: close"), std::string::npos) << first;
  server_->stop_accepting();
  ASSERT_TRUE(kept.send(get_request("/ok?n=2")));
  const std::string second = kept.reply();
  EXPECT_THAT(second, StartsWith("HTTP/1.1 200"));
  EXPECT_NE(second.find("Connection: close"), std::string::npos) << second;
  EXPECT_TRUE(kept.wait_closed(10s));
  RawConnection late(port_);
  EXPECT_FALSE(late.connected());  // nobody listens there now
}

TEST_F(FrontTest, PerAddressCapRefusesTheNextConnectionWhileOthersAreServed) {
  ServerOptions options = small();
  options.limits.head_timeout = 30s;
  options.limits.max_connections_per_address = 4;
  start(options);
  std::vector<std::unique_ptr<RawConnection>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawConnection>(port_));
    ASSERT_TRUE(held.back()->connected());
  }
  ASSERT_TRUE(eventually([&] { return server_->open_connections() == 4; }));
  RawConnection refused(port_);
  EXPECT_TRUE(refused.wait_closed(10s)) << "the fifth connection from 127.0.0.1 stays open";
  EXPECT_TRUE(refused.received().empty());
  EXPECT_TRUE(saw(FrontEvent::RefusedTooManyFromAddress));
  // The admitted ones are served, and a slot freed is a slot again.
  ASSERT_TRUE(held[0]->send(get_request("/ok?n=1")));
  EXPECT_THAT(held[0]->reply(), StartsWith("HTTP/1.1 200"));
  held[1]->close();
  ASSERT_TRUE(eventually([&] { return server_->open_connections() == 3; }));
  RawConnection again(port_);
  ASSERT_TRUE(again.send(get_request("/ok?n=2")));
  EXPECT_THAT(again.reply(), HasSubstr("ok 2"));
}

TEST_F(FrontTest, GlobalCapRefusesConnectionsFromAnyAddress) {
  ServerOptions options = small();
  options.limits.head_timeout = 30s;
  options.limits.max_connections = 2;
  start(options);
  RawConnection a(port_);
  RawConnection b(port_);
  ASSERT_TRUE(eventually([&] { return server_->open_connections() == 2; }));
  RawConnection refused(port_);
  EXPECT_TRUE(refused.wait_closed(10s));
  EXPECT_TRUE(saw(FrontEvent::RefusedTooManyConnections));
}

TEST_F(FrontTest, OversizedHeadIs431) {
  start(small());
  RawConnection big(port_);
  ASSERT_TRUE(big.send("GET /ok HTTP/1.1\r\nX-Big: " + std::string(8000, 'a') + "\r\n\r\n"));
  EXPECT_THAT(big.reply(), StartsWith("HTTP/1.1 431"));
  EXPECT_TRUE(big.wait_closed(10s));

  std::string many = "GET /ok HTTP/1.1\r\n";
  for (int i = 0; i < 60; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  RawConnection counted(port_);
  ASSERT_TRUE(counted.send(many + "\r\n"));
  EXPECT_THAT(counted.reply(), StartsWith("HTTP/1.1 431"));
}

TEST_F(FrontTest, OversizedDeclaredBodyIs413BeforeAnyOfItIsRead) {
  start(small());
  RawConnection c(port_);
  // No body follows: the reply must come from the head alone.
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10000000\r\n\r\n"));
  const std::string reply = c.reply();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(reply, HasSubstr("Connection: close"));
  EXPECT_TRUE(c.wait_closed(10s));
  EXPECT_EQ(echo_calls_, 0);
}

TEST_F(FrontTest, ChunkedRequestBodyIs411) {
  start(small());
  RawConnection c(port_);
  ASSERT_TRUE(
      c.send("POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"));
  EXPECT_THAT(c.reply(), StartsWith("HTTP/1.1 411"));
  EXPECT_EQ(echo_calls_, 0);
}

TEST_F(FrontTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  start(small());
  RawConnection c(port_);
  ASSERT_TRUE(c.send(get_request("/ok?n=1")));
  const std::string first = c.reply();
  EXPECT_THAT(first, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(first, HasSubstr("ok 1"));
  EXPECT_THAT(first, Not(HasSubstr("Connection: close")));
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nhello"));
  EXPECT_THAT(c.reply(), HasSubstr("\r\n\r\nhello"));
  // Two requests sent back to back are answered in order.
  ASSERT_TRUE(c.send(get_request("/ok?n=3") + get_request("/ok?n=4")));
  EXPECT_THAT(c.reply(), HasSubstr("ok 3"));
  EXPECT_THAT(c.reply(), HasSubstr("ok 4"));
  EXPECT_EQ(server_->open_connections(), 1u);
}

TEST_F(FrontTest, UnknownRouteIs404AndKeepsTheConnection) {
  start(small());
  RawConnection c(port_);
  ASSERT_TRUE(c.send(get_request("/nope")));
  EXPECT_THAT(c.reply(), StartsWith("HTTP/1.1 404"));
  ASSERT_TRUE(c.send(get_request("/ok")));
  EXPECT_THAT(c.reply(), StartsWith("HTTP/1.1 200"));
}

TEST_F(FrontTest, FullLaneAnswers503WithRetryAfterWhileInlineRoutesAnswer) {
  ServerOptions options = small();
  options.default_lane_threads = 1;
  options.default_lane_queue = 1;
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> entered{0};
  auto blocked = std::make_unique<HttpServer>(options);
  blocked->route("GET", "/block", [&](const HttpRequest&, HttpResponse& res) {
    ++entered;
    std::unique_lock lock(mu);
    cv.wait_for(lock, 30s, [&] { return release; });
    res.set_content("done", "text/plain");
  });
  blocked->route(
      "GET", "/healthz",
      [](const HttpRequest&, HttpResponse& res) { res.set_content("{}", "application/json"); },
      kInlineLane);
  pf::test::FrontServing serving(*blocked);
  RawConnection running(serving.port());
  ASSERT_TRUE(running.send(get_request("/block")));
  ASSERT_TRUE(eventually([&] { return entered == 1; }));
  RawConnection queued(serving.port());
  ASSERT_TRUE(queued.send(get_request("/block")));
  std::this_thread::sleep_for(200ms);  // let it reach the queue
  RawConnection refused(serving.port());
  ASSERT_TRUE(refused.send(get_request("/block")));
  const std::string reply = refused.reply();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(reply, HasSubstr("Retry-After: 1"));
  RawConnection health(serving.port());
  ASSERT_TRUE(health.send(get_request("/healthz")));
  EXPECT_THAT(health.reply(), StartsWith("HTTP/1.1 200"));
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  EXPECT_THAT(running.reply(), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(queued.reply(), StartsWith("HTTP/1.1 200"));
}

TEST_F(FrontTest, StreamRunsUntilItsClientLeaves) {
  start(small());
  {
    RawConnection c(port_);
    ASSERT_TRUE(c.send(get_request("/ticks")));
    ASSERT_TRUE(eventually(
        [&] {
          c.read_some(50ms);
          std::size_t ticks = 0;
          for (auto at = c.received().find("tick"); at != std::string::npos;
               at = c.received().find("tick", at + 1)) {
            ++ticks;
          }
          return ticks >= 3;
        },
        10s));
    EXPECT_THAT(c.received(), StartsWith("HTTP/1.1 200"));
    EXPECT_THAT(c.received(), HasSubstr("Transfer-Encoding: chunked"));
  }  // the client goes away
  // The stream's job holds its connection: no connection left means no producer left.
  EXPECT_TRUE(eventually([&] { return server_->open_connections() == 0; }));
  const int calls = provider_calls_;
  EXPECT_TRUE(holds_for([&] { return provider_calls_ == calls; }, 300ms))
      << "the producer is still being called";
}

// A handler that waits on its caller's behalf (the agents' lease long-poll) can tell that the
// caller hung up meanwhile, and that one still there has not (nor one that sent a next request).
TEST(FrontCallerGone, AWaitingHandlerSeesItsCallerHangUp) {
  std::atomic<int> seen{0};  // 0: waiting, 1: told gone, 2: waited it out, never told gone
  HttpServer server(ServerOptions{});
  server.route("GET", "/wait", [&](const HttpRequest& req, HttpResponse& res) {
    const auto until =
        Clock::now() + std::chrono::milliseconds(std::stoi(req.get_param_value("ms")));
    while (Clock::now() < until) {
      if (req.caller_gone && req.caller_gone()) {
        seen = 1;
        return;
      }
      std::this_thread::sleep_for(10ms);
    }
    seen = 2;
    res.set_content("waited", "text/plain");
  });
  server.route("GET", "/ok", [](const HttpRequest& req, HttpResponse& res) {
    res.set_content("ok " + req.get_param_value("n"), "text/plain");
  });
  pf::test::FrontServing serving(server);
  {
    RawConnection c(serving.port());
    ASSERT_TRUE(c.send(get_request("/wait?ms=10000")));
    std::this_thread::sleep_for(200ms);
  }  // the caller goes away while the handler waits
  EXPECT_TRUE(eventually([&] { return seen == 1; }, 5s)) << seen;

  seen = 0;
  RawConnection stays(serving.port());
  ASSERT_TRUE(stays.send(get_request("/wait?ms=500")));
  ASSERT_TRUE(stays.send(get_request("/ok?n=2")));  // pipelined: bytes waiting are no hang-up
  EXPECT_TRUE(eventually([&] { return seen != 0; }, 5s));
  EXPECT_EQ(seen, 2);
  EXPECT_TRUE(eventually([&] {
    stays.read_some(50ms);
    return stays.received().find("ok 2") != std::string::npos;
  }));
  EXPECT_THAT(stays.received(), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(stays.received(), HasSubstr("waited"));
}

TEST_F(FrontTest, StopClosesOpenConnectionsAndStreamsAndJoins) {
  ServerOptions options = small();
  options.limits.head_timeout = 60s;
  start(options);
  RawConnection idle(port_);
  RawConnection half(port_);
  ASSERT_TRUE(half.send("GET /ok HTTP/1.1\r\nHost"));
  RawConnection stream(port_);
  ASSERT_TRUE(stream.send(get_request("/ticks")));
  ASSERT_TRUE(eventually([&] {
    stream.read_some(50ms);
    return stream.received().find("tick") != std::string::npos;
  }));
  const auto before = Clock::now();
  serving_.reset();  // stop()
  EXPECT_LT(Clock::now() - before, 10s);
  EXPECT_EQ(server_->open_connections(), 0u);
  const int calls = provider_calls_;
  EXPECT_TRUE(holds_for([&] { return provider_calls_ == calls; }, 300ms))
      << "the producer outlived stop()";
  EXPECT_TRUE(idle.wait_closed(5s));
  EXPECT_TRUE(half.wait_closed(5s));
  EXPECT_TRUE(stream.wait_closed(5s));
  server_->stop();  // idempotent
}

// Handlers that defer their replies, keeping each Resume until the test says what to do.
struct DeferringRoutes {
  std::mutex mu;
  std::vector<Resume> kept;
  std::atomic<int> deferred{0};

  void mount(HttpServer& server) {
    server.route("GET", "/defer", [this](const HttpRequest&, HttpResponse& res) {
      res.set_content("as the handler left it", "text/plain");
      Resume resume = res.defer();
      std::lock_guard lock(mu);
      kept.push_back(std::move(resume));
      ++deferred;
    });
    server.route("GET", "/defer-known", [](const HttpRequest&, HttpResponse& res) {
      res.set_content("known at once", "text/plain");
      res.defer()(nullptr);  // resumed before the server took it over
    });
    server.route("GET", "/ok", [](const HttpRequest&, HttpResponse& res) {
      res.set_content("ok", "text/plain");
    });
    server.route(
        "GET", "/defer-inline", [](const HttpRequest&, HttpResponse& res) { res.defer()(nullptr); },
        kInlineLane);
  }
  std::vector<Resume> take() {
    std::lock_guard lock(mu);
    return std::exchange(kept, {});
  }
};

TEST(FrontDeferred, ADeferredReplyFreesItsLaneAndGoesOutWhenResumedFromAnyThread) {
  ServerOptions options;
  options.default_lane_threads = 1;  // one thread: a held one would block /ok
  DeferringRoutes routes;
  HttpServer server(options);
  routes.mount(server);
  pf::test::FrontServing serving(server);

  RawConnection waiting(serving.port());
  ASSERT_TRUE(waiting.send(get_request("/defer")));
  ASSERT_TRUE(eventually([&] { return routes.deferred == 1; }));
  RawConnection other(serving.port());
  ASSERT_TRUE(other.send(get_request("/ok")));
  EXPECT_THAT(other.reply(), StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(waiting.reply(300ms), "") << "sent before it was resumed";

  std::vector<Resume> kept = routes.take();
  ASSERT_EQ(kept.size(), 1u);
  std::thread([resume = kept.front()] {
    resume([](HttpResponse& res) {
      res.status = 201;
      res.set_content("finished later", "text/plain");
    });
    resume([](HttpResponse& res) { res.status = 500; });  // a second call does nothing
  }).join();
  const std::string reply = waiting.reply();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 201"));
  EXPECT_THAT(reply, HasSubstr("finished later"));

  // The connection goes on (keep-alive) with a reply resumed as the handler left it.
  ASSERT_TRUE(waiting.send(get_request("/defer")));
  ASSERT_TRUE(eventually([&] { return routes.deferred == 2; }));
  kept = routes.take();
  ASSERT_EQ(kept.size(), 1u);
  kept.front()(nullptr);
  EXPECT_THAT(waiting.reply(), HasSubstr("as the handler left it"));

  RawConnection known(serving.port());
  ASSERT_TRUE(known.send(get_request("/defer-known")));
  EXPECT_THAT(known.reply(), HasSubstr("known at once"));
}

TEST(FrontDeferred, AReplyNobodyResumesIs503AndInlineRoutesCannotDefer) {
  DeferringRoutes routes;
  HttpServer server;
  routes.mount(server);
  pf::test::FrontServing serving(server);

  RawConnection dropped(serving.port());
  ASSERT_TRUE(dropped.send(get_request("/defer")));
  ASSERT_TRUE(eventually([&] { return routes.deferred == 1; }));
  routes.take();  // the last copy of its Resume goes uncalled
  const std::string reply = dropped.reply();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(reply, HasSubstr("Retry-After: 1"));

  RawConnection inline_route(serving.port());
  ASSERT_TRUE(inline_route.send(get_request("/defer-inline")));
  EXPECT_THAT(inline_route.reply(), StartsWith("HTTP/1.1 500"));
}

TEST(FrontDeferred, StopLetsGoOfDeferredRepliesAndALaterResumeIsHarmless) {
  DeferringRoutes routes;
  std::vector<Resume> kept;
  {
    auto server = std::make_unique<HttpServer>();
    routes.mount(*server);
    std::optional<pf::test::FrontServing> serving(std::in_place, *server);
    RawConnection c(serving->port());
    ASSERT_TRUE(c.send(get_request("/defer")));
    ASSERT_TRUE(eventually([&] { return routes.deferred == 1; }));
    kept = routes.take();
    serving.reset();  // stop(): the deferred reply lets its connection go
    EXPECT_EQ(server->open_connections(), 0u) << "the deferred reply still holds its connection";
    EXPECT_TRUE(c.wait_closed(5s));
  }  // the server is gone
  ASSERT_EQ(kept.size(), 1u);
  kept.front()(nullptr);  // resumed after all that: nothing to deliver to
  kept.clear();
}

// A self-signed certificate for 127.0.0.1, written as PEM files into `dir`.
bool write_self_signed(const std::filesystem::path& dir) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  bool ok = key && cert;
  if (ok) {
    ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), 0);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>("127.0.0.1"), -1, -1, 0);
    X509_set_issuer_name(cert, name);
    ok = X509_sign(cert, key, EVP_sha256()) > 0;
  }
  if (ok) {
    FILE* k = std::fopen((dir / "key.pem").c_str(), "w");
    FILE* c = std::fopen((dir / "cert.pem").c_str(), "w");
    ok = k && c && PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr) == 1 &&
         PEM_write_X509(c, cert) == 1;
    if (k) std::fclose(k);
    if (c) std::fclose(c);
  }
  X509_free(cert);
  EVP_PKEY_free(key);
  return ok;
}

TEST(FrontTls, ServesHttpsAndAppliesTheHeadDeadlineToTheHandshake) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("http_front_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(write_self_signed(dir));
  ServerOptions options;
  options.limits.head_timeout = 1500ms;
  auto server =
      HttpServer::with_tls({(dir / "cert.pem").string(), (dir / "key.pem").string()}, options);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(server) << server.error();
  (*server)->route("GET", "/ok", [](const HttpRequest&, HttpResponse& res) {
    res.set_content("secure", "text/plain");
  });
  pf::test::FrontServing serving(**server);

  httplib::SSLClient client("127.0.0.1", serving.port());
  client.enable_server_certificate_verification(false);
  client.set_keep_alive(true);
  for (int i = 0; i < 2; ++i) {  // twice: the second on the kept-alive connection
    auto r = client.Get("/ok");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "secure");
  }
  // A client that connects and never starts the handshake is closed at the head deadline.
  RawConnection mute(serving.port());
  const auto before = Clock::now();
  EXPECT_TRUE(mute.wait_closed(10s));
  EXPECT_GE(Clock::now() - before, 1s);
}

// ---- the manager's API behind it --------------------------------------------------------------

constexpr const char* kOperatorToken = "operator-token-front-7c2d";

class ManagerFrontTest : public pf::test::ManagerFixture {
 protected:
  void SetUp() override {
    ManagerFixture::SetUp();
    manager::ApiOptions options;
    options.operator_token_hash = manager::hash_token(kOperatorToken);
    options.clock = [this] { return now_.load(); };
    options.http.head_timeout = 60s;  // the slow clients below must stay for the whole test
    api_ = std::make_unique<manager::HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    port_ = serving_->port();
  }
  void TearDown() override { serving_.reset(); }

  // Deploys offer 101 and registers its agent; returns the agent's token.
  std::string registered_agent() {
    httplib::Client client("127.0.0.1", port_);
    const httplib::Headers op = {{"Authorization", std::string("Bearer ") + kOperatorToken}};
    auto deployed =
        client.Post("/api/v1/instances", op, R"({"offer_id": 101})", "application/json");
    EXPECT_TRUE(deployed && deployed->status == 201);
    const auto& env = market_.create_requests.back().env;
    auto reg = client.Post("/api/v1/agent/register",
                           nlohmann::json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                                          {"secret", env.at("PROVERFLEET_SECRET")}}
                               .dump(),
                           "application/json");
    EXPECT_TRUE(reg && reg->status == 200);
    if (!reg) return "";
    return nlohmann::json::parse(reg->body).value("token", "");
  }

  std::unique_ptr<manager::HttpApi> api_;
  HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;
  int port_ = 0;
};

// The reproduction from the issue: ten connections sending one header byte at a time left
// /healthz unanswered and agents' heartbeats lost, and a healthy instance was destroyed.
TEST_F(ManagerFrontTest, SlowHeaderClientsDoNotStarveHealthOrAgentHeartbeats) {
  const std::string token = registered_agent();
  ASSERT_FALSE(token.empty());
  std::atomic<bool> done{false};
  std::vector<std::thread> attackers;
  for (int i = 0; i < 10; ++i) {
    attackers.emplace_back([&] {
      RawConnection slow(port_);
      const std::string head = "POST /api/v1/agent/heartbeat HTTP/1.1\r\nX-Pad: ";
      std::size_t sent = 0;
      while (!done && slow.send(std::string(1, head[std::min(sent, head.size() - 1)]))) {
        ++sent;
        for (int wait = 0; wait < 10 && !done; ++wait) std::this_thread::sleep_for(100ms);
      }
    });
  }
  ASSERT_TRUE(eventually([&] { return server_.open_connections() >= 10; }));

  httplib::Client client("127.0.0.1", port_);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  const httplib::Headers agent = {{"Authorization", "Bearer " + token}};
  for (int round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    auto health = client.Get("/healthz");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    auto hb = client.Post("/api/v1/agent/heartbeat", agent, R"({"phase": "fetching_params"})",
                          "application/json");
    ASSERT_TRUE(hb) << httplib::to_string(hb.error());
    EXPECT_EQ(hb->status, 200) << hb->body;
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_GE(server_.open_connections(), 10u) << "the slow clients were still connected";
  done = true;
  for (auto& t : attackers) t.join();
}

TEST_F(ManagerFrontTest, RefusalsCarryTheJsonErrorShapeAndShowInMetrics) {
  RawConnection big(port_);
  ASSERT_TRUE(big.send("GET /healthz HTTP/1.1\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n"));
  const std::string reply = big.reply();
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 431"));
  EXPECT_THAT(reply, HasSubstr(R"({"error":"request head too large)"));
  big.close();
  ASSERT_TRUE(eventually([&] { return server_.open_connections() == 0; }));

  manager::ApiOptions defaults;
  std::vector<std::unique_ptr<RawConnection>> held;
  for (std::size_t i = 0; i < defaults.http.max_connections_per_address; ++i) {
    held.push_back(std::make_unique<RawConnection>(port_));
  }
  ASSERT_TRUE(eventually(
      [&] { return server_.open_connections() == defaults.http.max_connections_per_address; }));
  RawConnection refused(port_);
  EXPECT_TRUE(refused.wait_closed(10s));
  held.clear();
  ASSERT_TRUE(eventually([&] { return server_.open_connections() == 0; }));

  httplib::Client client("127.0.0.1", port_);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("proverfleet_http_front_events_total{event=\""
                                       "refused_too_many_from_address\"} 1\n"));
  EXPECT_THAT(metrics->body,
              HasSubstr("proverfleet_api_requests_total{route=\"unmatched\",code=\"431\""));
}

}  // namespace
}  // namespace pf::net
