// Internal to src/sim: the discrete-event engine behind run_des (sim/des_engine.h), one class in
// three files — des_engine.cpp (the event loop, renting and setup, proofs, jobs, the policy's
// ticks and decisions), des_engine_failures.cpp (what the truth and the market do to a rental:
// throttle, crash, offline, market stops and resumes, bid changes) and des_engine_settle.cpp
// (closing a rental, and what each rental and job earned at the horizon).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <queue>
#include <set>
#include <string>
#include <vector>

#include "core/bench_run.h"
#include "core/bid_change.h"
#include "core/billing.h"
#include "core/job_worker.h"
#include "core/market_stop.h"
#include "core/memory_model.h"
#include "core/oom_memory.h"
#include "core/planner.h"
#include "core/rental_terms.h"
#include "core/text.h"
#include "scenario/bid_market.h"
#include "scenario/draws.h"
#include "scenario/truth_model.h"
#include "sim/des_dispatch.h"
#include "sim/des_engine.h"
#include "sim/des_lifecycle.h"

namespace pf::sim::des_engine_internal {

using S = core::InstanceState;
using core::fixed;

using scenario::Stream;

enum class EvKind {
  Tick,
  Decide,
  Boot,
  Params,
  Prover,
  Throttle,
  Crash,
  Offline,
  Arrival,
  MarketStop,    // /3: the market stops the rental (outbid, or its contract ended)
  MarketResume,  // /3: an outbid rental is on top again
};

struct Event {
  double t = 0;
  std::uint64_t seq = 0;
  EvKind kind = EvKind::Tick;
  std::size_t inst = 0;
  std::uint64_t gen = 0;
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.t != b.t) return a.t > b.t;
    return a.seq > b.seq;
  }
};

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

struct Inst {
  core::InstanceRecord rec;
  std::size_t offer_index = 0;
  const ScenarioOffer* so = nullptr;
  Stream rng;
  bool booted = false;
  bool failed = false;  // a failure of the host struck (never boots, crash, offline)
  bool offline = false;
  double params_start = 0;
  double params_speed_bps = 0;   // bytes/s
  std::uint64_t params_gen = 0;  // invalidates a scheduled end of download when it pauses
  scenario::BidHistory bids;     // /3: an interruptible rental's bid; empty: on-demand
  double rented_h = 0;  // when it was created (/3 market stops count from it; short rentals)
  std::uint64_t market_gen = 0;     // invalidates scheduled stops and resumes when the bid changes
  bool market_stopped = false;      // /3: the market holds it stopped (its container too)
  bool boot_pending = false;        // stopped at its boot hour: boots when it resumes
  bool prover_was_running = false;  // the agent restarts its prover when it resumes
  bool prover_running = false;
  // Proving time (truth_model.h): summed over prover runs; throttle and crash count it.
  double proving_s = 0;
  double proving_since = -1;    // start of the current run; -1 while the prover is down
  std::uint64_t clock_gen = 0;  // invalidates scheduled throttle/crash events on stop/start
  int proofs_since_start = 0;   // proofs begun since the last prover start (warm-up truth)
  // /2 jobs: the job of the proof in flight (kNone: none), or waiting for one with no job.
  std::size_t job = std::numeric_limits<std::size_t>::max();
  double job_since = 0;  // when its proof of `job` began (a hedge is judged overdue from it)
  bool idle = false;
  double idle_since = 0;
  int partitions = 0;
  bool oom_pending = false;
  double oom_at = 0;
  double delay_until = 0;
  double work_left = 0;
  double last_progress = 0;
  double last_completion = 0;
  double rate_now = 0;
  std::uint64_t gen = 0;
  int warmup_left = 0;
  std::optional<RentalLifecycle> life;  // the lifecycle's decisions (sim/des_lifecycle.h)
  int bench_max_others = 0;
  bool throttled = false;  // the throttle holds (physics); rec.gpu_throttled: it was reported
  bool decided = false;
  bool accepted = false;
  double truth_from = 0;
  double truth_proofs = 0;
  double prod_cost = 0;
  int window_max_others = 0;
  double bench_spend = 0;
  double revenue = 0;
  int proofs_paid = 0;
  bool accepted_unprofitable = false;
  bool rejected_profitable = false;
  bool rejected_by_target = false;
  std::string close_reason;
  std::optional<double> closed_at;
};

class Engine {
 public:
  Engine(const Scenario& scenario, DesPolicy& policy, const DesOptions& options)
      : sc_(scenario),
        policy_(policy),
        opt_(options),
        lifecycle_(policy.lifecycle()),
        hedging_(sim_hedging(policy.hedging(), options.tick_s)) {
    horizon_ = sc_.hours * 3600;
    rented_by_.assign(sc_.offers.size(), kNone);
    rent_count_.assign(sc_.offers.size(), 0);
    paid_per_hour_.assign(static_cast<std::size_t>(std::ceil(sc_.hours)) + 1, 0);
    report_.scenario = sc_.name;
    report_.policy = policy_.name();
    report_.seed = sc_.seed;
    report_.hours = sc_.hours;
  }

  DesReport run();

 private:
  double epoch(double t) const { return kDesEpoch + t; }

  // The offer as listed now: its price may have changed (/2 dph_changes).
  core::Offer listed_offer(const ScenarioOffer& so) const;
  void push(double t, EvKind kind, std::size_t inst = 0, std::uint64_t gen = 0);
  bool is_live(const Inst& in) const { return in.rec.state != S::Destroyed; }

  int others_alive(std::size_t i) const;
  std::vector<std::size_t> live_on_machine(std::int64_t machine) const;
  double current_rate(std::size_t i) const;

  // Work done up to t at the current rate; truth integral of production too.
  void advance(Inst& in, double t);
  void reschedule(std::size_t i);
  void rate_changed(std::size_t i);
  void machine_changed(std::int64_t machine);
  void bill(Inst& in);
  // A job's bytes through the instance's network (its input down, its proof up), billed as the
  // manager bills what the agent routes count (core::accrue_transfer_spend).
  // Returns what it charged.
  double bill_transfer(Inst& in, double bytes_down, double bytes_up);
  // Spend just billed counts for the benchmark until the verdict, for production once accepted.
  void attribute_spend(Inst& in, double usd);
  void transition(Inst& in, S to, const std::string& reason);
  void set_status(Inst& in, const std::string& status);
  void handle(const Event& ev);

  // --- renting and setup ----------------------------------------------------------------------
  void rent(std::size_t offer_index, const std::string& reason, double predicted_rate);
  void boot(std::size_t i);
  void params_done(std::size_t i);
  void start_prover(std::size_t i, int after_oom);

  // Bookkeeping of an accepted instance (the lifecycle moved it to proving).
  void accepted(std::size_t i);
  core::RunContext bench_context(const Inst& in) const;
  void record_run(Inst& in, const core::BenchRun& run, int others);

  // What a verdict led to: a benchmark run, an accepted instance or a close.
  void settle_verdict(std::size_t i, const std::optional<core::BenchmarkStep>& step,
                      const std::optional<core::BenchRun>& run, bool was_accepted);

  // --- proofs ---------------------------------------------------------------------------------
  void prover_event(std::size_t i);
  // The proof in flight ends: measured (the lifecycle counts it), paid when `delivered` and a
  // production proof, then the next one begins.
  void end_proof(std::size_t i, bool delivered);
  // The prover begins its next proof (fresh work drawn) `delay_s` from now.
  void next_proof(std::size_t i, double delay_s);

  // A production proof was delivered: /1 pays it within the hourly demand cap; /2 pays the job
  // it proved if delivered within the deadline of the job's arrival.
  void pay_production_proof(std::size_t i);

  // --- jobs (/2) ------------------------------------------------------------------------------
  // Jobs wait in the queue (sim/des_dispatch.h) until an instance asking for work is given them
  // by core::place_jobs, as the manager's job queue gives them. An accepted instance asks for one
  // at each production proof it begins and waits (idle, its prover up) while it gets none; idle
  // instances ask again when a job arrives or returns, and every tick (the agent's long-poll
  // re-asks). A job still queued at its deadline can no longer pay: it leaves unserved.

  static std::int64_t job_id(std::size_t job) { return static_cast<std::int64_t>(job) + 1; }

  void job_arrives();

  // Whether the instance's agent takes work now: its prover is up and past any warm-up (after an
  // OOM re-plan the agent warms up again before it asks). A stopped prover asks for nothing.
  bool takes_jobs(const Inst& in) const;

  // The workers place_jobs sees, as Manager::job_workers gives them to the job queue
  // (core::job_worker: proving, heard within three heartbeats — the simulated agents heartbeat
  // every tick — and its measured rate). The simulated prover keeps one proof in flight. A
  // policy that proves without a benchmark has no measured rate: its instances are placed by
  // the rate they prove at now (only clairvoyant does this, and it knows the truth).
  std::vector<core::WorkerView> job_workers() const;

  // The instance asks for a job; false when the plan gives it none.
  bool take_job(Inst& in);

  // A proof begins: in /2 a production proof needs a job, or the instance waits for one.
  void claim_job_or_idle(std::size_t i);
  void end_idle(Inst& in);
  void resume_with_job(std::size_t i);
  // An idle instance's waiting proof starts now, on the job it was just given.
  void start_waiting_proof(std::size_t i);

  // Hedged proving (core/job_hedge.h, the policy's hedging()): an idle prover asking for work
  // may be given a copy of a held job whose proof is at risk (JobDispatch::lease, as the
  // manager's queue leases it); the first proof delivered wins and the other copy stops
  // (stop_copy), its prover free for the next job. `holder`: the copy stopped is the one the
  // job was leased to (the hedge won).
  void stop_copy(std::size_t i, double copy_since, bool holder);

  // The prover stopped: the job it held goes back to the queue (the manager returns a closed or
  // silent instance's jobs).
  void release_job(Inst& in);

  // Idle instances ask, in instance order, while jobs are queued (or, `hedges_too`, each once:
  // the agents' long-polls re-ask every tick, and a hedge needs no queued job).
  void dispatch_waiting_jobs(bool hedges_too = false);
  void oom(std::size_t i);

  // The acceptance test's time rules between proofs.
  void evaluate(std::size_t i);

  // --- failures (des_engine_failures.cpp) ----------------------------------------------------
  void throttle(std::size_t i);
  void stop_prover(std::size_t i);

  // Throttle and crash come after so much proving time (truth_model.h): (re)scheduled whenever
  // the prover starts or stops.
  void schedule_proving_clock(std::size_t i);
  void crash(std::size_t i);

  // /3: the market stops the rental. Its container stops with it (the agent and its prover
  // end, their jobs go back to the queue: the reconcile that sees the stop returns them), and
  // it pays storage only. A contract's end is for good: the reconcile closes it, blaming no one.
  void market_stop(std::size_t i);

  // /3: when the market will stop the rental and let it run again from now on, for its bids as
  // they stand (scenario/bid_market.h); a change of bid schedules them again.
  void schedule_market_stops(std::size_t i);

  // /3: the manager's changes of bid (core::change_of_bid, which the manager's tick calls too):
  // raised while stopped, so the market may let it run at once; lowered once the raise has had
  // its time, so the market may stop it again.
  void change_bid(std::size_t i);

  // /3: on top again. The container starts again: the agent resumes its download, or restarts
  // its prover (a warm-up again); the state's clocks left the stop out (record_market_status).
  void market_resume(std::size_t i);
  void go_offline(std::size_t i);

  // --- the loops ------------------------------------------------------------------------------
  void tick();
  void decide();

  // --- closes and settlements (des_engine_settle.cpp) -------------------------------------
  // Whether keeping the instance paid, by the truth: sustained rate at the best plan with our
  // other instances on the machine, within the demand our other provers leave.
  bool keeping_paid(std::size_t i) const;
  void settle_accepted(Inst& in);
  void close(std::size_t i, CloseCause cause, const std::string& reason,
             std::optional<core::Strike> strike);
  void settle_jobs();
  void finish();

  // The policy's hedging with silence measured on the simulated agents' clock: they heartbeat
  // once a tick (serve's every heartbeat_s), so an agent is silent after three ticks without
  // one, as job_workers() counts it heard within three ticks.
  static core::HedgeConfig sim_hedging(core::HedgeConfig c, double tick_s) {
    c.silent_after_s = std::max(c.silent_after_s, 3 * tick_s);
    return c;
  }

  const Scenario& sc_;
  DesPolicy& policy_;
  DesOptions opt_;
  core::LifecycleConfig lifecycle_;
  core::HedgeConfig hedging_;
  double horizon_ = 0;
  double now_ = 0;
  std::uint64_t next_seq_ = 0;
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  std::vector<Inst> insts_;
  std::vector<std::size_t> fleet_offer_index_;
  std::map<std::int64_t, std::vector<std::size_t>> by_machine_;
  std::vector<std::size_t> rented_by_;
  std::vector<int> rent_count_;
  std::vector<double> paid_per_hour_;
  std::vector<double> jobs_;  // /2: arrival times, ascending; a job is its index
  std::size_t next_job_ = 0;
  JobDispatch dispatch_;  // /2: the queue; job id = index in jobs_ + 1
  struct HedgeRun {
    std::size_t hedger = 0;  // the instance running the second copy
    double since = 0;        // when it began
  };
  std::map<std::size_t, HedgeRun> hedges_;  // job → its hedge, while both copies run
  // Epoch seconds of the jobs arrived so far: the arrivals the policy is shown.
  std::vector<double> arrivals_seen_;
  std::vector<double> queue_waits_s_;
  std::vector<double> queued_deadlines_;  // /2: the deadlines the policy is shown (epoch s)
  std::set<std::int64_t> oomed_machines_;
  std::vector<core::Measurement> history_;
  std::vector<core::BadHost> bad_hosts_;
  DesReport report_;
};

}  // namespace pf::sim::des_engine_internal
