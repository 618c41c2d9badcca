// The engine's closes and settlements (sim/des_engine_internal.h): a rental closed by the policy,
// the lifecycle or a failure, and what every rental and job earned by the horizon.
#include "sim/des_engine_internal.h"

namespace pf::sim::des_engine_internal {

bool Engine::keeping_paid(std::size_t i) const {
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

void Engine::settle_accepted(Inst& in) {
  if (!in.accepted) return;
  const double revenue = sc_.economics.revenue_per_proof_usd;
  if (in.truth_proofs > 0) {
    in.accepted_unprofitable = in.prod_cost > in.truth_proofs * revenue;
  } else {
    in.accepted_unprofitable = in.prod_cost > 0 || in.rate_now * revenue < in.rec.offer.dph_total;
  }
  if (in.accepted_unprofitable) ++report_.accepted_unprofitable;
}

void Engine::close(std::size_t i, CloseCause cause, const std::string& reason,
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

void Engine::settle_jobs() {
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

void Engine::finish() {
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
  if (report_.proofs > 0) report_.cost_per_proof_usd = spend / static_cast<double>(report_.proofs);
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

}  // namespace pf::sim::des_engine_internal
