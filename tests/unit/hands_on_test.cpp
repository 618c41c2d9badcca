// manager/hands_on.h: the operator's tune commands wait for one heartbeat (a newer setting
// replacing a queued one of the same command), live reports and SSH endpoints are kept per
// instance, and a destroyed instance leaves nothing behind.
#include "manager/hands_on.h"

#include <gtest/gtest.h>

#include <thread>

namespace pf::manager {
namespace {

using Commands = std::vector<std::string>;

TEST(HandsOn, ANewerSettingReplacesTheQueuedOneAndAHeartbeatTakesThemOnce) {
  HandsOn hands_on;
  hands_on.queue_commands(7, {"replan:4", "set_concurrency:2"});
  hands_on.queue_commands(7, {"set_concurrency:3"});
  EXPECT_EQ(hands_on.pending_commands(7), (Commands{"replan:4", "set_concurrency:3"}));
  EXPECT_TRUE(hands_on.pending_commands(8).empty());
  EXPECT_EQ(hands_on.take_commands(7), (Commands{"replan:4", "set_concurrency:3"}));
  EXPECT_TRUE(hands_on.take_commands(7).empty());
  EXPECT_TRUE(hands_on.pending_commands(7).empty());
}

TEST(HandsOn, WhatAnInstanceReportedIsKeptUntilItIsForgotten) {
  HandsOn hands_on;
  EXPECT_FALSE(hands_on.live_status(3));
  hands_on.heard(3, live_status_from_heartbeat(
                        {{"prover", {{"state", "proving"}}}, {"gpus", {{{"util", 97}}}}}, 100));
  hands_on.listed(3, core::SshEndpoints{"ssh5.vast.ai", 22003, "1.2.3.4", 40022});
  hands_on.queue_commands(3, {"replan:2"});
  ASSERT_TRUE(hands_on.live_status(3));
  EXPECT_EQ(hands_on.live_status(3)->at, 100);
  EXPECT_EQ(hands_on.live_status(3)->prover["state"], "proving");
  EXPECT_EQ(hands_on.live_status(3)->gpus[0]["util"], 97);
  ASSERT_TRUE(hands_on.ssh_endpoints(3));
  EXPECT_FALSE(hands_on.ssh_endpoints(4));
  hands_on.forget(3);
  EXPECT_FALSE(hands_on.live_status(3));
  EXPECT_FALSE(hands_on.ssh_endpoints(3));
  EXPECT_TRUE(hands_on.pending_commands(3).empty());
}

TEST(HandsOn, ReadersAndWritersOnManyThreadsSeeWholeEntries) {
  HandsOn hands_on;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&hands_on, t] {
      for (int i = 0; i < 500; ++i) {
        hands_on.heard(t, live_status_from_heartbeat({{"prover", {{"n", i}}}}, i));
        const auto seen = hands_on.live_status(t);
        if (!seen || seen->prover["n"] != static_cast<int>(seen->at)) std::abort();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(hands_on.live_status(t)->at, 499);
}

}  // namespace
}  // namespace pf::manager
