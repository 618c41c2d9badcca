// The engine's failures (sim/des_engine_internal.h): what the truth does to a rental (throttle,
// crash, offline) and what a /3 market does to it (stops, resumes, bid changes).
#include "sim/des_engine_internal.h"

namespace pf::sim::des_engine_internal {

void Engine::throttle(std::size_t i) {
  Inst& in = insts_[i];
  if (!is_live(in)) return;
  in.throttled = true;
  // The agent reports it, as the manager hears it; a silent throttle (/2 reported: false)
  // only slows the proofs.
  if (scenario::throttle_reported(in.so->truth)) in.rec.gpu_throttled = true;
  rate_changed(i);
}

void Engine::stop_prover(std::size_t i) {
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

void Engine::schedule_proving_clock(std::size_t i) {
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

void Engine::crash(std::size_t i) {
  Inst& in = insts_[i];
  if (!is_live(in)) return;
  set_status(in, "exited");
  in.failed = true;
  stop_prover(i);
}

void Engine::market_stop(std::size_t i) {
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

void Engine::schedule_market_stops(std::size_t i) {
  Inst& in = insts_[i];
  const std::uint64_t gen = ++in.market_gen;
  const double now_h = now_ / 3600;
  for (const auto& [from_h, to_h] :
       scenario::market_stop_periods(*in.so, in.bids, in.rented_h, sc_.hours)) {
    if (from_h >= now_h) push(from_h * 3600, EvKind::MarketStop, i, gen);
    if (std::isfinite(to_h) && to_h >= now_h) push(to_h * 3600, EvKind::MarketResume, i, gen);
  }
}

void Engine::change_bid(std::size_t i) {
  Inst& in = insts_[i];
  if (!is_live(in) || in.bids.empty()) return;
  const auto change =
      core::change_of_bid(in.rec, epoch(now_), sc_.economics.revenue_per_proof_usd, policy_.bids());
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

void Engine::market_resume(std::size_t i) {
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

void Engine::go_offline(std::size_t i) {
  Inst& in = insts_[i];
  if (!is_live(in)) return;
  set_status(in, "offline");
  in.failed = true;
  in.offline = true;
  stop_prover(i);
}

}  // namespace pf::sim::des_engine_internal
