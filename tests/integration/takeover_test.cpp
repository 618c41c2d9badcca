// A planned restart of serve (cli/serve_takeover.h): a second `serve --takeover` receives the
// running serve's sockets, leads once it resigned, and the old one answers the Prove it held
// (its job answered by the new leader) before it exits; the ports never close. A successor that
// fails before it listens changes nothing, and --takeover with nobody to take over from fails
// naming the socket.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <optional>
#include <regex>
#include <string>

#include "cuzk/v1/proving.grpc.pb.h"
#include "support/eventually.h"
#include "support/porep_request.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using pf::test::eventually;
using pf::test::Subprocess;
using ::testing::HasSubstr;

class Takeover : public ::testing::Test {
 protected:
  Subprocess start_serve(std::vector<std::string> extra = {},
                         std::optional<std::string> notify_socket = std::nullopt) {
    // Connections told to reconnect after 2 s: the serve that hands over stays 4.2 s, not 35 s.
    std::ofstream(dir_.file("pf.toml")) << "[gateway]\nmax_connection_age_s = 2\n";
    std::vector<std::string> argv = {PF_BINARY,       "serve",
                                     "--config",      dir_.file("pf.toml"),
                                     "--db",          dir_.file("pf.db"),
                                     "--listen",      "127.0.0.1:0",
                                     "--grpc-listen", "127.0.0.1:0",
                                     "--vast-url",    "http://127.0.0.1:1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    pf::test::SpawnOptions options;
    options.env["PROVERFLEET_TOKEN"] = std::nullopt;
    options.env["NOTIFY_SOCKET"] = notify_socket;
    return Subprocess::spawn(argv, options);
  }
  // The gRPC port a serve's gateway listens on, from its log.
  static int grpc_port_of(const Subprocess& serve) {
    int port = 0;
    eventually([&] {
      std::smatch m;
      const std::string log = serve.stderr_text();
      if (!std::regex_search(log, m, std::regex(R"(gateway: listening on port (\d+))"))) {
        return false;
      }
      port = std::stoi(m[1]);
      return true;
    });
    return port;
  }
  static std::unique_ptr<cuzk::v1::ProvingEngine::Stub> stub(int port) {
    return cuzk::v1::ProvingEngine::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  static grpc::Status get_status(int port) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::GetStatusResponse reply;
    return stub(port)->GetStatus(&ctx, {}, &reply);
  }

  pf::testing::TempDir dir_{"pf_takeover"};
};

TEST_F(Takeover, ThePlannedRestartFailsNoCallAndTheOldServeExitsOnceItsCallIsAnswered) {
  auto old_serve = start_serve();
  const auto ready = old_serve.wait_for_line(std::regex(R"(listening on (http://\S+))"), 60s);
  ASSERT_TRUE(ready) << old_serve.stderr_text();
  const int grpc_port = grpc_port_of(old_serve);
  ASSERT_GT(grpc_port, 0) << old_serve.stderr_text();
  ASSERT_TRUE(eventually([&] {
    return old_serve.stderr_text().find("job queue loaded") != std::string::npos;
  })) << old_serve.stderr_text();

  // Curio's Prove, open on the old serve when the takeover begins (no agent proves it here).
  auto prover = stub(grpc_port);
  auto waiting = std::async(std::launch::async, [&] {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 120s);
    cuzk::v1::ProveRequest call;
    *call.mutable_submit() = pf::test::porep_request("upgrade-1", 3);
    cuzk::v1::ProveResponse reply;
    const grpc::Status status = prover->Prove(&ctx, call, &reply);
    return std::make_pair(status, reply);
  });
  ASSERT_EQ(waiting.wait_for(1s), std::future_status::timeout);

  auto new_serve = start_serve({"--takeover"});
  const auto new_ready = new_serve.wait_for_line("proverfleet serve listening on", 60s);
  ASSERT_TRUE(new_ready) << new_serve.stderr_text();
  EXPECT_EQ(new_ready->line, ready->line);  // the same port: the socket handed over
  ASSERT_TRUE(eventually([&] {
    return new_serve.stderr_text().find("takeover: this serve leads") != std::string::npos;
  })) << new_serve.stderr_text()
      << "\n--- old ---\n"
      << old_serve.stderr_text();
  // The old serve holds the call open (it is not failed) and does not exit while it does.
  EXPECT_EQ(waiting.wait_for(1s), std::future_status::timeout);
  EXPECT_TRUE(old_serve.running());
  EXPECT_TRUE(get_status(grpc_port).ok());

  // The job ends at the new leader; the call made to the old serve gets that answer.
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 20s);
    cuzk::v1::CancelProofRequest cancel;
    cancel.set_job_id("upgrade-1");
    cuzk::v1::CancelProofResponse cancelled;
    const grpc::Status status = stub(grpc_port)->CancelProof(&ctx, cancel, &cancelled);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  ASSERT_EQ(waiting.wait_for(60s), std::future_status::ready) << old_serve.stderr_text();
  const auto [status, reply] = waiting.get();
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << old_serve.stderr_text();
  EXPECT_EQ(reply.result().job_id(), "upgrade-1");
  EXPECT_EQ(reply.result().status(), cuzk::v1::AwaitProofResponse::CANCELLED);

  const auto code = old_serve.wait_exit(60s);
  ASSERT_TRUE(code) << old_serve.stderr_text();
  EXPECT_EQ(*code, 0) << old_serve.stderr_text();
  EXPECT_THAT(old_serve.stderr_text(), HasSubstr("handed over to pid"));
  EXPECT_THAT(old_serve.stderr_text(), HasSubstr("drained in"));
  // Still served, by the new serve alone; and it offers the next takeover.
  EXPECT_TRUE(get_status(grpc_port).ok());
  EXPECT_TRUE(eventually([&] {
    return new_serve.stderr_text().find("a successor may take over at") != std::string::npos;
  })) << new_serve.stderr_text();
  new_serve.terminate();
}

TEST_F(Takeover, ASuccessorThatFailsBeforeItListensChangesNothing) {
  auto serve = start_serve();
  ASSERT_TRUE(serve.wait_for_line("proverfleet serve listening on", 60s)) << serve.stderr_text();
  const int grpc_port = grpc_port_of(serve);
  ASSERT_TRUE(eventually([&] {
    return serve.stderr_text().find("a successor may take over at") != std::string::npos;
  })) << serve.stderr_text();
  // It receives the sockets, then stops on a TLS file that is not there.
  auto failing = start_serve(
      {"--takeover", "--tls-cert", dir_.file("none.pem"), "--tls-key", dir_.file("none.key")});
  const auto code = failing.wait_exit(60s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 1) << failing.stderr_text();
  EXPECT_TRUE(eventually([&] {
    return serve.stderr_text().find("abandoned before it listened") != std::string::npos;
  })) << serve.stderr_text();
  EXPECT_TRUE(serve.running());
  EXPECT_TRUE(get_status(grpc_port).ok()) << serve.stderr_text();
  EXPECT_THAT(serve.stderr_text(), ::testing::Not(HasSubstr("resigned")));
  serve.terminate();
}

// systemd's side of sd_notify(3): a datagram socket serve reports to.
class NotifySocket {
 public:
  explicit NotifySocket(std::string path) : path_(std::move(path)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path_.data(), path_.size());
    bound_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  }
  ~NotifySocket() { ::close(fd_); }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // The next datagram, or "" after `timeout`.
  std::string next(std::chrono::seconds timeout) {
    timeval limit{static_cast<time_t>(timeout.count()), 0};
    if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit) != 0) return "";
    char buffer[512];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    return n > 0 ? std::string(buffer, static_cast<std::size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

// `systemctl reload` (ExecReload sends SIGHUP, deploy/systemd/proverfleet.service): serve starts
// its successor itself (the same binary path and arguments, --takeover), which tells systemd it
// is the unit's main process once it leads; the port is served throughout.
TEST_F(Takeover, AReloadStartsTheSuccessorWhichTellsTheServiceManagerItIsTheMainProcess) {
  NotifySocket systemd(dir_.file("notify.sock"));
  ASSERT_TRUE(systemd.bound()) << std::strerror(errno);
  auto serve = start_serve({}, systemd.path());
  ASSERT_TRUE(serve.wait_for_line("proverfleet serve listening on", 60s)) << serve.stderr_text();
  EXPECT_EQ(systemd.next(60s), "READY=1") << serve.stderr_text();
  const int grpc_port = grpc_port_of(serve);
  ASSERT_TRUE(get_status(grpc_port).ok());

  ASSERT_EQ(::kill(serve.pid(), SIGHUP), 0);
  const std::string told = systemd.next(60s);
  std::smatch m;
  ASSERT_TRUE(std::regex_match(told, m, std::regex(R"(MAINPID=(\d+)\nREADY=1)")))
      << "\"" << told << "\"\n"
      << serve.stderr_text();
  const int successor = std::stoi(m[1]);
  EXPECT_NE(successor, serve.pid());
  EXPECT_THAT(serve.stderr_text(), HasSubstr("reload: started pid " + m[1].str()));
  EXPECT_TRUE(eventually([&] {
    return serve.stderr_text().find("handed over to pid " + m[1].str()) != std::string::npos;
  })) << serve.stderr_text();
  EXPECT_TRUE(get_status(grpc_port).ok());
  ::kill(successor, SIGTERM);
  serve.terminate();
}

// A follower replica is taken over too: the successor follows the leader in its place (it
// resigned nothing, and the leader goes on leading), and the replaced follower exits.
TEST_F(Takeover, AFollowerReplicaIsReplacedWhileTheLeaderGoesOnLeading) {
  auto leader = start_serve();
  ASSERT_TRUE(leader.wait_for_line("proverfleet serve listening on", 60s)) << leader.stderr_text();
  ASSERT_TRUE(eventually([&] {
    return leader.stderr_text().find("job queue loaded") != std::string::npos;
  })) << leader.stderr_text();
  const std::string follower_socket = dir_.file("follower.sock");
  auto follower = start_serve({"--takeover-socket", follower_socket});
  const auto follower_ready = follower.wait_for_line("proverfleet serve listening on", 60s);
  ASSERT_TRUE(follower_ready) << follower.stderr_text();
  const int follower_grpc = grpc_port_of(follower);
  ASSERT_TRUE(eventually([&] {
    return follower.stderr_text().find("a successor may take over at " + follower_socket) !=
           std::string::npos;
  })) << follower.stderr_text();

  auto successor = start_serve({"--takeover", "--takeover-socket", follower_socket});
  const auto successor_ready = successor.wait_for_line("proverfleet serve listening on", 60s);
  ASSERT_TRUE(successor_ready) << successor.stderr_text();
  EXPECT_EQ(successor_ready->line, follower_ready->line);  // the follower's port, handed over
  ASSERT_TRUE(eventually([&] {
    return successor.stderr_text().find("another replica leads") != std::string::npos;
  })) << successor.stderr_text()
      << "\n--- follower ---\n"
      << follower.stderr_text();
  const auto code = follower.wait_exit(60s);
  ASSERT_TRUE(code) << follower.stderr_text();
  EXPECT_EQ(*code, 0) << follower.stderr_text();
  EXPECT_TRUE(leader.running());
  EXPECT_THAT(leader.stderr_text(), ::testing::Not(HasSubstr("stepping down")));
  EXPECT_TRUE(get_status(follower_grpc).ok());  // relayed by the successor to the leader
  successor.terminate();
  leader.terminate();
}

TEST_F(Takeover, NobodyToTakeOverFromIsAnErrorNamingTheSocket) {
  auto alone = start_serve({"--takeover"});
  const auto code = alone.wait_exit(60s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 1);
  EXPECT_THAT(alone.stderr_text(), HasSubstr("no serve answers at the takeover socket"));
  EXPECT_THAT(alone.stderr_text(), HasSubstr("serve-takeover.sock"));
}

}  // namespace
