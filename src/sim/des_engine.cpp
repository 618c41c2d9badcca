// run_des and its engine's event loop, renting and setup, proofs, jobs (/2) and the policy's
// ticks and decisions (the engine: sim/des_engine_internal.h).
#include "sim/des_engine.h"

#include "sim/des_engine_internal.h"

namespace pf::sim::des_engine_internal {

DesReport Engine::run() {
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

core::Offer Engine::listed_offer(const ScenarioOffer& so) const {
  core::Offer offer = so.offer;
  offer.dph_total = scenario::listed_dph(so, now_ / 3600);
  // /3: what search shows of the market (vast's min_bid and end_date).
  if (so.bid_market) offer.min_bid = so.bid_market->min_bid;
  if (so.contract_end_h) offer.end_date = epoch(*so.contract_end_h * 3600);
  return offer;
}

void Engine::push(double t, EvKind kind, std::size_t inst, std::uint64_t gen) {
  queue_.push(Event{t, next_seq_++, kind, inst, gen});
}

int Engine::others_alive(std::size_t i) const {
  int n = 0;
  const auto machine = insts_[i].rec.offer.machine_id;
  for (std::size_t j : live_on_machine(machine))
    if (j != i) ++n;
  return n;
}

std::vector<std::size_t> Engine::live_on_machine(std::int64_t machine) const {
  std::vector<std::size_t> out;
  auto it = by_machine_.find(machine);
  if (it == by_machine_.end()) return out;
  for (std::size_t j : it->second)
    if (is_live(insts_[j])) out.push_back(j);
  return out;
}

double Engine::current_rate(std::size_t i) const {
  const Inst& in = insts_[i];
  if (!in.prover_running || in.oom_pending) return 0;
  return truth_rate(in.so->truth, in.partitions, others_alive(i), in.throttled);
}

void Engine::advance(Inst& in, double t) {
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

void Engine::reschedule(std::size_t i) {
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

void Engine::rate_changed(std::size_t i) {
  Inst& in = insts_[i];
  advance(in, now_);
  in.rate_now = current_rate(i);
  reschedule(i);
}

void Engine::machine_changed(std::int64_t machine) {
  for (std::size_t j : live_on_machine(machine)) {
    Inst& in = insts_[j];
    const int others = others_alive(j);
    in.bench_max_others = std::max(in.bench_max_others, others);
    in.window_max_others = std::max(in.window_max_others, others);
    rate_changed(j);
  }
}

void Engine::bill(Inst& in) {
  const double before = in.rec.spend_usd;
  core::accrue_rental_spend(in.rec, epoch(now_));
  if (in.rec.state == S::FetchingParams && in.params_speed_bps > 0 && !in.market_stopped) {
    const double done =
        std::min(in.rec.params_total_bytes, (now_ - in.params_start) * in.params_speed_bps);
    report_.bandwidth_usd += core::accrue_bandwidth_spend(in.rec, done);
  }
  attribute_spend(in, in.rec.spend_usd - before);
}

double Engine::bill_transfer(Inst& in, double bytes_down, double bytes_up) {
  const double inc = core::accrue_transfer_spend(in.rec, bytes_down, bytes_up);
  report_.bandwidth_usd += inc;
  attribute_spend(in, inc);
  return inc;
}

void Engine::attribute_spend(Inst& in, double usd) {
  if (!in.decided) in.bench_spend += usd;
  if (in.accepted) in.prod_cost += usd;
}

void Engine::transition(Inst& in, S to, const std::string& reason) {
  in.life->transition(in.rec, to, epoch(now_), reason);
}

void Engine::set_status(Inst& in, const std::string& status) {
  bill(in);
  in.rec.market_status = status;
  in.rec.market_status_since = epoch(now_);
}

void Engine::handle(const Event& ev) {
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

void Engine::rent(std::size_t offer_index, const std::string& reason, double predicted_rate) {
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
                                 policy_.break_even_rate(in.rec.offer), opt_.production_window_s});
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

void Engine::boot(std::size_t i) {
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

void Engine::params_done(std::size_t i) {
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

void Engine::start_prover(std::size_t i, int after_oom) {
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

void Engine::accepted(std::size_t i) {
  Inst& in = insts_[i];
  in.decided = true;
  in.accepted = true;
  in.truth_from = now_;
  ++report_.instances_accepted;
  in.window_max_others = others_alive(i);
  claim_job_or_idle(i);
}

core::RunContext Engine::bench_context(const Inst& in) const {
  return {in.bench_max_others > 0, in.rec.gpu_throttled};
}

void Engine::record_run(Inst& in, const core::BenchRun& run, int others) {
  core::Measurement m;
  m.run = run;
  m.offer = in.rec.offer;
  m.ram_gib = in.so->truth.ram_visible_gib;
  m.our_others_on_machine = others;
  history_.push_back(std::move(m));
}

void Engine::settle_verdict(std::size_t i, const std::optional<core::BenchmarkStep>& step,
                            const std::optional<core::BenchRun>& run, bool was_accepted) {
  Inst& in = insts_[i];
  if (run) record_run(in, *run, in.bench_max_others);
  if (was_accepted) accepted(i);
  if (step && step->reject) close(i, step->reject->cause, step->reject->reason, std::nullopt);
}

void Engine::prover_event(std::size_t i) {
  Inst& in = insts_[i];
  advance(in, now_);
  if (in.oom_pending) return oom(i);
  end_proof(i, true);
}

void Engine::end_proof(std::size_t i, bool delivered) {
  Inst& in = insts_[i];
  const Truth& truth = in.so->truth;
  // The agent marks the first proofs after each prover start as warm-up; the rest is the
  // lifecycle's, as the manager counts it.
  const bool warmup = in.warmup_left > 0;
  if (warmup) --in.warmup_left;
  const ProofOutcome out =
      in.life->proof(in.rec, warmup, epoch(now_), now_ - in.last_completion, bench_context(in),
                     {in.window_max_others > 0, in.rec.gpu_throttled});
  if (delivered && out.step.phase == core::ProofPhase::Production) pay_production_proof(i);
  for (const auto& run : out.production_runs) record_run(in, run, in.window_max_others);
  if (!out.production_runs.empty()) in.window_max_others = others_alive(i);
  next_proof(i, scenario::warmup_extra_s(truth, ++in.proofs_since_start));
  settle_verdict(i, out.benchmark, out.benchmark_run, out.accepted);
  claim_job_or_idle(i);
}

void Engine::pay_production_proof(std::size_t i) {
  Inst& in = insts_[i];
  bool paid = false;
  if (sc_.demand) {
    if (in.job != kNone) {
      paid = now_ - jobs_[in.job] <= sc_.demand->deadline_min * 60;
      ++(paid ? report_.jobs_served_on_time : report_.jobs_late);
      bill_transfer(in, 0, core::kPorepC2ProofBytes);  // the proof goes up, paid or late
      const std::size_t job = in.job;
      in.job = kNone;
      const auto other = dispatch_.done(in.rec.id, job_id(job));
      if (const auto h = hedges_.find(job); h != hedges_.end()) {
        const HedgeRun run = h->second;
        hedges_.erase(h);
        if (run.hedger == i) {
          ++report_.hedges_won;
          if (paid) ++report_.hedges_won_on_time;
        }
        if (other) stop_copy(static_cast<std::size_t>(*other - 1), run.since, run.hedger == i);
      }
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

void Engine::job_arrives() {
  const std::size_t job = next_job_++;
  dispatch_.arrive(job_id(job), epoch(jobs_[job]),
                   epoch(jobs_[job] + sc_.demand->deadline_min * 60));
  if (next_job_ < jobs_.size()) push(jobs_[next_job_], EvKind::Arrival);
  dispatch_waiting_jobs();
}

bool Engine::takes_jobs(const Inst& in) const {
  return is_live(in) && in.rec.state == S::Proving && in.prover_running && !in.oom_pending &&
         in.warmup_left == 0;
}

std::vector<core::WorkerView> Engine::job_workers() const {
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

bool Engine::take_job(Inst& in) {
  dispatch_.expire(epoch(now_));
  const auto leased = dispatch_.lease(in.rec.id, 1, epoch(now_), job_workers(), hedging_);
  if (leased.empty()) return false;
  in.job = static_cast<std::size_t>(leased.front() - 1);
  in.job_since = now_;
  // The agent fetches the job's input.
  const double input_usd = bill_transfer(in, core::kPorepC2InputBytes, 0);
  if (dispatch_.hedger(leased.front()) == in.rec.id) {
    // A copy of a job another prover holds (its proof at risk: core/job_hedge.h).
    hedges_[in.job] = HedgeRun{static_cast<std::size_t>(in.rec.id - 1), now_};
    ++report_.hedges;
    report_.hedge_usd += input_usd;
  } else {
    queue_waits_s_.push_back(now_ - jobs_[in.job]);
  }
  return true;
}

void Engine::claim_job_or_idle(std::size_t i) {
  Inst& in = insts_[i];
  if (!sc_.demand || !takes_jobs(in) || in.job != kNone || in.idle) return;
  if (take_job(in)) return;
  advance(in, now_);
  in.idle = true;
  in.idle_since = now_;
  ++in.gen;  // the proof waits for its job
}

void Engine::end_idle(Inst& in) {
  if (!in.idle) return;
  in.idle = false;
  report_.idle_instance_hours += (now_ - in.idle_since) / 3600;
}

void Engine::resume_with_job(std::size_t i) {
  if (take_job(insts_[i])) start_waiting_proof(i);
}

void Engine::start_waiting_proof(std::size_t i) {
  Inst& in = insts_[i];
  // A warm-up delay the proof had not served yet still comes first.
  in.delay_until = now_ + std::max(0.0, in.delay_until - in.idle_since);
  end_idle(in);
  in.last_progress = now_;
  in.last_completion = now_;  // the agent times a proof from its job's submission
  in.truth_from = now_;
  reschedule(i);
}

void Engine::release_job(Inst& in) {
  end_idle(in);
  if (in.job == kNone) return;
  // A hedged job stays with its other prover (dispatch_.release keeps it there); once the
  // hedge's own copy is gone there is no hedge left to count.
  const auto h = hedges_.find(in.job);
  if (h != hedges_.end() && h->second.hedger == static_cast<std::size_t>(in.rec.id - 1)) {
    hedges_.erase(h);
  }
  dispatch_.release(in.rec.id);
  in.job = kNone;
}

void Engine::stop_copy(std::size_t i, double copy_since, bool holder) {
  Inst& in = insts_[i];
  advance(in, now_);
  // Two provers ran the job since the hedge began; the one that lost did it for nothing.
  report_.hedge_usd += (now_ - copy_since) / 3600 * core::rental_compute_usd_per_hour(in.rec);
  in.job = kNone;
  if (holder) {
    // The holder was overdue and lost: its proof took at least this long, and the production
    // watch counts it so (a lower bound: it can only flatter the host). Uncounted, a slow host
    // whose every proof a hedge beats shows the watch no proofs at all and is kept for hours.
    end_proof(i, false);
    return;
  }
  // The hedge's copy began late: its time says nothing of its prover. Its proof is abandoned
  // (the agent cancels it in the prover): the next one starts afresh.
  next_proof(i, 0);
  claim_job_or_idle(i);
}

void Engine::next_proof(std::size_t i, double delay_s) {
  Inst& in = insts_[i];
  in.work_left = scenario::draw_proof_work(in.so->truth, in.rng);
  in.delay_until = now_ + delay_s;
  in.last_progress = now_;
  in.last_completion = now_;
  reschedule(i);
}

void Engine::dispatch_waiting_jobs(bool hedges_too) {
  for (std::size_t i = 0; i < insts_.size() && (hedges_too || dispatch_.queued() > 0); ++i) {
    if (insts_[i].idle && takes_jobs(insts_[i])) resume_with_job(i);
  }
}

void Engine::oom(std::size_t i) {
  Inst& in = insts_[i];
  ++in.rec.ooms;
  ++report_.ooms;
  if (!oomed_machines_.insert(in.rec.offer.machine_id).second) ++report_.ooms_after_first_on_host;
  const int failed_plan = in.partitions;
  core::record_oom(in.rec, failed_plan);
  stop_prover(i);
  start_prover(i, failed_plan);
}

void Engine::evaluate(std::size_t i) {
  Inst& in = insts_[i];
  std::optional<core::BenchRun> run;
  bool was_accepted = false;
  const auto step = in.life->evaluate(in.rec, epoch(now_), bench_context(in), run, was_accepted);
  settle_verdict(i, step, run, was_accepted);
}

void Engine::tick() {
  for (std::size_t i = 0; i < insts_.size(); ++i) {
    Inst& in = insts_[i];
    if (!is_live(in)) continue;
    bill(in);
    if (in.booted && !in.offline && !in.market_stopped) {
      in.rec.last_heartbeat_at = epoch(now_);
      dispatch_.renew(in.rec.id, epoch(now_));  // the heartbeat renews its leases
    }
    if (in.rec.state == S::FetchingParams) in.rec.params_rate_bps = in.params_speed_bps;
    if (in.rec.state == S::Benchmarking) evaluate(i);
    if (!in.bids.empty()) change_bid(i);
    if (!is_live(in)) continue;
    if (auto closing = in.life->check(in.rec, epoch(now_))) {
      close(i, closing->cause, closing->reason, std::nullopt);
    }
  }
  // The agents' long-polls ask again; an idle one may be given a hedge with nothing queued.
  if (sc_.demand) dispatch_waiting_jobs(hedging_.enabled);
  if (now_ + opt_.tick_s < horizon_) push(now_ + opt_.tick_s, EvKind::Tick);
}

void Engine::decide() {
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

}  // namespace pf::sim::des_engine_internal

namespace pf::sim {

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
  des_engine_internal::Engine engine(scenario, policy, options);
  return engine.run();
}

}  // namespace pf::sim
