// manager/leadership.h and manager/fenced_market.h: two replicas (two Leadership objects, each
// with its own connection to one SQLite file and its own clock) take, renew and lose the lease;
// the fenced market of a replica whose term ended sends nothing; the term hooks fire once each.
#include "manager/leadership.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "manager/fenced_market.h"
#include "manager/leader_forward.h"
#include "store/sql_store.h"
#include "support/eventually.h"
#include "support/fake_market.h"
#include "support/temp_dir.h"

namespace pf::manager {
namespace {

using pf::test::eventually;

struct Replica {
  Replica(const std::string& path, const std::string& id, double* now)
      : db(store::open_sql_store("sqlite:" + path)),
        leadership(
            *db,
            LeadershipConfig{
                .replica_id = id, .url = "http://" + id, .timing = {.ttl_s = 15, .guard_s = 2}},
            [now] { return *now; }),
        fenced(market, leadership) {
    leadership.set_hooks({.elected = [this](std::int64_t epoch) { elected.push_back(epoch); },
                          .stepped_down = [this](const std::string&) { ++stepped_down; }});
  }
  std::unique_ptr<store::SqlStore> db;
  Leadership leadership;
  pf::testing::FakeMarket market;
  FencedMarket fenced;
  std::vector<std::int64_t> elected;
  int stepped_down = 0;
};

market::CreateRequest create_of(std::int64_t offer) {
  market::CreateRequest request;
  request.offer_id = offer;
  request.label = "proverfleet:test";
  return request;
}

TEST(Leadership, OneLeadsTheOtherFollowsAndTheLeaderMayUseTheMarket) {
  pf::testing::TempDir dir;
  double now = 1000;
  Replica a(dir.file("fleet.db"), "a", &now);
  Replica b(dir.file("fleet.db"), "b", &now);
  a.market.add_offer(1, 11, 0.3);
  a.leadership.step();
  b.leadership.step();
  EXPECT_TRUE(a.leadership.leading());
  EXPECT_FALSE(b.leadership.leading());
  EXPECT_EQ(a.elected, std::vector<std::int64_t>{1});
  EXPECT_TRUE(b.elected.empty());
  EXPECT_EQ(b.leadership.view().lease->holder, "a");
  EXPECT_EQ(b.leadership.view().lease->holder_url, "http://a");

  EXPECT_TRUE(a.fenced.create_instance(create_of(1)));
  EXPECT_EQ(a.market.creates, 1);
  // The follower's market refuses every mutation and sends nothing; reads pass.
  const auto refused = b.fenced.create_instance(create_of(1));
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, market::ErrorKind::NotLeader);
  EXPECT_FALSE(b.fenced.destroy_instance(5000));
  EXPECT_FALSE(b.fenced.set_label(5000, "x"));
  EXPECT_EQ(b.market.creates, 0);
  EXPECT_EQ(b.market.destroys, 0);
  EXPECT_TRUE(b.fenced.list_instances());
  EXPECT_EQ(b.fenced.refused(), 3);
}

TEST(Leadership, APausedLeaderLosesItsTermAndItsMarketRefusesOnWaking) {
  pf::testing::TempDir dir;
  double now = 1000;
  Replica a(dir.file("fleet.db"), "a", &now);
  Replica b(dir.file("fleet.db"), "b", &now);
  a.market.add_offer(1, 11, 0.3);
  a.leadership.step();
  // Renewals every 5 s keep it.
  for (int i = 0; i < 4; ++i) {
    now += 5;
    a.leadership.step();
    b.leadership.step();
  }
  EXPECT_TRUE(a.leadership.leading());
  EXPECT_EQ(a.elected.size(), 1u);
  // a stands still (SIGSTOP) for 20 s: b takes over at its first try after the expiry.
  now += 16;
  b.leadership.step();
  EXPECT_TRUE(b.leadership.leading());
  EXPECT_EQ(b.elected, std::vector<std::int64_t>{2});
  // a wakes in the middle of a loop: leading() is already false by its own clock, and the
  // market mutation it was about to make is refused by the fence (the row names b, epoch 2).
  EXPECT_FALSE(a.leadership.leading());
  const auto create = a.fenced.create_instance(create_of(1));
  ASSERT_FALSE(create);
  EXPECT_EQ(create.error().kind, market::ErrorKind::NotLeader);
  EXPECT_NE(create.error().message.find("held by b"), std::string::npos) << create.error().message;
  EXPECT_FALSE(a.fenced.destroy_instance(5000));
  EXPECT_EQ(a.market.creates, 0);
  EXPECT_EQ(a.market.destroys, 0);
  // Its next step steps it down (once) and it follows.
  a.leadership.step();
  EXPECT_EQ(a.stepped_down, 1);
  a.leadership.step();
  EXPECT_EQ(a.stepped_down, 1);
  EXPECT_FALSE(a.leadership.leading());
  EXPECT_EQ(a.leadership.view().lease->holder, "b");
}

TEST(Leadership, ALeaseAboutToLapseFencesBeforeItLapses) {
  pf::testing::TempDir dir;
  double now = 1000;
  Replica a(dir.file("fleet.db"), "a", &now);
  a.leadership.step();
  now += 13.5;  // 1.5 s left, under the 2 s guard
  EXPECT_TRUE(a.leadership.leading());
  EXPECT_TRUE(a.leadership.fence_refusal());
  EXPECT_FALSE(a.fenced.destroy_instance(1));
  EXPECT_EQ(a.market.destroys, 0);
}

TEST(Leadership, ResigningHandsOverAtTheFollowersNextTry) {
  pf::testing::TempDir dir;
  double now = 1000;
  Replica a(dir.file("fleet.db"), "a", &now);
  Replica b(dir.file("fleet.db"), "b", &now);
  a.leadership.step();
  b.leadership.step();
  EXPECT_FALSE(b.leadership.leading());
  now += 1;
  a.leadership.resign();
  EXPECT_FALSE(a.leadership.leading());
  EXPECT_EQ(a.stepped_down, 1);
  now += 0.001;
  b.leadership.step();
  EXPECT_TRUE(b.leadership.leading());
  EXPECT_EQ(b.leadership.term(), 2);
}

TEST(Leadership, ViewAndMetricsNameTheLeader) {
  pf::testing::TempDir dir;
  double now = 1000;
  Replica a(dir.file("fleet.db"), "a", &now);
  Replica b(dir.file("fleet.db"), "b", &now);
  a.leadership.step();
  now += 7;
  b.leadership.step();
  const auto view = b.leadership.view();
  const auto shown = leader_json(view, true);
  EXPECT_EQ(shown["role"], "follower");
  EXPECT_EQ(shown["leader"]["replica_id"], "a");
  EXPECT_EQ(shown["leader"]["epoch"], 1);
  EXPECT_DOUBLE_EQ(shown["leader"]["lease_age_s"].get<double>(), 7);
  const std::string metrics = leader_prometheus(view);
  EXPECT_NE(metrics.find("proverfleet_leader 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("proverfleet_leader_epoch 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("proverfleet_leader_lease_age_seconds 7.000\n"), std::string::npos)
      << metrics;
  EXPECT_NE(leader_prometheus(a.leadership.view()).find("proverfleet_leader 1\n"),
            std::string::npos);
}

TEST(Leadership, ALeaseOfAProcessGoneFromThisMachineIsTakenWithoutWaiting) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(0);
  const std::string mine = process_identity();
  ASSERT_FALSE(mine.empty());
  const std::string prefix = mine.substr(0, mine.rfind('/') + 1);
  core::LeaseRow row;
  row.holder_process = prefix + std::to_string(child);
  // Exited but not yet reaped (a zombie keeps its pid): gone.
  eventually([&] { return holder_process_gone(row); });
  EXPECT_TRUE(holder_process_gone(row));
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(holder_process_gone(row));
  row.holder_process = mine;
  EXPECT_FALSE(holder_process_gone(row));  // ourselves
  row.holder_process = "another-boot/pid:[1]/" + std::to_string(child);
  EXPECT_FALSE(holder_process_gone(row));  // another machine: cannot tell
  row.holder_process = "";
  EXPECT_FALSE(holder_process_gone(row));

  // A serve SIGKILLed and restarted on the same host leads again at once, with a new epoch.
  auto opened = store::open_sql_store(":memory:");
  store::Store& store = *opened;
  core::LeaseRow dead;
  dead.name = kManagerLeaseName;
  dead.holder = "old";
  dead.holder_process = prefix + std::to_string(child);
  dead.epoch = 1;
  dead.expires_at = 2000;
  ASSERT_TRUE(store.write_leader_lease(dead, core::LeaseRow{}));
  double now = 1000;
  Leadership restarted(store,
                       LeadershipConfig{.replica_id = "new",
                                        .url = "http://new",
                                        .timing = {},
                                        .lease_name = kManagerLeaseName,
                                        .process = process_identity()},
                       [&now] { return now; });
  restarted.step();
  EXPECT_TRUE(restarted.leading());
  EXPECT_EQ(restarted.term(), 2);
}

// A takeover (serve --takeover): the retiring replica resigns and takes no term again, however
// long the lease lies free, until it rejoins (its successor failed).
TEST(Leadership, ARetiredReplicaTakesNoTermUntilItRejoins) {
  pf::testing::TempDir dir("pf_leadership_retire");
  double now = 1000;
  Replica a(dir.file("fleet.db"), "a", &now);
  Replica b(dir.file("fleet.db"), "b", &now);
  a.leadership.step();
  ASSERT_TRUE(a.leadership.leading());
  a.leadership.retire();
  EXPECT_FALSE(a.leadership.leading());
  EXPECT_EQ(a.stepped_down, 1);
  now += 1;
  a.leadership.step();
  EXPECT_FALSE(a.leadership.leading());               // the lease is free, and not for it
  EXPECT_EQ(a.leadership.view().lease->holder, "a");  // it still reads the row
  b.leadership.step();
  ASSERT_TRUE(b.leadership.leading());
  EXPECT_EQ(b.leadership.term(), 2);
  a.leadership.step();
  EXPECT_EQ(a.leadership.view().lease->holder, "b");
  now += 60;  // b's term lapses
  a.leadership.step();
  EXPECT_FALSE(a.leadership.leading());
  a.leadership.rejoin();
  a.leadership.step();
  EXPECT_TRUE(a.leadership.leading());
}

// A serve restarted on sockets systemd held, or one handing its socket to a successor, shares its
// URL with the lease's holder: forwarding there while it still accepts would reach itself, and
// the forwarded request would wait for a thread its forwarder holds. It answers 503 at once;
// once it stopped accepting, that URL is the successor's and it forwards there.
TEST(Leadership, AFollowerDoesNotForwardToItsOwnUrlWhileItAcceptsThere) {
  auto opened = store::open_sql_store(":memory:");
  core::LeaseRow other;
  other.name = kManagerLeaseName;
  other.holder = "successor";
  other.holder_url = "http://127.0.0.1:1";  // nothing listens: a forward fails to connect
  other.epoch = 2;
  other.expires_at = 2000;
  ASSERT_TRUE(opened->write_leader_lease(other, core::LeaseRow{}));
  double now = 1000;
  Leadership retiring(*opened,
                      LeadershipConfig{.replica_id = "predecessor",
                                       .url = "http://127.0.0.1:1",
                                       .timing = {},
                                       .lease_name = kManagerLeaseName,
                                       .process = process_identity()},
                      [&now] { return now; });
  LeaderForward forward(retiring, 5);
  net::HttpRequest heartbeat;
  heartbeat.method = "POST";
  heartbeat.target = heartbeat.path = "/api/v1/agent/heartbeat";
  const auto refused = forward(heartbeat, "/api/v1/agent/heartbeat");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("is this replica's own"), std::string::npos) << refused->body;
  forward.stopped_accepting();
  const auto tried = forward(heartbeat, "/api/v1/agent/heartbeat");
  ASSERT_TRUE(tried);
  EXPECT_EQ(tried->status, 503);  // it tried the successor, which does not answer here
  EXPECT_NE(tried->body.find("did not answer"), std::string::npos) << tried->body;
}

}  // namespace
}  // namespace pf::manager
