#include "sim/des_engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <queue>
#include <set>

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
#include "sim/des_lifecycle.h"

namespace pf::sim {
namespace {

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
      : sc_(scenario), policy_(policy), opt_(options), lifecycle_(policy.lifecycle()) {
    horizon_ = sc_.hours * 3600;
    rented_by_.assign(sc_.offers.size(), kNone);
    rent_count_.assign(sc_.offers.size(), 0);
    paid_per_hour_.assign(static_cast<std::size_t>(std::ceil(sc_.hours)) + 1, 0);
    report_.scenario = sc_.name;
    report_.policy = policy_.name();
    report_.seed = sc_.seed;
    report_.hours = sc_.hours;
  }

  DesReport run() {
    if (sc_.demand) {
      Stream arrivals(scenario::arrivals_seed(sc_.seed));
      jobs_ = scenario::draw_arrivals(*sc_.demand, horizon_, arrivals);
      if (!jobs_.empty()) push(jobs_.front(), EvKind::Arrival);
    }
    push(0, EvKind::Tick);
    push(0, EvKind::Decide);
    while (!queue_.empty()) {
      const Event ev = queue_.top();
      if (ev.t >= horizon_) break;
      queue_.pop();
      now_ = ev.t;
      handle(ev);
    }
    finish();
    return report_;
  }

 private:
  double epoch(double t) const { return kDesEpoch + t; }

  // The offer as listed now: its price may have changed (/2 dph_changes).
  core::Offer listed_offer(const ScenarioOffer& so) const {
    core::Offer offer = so.offer;
    offer.dph_total = scenario::listed_dph(so, now_ / 3600);
    // /3: what search shows of the market (vast's min_bid and end_date).
    if (so.bid_market) offer.min_bid = so.bid_market->min_bid;
    if (so.contract_end_h) offer.end_date = epoch(*so.contract_end_h * 3600);
    return offer;
  }

  void push(double t, EvKind kind, std::size_t inst = 0, std::uint64_t gen = 0) {
    queue_.push(Event{t, next_seq_++, kind, inst, gen});
  }

  bool is_live(const Inst& in) const { return in.rec.state != S::Destroyed; }

  int others_alive(std::size_t i) const {
    int n = 0;
    const auto machine = insts_[i].rec.offer.machine_id;
    for (std::size_t j : live_on_machine(machine))
      if (j != i) ++n;
    return n;
  }

  std::vector<std::size_t> live_on_machine(std::int64_t machine) const {
    std::vector<std::size_t> out;
    auto it = by_machine_.find(machine);
    if (it == by_machine_.end()) return out;
    for (std::size_t j : it->second)
      if (is_live(insts_[j])) out.push_back(j);
    return out;
  }

  double current_rate(std::size_t i) const {
    const Inst& in = insts_[i];
    if (!in.prover_running || in.oom_pending) return 0;
    return truth_rate(in.so->truth, in.partitions, others_alive(i), in.throttled);
  }

  // Work done up to t at the current rate; truth integral of production too.
  void advance(Inst& in, double t) {
    const double from = std::max(in.last_progress, in.delay_until);
    if (in.prover_running && !in.idle && t > from && in.rate_now > 0) {
      in.work_left = std::max(0.0, in.work_left - (t - from) * in.rate_now / 3600);
    }
    in.last_progress = std::max(in.last_progress, t);
    if (in.accepted && t > in.truth_from) {
      if (!in.idle) in.truth_proofs += in.rate_now * (t - in.truth_from) / 3600;
      in.truth_from = t;
    }
  }

  void reschedule(std::size_t i) {
    Inst& in = insts_[i];
    ++in.gen;
    if (!in.prover_running || in.idle) return;
    if (in.oom_pending) {
      push(std::max(in.oom_at, now_), EvKind::Prover, i, in.gen);
      return;
    }
    if (in.rate_now <= 0) return;
    const double start = std::max(now_, in.delay_until);
    push(start + in.work_left * 3600 / in.rate_now, EvKind::Prover, i, in.gen);
  }

  void rate_changed(std::size_t i) {
    Inst& in = insts_[i];
    advance(in, now_);
    in.rate_now = current_rate(i);
    reschedule(i);
  }

  void machine_changed(std::int64_t machine) {
    for (std::size_t j : live_on_machine(machine)) {
      Inst& in = insts_[j];
      const int others = others_alive(j);
      in.bench_max_others = std::max(in.bench_max_others, others);
      in.window_max_others = std::max(in.window_max_others, others);
      rate_changed(j);
    }
  }

  void bill(Inst& in) {
    const double before = in.rec.spend_usd;
    core::accrue_rental_spend(in.rec, epoch(now_));
    if (in.rec.state == S::FetchingParams && in.params_speed_bps > 0 && !in.market_stopped) {
      const double done =
          std::min(in.rec.params_total_bytes, (now_ - in.params_start) * in.params_speed_bps);
      report_.bandwidth_usd += core::accrue_bandwidth_spend(in.rec, done);
    }
    const double inc = in.rec.spend_usd - before;
    if (!in.decided) in.bench_spend += inc;
    if (in.accepted) in.prod_cost += inc;
  }

  void transition(Inst& in, S to, const std::string& reason) {
    in.life->transition(in.rec, to, epoch(now_), reason);
  }

  void set_status(Inst& in, const std::string& status) {
    bill(in);
    in.rec.market_status = status;
    in.rec.market_status_since = epoch(now_);
  }

  void handle(const Event& ev) {
    switch (ev.kind) {
      case EvKind::Tick:
        return tick();
      case EvKind::Decide:
        return decide();
      case EvKind::Boot:
        return boot(ev.inst);
      case EvKind::Params:
        if (ev.gen == insts_[ev.inst].params_gen) params_done(ev.inst);
        return;
      case EvKind::MarketStop:
        if (ev.gen == insts_[ev.inst].market_gen) market_stop(ev.inst);
        return;
      case EvKind::MarketResume:
        if (ev.gen == insts_[ev.inst].market_gen) market_resume(ev.inst);
        return;
      case EvKind::Prover:
        if (ev.gen == insts_[ev.inst].gen && is_live(insts_[ev.inst])) prover_event(ev.inst);
        return;
      case EvKind::Throttle:
        if (ev.gen == insts_[ev.inst].clock_gen) throttle(ev.inst);
        return;
      case EvKind::Crash:
        if (ev.gen == insts_[ev.inst].clock_gen) crash(ev.inst);
        return;
      case EvKind::Arrival:
        return job_arrives();
      case EvKind::Offline:
        return go_offline(ev.inst);
    }
  }

  // --- renting and setup ----------------------------------------------------------------------
  void rent(std::size_t offer_index, const std::string& reason, double predicted_rate) {
    const ScenarioOffer& so = sc_.offers[offer_index];
    Inst in;
    in.offer_index = offer_index;
    in.so = &so;
    in.rng = Stream(scenario::rental_seed(sc_.seed, so.offer.id, rent_count_[offer_index]++));
    in.rec.id = static_cast<std::int64_t>(insts_.size()) + 1;
    in.rec.deployment_id = "sim-" + std::to_string(in.rec.id);
    in.rec.market_id = 90'000'000 + in.rec.id;
    in.rec.offer = listed_offer(so);
    in.rec.disk_gb = opt_.disk_gb;
    in.rec.origin = "autopilot";
    in.rec.created_at = epoch(now_);
    in.rented_h = now_ / 3600;
    in.rec.state_since = epoch(now_);
    in.rec.billed_until = epoch(now_);
    in.rec.market_status = "loading";
    in.rec.market_status_since = epoch(now_);
    in.rec.params_total_bytes = sc_.params_bytes;
    // On-demand or a bid: the manager's decision (core::rental_terms_for), on our rows so far.
    const core::BidConfig& bid_config = policy_.bids();
    if (core::bid_possible(in.rec.offer, bid_config)) {
      std::vector<core::InstanceRecord> fleet;
      fleet.reserve(insts_.size());
      for (const auto& other : insts_) fleet.push_back(other.rec);
      const core::RentalTerms terms = core::rental_terms_for(
          in.rec.offer, predicted_rate, opt_.disk_gb, fleet, bid_config, epoch(now_));
      if (terms.bid_price) {
        in.rec.bid_price = terms.bid_price;
        in.bids = {{now_ / 3600, *terms.bid_price}};
        ++report_.bid_rentals;
      }
    }
    in.life.emplace(RentalSettings{lifecycle_, policy_.acceptance(),
                                   policy_.break_even_rate(in.rec.offer),
                                   opt_.production_window_s});
    transition(in, S::Booting, reason);
    in.failed = so.truth.failure.kind == FailureKind::NeverBoots;
    const std::size_t i = insts_.size();
    insts_.push_back(std::move(in));
    fleet_offer_index_.push_back(offer_index);
    by_machine_[so.offer.machine_id].push_back(i);
    rented_by_[offer_index] = i;
    ++report_.instances_rented;
    if (const double boot_s = scenario::boot_after_rent_s(so.truth); boot_s < scenario::kNeverS) {
      push(now_ + boot_s, EvKind::Boot, i);
    }
    schedule_market_stops(i);
    machine_changed(so.offer.machine_id);
  }

  void boot(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in)) return;
    if (in.market_stopped) {
      in.boot_pending = true;
      return;
    }
    set_status(in, "running");
    in.booted = true;
    in.rec.last_heartbeat_at = epoch(now_);
    transition(in, S::Registered, "agent registered");
    transition(in, S::FetchingParams, "downloading parameters");
    in.params_start = now_;
    in.params_speed_bps = in.so->truth.download_mbps * 1e6 / 8;
    if (const double s = scenario::download_s(in.so->truth, sc_.params_bytes);
        s < scenario::kNeverS) {
      push(now_ + s, EvKind::Params, i, in.params_gen);
    }
    if (auto offline = scenario::offline_after_boot_s(in.so->truth)) {
      push(now_ + *offline, EvKind::Offline, i);
    }
  }

  void params_done(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in) || in.rec.state != S::FetchingParams) return;
    bill(in);
    report_.bandwidth_usd += core::accrue_bandwidth_spend(in.rec, in.rec.params_total_bytes);
    in.rec.params_rate_bps = in.params_speed_bps;
    // As the manager hears it: the agent reports the prover started (core/proof_flow.h moves
    // on from there at the first measured proof).
    transition(in, S::WarmingUp, "prover started");
    // The benchmark's contention counts from here (it starts at the first measured proof).
    in.bench_max_others = others_alive(i);
    start_prover(i, 0);
  }

  void start_prover(std::size_t i, int after_oom) {
    Inst& in = insts_[i];
    const Truth& truth = in.so->truth;
    const int p = policy_.plan_partitions(in.rec.offer, probe_of(*in.so), after_oom);
    advance(in, now_);
    in.prover_running = p > 0;
    in.partitions = std::max(0, p);
    in.rec.plan_json = "{\"partitions\":" + std::to_string(in.partitions) + "}";
    if (in.prover_running) {
      in.warmup_left = policy_.warmup_proofs();
      in.proofs_since_start = 1;
      in.oom_pending = scenario::out_of_memory(truth, p);
      in.oom_at = now_ + scenario::oom_after_start_s(truth);
      in.delay_until = now_ + scenario::warmup_extra_s(truth, in.proofs_since_start);
      in.work_left = scenario::draw_proof_work(truth, in.rng);
      in.last_progress = now_;
      in.last_completion = now_;
      in.rec.peak_memory_gib = scenario::observed_peak_memory_gib(truth, p);
      in.proving_since = now_;
    }
    in.rate_now = current_rate(i);
    reschedule(i);
    schedule_proving_clock(i);
    claim_job_or_idle(i);  // a policy with no warm-up proofs proves for money at once
  }

  // Bookkeeping of an accepted instance (the lifecycle moved it to proving).
  void accepted(std::size_t i) {
    Inst& in = insts_[i];
    in.decided = true;
    in.accepted = true;
    in.truth_from = now_;
    ++report_.instances_accepted;
    in.window_max_others = others_alive(i);
    claim_job_or_idle(i);
  }

  core::RunContext bench_context(const Inst& in) const {
    return {in.bench_max_others > 0, in.rec.gpu_throttled};
  }

  void record_run(Inst& in, const core::BenchRun& run, int others) {
    core::Measurement m;
    m.run = run;
    m.offer = in.rec.offer;
    m.ram_gib = in.so->truth.ram_visible_gib;
    m.our_others_on_machine = others;
    history_.push_back(std::move(m));
  }

  // What a verdict led to: a benchmark run, an accepted instance or a close.
  void settle_verdict(std::size_t i, const std::optional<core::BenchmarkStep>& step,
                      const std::optional<core::BenchRun>& run, bool was_accepted) {
    Inst& in = insts_[i];
    if (run) record_run(in, *run, in.bench_max_others);
    if (was_accepted) accepted(i);
    if (step && step->reject) close(i, step->reject->cause, step->reject->reason, std::nullopt);
  }

  // --- proofs ---------------------------------------------------------------------------------
  void prover_event(std::size_t i) {
    Inst& in = insts_[i];
    advance(in, now_);
    if (in.oom_pending) return oom(i);
    const Truth& truth = in.so->truth;
    // The agent marks the first proofs after each prover start as warm-up; the rest is the
    // lifecycle's, as the manager counts it.
    const bool warmup = in.warmup_left > 0;
    if (warmup) --in.warmup_left;
    const ProofOutcome out =
        in.life->proof(in.rec, warmup, epoch(now_), now_ - in.last_completion, bench_context(in),
                       {in.window_max_others > 0, in.rec.gpu_throttled});
    if (out.step.phase == core::ProofPhase::Production) pay_production_proof(i);
    for (const auto& run : out.production_runs) record_run(in, run, in.window_max_others);
    if (!out.production_runs.empty()) in.window_max_others = others_alive(i);
    // The next proof.
    in.work_left = scenario::draw_proof_work(truth, in.rng);
    in.delay_until = now_ + scenario::warmup_extra_s(truth, ++in.proofs_since_start);
    in.last_progress = now_;
    in.last_completion = now_;
    reschedule(i);
    settle_verdict(i, out.benchmark, out.benchmark_run, out.accepted);
    claim_job_or_idle(i);
  }

  // A production proof was delivered: /1 pays it within the hourly demand cap; /2 pays the job
  // it proved if delivered within the deadline of the job's arrival.
  void pay_production_proof(std::size_t i) {
    Inst& in = insts_[i];
    bool paid = false;
    if (sc_.demand) {
      if (in.job != kNone) {
        paid = now_ - jobs_[in.job] <= sc_.demand->deadline_min * 60;
        ++(paid ? report_.jobs_served_on_time : report_.jobs_late);
        dispatch_.done(in.rec.id, job_id(in.job));
        in.job = kNone;
      }
    } else {
      const auto bucket = static_cast<std::size_t>(now_ / 3600);
      const auto& demand = sc_.economics.demand_proofs_per_hour;
      paid = !demand || paid_per_hour_[bucket] < *demand;
      if (paid) ++paid_per_hour_[bucket];
    }
    if (!paid) {
      ++report_.proofs_unpaid;
      return;
    }
    ++report_.proofs;
    ++in.proofs_paid;
    in.revenue += sc_.economics.revenue_per_proof_usd;
    report_.revenue_usd += sc_.economics.revenue_per_proof_usd;
  }

  // --- jobs (/2) ------------------------------------------------------------------------------
  // Jobs wait in the queue (sim/des_dispatch.h) until an instance asking for work is given them
  // by core::place_jobs, as the manager's job queue gives them. An accepted instance asks for one
  // at each production proof it begins and waits (idle, its prover up) while it gets none; idle
  // instances ask again when a job arrives or returns, and every tick (the agent's long-poll
  // re-asks). A job still queued at its deadline can no longer pay: it leaves unserved.

  static std::int64_t job_id(std::size_t job) { return static_cast<std::int64_t>(job) + 1; }

  void job_arrives() {
    const std::size_t job = next_job_++;
    dispatch_.arrive(job_id(job), epoch(jobs_[job]),
                     epoch(jobs_[job] + sc_.demand->deadline_min * 60));
    if (next_job_ < jobs_.size()) push(jobs_[next_job_], EvKind::Arrival);
    dispatch_waiting_jobs();
  }

  // Whether the instance's agent takes work now: its prover is up and past any warm-up (after an
  // OOM re-plan the agent warms up again before it asks). A stopped prover asks for nothing.
  bool takes_jobs(const Inst& in) const {
    return is_live(in) && in.rec.state == S::Proving && in.prover_running && !in.oom_pending &&
           in.warmup_left == 0;
  }

  // The workers place_jobs sees, as Manager::job_workers gives them to the job queue
  // (core::job_worker: proving, heard within three heartbeats — the simulated agents heartbeat
  // every tick — and its measured rate). The simulated prover keeps one proof in flight. A
  // policy that proves without a benchmark has no measured rate: its instances are placed by
  // the rate they prove at now (only clairvoyant does this, and it knows the truth).
  std::vector<core::WorkerView> job_workers() const {
    std::vector<core::WorkerView> out;
    const double heard_within_s = 3 * opt_.tick_s;
    for (const auto& in : insts_) {
      if (!takes_jobs(in)) continue;
      auto w = core::job_worker(in.rec, 1, epoch(now_), heard_within_s);
      if (!w && !policy_.acceptance() && in.rate_now > 0) {
        w = core::WorkerView{in.rec.id, 3600 / in.rate_now, 1, 0, -1};
      }
      if (w) out.push_back(*w);
    }
    return out;
  }

  // The instance asks for a job; false when the plan gives it none.
  bool take_job(Inst& in) {
    dispatch_.expire(epoch(now_));
    const auto leased = dispatch_.lease(in.rec.id, 1, epoch(now_), job_workers());
    if (leased.empty()) return false;
    in.job = static_cast<std::size_t>(leased.front() - 1);
    queue_waits_s_.push_back(now_ - jobs_[in.job]);
    return true;
  }

  // A proof begins: in /2 a production proof needs a job, or the instance waits for one.
  void claim_job_or_idle(std::size_t i) {
    Inst& in = insts_[i];
    if (!sc_.demand || !takes_jobs(in) || in.job != kNone || in.idle) return;
    if (take_job(in)) return;
    advance(in, now_);
    in.idle = true;
    in.idle_since = now_;
    ++in.gen;  // the proof waits for its job
  }

  void end_idle(Inst& in) {
    if (!in.idle) return;
    in.idle = false;
    report_.idle_instance_hours += (now_ - in.idle_since) / 3600;
  }

  void resume_with_job(std::size_t i) {
    Inst& in = insts_[i];
    if (!take_job(in)) return;
    // A warm-up delay the proof had not served yet still comes first.
    in.delay_until = now_ + std::max(0.0, in.delay_until - in.idle_since);
    end_idle(in);
    in.last_progress = now_;
    in.last_completion = now_;  // the agent times a proof from its job's submission
    in.truth_from = now_;
    reschedule(i);
  }

  // The prover stopped: the job it held goes back to the queue (the manager returns a closed or
  // silent instance's jobs).
  void release_job(Inst& in) {
    end_idle(in);
    if (in.job == kNone) return;
    dispatch_.release(in.rec.id);
    in.job = kNone;
  }

  // Idle instances ask, in instance order, while jobs are queued.
  void dispatch_waiting_jobs() {
    for (std::size_t i = 0; i < insts_.size() && dispatch_.queued() > 0; ++i) {
      if (insts_[i].idle && takes_jobs(insts_[i])) resume_with_job(i);
    }
  }

  void oom(std::size_t i) {
    Inst& in = insts_[i];
    ++in.rec.ooms;
    ++report_.ooms;
    if (!oomed_machines_.insert(in.rec.offer.machine_id).second) ++report_.ooms_after_first_on_host;
    const int failed_plan = in.partitions;
    core::record_oom(in.rec, failed_plan);
    stop_prover(i);
    start_prover(i, failed_plan);
  }

  // The acceptance test's time rules between proofs.
  void evaluate(std::size_t i) {
    Inst& in = insts_[i];
    std::optional<core::BenchRun> run;
    bool was_accepted = false;
    const auto step = in.life->evaluate(in.rec, epoch(now_), bench_context(in), run, was_accepted);
    settle_verdict(i, step, run, was_accepted);
  }

  // --- failures -------------------------------------------------------------------------------
  void throttle(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in)) return;
    in.throttled = true;
    // The agent reports it, as the manager hears it; a silent throttle (/2 reported: false)
    // only slows the proofs.
    if (scenario::throttle_reported(in.so->truth)) in.rec.gpu_throttled = true;
    rate_changed(i);
  }

  void stop_prover(std::size_t i) {
    Inst& in = insts_[i];
    advance(in, now_);
    in.prover_running = false;
    in.oom_pending = false;
    in.rate_now = 0;
    ++in.gen;
    if (in.proving_since >= 0) in.proving_s += now_ - in.proving_since;
    in.proving_since = -1;
    schedule_proving_clock(i);
    release_job(in);
    dispatch_waiting_jobs();
  }

  // Throttle and crash come after so much proving time (truth_model.h): (re)scheduled whenever
  // the prover starts or stops.
  void schedule_proving_clock(std::size_t i) {
    Inst& in = insts_[i];
    ++in.clock_gen;
    if (in.proving_since < 0) return;
    const double proved = in.proving_s + (now_ - in.proving_since);
    if (auto after = scenario::throttle_after_proving_s(in.so->truth); after && !in.throttled) {
      push(now_ + std::max(0.0, *after - proved), EvKind::Throttle, i, in.clock_gen);
    }
    if (auto after = scenario::crash_after_proving_s(in.so->truth); after && !in.failed) {
      push(now_ + std::max(0.0, *after - proved), EvKind::Crash, i, in.clock_gen);
    }
  }

  void crash(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in)) return;
    set_status(in, "exited");
    in.failed = true;
    stop_prover(i);
  }

  // /3: the market stops the rental. Its container stops with it (the agent and its prover
  // end, their jobs go back to the queue: the reconcile that sees the stop returns them), and
  // it pays storage only. A contract's end is for good: the reconcile closes it, blaming no one.
  void market_stop(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in) || in.market_stopped) return;
    bill(in);  // the download so far, and the status until now
    core::record_market_status(in.rec, "stopped", epoch(now_));
    in.market_stopped = true;
    ++in.params_gen;  // a download in flight pauses where it is
    in.prover_was_running = in.prover_running;
    if (in.prover_running) stop_prover(i);
    const auto why = scenario::market_stop_at(*in.so, in.bids, now_ / 3600);
    if (why == scenario::MarketStop::ContractEnded) {
      close(i, CloseCause::MarketStopped,
            "the market stopped it: the host's contract ended; it cannot restart", std::nullopt);
      return;
    }
    ++report_.preemptions;
  }

  // /3: when the market will stop the rental and let it run again from now on, for its bids as
  // they stand (scenario/bid_market.h); a change of bid schedules them again.
  void schedule_market_stops(std::size_t i) {
    Inst& in = insts_[i];
    const std::uint64_t gen = ++in.market_gen;
    const double now_h = now_ / 3600;
    for (const auto& [from_h, to_h] :
         scenario::market_stop_periods(*in.so, in.bids, in.rented_h, sc_.hours)) {
      if (from_h >= now_h) push(from_h * 3600, EvKind::MarketStop, i, gen);
      if (std::isfinite(to_h) && to_h >= now_h) push(to_h * 3600, EvKind::MarketResume, i, gen);
    }
  }

  // /3: the manager's changes of bid (core::change_of_bid, which the manager's tick calls too):
  // raised while stopped, so the market may let it run at once; lowered once the raise has had
  // its time, so the market may stop it again.
  void change_bid(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in) || in.bids.empty()) return;
    const auto change = core::change_of_bid(in.rec, epoch(now_),
                                            sc_.economics.revenue_per_proof_usd, policy_.bids());
    if (!change) return;
    bill(in);  // what ran so far, at the old bid
    const bool raise = change->bid_price > *in.rec.bid_price;
    ++(raise ? report_.bid_raises : report_.bid_lowerings);
    in.rec.bid_price = change->bid_price;
    in.bids.emplace_back(now_ / 3600, change->bid_price);
    schedule_market_stops(i);
    const bool stopped_now = scenario::market_stop_at(*in.so, in.bids, now_ / 3600).has_value();
    if (in.market_stopped && !stopped_now) market_resume(i);
    if (!in.market_stopped && stopped_now) market_stop(i);
  }

  // /3: on top again. The container starts again: the agent resumes its download, or restarts
  // its prover (a warm-up again); the state's clocks left the stop out (record_market_status).
  void market_resume(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in) || !in.market_stopped) return;
    bill(in);
    in.market_stopped = false;
    core::record_market_status(in.rec, in.booted || in.boot_pending ? "running" : "loading",
                               epoch(now_));
    if (in.boot_pending) {
      in.boot_pending = false;
      boot(i);
      return;
    }
    if (!in.booted || in.offline || in.failed) return;
    in.rec.last_heartbeat_at = epoch(now_);
    if (in.rec.state == S::FetchingParams && in.params_speed_bps > 0) {
      const double left = std::max(0.0, in.rec.params_total_bytes - in.rec.params_done_bytes);
      in.params_start = now_ - in.rec.params_done_bytes / in.params_speed_bps;
      push(now_ + left / in.params_speed_bps, EvKind::Params, i, in.params_gen);
    } else if (in.prover_was_running) {
      in.prover_was_running = false;
      start_prover(i, 0);
    }
  }

  void go_offline(std::size_t i) {
    Inst& in = insts_[i];
    if (!is_live(in)) return;
    set_status(in, "offline");
    in.failed = true;
    in.offline = true;
    stop_prover(i);
  }

  // --- the loops ------------------------------------------------------------------------------
  void tick() {
    for (std::size_t i = 0; i < insts_.size(); ++i) {
      Inst& in = insts_[i];
      if (!is_live(in)) continue;
      bill(in);
      if (in.booted && !in.offline && !in.market_stopped) in.rec.last_heartbeat_at = epoch(now_);
      if (in.rec.state == S::FetchingParams) in.rec.params_rate_bps = in.params_speed_bps;
      if (in.rec.state == S::Benchmarking) evaluate(i);
      if (!in.bids.empty()) change_bid(i);
      if (!is_live(in)) continue;
      if (auto closing = in.life->check(in.rec, epoch(now_))) {
        close(i, closing->cause, closing->reason, std::nullopt);
      }
    }
    if (sc_.demand) dispatch_waiting_jobs();  // the agents' long-polls ask again
    if (now_ + opt_.tick_s < horizon_) push(now_ + opt_.tick_s, EvKind::Tick);
  }

  void decide() {
    std::vector<core::InstanceRecord> fleet;
    fleet.reserve(insts_.size());
    for (const auto& in : insts_) fleet.push_back(in.rec);
    std::vector<core::Offer> offers;
    std::vector<std::size_t> index;
    for (std::size_t k = 0; k < sc_.offers.size(); ++k) {
      const auto& so = sc_.offers[k];
      if (rented_by_[k] != kNone) continue;
      if (now_ < so.listed_from_h * 3600 || now_ >= so.listed_until_h * 3600) continue;
      offers.push_back(listed_offer(so));
      index.push_back(k);
    }
    // /2: the arrivals so far (epoch seconds) and the queue, as a gateway would show them.
    std::optional<core::QueueObservation> jobs;
    if (sc_.demand) {
      while (arrivals_seen_.size() < next_job_) {
        arrivals_seen_.push_back(epoch(jobs_[arrivals_seen_.size()]));
      }
      dispatch_.expire(epoch(now_));
      queued_deadlines_ = dispatch_.queued_deadlines();
      jobs = core::QueueObservation{epoch(now_),        epoch(0),          arrivals_seen_,
                                    dispatch_.queued(), queued_deadlines_, dispatch_.in_flight()};
    }
    const DesView view{epoch(now_),        fleet, offers, index, history_, bad_hosts_, sc_,
                       fleet_offer_index_, jobs};
    const std::vector<core::Action> actions = policy_.decide(view);
    for (const auto& a : actions) {
      if (a.kind == core::Action::Kind::Rent) {
        auto it = std::find_if(offers.begin(), offers.end(),
                               [&](const core::Offer& o) { return o.id == a.offer.id; });
        if (it == offers.end()) continue;
        const std::size_t k = index[static_cast<std::size_t>(it - offers.begin())];
        if (rented_by_[k] != kNone) continue;
        ++report_.decisions;
        rent(k, a.reason, a.prediction.rate);
      } else {
        for (std::size_t i = 0; i < insts_.size(); ++i) {
          if (insts_[i].rec.id != a.instance_id || !is_live(insts_[i])) continue;
          ++report_.decisions;
          close(i, CloseCause::Dropped, a.reason, a.strike);
        }
      }
    }
    if (now_ + opt_.decide_every_s < horizon_) push(now_ + opt_.decide_every_s, EvKind::Decide);
  }

  // Whether keeping the instance paid, by the truth: sustained rate at the best plan with our
  // other instances on the machine, within the demand our other provers leave.
  bool keeping_paid(std::size_t i) const {
    const Inst& in = insts_[i];
    const Truth& truth = in.so->truth;
    const double r = truth_rate(truth, planned_partitions(probe_of(*in.so)), others_alive(i),
                                truth.throttle.has_value());
    double paid = r;
    // /2: the demand is the job arrival rate now.
    const std::optional<double> demand =
        sc_.demand ? std::optional(scenario::arrival_rate(*sc_.demand, now_ / 3600))
                   : sc_.economics.demand_proofs_per_hour;
    if (demand) {
      double others = 0;
      for (std::size_t j = 0; j < insts_.size(); ++j) {
        if (j != i && is_live(insts_[j]) && insts_[j].rec.state == S::Proving) {
          others += insts_[j].rate_now;
        }
      }
      paid = std::min(r, std::max(0.0, *demand - others));
    }
    return paid * sc_.economics.revenue_per_proof_usd > in.rec.offer.dph_total;
  }

  void settle_accepted(Inst& in) {
    if (!in.accepted) return;
    const double revenue = sc_.economics.revenue_per_proof_usd;
    if (in.truth_proofs > 0) {
      in.accepted_unprofitable = in.prod_cost > in.truth_proofs * revenue;
    } else {
      in.accepted_unprofitable = in.prod_cost > 0 || in.rate_now * revenue < in.rec.offer.dph_total;
    }
    if (in.accepted_unprofitable) ++report_.accepted_unprofitable;
  }

  void close(std::size_t i, CloseCause cause, const std::string& reason,
             std::optional<core::Strike> strike) {
    Inst& in = insts_[i];
    if (!is_live(in)) return;
    bill(in);
    stop_prover(i);
    const int others = others_alive(i);
    if (cause != CloseCause::Horizon && !in.failed && keeping_paid(i)) {
      // Below the policy's own break-even (its $/proof target) it was its rule, not a mistake.
      const Truth& t = in.so->truth;
      const double r =
          truth_rate(t, planned_partitions(probe_of(*in.so)), others, t.throttle.has_value());
      if (r < policy_.break_even_rate(in.rec.offer)) {
        in.rejected_by_target = true;
        ++report_.rejected_by_target;
      } else {
        in.rejected_profitable = true;
        ++report_.rejected_profitable;
      }
    }
    const auto step = in.life->close(in.rec, {cause, reason}, epoch(now_), others, strike);
    if (!step) return;
    if (cause == CloseCause::Dropped && now_ / 3600 - in.rented_h < kShortRentalH) {
      ++report_.short_rentals;
    }
    transition(in, S::Destroyed, "market confirmed");
    if (!in.decided) {
      in.decided = true;
      ++report_.instances_rejected;
    }
    settle_accepted(in);
    in.close_reason = reason;
    in.closed_at = now_;
    rented_by_[in.offer_index] = kNone;
    const ClosedInstance info{in.rec, step->state_before, cause,      reason,
                              others, step->strike,       epoch(now_)};
    policy_.on_closed(info, bad_hosts_);
    machine_changed(in.rec.offer.machine_id);
  }

  void settle_jobs() {
    report_.jobs = true;
    report_.jobs_arrived = static_cast<std::int64_t>(next_job_);
    report_.jobs_unserved = report_.jobs_arrived - report_.jobs_served_on_time - report_.jobs_late;
    if (!queue_waits_s_.empty()) {
      auto p95 = queue_waits_s_.begin() +
                 static_cast<std::ptrdiff_t>(
                     std::ceil(0.95 * static_cast<double>(queue_waits_s_.size())) - 1);
      std::nth_element(queue_waits_s_.begin(), p95, queue_waits_s_.end());
      report_.queue_wait_p95_min = *p95 / 60;
    }
  }

  void finish() {
    now_ = horizon_;
    for (auto& in : insts_) {
      if (!is_live(in)) continue;
      bill(in);
      advance(in, now_);
      end_idle(in);
      settle_accepted(in);
    }
    if (sc_.demand) settle_jobs();
    double spend = 0;
    double bench = 0;
    double storage = 0;
    for (const auto& in : insts_) {
      spend += in.rec.spend_usd;
      bench += in.bench_spend;
      storage += in.rec.storage_spend_usd;
    }
    report_.storage_usd = storage;
    report_.spend_usd = spend;
    report_.benchmark_spend_usd = bench;
    report_.profit_usd = report_.revenue_usd - spend;
    if (report_.proofs > 0)
      report_.cost_per_proof_usd = spend / static_cast<double>(report_.proofs);
    report_.mean_proofs_per_hour =
        sc_.hours > 0 ? static_cast<double>(report_.proofs) / sc_.hours : 0;
    if (!opt_.details) return;
    for (const auto& in : insts_) {
      InstanceOutcome o;
      o.instance_id = in.rec.id;
      o.offer_id = in.rec.offer.id;
      o.machine_id = in.rec.offer.machine_id;
      o.gpu = std::to_string(in.rec.offer.num_gpus) + "x " + in.rec.offer.gpu_name;
      o.dph = in.rec.offer.dph_total;
      o.rented_h = (in.rec.created_at - kDesEpoch) / 3600;
      if (in.closed_at) o.closed_h = *in.closed_at / 3600;
      o.final_state = core::to_string(in.rec.state);
      o.close_reason = in.close_reason;
      if (in.rec.close_cause) o.close_cause = core::to_string(*in.rec.close_cause);
      o.accepted = in.accepted;
      if (in.rec.verdict) {
        o.verdict_rate = in.rec.verdict->rate;
        o.verdict_samples = in.rec.verdict->samples;
      }
      const Truth& truth = in.so->truth;
      o.truth_rate = truth_rate(truth, planned_partitions(probe_of(*in.so)), 0, false);
      o.partitions = in.partitions;
      o.ooms = in.rec.ooms;
      o.proofs_paid = in.proofs_paid;
      o.spend_usd = in.rec.spend_usd;
      o.revenue_usd = in.revenue;
      o.accepted_unprofitable = in.accepted_unprofitable;
      o.rejected_profitable = in.rejected_profitable;
      o.rejected_by_target = in.rejected_by_target;
      report_.instances.push_back(std::move(o));
    }
  }

  const Scenario& sc_;
  DesPolicy& policy_;
  DesOptions opt_;
  core::LifecycleConfig lifecycle_;
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
  // Epoch seconds of the jobs arrived so far: the arrivals the policy is shown.
  std::vector<double> arrivals_seen_;
  std::vector<double> queue_waits_s_;
  std::vector<double> queued_deadlines_;  // /2: the deadlines the policy is shown (epoch s)
  std::set<std::int64_t> oomed_machines_;
  std::vector<core::Measurement> history_;
  std::vector<core::BadHost> bad_hosts_;
  DesReport report_;
};

}  // namespace

AgentProbe probe_of(const ScenarioOffer& offer) {
  return AgentProbe{offer.truth.ram_visible_gib, offer.truth.cores_visible,
                    std::max(1, offer.offer.num_gpus)};
}

int planned_partitions(const AgentProbe& probe) {
  core::PlanInput in;
  in.ram_gib = probe.ram_gib;
  in.cores = probe.cores;
  in.gpus = probe.gpus;
  auto plan = core::plan_prover(in, core::PlanLimits{});
  return plan ? plan->partitions : 0;
}

DesReport run_des(const Scenario& scenario, DesPolicy& policy, const DesOptions& options) {
  Engine engine(scenario, policy, options);
  return engine.run();
}

}  // namespace pf::sim
