// The placement rule (core/job_schedule.h): earliest expected finish given measured rate and
// the work already on an instance, deadlines before speed, the avoid list last, leases never
// beyond slots, and a job waits for a busy instance only when that is clearly better.
#include "core/job_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <tuple>

#include "core/text.h"

namespace pf::core {
namespace {

constexpr double kNow = 1'750'000'000;

JobToPlace job(std::int64_t id, double deadline_in_s = 0, int priority = 0,
               double submitted_ago_s = 0) {
  JobToPlace j;
  j.job_id = id;
  j.priority = priority;
  j.submitted_at = kNow - submitted_ago_s;
  j.deadline_at = deadline_in_s > 0 ? kNow + deadline_in_s : 0;
  return j;
}

WorkerView worker(std::int64_t id, double seconds_per_proof, int slots = 1, int held = 0,
                  double busy_s = -1) {
  return {id, seconds_per_proof, slots, held, busy_s};
}

std::map<std::int64_t, std::int64_t> where(const std::vector<JobPlacement>& placements) {
  std::map<std::int64_t, std::int64_t> out;
  for (const auto& p : placements) out[p.job_id] = p.instance_id;
  return out;
}

TEST(JobSchedule, AJobGoesToTheFastestFreeInstance) {
  const auto placed = place_jobs(kNow, {job(1)}, {worker(10, 200), worker(11, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 11);
  EXPECT_DOUBLE_EQ(placed[0].expected_finish_at, kNow + 100);
  EXPECT_FALSE(placed[0].late);
  EXPECT_NE(placed[0].reason.find("100 s"), std::string::npos) << placed[0].reason;
}

TEST(JobSchedule, LeasesNeverExceedSlots) {
  // Three jobs, one instance with two slots of which one is held: one job is placed.
  const auto plan = plan_jobs(kNow, {job(1), job(2), job(3)}, {worker(10, 100, 2, 1)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, 1);
  ASSERT_EQ(plan.waits.size(), 2u);
  EXPECT_EQ(plan.waits[0].instance_id, 10);
  EXPECT_NE(plan.waits[0].reason().find("no free slot"), std::string::npos)
      << plan.waits[0].reason();
}

TEST(JobSchedule, SlotsFillInFinishOrderAcrossInstances) {
  // A with 2 slots at 100 s, B with 1 slot at 150 s: three jobs fill A, A, B.
  const auto placed =
      place_jobs(kNow, {job(1), job(2), job(3)}, {worker(1, 100, 2), worker(2, 150, 1)});
  const auto at = where(placed);
  ASSERT_EQ(at.size(), 3u);
  EXPECT_EQ(at.at(1), 1);
  EXPECT_EQ(at.at(2), 1);
  EXPECT_EQ(at.at(3), 2);
}

TEST(JobSchedule, WaitsForAMuchFasterBusyInstanceInsteadOfASlowFreeOne) {
  // Fast: 60 s/proof, its proof done in 30 s → finishes the job at 90 s. Slow and free: 600 s.
  const auto plan =
      plan_jobs(kNow, {job(1, 1800)}, {worker(1, 60, 1, 1, 30), worker(2, 600, 1, 0)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].instance_id, 1);
  EXPECT_DOUBLE_EQ(plan.waits[0].expected_finish_at, kNow + 90);
  EXPECT_NE(plan.waits[0].reason().find("waits for busy #1"), std::string::npos)
      << plan.waits[0].reason();
}

TEST(JobSchedule, ASmallExpectedGainDoesNotLeaveAFreeInstanceIdle) {
  // Busy finishes at 90 s, free at 100 s: within the 20% margin, the free one takes it.
  const auto placed =
      place_jobs(kNow, {job(1, 1800)}, {worker(1, 60, 1, 1, 30), worker(2, 100, 1, 0)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 2);
}

TEST(JobSchedule, WaitingForABusyInstanceCountsItsBacklogForTheJobsBehind) {
  // Each job that waits for the fast busy instance (60 s/proof, free at 30 s) adds a proof to
  // its backlog; the slow free one (600 s) takes the first job the fast one could not finish
  // 20% sooner than it, and the jobs after that wait for the fast one again.
  std::vector<JobToPlace> jobs;
  for (int i = 1; i <= 12; ++i) jobs.push_back(job(i, 3600));
  const auto plan = plan_jobs(kNow, jobs, {worker(1, 60, 1, 1, 30), worker(2, 600, 1, 0)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].instance_id, 2);
  // The fast instance finishes the k-th waiting job at 30 + 60·k s; k = 8 is at 510 s ≥ 480.
  EXPECT_EQ(plan.placements[0].job_id, 8);
  for (const auto& w : plan.waits) EXPECT_EQ(w.instance_id, 1) << w.job_id;
}

TEST(JobSchedule, AnInstanceThatWouldMissTheDeadlineIsNotChosenWhileAnotherCanMeetIt) {
  // The free one finishes at 290 s, after the 260 s deadline; the busy one at 250 s meets it.
  // Its gain (40 s) is within the margin, which would place the job on the free one — but the
  // deadline comes before the margin.
  const auto plan =
      plan_jobs(kNow, {job(1, 260)}, {worker(1, 100, 1, 1, 150), worker(2, 290, 1, 0)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].instance_id, 1);
  EXPECT_FALSE(plan.waits[0].late);
  // Without the deadline the 40 s gain does not keep the free instance idle.
  const auto placed = place_jobs(kNow, {job(1)}, {worker(1, 100, 1, 1, 150), worker(2, 290, 1, 0)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 2);
}

TEST(JobSchedule, AFreeInstanceThatMeetsTheDeadlineBeatsWaiting) {
  // Busy fast one would finish at 30 + 60 + (queue) — give it a long busy time: 500 s → 560 s,
  // past the 400 s deadline; the slow free one (350 s) meets it.
  const auto placed =
      place_jobs(kNow, {job(1, 400)}, {worker(1, 60, 1, 1, 500), worker(2, 350, 1, 0)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 2);
  EXPECT_FALSE(placed[0].late);
}

TEST(JobSchedule, WaitsForTheOnlyInstanceThatMeetsTheDeadline) {
  // The free one (500 s) would miss the 300 s deadline; the busy one finishes at 200 s.
  const auto plan =
      plan_jobs(kNow, {job(1, 300)}, {worker(1, 100, 1, 1, 100), worker(2, 500, 1, 0)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].instance_id, 1);
  EXPECT_FALSE(plan.waits[0].late);
  EXPECT_NE(plan.waits[0].reason().find("miss its deadline"), std::string::npos)
      << plan.waits[0].reason();
}

TEST(JobSchedule, AJobNobodyCanFinishInTimeGoesToTheEarliestFinisherMarkedLate) {
  const auto placed = place_jobs(kNow, {job(1, 60)}, {worker(1, 400), worker(2, 200)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 2);
  EXPECT_TRUE(placed[0].late);
  EXPECT_NE(placed[0].reason.find("after its deadline"), std::string::npos) << placed[0].reason;
}

// In an overload the slots go to jobs that can still be on time: one due too soon for any
// instance is held back behind them (still served, by the next free slot nobody on time wants).
TEST(JobSchedule, AJobThatCannotBeOnTimeComesAfterTheOnesThatCan) {
  // One instance, 100 s a proof: job 1 (due in 60 s) cannot make it, job 2 (due in 150 s) can.
  auto plan = plan_jobs(kNow, {job(1, 60), job(2, 150)}, {worker(1, 100)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, 2);
  EXPECT_FALSE(plan.placements[0].late);
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].job_id, 1);
  EXPECT_TRUE(plan.waits[0].late);
  // Strictly by deadline job 1 would take the slot, finish late, and make job 2 late too.
  // With a free slot left over, the late one still gets it.
  const auto placed = place_jobs(kNow, {job(1, 60), job(2, 150)}, {worker(1, 100, 2)});
  ASSERT_EQ(placed.size(), 2u);
  EXPECT_EQ(placed[0].job_id, 2);
  EXPECT_EQ(placed[1].job_id, 1);
  EXPECT_TRUE(placed[1].late);
  // Priority still comes first: a late job of a higher priority is not held behind lower ones.
  plan = plan_jobs(kNow, {job(1, 60, 1), job(2, 150)}, {worker(1, 100)});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].job_id, 1);
}

TEST(JobSchedule, TheAvoidListComesLast) {
  JobToPlace j = job(1, 1800);
  j.avoid_instances = {2};
  // #2 is faster but failed this job: #1 takes it.
  auto placed = place_jobs(kNow, {j}, {worker(1, 300), worker(2, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 1);
  // Even over meeting the deadline: an instance that failed it is the last resort.
  j.deadline_at = kNow + 200;
  placed = place_jobs(kNow, {j}, {worker(1, 300), worker(2, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 1);
  EXPECT_TRUE(placed[0].late);
  // Only the avoided one is there: it takes it rather than nobody.
  placed = place_jobs(kNow, {j}, {worker(2, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].instance_id, 2);
  EXPECT_NE(placed[0].reason.find("failed it"), std::string::npos) << placed[0].reason;
}

TEST(JobSchedule, AJobWaitsForABusyInstanceRatherThanAFreeOneThatFailedIt) {
  JobToPlace j = job(1, 1800);
  j.avoid_instances = {2};
  const auto plan = plan_jobs(kNow, {j}, {worker(1, 100, 1, 1, 50), worker(2, 100, 1, 0)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].instance_id, 1);
}

TEST(JobSchedule, PriorityThenDeadlineThenArrivalOrder) {
  // One free slot: the high-priority job gets it although it arrived last and its deadline is
  // later; among equal priorities the earlier deadline, then the earlier arrival.
  auto placed = place_jobs(kNow, {job(1, 600, 0, 100), job(2, 300, 0, 50), job(3, 1200, 5, 0)},
                           {worker(1, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, 3);
  placed = place_jobs(kNow, {job(1, 600, 0, 100), job(2, 300, 0, 50)}, {worker(1, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, 2);
  placed = place_jobs(kNow, {job(1, 0, 0, 10), job(2, 0, 0, 100)}, {worker(1, 100)});
  ASSERT_EQ(placed.size(), 1u);
  EXPECT_EQ(placed[0].job_id, 2);
}

TEST(JobSchedule, HeldWorkWithoutKnownProgressCountsHalfAProofOnAverage) {
  // One slot, held, 100 s/proof, progress unknown: frees at 50 s, finishes the job at 150 s —
  // the free 400 s one is 20% worse, so the job waits for it.
  const auto plan = plan_jobs(kNow, {job(1)}, {worker(1, 100, 1, 1), worker(2, 400, 1, 0)});
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_DOUBLE_EQ(plan.waits[0].expected_finish_at, kNow + 150);
}

TEST(JobSchedule, InstancesWithoutAMeasuredRateAreNotPlacedOn) {
  const auto plan = plan_jobs(kNow, {job(1)}, {worker(1, 0), worker(2, -5)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].instance_id, 0);
}

TEST(JobSchedule, NoWorkersNoPlacements) {
  EXPECT_TRUE(place_jobs(kNow, {job(1), job(2)}, {}).empty());
  EXPECT_TRUE(place_jobs(kNow, {}, {worker(1, 100)}).empty());
}

TEST(JobSchedule, AFullFleetPlacesNothingAndEveryJobWaitsOnItsBestInstance) {
  const auto plan =
      plan_jobs(kNow, {job(1), job(2)}, {worker(1, 100, 2, 2, 80), worker(2, 100, 1, 1, 10)});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 2u);
  // #2 frees at 10 s (job 1 done at 110 s); #1's first slot at 40 s (job 2 at 140 s).
  EXPECT_EQ(plan.waits[0].instance_id, 2);
  EXPECT_EQ(plan.waits[1].instance_id, 1);
}

// Issue 25 item 5: a job goes only to an instance with its kind's parameters, however much
// sooner another would finish; with none, it waits, saying which parameters are missing.
TEST(JobSchedule, AJobGoesOnlyToAnInstanceWithItsKindsParameters) {
  std::vector<WorkerView> workers = {worker(1, 50, 1, 0), worker(2, 500, 1, 0)};
  workers[0].kinds = kind_bit(JobKind::PorepC2);  // fast, but PoRep only
  JobToPlace snap = job(7);
  snap.kind = JobKind::SnapUpdate;
  auto plan = plan_jobs(kNow, {snap}, workers, {});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].instance_id, 2);
  workers[1].kinds = kind_bit(JobKind::PorepC2);
  plan = plan_jobs(kNow, {snap}, workers, {});
  EXPECT_TRUE(plan.placements.empty());
  ASSERT_EQ(plan.waits.size(), 1u);
  EXPECT_EQ(plan.waits[0].reason(), "no instance has the parameters for snap-update");
  // PoRep still goes to the fastest.
  plan = plan_jobs(kNow, {job(8)}, workers, {});
  ASSERT_EQ(plan.placements.size(), 1u);
  EXPECT_EQ(plan.placements[0].instance_id, 1);
}

// --- the rule as first written (a scan of every instance for every job) ---------------------
// plan_jobs finds the same candidates through a heap; this is the oracle it must match exactly.

bool ref_avoids(const JobToPlace& job, std::int64_t instance_id) {
  return std::find(job.avoid_instances.begin(), job.avoid_instances.end(), instance_id) !=
         job.avoid_instances.end();
}

// When each of a worker's slots frees (epoch s), as far as this plan knows.
std::vector<double> ref_slot_free_times(double now, const WorkerView& w) {
  const int slots = std::max(1, w.slots);
  const int held = std::max(0, w.held);
  std::vector<double> free_at(static_cast<std::size_t>(slots), now);
  // The held proofs in flight finish spread over what is left of them: until busy_s when the
  // shell knows it, else (progress unknown, on average half way) one proof time's share each.
  const int running = std::min(held, slots);
  for (int k = 1; k <= running; ++k) {
    const double done =
        w.busy_s >= 0 ? w.busy_s * k / running : w.seconds_per_proof * k / (running + 1);
    free_at[static_cast<std::size_t>(k - 1)] = now + done;
  }
  // Held beyond its slots (should not happen: an agent leases at most its slots) queue behind.
  for (int k = running; k < held; ++k) {
    auto first = std::min_element(free_at.begin(), free_at.end());
    *first += w.seconds_per_proof;
  }
  return free_at;
}

struct RefCandidate {
  int worker = -1;
  bool avoided = true;
  bool late = true;
  double finish = std::numeric_limits<double>::infinity();
  auto key() const { return std::tuple(avoided, late, finish); }
};

JobPlan reference_plan(double now, const std::vector<JobToPlace>& queued,
                       const std::vector<WorkerView>& workers, const PlacementConfig& config) {
  std::vector<const JobToPlace*> order;
  order.reserve(queued.size());
  for (const auto& job : queued) order.push_back(&job);
  std::stable_sort(order.begin(), order.end(), [](const JobToPlace* a, const JobToPlace* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    const double da = a->deadline_at > 0 ? a->deadline_at : std::numeric_limits<double>::max();
    const double db = b->deadline_at > 0 ? b->deadline_at : std::numeric_limits<double>::max();
    if (da != db) return da < db;
    return a->submitted_at < b->submitted_at;
  });

  std::vector<std::vector<double>> free_at;  // per worker, when each slot frees
  free_at.reserve(workers.size());
  for (const auto& w : workers) free_at.push_back(ref_slot_free_times(now, w));

  JobPlan plan;
  std::vector<const JobToPlace*> deferred;  // no instance can be on time: after the rest
  const auto place = [&](const JobToPlace* job, bool may_defer) {
    RefCandidate best_any, best_free;
    for (std::size_t i = 0; i < workers.size(); ++i) {
      const WorkerView& w = workers[i];
      if (!(w.seconds_per_proof > 0)) continue;     // no measured rate: not placed on
      if (!has_kind(w.kinds, job->kind)) continue;  // lacks the kind's parameters
      const double start = std::max(now, *std::min_element(free_at[i].begin(), free_at[i].end()));
      RefCandidate c;
      c.worker = static_cast<int>(i);
      c.finish = start + w.seconds_per_proof;
      c.late = job->deadline_at > 0 && c.finish > job->deadline_at;
      c.avoided = ref_avoids(*job, w.instance_id);
      if (best_any.worker < 0 || c.key() < best_any.key()) best_any = c;
      if (start <= now && (best_free.worker < 0 || c.key() < best_free.key())) best_free = c;
    }
    if (best_any.worker < 0) {
      const bool any_rated = std::any_of(workers.begin(), workers.end(), [](const WorkerView& w) {
        return w.seconds_per_proof > 0;
      });
      JobWait w;
      w.job_id = job->job_id;
      w.cause = any_rated ? JobWait::Cause::NoParameters : JobWait::Cause::NoRatedInstance;
      w.kind = job->kind;
      w.planned_at = now;
      plan.waits.push_back(w);
      return;
    }
    if (may_defer && best_any.late) {
      deferred.push_back(job);
      return;
    }
    // Wait for a busy instance only when it is clearly better than every free one.
    bool wait = best_free.worker < 0;
    if (!wait && best_any.worker != best_free.worker) {
      const bool better_class = std::tuple(best_any.avoided, best_any.late) <
                                std::tuple(best_free.avoided, best_free.late);
      const bool same_class = std::tuple(best_any.avoided, best_any.late) ==
                              std::tuple(best_free.avoided, best_free.late);
      const double free_takes = best_free.finish - now;
      wait = better_class ||
             (same_class && best_any.finish < now + free_takes * (1 - config.hold_margin));
    }
    const RefCandidate& chosen = wait ? best_any : best_free;
    const auto wi = static_cast<std::size_t>(chosen.worker);
    const std::int64_t instance = workers[wi].instance_id;
    *std::min_element(free_at[wi].begin(), free_at[wi].end()) = chosen.finish;

    std::string reason = "expected to finish in " + fixed(chosen.finish - now, 0) + " s on #" +
                         std::to_string(instance);
    if (chosen.late) reason += " (after its deadline: no instance can meet it)";
    if (chosen.avoided) reason += " (an instance that failed it: no other can take it)";
    if (wait) {
      JobWait w;
      w.job_id = job->job_id;
      w.instance_id = instance;
      w.expected_finish_at = chosen.finish;
      w.late = chosen.late;
      w.cause = best_free.worker < 0 ? JobWait::Cause::NoFreeSlot : JobWait::Cause::BusyIsBetter;
      w.kind = job->kind;
      w.planned_at = now;
      w.avoided = chosen.avoided;
      if (best_free.worker >= 0) {
        w.free_instance_id = workers[static_cast<std::size_t>(best_free.worker)].instance_id;
        w.free_finish_at = best_free.finish;
        w.free_late = best_free.late;
      }
      // The words as first written, against which JobWait::reason() is checked.
      const std::string said =
          best_free.worker < 0
              ? "waits: no free slot; " + reason
              : "waits for busy #" + std::to_string(instance) + ": " + reason +
                    ", the best free one #" + std::to_string(w.free_instance_id) + " would take " +
                    fixed(best_free.finish - now, 0) + " s" +
                    (best_free.late && !chosen.late ? " and miss its deadline" : "");
      EXPECT_EQ(w.reason(), said);
      plan.waits.push_back(w);
      return;
    }
    JobPlacement placement;
    placement.job_id = job->job_id;
    placement.instance_id = instance;
    placement.expected_finish_at = chosen.finish;
    placement.late = chosen.late;
    placement.reason = std::move(reason);
    plan.placements.push_back(std::move(placement));
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    if (k > 0 && order[k]->priority != order[k - 1]->priority) {
      for (const JobToPlace* late : deferred) place(late, false);
      deferred.clear();
    }
    place(order[k], true);
  }
  for (const JobToPlace* late : deferred) place(late, false);
  return plan;
}

bool same_plan(const JobPlan& a, const JobPlan& b, std::string& why) {
  if (a.placements.size() != b.placements.size() || a.waits.size() != b.waits.size()) {
    why = "sizes differ";
    return false;
  }
  for (std::size_t i = 0; i < a.placements.size(); ++i) {
    const auto &x = a.placements[i], &y = b.placements[i];
    if (x.job_id != y.job_id || x.instance_id != y.instance_id ||
        x.expected_finish_at != y.expected_finish_at || x.late != y.late || x.reason != y.reason) {
      why = "placement " + std::to_string(i) + ": " + x.reason + " | " + y.reason;
      return false;
    }
  }
  for (std::size_t i = 0; i < a.waits.size(); ++i) {
    const auto &x = a.waits[i], &y = b.waits[i];
    if (x.job_id != y.job_id || x.instance_id != y.instance_id ||
        x.expected_finish_at != y.expected_finish_at || x.late != y.late ||
        x.reason() != y.reason()) {
      why = "wait " + std::to_string(i) + ": " + x.reason() + " | " + y.reason();
      return false;
    }
  }
  return true;
}

TEST(JobSchedule, MatchesTheRuleAsFirstWrittenOnRandomQueuesAndFleets) {
  std::mt19937_64 rng(12);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int round = 0; round < 400; ++round) {
    std::vector<WorkerView> workers;
    const int n_workers = pick(0, 12);
    for (int i = 0; i < n_workers; ++i) {
      // Few distinct rates and busy times: ties in expected finish are common.
      const double spp = pick(0, 9) == 0 ? 0 : 50.0 * pick(1, 4);
      const int slots = pick(1, 3);
      const int held = pick(0, slots + (pick(0, 9) == 0 ? 1 : 0));
      const double busy = pick(0, 2) == 0 ? 25.0 * pick(0, 4) : -1;
      workers.push_back(worker(100 + i, spp, slots, held, busy));
      // Some instances lack the SnapDeals parameters (issue 25 item 5).
      if (pick(0, 2) == 0) workers.back().kinds = kind_bit(JobKind::PorepC2);
    }
    std::vector<JobToPlace> jobs;
    const int n_jobs = pick(0, 30);
    for (int j = 0; j < n_jobs; ++j) {
      auto one =
          job(j + 1, pick(0, 2) == 0 ? 0 : 60.0 * pick(1, 8), pick(0, 4) == 0 ? 1 : 0, pick(0, 3));
      for (int k = pick(0, 3); k > 0 && n_workers > 0; --k) {
        one.avoid_instances.push_back(100 + pick(0, n_workers - 1));
      }
      if (pick(0, 3) == 0) one.kind = JobKind::SnapUpdate;
      jobs.push_back(one);
    }
    PlacementConfig config;
    config.hold_margin = pick(0, 1) == 0 ? 0.2 : 0;
    std::string why;
    const JobPlan plan = plan_jobs(kNow, jobs, workers, config);
    EXPECT_TRUE(same_plan(plan, reference_plan(kNow, jobs, workers, config), why))
        << "round " << round << ": " << why;
    // place_jobs stops looking once no slot is free: the same placements, without the waits.
    JobPlan placed_only;
    placed_only.placements = place_jobs(kNow, jobs, workers, config);
    placed_only.waits = plan.waits;
    EXPECT_TRUE(same_plan(plan, placed_only, why)) << "round " << round << ": " << why;
  }
}

}  // namespace
}  // namespace pf::core
