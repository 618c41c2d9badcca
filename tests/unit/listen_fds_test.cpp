// Sockets handed over by a supervisor (net/listen_fds.h): the environment of sd_listen_fds(3),
// read strictly, and only by the process it names.
#include "net/listen_fds.h"

#include <gtest/gtest.h>

namespace pf::net {
namespace {

constexpr long kPid = 4242;

TEST(ListenFds, NamedSocketsFromFdThreeOn) {
  auto fds = parse_listen_fds("4242", "2", "grpc:http", kPid);
  ASSERT_TRUE(fds) << fds.error();
  ASSERT_TRUE(*fds);
  EXPECT_EQ((*fds)->at("grpc"), 3);
  EXPECT_EQ((*fds)->at("http"), 4);
}

TEST(ListenFds, UnnamedSocketsAreHttpThenGrpc) {
  auto one = parse_listen_fds("4242", "1", std::nullopt, kPid);
  ASSERT_TRUE(one && *one);
  EXPECT_EQ((*one)->size(), 1u);
  EXPECT_EQ((*one)->at("http"), 3);
  auto two = parse_listen_fds("4242", "2", std::nullopt, kPid);
  ASSERT_TRUE(two && *two);
  EXPECT_EQ((*two)->at("grpc"), 4);
}

TEST(ListenFds, NothingHandedOverOrHandedToAnotherProcess) {
  EXPECT_FALSE(*parse_listen_fds(std::nullopt, std::nullopt, std::nullopt, kPid));
  EXPECT_FALSE(*parse_listen_fds("4242", std::nullopt, std::nullopt, kPid));
  // A child that inherited its parent's environment must not take the parent's sockets.
  EXPECT_FALSE(*parse_listen_fds("4243", "2", "http:grpc", kPid));
}

TEST(ListenFds, MalformedValuesAreRefusedNamingTheVariable) {
  const auto refused = [](const std::optional<std::string>& pid, const std::string& count,
                          const std::optional<std::string>& names) {
    auto r = parse_listen_fds(pid, count, names, kPid);
    return r ? std::string() : r.error();
  };
  EXPECT_NE(refused("abc", "1", std::nullopt).find("LISTEN_PID"), std::string::npos);
  EXPECT_NE(refused("-1", "1", std::nullopt).find("LISTEN_PID"), std::string::npos);
  EXPECT_NE(refused("4242", "0", std::nullopt).find("LISTEN_FDS"), std::string::npos);
  EXPECT_NE(refused("4242", "99", std::nullopt).find("LISTEN_FDS"), std::string::npos);
  EXPECT_NE(refused("4242", "2x", std::nullopt).find("LISTEN_FDS"), std::string::npos);
  EXPECT_NE(refused("4242", "3", std::nullopt).find("LISTEN_FDNAMES"), std::string::npos);
  EXPECT_NE(refused("4242", "2", "http").find("LISTEN_FDNAMES"), std::string::npos);
  EXPECT_NE(refused("4242", "2", "http:http").find("twice"), std::string::npos);
  EXPECT_NE(refused("4242", "1", "metrics").find("\"metrics\""), std::string::npos);
}

}  // namespace
}  // namespace pf::net
