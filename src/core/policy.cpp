#include "core/policy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/billing.h"
#include "core/market_stop.h"
#include "core/text.h"

namespace pf::core {
namespace {

bool live(const InstanceRecord& r) {
  return r.state != InstanceState::Destroying && r.state != InstanceState::Destroyed;
}

std::string money(double usd) {
  return "$" + fixed(usd, 2);
}

// Latest judged production window of an instance since it was accepted, if any.
const BenchRun* latest_window(const std::vector<BenchRun>& windows, const InstanceRecord& rec,
                              int min_samples) {
  const BenchRun* best = nullptr;
  for (const auto& w : windows) {
    if (w.at < rec.state_since || w.samples < min_samples) continue;
    if (!best || w.at > best->at) best = &w;
  }
  return best;
}

struct Candidate {
  Offer offer;
  Prediction prediction;
  Score score;
  ScoreContext context;
  double expected_rate = 0;  // p_pays · E[rate | pays]: what it adds to capacity, on average
  double lost_rate = 0;      // what ours on the same machine lose to its contention
  std::string sharing;       // contention note when the machine already hosts ours
  int others = 0;            // ours already on its machine
};

std::string swap_reason(const SwapPlan& swap, const Offer& offer, double revenue) {
  std::string ids;
  for (const auto& d : swap.displaced) {
    ids += (ids.empty() ? "#" : ", #") + std::to_string(d.instance_id) + " (" + fixed(d.rate, 1) +
           "/hr, " + money(d.cost_per_proof() * 1000) + " per 1000 proofs)";
  }
  const double own =
      swap.score.rate_if_accepted > 0 ? offer.dph_total / swap.score.rate_if_accepted : 0;
  return "to replace " + ids + " at ~" + money(own * 1000) +
         " per 1000 proofs once accepted (expected gain " + money(swap.value_usd) +
         "; the surplus step drops them; revenue $" + fixed(revenue, 4) + "/proof)";
}

}  // namespace

std::map<std::int64_t, double> measured_download_mbps(const std::vector<InstanceRecord>& fleet) {
  std::map<std::int64_t, std::pair<double, double>> latest;  // machine → (rented at, Mb/s)
  for (const auto& r : fleet) {
    if (r.params_rate_bps <= 0) continue;
    auto [it, fresh] = latest.try_emplace(r.offer.machine_id, r.created_at, 0.0);
    if (!fresh && it->second.first > r.created_at) continue;
    it->second = {r.created_at, r.params_rate_bps * 8 / 1e6};
  }
  std::map<std::int64_t, double> out;
  for (const auto& [machine, seen] : latest) out[machine] = seen.second;
  return out;
}

const char* to_string(Action::Kind kind) {
  switch (kind) {
    case Action::Kind::Rent:
      return "rent";
    case Action::Kind::Drop:
      return "drop";
  }
  return "unknown";
}

bool in_setup(InstanceState s) {
  return s == InstanceState::Renting || s == InstanceState::Booting ||
         s == InstanceState::Registered || s == InstanceState::FetchingParams ||
         s == InstanceState::WarmingUp || s == InstanceState::Benchmarking;
}

double lifetime_hours(double now, const PolicyConfig& cfg) {
  double lifetime = cfg.scoring.setup.expected_lifetime_h;
  if (cfg.stop_at) lifetime = std::min(lifetime, std::max(0.0, (*cfg.stop_at - now) / 3600));
  return lifetime;
}

double exploration_spend(const std::vector<InstanceRecord>& fleet, double now, double window_s) {
  double total = 0;
  for (const auto& r : fleet) {
    if (!r.destroyed_at || *r.destroyed_at < now - window_s) continue;
    if (r.verdict && r.verdict->decision == Verdict::Decision::Accept) continue;
    total += r.spend_usd;
  }
  return total;
}

WatchResult watch_production(const InstanceRecord& rec, const std::vector<BenchRun>& windows,
                             double be, const WatchConfig& cfg) {
  WatchResult out;
  std::vector<const BenchRun*> judged;
  for (const auto& w : windows) {
    if (w.instance_id != rec.id || w.kind != "production") continue;
    if (w.at < rec.state_since || w.samples < cfg.min_samples) continue;
    judged.push_back(&w);
  }
  if (judged.empty() || be <= 0) return out;
  std::sort(judged.begin(), judged.end(),
            [](const BenchRun* a, const BenchRun* b) { return a->at < b->at; });
  const BenchRun& latest = *judged.back();
  out.below = latest.rate < be;
  const std::string context = std::string(latest.throttled ? ", GPU throttling" : "") +
                              (latest.contended ? ", machine shared with ours" : "");
  const std::string window = fixed(latest.rate, 1) + "/hr [" + fixed(latest.low, 1) + ", " +
                             fixed(latest.high, 1) + "] over " + std::to_string(latest.samples) +
                             " proofs" + context;
  if (latest.high < be) {
    out.drop = true;
    out.reason = "production rate " + window + " is below break-even " + fixed(be, 1) +
                 "/hr: every hour loses money";
    return out;
  }
  int below = 0;
  for (auto it = judged.rbegin(); it != judged.rend() && (*it)->rate < be; ++it) ++below;
  if (below >= cfg.consecutive_below) {
    out.drop = true;
    out.reason = "production rate below break-even " + fixed(be, 1) + "/hr in the last " +
                 std::to_string(below) + " windows (latest " + window + ")";
    return out;
  }
  if (out.below) out.reason = "watching: latest window " + window + " dips below break-even";
  return out;
}

std::optional<SwapPlan> best_swap(const Offer& offer, const Prediction& pred,
                                  const ScoringConfig& scoring, const ScoreContext& ctx,
                                  std::vector<Displaceable> proving, double lost_rate,
                                  double margin, int max_displaced) {
  if (pred.rate <= 0 || !ctx.demand_room) return std::nullopt;
  const double revenue = scoring.economics.revenue_per_proof_usd;
  const double own_cost = offer.dph_total / pred.rate;
  std::erase_if(proving, [&](const Displaceable& d) {
    return d.rate <= 0 || d.machine_id == offer.machine_id ||
           d.cost_per_proof() <= own_cost * (1 + margin);
  });
  std::sort(proving.begin(), proving.end(), [](const Displaceable& a, const Displaceable& b) {
    if (a.cost_per_proof() != b.cost_per_proof()) return a.cost_per_proof() > b.cost_per_proof();
    return a.instance_id < b.instance_id;
  });
  const double open = *ctx.demand_room;
  std::optional<SwapPlan> best;
  SwapPlan plan;
  double displaced_dph = 0;
  for (const auto& d : proving) {
    if (static_cast<int>(plan.displaced.size()) >= max_displaced) break;
    plan.displaced.push_back(d);
    plan.displaced_rate += d.rate;
    displaced_dph += d.dph;
    ScoreContext with_room = ctx;
    with_room.demand_room = open + plan.displaced_rate;
    if (ctx.lasting_room) with_room.lasting_room = *ctx.lasting_room + plan.displaced_rate;
    plan.score = score_offer(offer, pred, scoring, with_room);
    plan.context = with_room;
    plan.score.value_usd -= lost_rate * revenue * plan.score.productive_hours;
    // What the displaced would add without the swap: their paid proofs within demand less
    // their price, or nothing where that is negative (the surplus step drops them anyway, so
    // their price is no saving of the swap).
    const double their_paid = std::clamp(open + plan.displaced_rate, 0.0, plan.displaced_rate);
    const double their_net = std::max(0.0, revenue * their_paid - displaced_dph);
    plan.value_usd =
        plan.score.value_usd - plan.score.p_pays * plan.score.productive_hours * their_net;
    if (!best || plan.value_usd > best->value_usd) best = plan;
  }
  return best;
}

std::optional<DownloadJudgement> judge_download(const InstanceRecord& rec, const Prediction& pred,
                                                int others, int failure_strikes, double now,
                                                const PolicyConfig& cfg) {
  if (rec.state != InstanceState::FetchingParams) return std::nullopt;
  // Judged after this long downloading, not counting time the market held the instance stopped.
  if (running_seconds_in_state(rec, now) < cfg.download_judge_after_s) return std::nullopt;
  if (rec.params_rate_bps <= 0 || rec.params_total_bytes <= 0) return std::nullopt;
  const double left_h =
      std::max(0.0, rec.params_total_bytes - rec.params_done_bytes) / rec.params_rate_bps / 3600;
  ScoreContext ctx;
  ctx.lifetime_h = within_contract_h(rec.offer, lifetime_hours(now, cfg), now);
  ctx.failure_strikes = failure_strikes;
  const double bench_h = pred.rate > 0 ? cfg.scoring.setup.benchmark_proofs / pred.rate : 0;
  ctx.setup_hours_left = left_h + cfg.scoring.setup.warmup_h + bench_h;
  const Score sc = score_offer(rec.offer, pred, cfg.scoring, ctx);
  // A download that cannot finish before its state's deadline is closed by it anyway: every
  // minute until then is paid for nothing.
  const bool misses_deadline = rec.deadline_at > 0 && now + left_h * 3600 > rec.deadline_at;
  if (sc.value_usd >= 0 && !misses_deadline) return std::nullopt;
  const double mbps = rec.params_rate_bps * 8 / 1e6;
  DownloadJudgement out;
  out.strike.machine_id = rec.offer.machine_id;
  out.strike.kind = StrikeKind::SlowDownload;
  out.strike.at = now;
  out.strike.instance_id = rec.id;
  out.strike.our_others_on_machine = others;
  out.strike.reason = "parameters at " + fixed(mbps, 0) + " Mb/s (advertised " +
                      fixed(rec.offer.inet_down_mbps, 0) + ")";
  const std::string why = sc.value_usd < 0
                              ? "finishing is expected to lose " + money(-sc.value_usd) +
                                    (sc.reasons.empty() ? "" : " (" + sc.reasons.front() + ")")
                              : "it cannot finish before the download deadline in " +
                                    fixed(std::max(0.0, rec.deadline_at - now) / 60, 0) + " min";
  out.reason = "download at " + fixed(mbps, 0) + " Mb/s leaves " + fixed(left_h, 1) + " h: " + why;
  return out;
}

std::vector<Action> decide(const std::vector<InstanceRecord>& fleet,
                           const std::vector<Offer>& offers, const PolicyHistory& history,
                           const std::vector<BadHost>& bad_hosts, double now,
                           const PolicyConfig& configured) {
  // Setup is valued at the fleet's measured real/advertised download ratio, not the configured
  // guess alone (learn_download_fraction; the offers table uses the same).
  PolicyConfig cfg = configured;
  cfg.scoring.setup.download_speed_fraction =
      learn_download_fraction(fleet, configured.scoring.setup.download_speed_fraction,
                              configured.predictor)
          .fraction;
  std::vector<Action> actions;
  const FleetKnowledge knowledge = learn_fleet(history.measurements, cfg.predictor);
  const double lifetime = lifetime_hours(now, cfg);
  const double revenue = cfg.scoring.economics.revenue_per_proof_usd;

  std::map<std::int64_t, std::vector<BenchRun>> windows;
  for (const auto& m : history.measurements)
    if (m.run.kind == "production") windows[m.run.instance_id].push_back(m.run);

  std::vector<const InstanceRecord*> alive;
  for (const auto& r : fleet)
    if (live(r)) alive.push_back(&r);
  std::set<std::int64_t> dropped;
  auto drop = [&](const InstanceRecord& rec, std::string reason, std::optional<Strike> strike) {
    Action a;
    a.kind = Action::Kind::Drop;
    a.instance_id = rec.id;
    a.offer = rec.offer;
    a.reason = std::move(reason);
    a.strike = std::move(strike);
    actions.push_back(std::move(a));
    dropped.insert(rec.id);
  };
  auto others_on = [&](std::int64_t machine_id, std::int64_t except) {
    int n = 0;
    for (const auto* r : alive)
      if (r->offer.machine_id == machine_id && r->id != except && !dropped.count(r->id)) ++n;
    return n;
  };

  // Production watch.
  std::map<std::int64_t, double> measured;  // proving instance → its current rate
  for (const auto* rec : alive) {
    if (rec->state != InstanceState::Proving) continue;
    const double be = objective_break_even(rec->offer, rental_usd_per_hour(*rec), cfg.scoring);
    const auto& ws = windows[rec->id];
    const WatchResult w = watch_production(*rec, ws, be, cfg.watch);
    if (w.drop) {
      drop(*rec, "production watch: " + w.reason, std::nullopt);
      continue;
    }
    const BenchRun* latest = latest_window(ws, *rec, cfg.watch.min_samples);
    measured[rec->id] = latest ? latest->rate : rec->verdict ? rec->verdict->rate : 0;
  }

  // Setup watch: downloads that have become too slow to pay.
  for (const auto* rec : alive) {
    if (rec->state != InstanceState::FetchingParams) continue;
    const int others = others_on(rec->offer.machine_id, rec->id);
    const Prediction pred =
        predict_offer(rec->offer, knowledge, cfg.predictor, others, Reasons::Skipped);
    auto judged = judge_download(*rec, pred, others, auto_strikes(bad_hosts, rec->offer.machine_id),
                                 now, cfg);
    if (judged) drop(*rec, std::move(judged->reason), std::move(judged->strike));
  }

  // Demand: capacity whose proofs would earn nothing.
  double proving_rate = 0;
  for (const auto& [id, rate] : measured)
    if (!dropped.count(id)) proving_rate += rate;
  if (cfg.demand_proofs_per_hour) {
    const double demand = *cfg.demand_proofs_per_hour;
    const InstanceRecord* worst = nullptr;
    double worst_cost = 0;
    for (const auto* rec : alive) {
      auto it = measured.find(rec->id);
      if (it == measured.end() || dropped.count(rec->id) || it->second <= 0) continue;
      const double cost = rental_usd_per_hour(*rec) / it->second;
      if (!worst || cost > worst_cost) {
        worst = rec;
        worst_cost = cost;
      }
    }
    if (worst) {
      const double r = measured[worst->id];
      const double paid = std::clamp(demand - (proving_rate - r), 0.0, r);
      if (paid * revenue < cfg.surplus_keep_share * rental_usd_per_hour(*worst)) {
        drop(*worst,
             "surplus: the fleet proves " + fixed(proving_rate, 0) + "/hr against demand " +
                 fixed(demand, 0) + "/hr; this instance (" + fixed(r, 1) + "/hr, the dearest at " +
                 money(worst_cost * 1000) + " per 1000 proofs) adds " + fixed(paid, 1) +
                 " paid proofs/hr worth " + money(paid * revenue) + "/hr for " +
                 money(rental_usd_per_hour(*worst)) + "/hr",
             std::nullopt);
        proving_rate -= r;
      }
    }
  }

  // Capacity and spend committed so far. A proving instance whose contract ends before a rental
  // made now would be proving is not capacity to plan with: its replacement is.
  double ending_rate = 0;
  for (const auto* rec : alive) {
    const auto rate = measured.find(rec->id);
    if (rate == measured.end() || dropped.count(rec->id)) continue;
    const double lead_h = cfg.replace_before_contract_end_h;
    if (within_contract_h(rec->offer, lead_h, now) < lead_h) ending_rate += rate->second;
  }
  double committed = proving_rate - ending_rate;
  double dph = 0;
  int n_live = 0;
  int n_setup = 0;
  double pending_exploration = 0;
  std::set<std::int64_t> machines_in_setup;
  for (const auto* rec : alive) {
    if (dropped.count(rec->id)) continue;
    ++n_live;
    dph += rental_usd_per_hour(*rec);
    if (!in_setup(rec->state)) continue;
    ++n_setup;
    machines_in_setup.insert(rec->offer.machine_id);
    const Prediction pred =
        predict_offer(rec->offer, knowledge, cfg.predictor,
                      others_on(rec->offer.machine_id, rec->id), Reasons::Skipped);
    ScoreContext ctx;
    ctx.lifetime_h = within_contract_h(rec->offer, lifetime, now);
    ctx.explain = false;
    const Score sc = score_offer(rec->offer, pred, cfg.scoring, ctx);
    committed += sc.p_pays * sc.rate_if_accepted;
    if (sc.exploratory()) pending_exploration += sc.exploration_cost_usd;
  }

  // Candidates: never a machine the operator recently took an instance off.
  const std::set<std::int64_t> cooled =
      operator_cooldown_machines(fleet, now, cfg.operator_cooldown_s);
  std::vector<Offer> open_offers;
  for (const auto& offer : offers)
    if (!cooled.count(offer.machine_id)) open_offers.push_back(offer);
  const Exclusion excluded = excluded_machines(bad_hosts, open_offers, now, cfg.blocklist);
  const std::map<std::int64_t, double> downloads = measured_download_mbps(fleet);
  // The demand room a candidate fills, and the part of it that lasts (demand from a job queue).
  auto set_rooms = [&](ScoreContext& ctx, double committed_now) {
    if (!cfg.demand_proofs_per_hour) return;
    const double demand = *cfg.demand_proofs_per_hour * cfg.demand_headroom;
    ctx.demand_room = demand - committed_now;
    if (cfg.lasting_demand_proofs_per_hour) {
      ctx.lasting_room =
          std::min(demand, *cfg.lasting_demand_proofs_per_hour * cfg.demand_headroom) -
          committed_now;
      ctx.room_lasts_h = cfg.transient_room_h;
    }
  };
  std::vector<Candidate> candidates;
  for (const auto& offer : open_offers) {
    if (excluded.machines.count(offer.machine_id)) continue;
    if (machines_in_setup.count(offer.machine_id)) continue;
    const int others = others_on(offer.machine_id, -1);
    if (others > 0 && !cfg.allow_shared_machines) continue;
    Candidate c;
    c.offer = offer;
    c.others = others;
    c.prediction = predict_offer(offer, knowledge, cfg.predictor, others, Reasons::Skipped);
    // A contract that ends before the rental pays back its setup leaves it worth less than
    // nothing: valued over the hours it may run, it is not rented.
    c.context.lifetime_h = within_contract_h(offer, lifetime, now);
    c.context.failure_strikes = auto_strikes(bad_hosts, offer.machine_id);
    if (auto it = downloads.find(offer.machine_id); it != downloads.end())
      c.context.measured_download_mbps = it->second;
    set_rooms(c.context, committed);
    // Every listed offer is screened with numbers only; the words are written for what it rents.
    c.context.explain = false;
    c.score = score_offer(offer, c.prediction, cfg.scoring, c.context);
    if (others > 0) {
      // Ours already there slow down too: their lost proofs are part of this rental's price.
      double lost = 0;
      for (const auto* rec : alive) {
        if (rec->offer.machine_id != offer.machine_id || dropped.count(rec->id)) continue;
        auto it = measured.find(rec->id);
        const double r = it != measured.end() ? it->second : 0;
        lost += r * (1 - knowledge.contention_factor);
      }
      c.lost_rate = lost;
      const double lost_usd = lost * revenue * c.score.productive_hours;
      c.score.value_usd -= lost_usd;
      c.sharing = "shares machine " + std::to_string(offer.machine_id) + " with " +
                  std::to_string(others) + " of ours, costing them ~" + fixed(lost, 1) + "/hr (" +
                  money(lost_usd) + ")";
    }
    c.expected_rate = c.score.p_pays * c.score.rate_if_accepted;
    // With demand, one that does not fit the room may still pay as a swap (decided below).
    if (c.score.value_usd < cfg.min_value_usd && !(cfg.demand_proofs_per_hour && !measured.empty()))
      continue;
    candidates.push_back(std::move(c));
  }
  const bool per_proof = cfg.demand_proofs_per_hour.has_value();
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    const double ka = per_proof ? a.score.value_per_proof_usd : a.score.value_usd;
    const double kb = per_proof ? b.score.value_per_proof_usd : b.score.value_usd;
    if (ka != kb) return ka > kb;
    return a.offer.id < b.offer.id;
  });

  // Proving instances a swap may displace (each at most once per decision).
  std::vector<Displaceable> displaceable;
  for (const auto* rec : alive) {
    auto it = measured.find(rec->id);
    if (it == measured.end() || dropped.count(rec->id) || it->second <= 0) continue;
    displaceable.push_back({rec->id, rec->offer.machine_id, it->second, rental_usd_per_hour(*rec)});
  }

  int rents = 0;
  std::set<std::int64_t> machines_taken;
  for (auto& c : candidates) {
    if (rents >= cfg.max_rents_per_decision) break;
    if (n_live >= cfg.max_instances) break;
    if (n_setup >= cfg.max_concurrent_benchmarks) break;
    if (machines_taken.count(c.offer.machine_id)) continue;
    if (dph + c.offer.dph_total > cfg.max_dollars_per_hour) continue;
    std::optional<SwapPlan> swap;
    if (cfg.demand_proofs_per_hour) {
      // Re-value against the demand still open after the rentals chosen above.
      set_rooms(c.context, committed);
      c.score = score_offer(c.offer, c.prediction, cfg.scoring, c.context);
      c.score.value_usd -= c.lost_rate * revenue * c.score.productive_hours;
      swap = best_swap(c.offer, c.prediction, cfg.scoring, c.context, displaceable, c.lost_rate,
                       cfg.swap_margin, cfg.swap_max_displaced);
      const bool fills = c.score.value_usd >= cfg.min_value_usd;
      if (swap && (swap->value_usd < std::max(cfg.swap_min_gain_usd, cfg.min_value_usd) ||
                   (fills && swap->value_usd <= c.score.value_usd)))
        swap.reset();
      if (!fills && !swap) continue;
      if (swap) c.score = swap->score;
    }
    const bool exploratory = c.score.exploratory();
    if (exploratory &&
        history.exploration_spent_usd + pending_exploration + c.score.exploration_cost_usd >
            cfg.exploration_budget_usd) {
      continue;
    }
    explain_score(c.score, c.offer, c.prediction, cfg.scoring, swap ? swap->context : c.context);
    Action a;
    a.kind = Action::Kind::Rent;
    a.exploratory = exploratory;
    a.partitions = c.prediction.partitions;
    std::string why =
        swap          ? swap_reason(*swap, c.offer, revenue)
        : exploratory ? "to find out: the point estimate does not pay but the band might (" +
                            money(c.score.exploration_cost_usd) + " at risk of the " +
                            money(cfg.exploration_budget_usd) + " exploration budget, " +
                            money(history.exploration_spent_usd + pending_exploration) + " used)"
                      : "expected to pay";
    a.reason = "rent offer " + std::to_string(c.offer.id) + " (" +
               std::to_string(c.offer.num_gpus) + "x " + c.offer.gpu_name + ", machine " +
               std::to_string(c.offer.machine_id) + ", $" + fixed(c.offer.dph_total, 3) + "/hr) " +
               why + ": " + c.score.reasons[0] + "; " + c.score.reasons[1] +
               (c.sharing.empty() ? "" : "; " + c.sharing) + "; fleet then " +
               money(dph + c.offer.dph_total) + "/hr of " + money(cfg.max_dollars_per_hour) + ", " +
               std::to_string(n_live + 1) + "/" + std::to_string(cfg.max_instances) +
               " instances, " + std::to_string(n_setup + 1) + "/" +
               std::to_string(cfg.max_concurrent_benchmarks) + " in setup" +
               (cfg.demand_proofs_per_hour
                    ? ", expected capacity " + fixed(committed + c.expected_rate, 0) + " of " +
                          fixed(*cfg.demand_proofs_per_hour, 0) + "/hr demand"
                    : "");
    a.offer = c.offer;
    // The same numbers, now with their reasons (screening skipped the words).
    a.prediction = predict_offer(c.offer, knowledge, cfg.predictor, c.others, Reasons::Written);
    a.score = std::move(c.score);
    if (exploratory) pending_exploration += a.score.exploration_cost_usd;
    committed += c.expected_rate;
    if (swap) {
      for (const auto& d : swap->displaced) {
        std::erase_if(displaceable,
                      [&](const Displaceable& x) { return x.instance_id == d.instance_id; });
      }
    }
    dph += c.offer.dph_total;
    ++n_live;
    ++n_setup;
    ++rents;
    machines_taken.insert(c.offer.machine_id);
    actions.push_back(std::move(a));
  }
  return actions;
}

std::set<std::int64_t> operator_cooldown_machines(const std::vector<InstanceRecord>& fleet,
                                                  double now, double cooldown_s) {
  std::set<std::int64_t> out;
  for (const auto& rec : fleet) {
    if (rec.close_cause != CloseCause::Operator) continue;
    if (!rec.destroyed_at || now - *rec.destroyed_at < cooldown_s) out.insert(rec.offer.machine_id);
  }
  return out;
}

std::vector<ProductionWindow> complete_production_windows(const std::vector<ProofSample>& samples,
                                                          double window_s) {
  std::vector<ProofSample> production;
  for (const auto& s : samples)
    if (s.phase == ProofPhase::Production) production.push_back(s);
  std::vector<ProductionWindow> out;
  if (production.empty() || !(window_s > 0)) return out;
  std::sort(production.begin(), production.end(),
            [](const ProofSample& a, const ProofSample& b) { return a.at < b.at; });
  // The first proof ends a proof that started one proof-time earlier: the window opens there.
  const double origin = production.front().at - production.front().seconds;
  for (const auto& s : production) {
    const auto index = static_cast<std::size_t>((s.at - origin) / window_s);
    while (out.size() <= index) {
      out.push_back({origin + static_cast<double>(out.size()) * window_s, {}});
    }
    out[index].samples.push_back(s);
  }
  out.pop_back();  // the window the latest proof is in is still open
  return out;
}

}  // namespace pf::core
