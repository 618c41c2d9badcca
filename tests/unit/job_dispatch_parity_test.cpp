// The simulator places /2 jobs as `serve` does (issue 12): one scripted sequence of arrivals,
// agents asking for work, proofs finishing, instances lost and clients leaving at their deadline,
// over one fixed fleet, is driven through the manager's job queue (jobs::JobQueue over a real
// SQLite store and input directory) and through the simulator's queue (sim::JobDispatch, what
// sim/des_engine.cpp dispatches with); every ask must get the same jobs from both, hedges
// (core/job_hedge.h: a copy of a job whose proof is overdue or whose holder is silent, given to
// an agent the plan gives nothing) included.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "jobs/job_queue.h"
#include "sim/des_dispatch.h"
#include "store/sql_store.h"
#include "support/temp_dir.h"

namespace pf {
namespace {

using namespace std::chrono_literals;

// A fleet of unequal workers, as Manager::job_workers would report it: one fast, two mid, one
// slow enough that a job should rather wait for the fast one, and one with two proof slots.
std::vector<core::WorkerView> fleet() {
  return {core::WorkerView{1, 100, 1, 0, -1}, core::WorkerView{2, 130, 1, 0, -1},
          core::WorkerView{3, 150, 1, 0, -1}, core::WorkerView{4, 600, 1, 0, -1},
          core::WorkerView{5, 240, 2, 0, -1}};
}

// Both queues side by side; job ordinals (1, 2, ... in submission order) name the same job on
// both sides (the manager's ids come from its store).
class Parity {
 public:
  Parity() {
    jobs::JobQueueConfig config;
    config.data_dir = dir_.file("data");
    config.lease_s = 1e9;       // the script ends leases itself (instance lost)
    config.hedging = hedging_;  // serve's default: on
    jobs::JobQueueHooks hooks;
    hooks.workers = [] { return fleet(); };
    store_ = store::open_sql_store(dir_.file("fleet.db"));
    queue_ = std::make_unique<jobs::JobQueue>(*store_, config, hooks, [this] { return now_; });
  }

  void advance(double s) { now_ += s; }
  double now() const { return now_; }

  void arrive(double deadline_s) {
    jobs::SubmitRequest r;
    const int ordinal = static_cast<int>(manager_id_.size()) + 1;
    r.request_id = "req-" + std::to_string(ordinal);
    r.input = "input " + std::to_string(ordinal);
    r.deadline_s = deadline_s;
    auto s = queue_->submit(r);
    ASSERT_TRUE(s) << s.error().message;
    manager_id_.push_back(s->job.id);
    ordinal_of_[s->job.id] = ordinal;
    sim_.arrive(ordinal, now_, now_ + deadline_s);
  }

  // Clients whose deadline passed leave: the simulator drops their jobs, the manager's clients
  // cancel them.
  void clients_leave() {
    for (std::int64_t ordinal : sim_.expire(now_)) {
      ASSERT_TRUE(queue_->cancel(manager_id_[static_cast<std::size_t>(ordinal - 1)]));
    }
  }

  // The agent of `instance` asks for its free slots' worth of jobs; returns what each side gave
  // it (as ordinals).
  std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> ask(std::int64_t instance,
                                                                      int free_slots) {
    std::vector<std::int64_t> manager;
    auto leased = queue_->lease(instance, free_slots, 0ms);
    EXPECT_TRUE(leased) << leased.error().message;
    if (leased) {
      for (const auto& l : *leased) {
        manager.push_back(ordinal_of_.at(l.job.id));
        held_[instance].push_back({l.job.id, l.job.attempts});
      }
    }
    auto sim = sim_.lease(instance, free_slots, now_, fleet(), hedging_);
    for (const auto ordinal : sim) {
      if (sim_.hedger(ordinal) == instance) ++hedges_;
    }
    return {manager, sim};
  }

  // The oldest job the instance holds is proved and delivered.
  void finish_one(std::int64_t instance) {
    auto& held = held_[instance];
    if (held.empty()) return;
    const auto [job_id, attempt] = held.front();
    held.erase(held.begin());
    jobs::ProofReport r;
    r.job_id = job_id;
    r.attempt = attempt;
    r.ok = true;
    r.proof = "proof of " + std::to_string(job_id);
    auto ack = queue_->report(instance, r);
    ASSERT_TRUE(ack) << ack.error().message;
    ASSERT_TRUE(ack->applied) << ack->reason;
    const auto other = sim_.done(instance, ordinal_of_.at(job_id));
    // A hedged job's other copy: its agent is told to drop it at its next heartbeat.
    if (other) {
      auto& theirs = held_[*other];
      theirs.erase(std::remove_if(theirs.begin(), theirs.end(),
                                  [&](const auto& h) { return h.first == job_id; }),
                   theirs.end());
    }
  }

  // The instance is lost: its jobs return to the queue on both sides.
  void lose(std::int64_t instance) {
    queue_->return_jobs_of(instance, "lost in the script");
    held_[instance].clear();
    sim_.release(instance);
  }

  int held(std::int64_t instance) { return static_cast<int>(held_[instance].size()); }
  int hedges() const { return hedges_; }
  int sim_queued() const { return sim_.queued(); }

 private:
  testing::TempDir dir_;
  const core::HedgeConfig hedging_;
  int hedges_ = 0;  // copies given (on both sides: every ask matched)
  double now_ = 1'750'000'000;
  std::unique_ptr<store::SqlStore> store_;
  std::unique_ptr<jobs::JobQueue> queue_;
  sim::JobDispatch sim_;
  std::vector<std::int64_t> manager_id_;             // ordinal - 1 → manager's job id
  std::map<std::int64_t, std::int64_t> ordinal_of_;  // manager's job id → ordinal
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, int>>> held_;  // (id, attempt)
};

TEST(JobDispatchParity, TheSimulatorAssignsEveryJobAsTheManagersQueueDoes) {
  Parity p;
  // mt19937's sequence is fixed by the standard (its distributions are not): the same script
  // everywhere.
  std::mt19937 engine(20261202);
  auto unit = [&engine] { return static_cast<double>(engine()) / 4294967296.0; };
  const std::vector<double> deadlines = {300, 900, 2700};
  const auto workers = fleet();
  int asks = 0, given = 0, kept_waiting = 0, cancelled_before = 0;
  for (int step = 0; step < 1000; ++step) {
    p.advance(std::floor(unit() * 60));
    const int queued_before = p.sim_queued();
    p.clients_leave();
    cancelled_before += queued_before - p.sim_queued();
    const double what = unit();
    const auto& w = workers[static_cast<std::size_t>(unit() * workers.size())];
    if (what < 0.3) {
      p.arrive(deadlines[static_cast<std::size_t>(unit() * deadlines.size())]);
    } else if (what < 0.65) {
      const int free_slots = w.slots - p.held(w.instance_id);
      if (free_slots < 1) continue;
      const bool queue_had_work = p.sim_queued() > 0;
      const auto [manager, sim] = p.ask(w.instance_id, free_slots);
      ASSERT_EQ(manager, sim) << "step " << step << ": instance " << w.instance_id << " asked";
      ++asks;
      given += static_cast<int>(sim.size());
      if (queue_had_work && sim.empty()) ++kept_waiting;
    } else if (what < 0.97) {
      p.finish_one(w.instance_id);
    } else {
      p.lose(w.instance_id);
    }
    if (::testing::Test::HasFatalFailure()) return;
  }
  // The script exercises what the placement decides: jobs given, jobs kept for a faster busy
  // instance while a slower one asked, clients leaving.
  std::cout << asks << " asks, " << given << " jobs given, " << kept_waiting
            << " asks left waiting with jobs queued, " << cancelled_before
            << " jobs left at their deadline, " << p.hedges() << " hedges\n";
  EXPECT_GT(asks, 100);
  EXPECT_GT(given, 80);
  EXPECT_GT(kept_waiting, 5);
  EXPECT_GT(cancelled_before, 0);
  EXPECT_GT(p.hedges(), 0);
}

}  // namespace
}  // namespace pf
