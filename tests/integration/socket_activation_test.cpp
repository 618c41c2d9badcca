// serve on sockets a supervisor holds (systemd socket activation, net/listen_fds.h): the test
// plays the supervisor. It binds both sockets, starts serve with them as fds 3 and 4 and the
// LISTEN_* variables (set by the process itself before exec, as systemd sets them after fork),
// SIGKILLs serve, makes a call while nothing serves (the kernel accepts it into the socket's
// backlog), starts serve again on the same sockets, and the call is answered.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>

#include "cuzk/v1/proving.grpc.pb.h"
#include "support/eventually.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using pf::test::Subprocess;

// A listening TCP socket on 127.0.0.1 (inherited by children: not close-on-exec); its port.
int listening_socket(int& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
    return -1;
  }
  port = ntohs(address.sin_port);
  return fd;
}

// cuzk.v1.ProvingEngine/GetStatus at `address` (HOST:PORT), as a Curio node calls it.
grpc::Status get_status(const std::string& address) {
  auto stub = cuzk::v1::ProvingEngine::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  cuzk::v1::GetStatusResponse status;
  return stub->GetStatus(&ctx, {}, &status);
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    return -1;
  return fd;
}

std::string read_reply(int fd) {
  timeval limit{60, 0};
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0)
    return "setsockopt failed";
  std::string reply;
  char buffer[4096];
  while (reply.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    reply.append(buffer, static_cast<std::size_t>(n));
  }
  return reply;
}

class SocketActivation : public ::testing::Test {
 protected:
  void SetUp() override {
    http_fd_ = listening_socket(http_port_);
    grpc_fd_ = listening_socket(grpc_port_);
    ASSERT_GE(http_fd_, 0);
    ASSERT_GE(grpc_fd_, 0);
  }
  void TearDown() override {
    ::close(http_fd_);
    if (grpc_fd_ >= 0) ::close(grpc_fd_);  // one test frees the port itself
  }

  // serve as the supervisor starts it: the sockets as fds 3 and 4, named, for its own pid.
  Subprocess start_serve() {
    const std::string script =
        "exec 3<&" + std::to_string(http_fd_) + " 4<&" + std::to_string(grpc_fd_) +
        "; export LISTEN_PID=$$ LISTEN_FDS=2 LISTEN_FDNAMES=http:grpc; exec \"$@\"";
    pf::test::SpawnOptions options;
    options.env["PROVERFLEET_TOKEN"] = std::nullopt;
    return Subprocess::spawn({"/bin/sh", "-c", script, "sh", PF_BINARY, "serve", "--db",
                              dir_.file("pf.db"), "--vast-url", "http://127.0.0.1:1"},
                             options);
  }

  pf::testing::TempDir dir_{"pf_socket_activation"};
  int http_fd_ = -1, grpc_fd_ = -1;
  int http_port_ = 0, grpc_port_ = 0;
};

TEST_F(SocketActivation, ACallMadeWhileServeIsDownIsAnsweredAfterItsRestart) {
  {
    auto serve = start_serve();
    const auto ready = serve.wait_for_line("proverfleet serve listening on", 60s);
    ASSERT_TRUE(ready) << serve.stderr_text();
    // The handed sockets are what it serves, not --listen's default address.
    EXPECT_THAT(ready->line, ::testing::HasSubstr(":" + std::to_string(http_port_)));
    EXPECT_THAT(serve.stderr_text(), ::testing::HasSubstr("serving the socket handed over"));

    // gRPC through the socket handed over, its connections passed to the gRPC server.
    const grpc::Status called = get_status("127.0.0.1:" + std::to_string(grpc_port_));
    EXPECT_TRUE(called.ok()) << called.error_message() << "\n" << serve.stderr_text();

    ::kill(serve.pid(), SIGKILL);
    ASSERT_TRUE(serve.wait_exit(30s));
  }
  // Nothing serves now; the supervisor still holds the socket, so the kernel accepts the call.
  const int client = connect_to(http_port_);
  ASSERT_GE(client, 0) << "connect failed while serve was down: " << std::strerror(errno);
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: fleet\r\nConnection: close\r\n\r\n";
  ASSERT_EQ(::send(client, request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));

  auto serve = start_serve();
  ASSERT_TRUE(serve.wait_for_line("proverfleet serve listening on", 60s)) << serve.stderr_text();
  const std::string reply = read_reply(client);
  ::close(client);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply << "\n" << serve.stderr_text();
  serve.terminate();
}

// What a supervisor hands over is checked before serve does anything: a socket that is not a
// listening stream socket, or names serve does not take, end it at once naming the problem.
TEST_F(SocketActivation, WhatServeCannotServeIsRefusedAtStartNamingIt) {
  const auto refused = [&](const std::string& setup) {
    pf::test::SpawnOptions options;
    options.env["PROVERFLEET_TOKEN"] = std::nullopt;
    auto serve =
        Subprocess::spawn({"/bin/sh", "-c", setup + "; exec \"$@\"", "sh", PF_BINARY, "serve",
                           "--db", dir_.file("refused.db"), "--vast-url", "http://127.0.0.1:1"},
                          options);
    const auto code = serve.wait_exit(60s);
    EXPECT_EQ(code.value_or(-1), 1);
    return serve.stderr_text();
  };
  EXPECT_THAT(refused("exec 3</dev/null; export LISTEN_PID=$$ LISTEN_FDS=1"),
              ::testing::HasSubstr("is not a socket"));
  EXPECT_THAT(refused("exec 3<&" + std::to_string(http_fd_) +
                      "; export LISTEN_PID=$$ LISTEN_FDS=1 LISTEN_FDNAMES=metrics"),
              ::testing::HasSubstr("LISTEN_FDNAMES"));
}

// A gateway port held by another process (here: the fixture's socket) does not stop serve: it
// serves HTTP, says nothing of a gateway until it really listens (the line a supervisor's
// script or the demo waits for), retries the bind at each lease renewal, and prints where it
// listens once the port frees. Before the line, a client of that port reaches the holder, so
// whoever starts Curio waits for it.
TEST_F(SocketActivation, AGatewayWhosePortIsHeldListensOnceItFreesAndSaysSo) {
  // Held here only: serve must not inherit it, or closing it would free nothing.
  ASSERT_EQ(::fcntl(grpc_fd_, F_SETFD, FD_CLOEXEC), 0);
  pf::test::SpawnOptions options;
  options.env["PROVERFLEET_TOKEN"] = std::nullopt;
  const std::string gateway = "127.0.0.1:" + std::to_string(grpc_port_);
  auto serve = Subprocess::spawn(
      {PF_BINARY, "serve", "--db", dir_.file("held.db"), "--listen", "127.0.0.1:0", "--grpc-listen",
       gateway, "--vast-url", "http://127.0.0.1:1"},
      options);
  ASSERT_TRUE(serve.wait_for_line("proverfleet serve listening on", 60s)) << serve.stderr_text();
  for (const auto& line : serve.stdout_lines()) {
    EXPECT_THAT(line, ::testing::Not(::testing::HasSubstr("gateway listening")));
  }
  EXPECT_TRUE(pf::test::eventually([&] {
    return serve.stderr_text().find("the gateway did not start") != std::string::npos;
  })) << serve.stderr_text();

  ::close(grpc_fd_);
  grpc_fd_ = -1;
  const auto listening = serve.wait_for_line("proverfleet gateway listening on " + gateway, 60s);
  ASSERT_TRUE(listening) << serve.stderr_text();
  const grpc::Status called = get_status(gateway);
  EXPECT_TRUE(called.ok()) << called.error_message() << "\n" << serve.stderr_text();
  serve.terminate();
}

// --grpc-listen with port 0: the kernel picks the port (none another process can take between
// choosing and binding it), and the line names it.
TEST_F(SocketActivation, AGatewayOnPortZeroSaysWhichPortItGot) {
  pf::test::SpawnOptions options;
  options.env["PROVERFLEET_TOKEN"] = std::nullopt;
  auto serve = Subprocess::spawn(
      {PF_BINARY, "serve", "--db", dir_.file("zero.db"), "--listen", "127.0.0.1:0", "--grpc-listen",
       "127.0.0.1:0", "--vast-url", "http://127.0.0.1:1"},
      options);
  ASSERT_TRUE(serve.wait_for_line("proverfleet serve listening on", 60s)) << serve.stderr_text();
  std::string gateway;
  const std::string prefix = "proverfleet gateway listening on ";
  for (const auto& line : serve.stdout_lines()) {
    if (line.rfind(prefix, 0) == 0) gateway = line.substr(prefix.size());
  }
  ASSERT_THAT(gateway, ::testing::StartsWith("127.0.0.1:")) << serve.stderr_text();
  EXPECT_NE(gateway, "127.0.0.1:0");
  const grpc::Status called = get_status(gateway);
  EXPECT_TRUE(called.ok()) << called.error_message() << "\n" << serve.stderr_text();
  serve.terminate();
}

}  // namespace
