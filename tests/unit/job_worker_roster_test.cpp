// The Manager's job workers kept between reads of the store (manager/job_worker_roster.h): the
// rows are read once per change, heartbeats keep a worker heard without a read, silence is
// judged at each call, and an old read is made again.
#include "manager/job_worker_roster.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

namespace pf::manager {
namespace {

using S = core::InstanceState;

core::InstanceRecord proving(std::int64_t id, double rate, double heard_at) {
  core::InstanceRecord rec;
  rec.id = id;
  rec.state = S::Proving;
  core::Verdict v;
  v.decision = core::Verdict::Decision::Accept;
  v.rate = rate;
  rec.verdict = v;
  rec.last_heartbeat_at = heard_at;
  return rec;
}

class JobWorkerRosterTest : public ::testing::Test {
 protected:
  std::vector<std::int64_t> ids(double now) {
    std::vector<std::int64_t> out;
    for (const auto& w : roster_.workers(now, kHeardWithinS)) out.push_back(w.instance_id);
    return out;
  }
  void set_rows(std::vector<core::InstanceRecord> rows) {
    std::lock_guard lock(mu_);
    rows_ = std::move(rows);
  }

  static constexpr double kHeardWithinS = 30;
  std::mutex mu_;
  std::vector<core::InstanceRecord> rows_;
  JobWorkerRoster roster_{[this] {
                            std::lock_guard lock(mu_);
                            return rows_;
                          },
                          [](const core::InstanceRecord&) { return 2; }, /*max_age_s=*/60};
};

using Ids = std::vector<std::int64_t>;

TEST_F(JobWorkerRosterTest, ReadsTheRowsOncePerChange) {
  auto booting = proving(3, 90, 1000);
  booting.state = S::Booting;
  set_rows({proving(1, 90, 1000), proving(2, 45, 1000), booting});
  EXPECT_EQ(ids(1000), (Ids{1, 2}));
  const auto w = roster_.workers(1001, kHeardWithinS);
  EXPECT_EQ(w[1].slots, 2);
  EXPECT_DOUBLE_EQ(w[1].seconds_per_proof, 2 * 3600.0 / 45);
  EXPECT_EQ(ids(1002), (Ids{1, 2}));
  EXPECT_EQ(roster_.reads(), 1u);

  set_rows({proving(1, 90, 1000), proving(3, 90, 1000)});  // #2 closed, #3 accepted
  EXPECT_EQ(ids(1003), (Ids{1, 2}));                       // not told yet
  roster_.changed();
  EXPECT_EQ(ids(1003), (Ids{1, 3}));
  EXPECT_EQ(roster_.reads(), 2u);
}

TEST_F(JobWorkerRosterTest, HeartbeatsKeepAWorkerHeardWithoutARead) {
  set_rows({proving(1, 90, 1000), proving(2, 90, 1000)});
  EXPECT_EQ(ids(1000), (Ids{1, 2}));
  roster_.heard(2, 1008);
  EXPECT_EQ(ids(1030), (Ids{1, 2}));  // within three heartbeats of both
  EXPECT_EQ(ids(1031), (Ids{2}));     // #1 silent
  EXPECT_EQ(roster_.reads(), 1u);
  roster_.heard(1, 1032);  // heard again: a worker again
  EXPECT_EQ(ids(1032), (Ids{1, 2}));
  roster_.heard(9, 1032);  // not a worker: nothing to follow
  EXPECT_EQ(ids(1032), (Ids{1, 2}));
}

TEST_F(JobWorkerRosterTest, AnOldReadIsMadeAgain) {
  set_rows({proving(1, 90, 1000)});
  EXPECT_EQ(ids(1000), (Ids{1}));
  roster_.heard(1, 1050);
  set_rows({proving(1, 90, 1000), proving(2, 90, 1055)});  // written without a word
  EXPECT_EQ(ids(1059), (Ids{1}));
  EXPECT_EQ(ids(1060), (Ids{1, 2}));  // max_age_s later
  EXPECT_EQ(roster_.reads(), 2u);
  EXPECT_EQ(ids(1080), (Ids{1, 2}));  // what was heard survives a read of older rows
}

TEST_F(JobWorkerRosterTest, ConcurrentCallersAgreeAndReadRarely) {
  set_rows({proving(1, 90, 1000), proving(2, 90, 1000)});
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (ids(1000) != Ids{1, 2}) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(roster_.reads(), 4u);  // at most one first read per caller, then none
}

}  // namespace
}  // namespace pf::manager
