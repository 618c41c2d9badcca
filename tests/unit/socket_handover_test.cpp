// net/socket_handover.h: lines and descriptors between two processes' ends of a unix socket
// (here two ends in one process), bounded reads, and a listener that never takes a path another
// process answers at.
#include "net/socket_handover.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace pf::net {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct ChannelPair {
  HandoverChannel a, b;
};

ChannelPair channel_pair() {
  int ends[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    throw std::runtime_error("socketpair failed");
  }
  return {HandoverChannel(util::UniqueFd(ends[0])), HandoverChannel(util::UniqueFd(ends[1]))};
}

TEST(SocketHandover, ALineCarriesDescriptorsThatReachTheSameFile) {
  auto [a, b] = channel_pair();
  int pipe_ends[2];
  ASSERT_EQ(::pipe(pipe_ends), 0);
  util::UniqueFd read_end(pipe_ends[0]), write_end(pipe_ends[1]);
  ASSERT_TRUE(a.send("sockets http grpc", {write_end.get(), write_end.get()}));
  write_end.reset();  // the receiver's copies keep the pipe open
  auto message = b.receive(5s);
  ASSERT_TRUE(message) << message.error();
  EXPECT_EQ(message->line, "sockets http grpc");
  ASSERT_EQ(message->fds.size(), 2u);
  ASSERT_EQ(::write(message->fds[1].get(), "x", 1), 1);
  char got = 0;
  ASSERT_EQ(::read(read_end.get(), &got, 1), 1);
  EXPECT_EQ(got, 'x');
  EXPECT_EQ(b.peer_uid().value_or(~0u), static_cast<unsigned>(::geteuid()));
}

TEST(SocketHandover, LinesArriveOneAtATimeWithoutDescriptors) {
  auto [a, b] = channel_pair();
  ASSERT_TRUE(a.send("listening"));
  ASSERT_TRUE(a.send("leading"));
  auto first = b.receive(5s);
  auto second = b.receive(5s);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->line, "listening");
  EXPECT_TRUE(first->fds.empty());
  EXPECT_EQ(second->line, "leading");
}

TEST(SocketHandover, SilenceAClosedPeerAndAnEndlessLineAreErrorsNamingThem) {
  {
    auto [a, b] = channel_pair();
    const auto quiet = b.receive(50ms);
    ASSERT_FALSE(quiet);
    EXPECT_THAT(quiet.error(), HasSubstr("no answer within 50 ms"));
  }
  {
    auto [a, b] = channel_pair();
    { HandoverChannel gone = std::move(a); }
    const auto closed = b.receive(5s);
    ASSERT_FALSE(closed);
    EXPECT_THAT(closed.error(), HasSubstr("closed the channel"));
  }
  {
    auto [a, b] = channel_pair();
    const std::string endless(2000, 'a');
    ASSERT_EQ(::write(a.fd(), endless.data(), endless.size()),
              static_cast<ssize_t>(endless.size()));
    const auto overlong = b.receive(5s);
    ASSERT_FALSE(overlong);
    EXPECT_THAT(overlong.error(), HasSubstr("over 512 bytes"));
  }
  auto [a, b] = channel_pair();
  EXPECT_FALSE(a.send("two\nlines"));
  EXPECT_FALSE(a.send(std::string(600, 'a')));
}

TEST(SocketHandover, TheListenerTakesAStalePathButNeverOneAnotherProcessAnswersAt) {
  pf::testing::TempDir dir("pf_socket_handover");
  const std::string path = dir.file("serve.sock");
  auto first = HandoverListener::listen(path);
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(handover_socket_answers(path));
  const auto second = HandoverListener::listen(path);
  ASSERT_FALSE(second);
  EXPECT_THAT(second.error(), HasSubstr("another serve answers takeovers"));
  // The two probes above connected and left: the listener sees them as closed channels.
  for (int probe = 0; probe < 2; ++probe) {
    auto left = first->accept(5s);
    ASSERT_TRUE(left && *left);
    const auto nothing = (*left)->receive(5s);
    ASSERT_FALSE(nothing);
    EXPECT_THAT(nothing.error(), HasSubstr("closed the channel"));
  }

  auto asking = HandoverChannel::connect(path);
  ASSERT_TRUE(asking) << asking.error();
  auto accepted = first->accept(5s);
  ASSERT_TRUE(accepted && *accepted);
  ASSERT_TRUE(asking->send("takeover 1 42"));
  auto hello = (*accepted)->receive(5s);
  ASSERT_TRUE(hello);
  EXPECT_EQ(hello->line, "takeover 1 42");

  first->close(false);  // gone without removing the file (a process that handed over)
  EXPECT_FALSE(handover_socket_answers(path));
  auto again = HandoverListener::listen(path);
  ASSERT_TRUE(again) << again.error();
  again->close(true);
  EXPECT_NE(::access(path.c_str(), F_OK), 0);

  std::ofstream(dir.file("plain")) << "not a socket";
  const auto plain = HandoverListener::listen(dir.file("plain"));
  ASSERT_FALSE(plain);
  EXPECT_THAT(plain.error(), HasSubstr("is not a socket"));
  const auto too_long = HandoverListener::listen("/tmp/" + std::string(200, 'a'));
  ASSERT_FALSE(too_long);
  EXPECT_THAT(too_long.error(), HasSubstr("must be 1 to 107 bytes"));
  const auto nobody = HandoverChannel::connect(dir.file("nobody.sock"));
  ASSERT_FALSE(nobody);
  EXPECT_THAT(nobody.error(), HasSubstr("no serve answers"));
}

}  // namespace
}  // namespace pf::net
