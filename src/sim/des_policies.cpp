#include "sim/des_policies.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include "core/text.h"
#include "market/query.h"
#include "scenario/offer_query.h"
#include "scenario/truth_model.h"
#include "sim/profit_bound.h"

namespace pf::sim {
namespace {

using S = core::InstanceState;
using core::fixed;

bool live(const core::InstanceRecord& r) {
  return r.state != S::Destroying && r.state != S::Destroyed;
}

void put_bad_host(std::vector<core::BadHost>& list, core::BadHost entry) {
  for (auto& b : list) {
    if (b.machine_id == entry.machine_id && b.source == entry.source) {
      b = std::move(entry);
      return;
    }
  }
  list.push_back(std::move(entry));
}

core::Action rent_action(const core::Offer& offer, std::string reason) {
  core::Action a;
  a.kind = core::Action::Kind::Rent;
  a.offer = offer;
  a.reason = std::move(reason);
  return a;
}

}  // namespace

// --- default -------------------------------------------------------------------------------

DefaultPolicyConfig serve_defaults() {
  DefaultPolicyConfig c;
  const core::AcceptanceConfig caps;
  c.sprt = core::with_caps(core::SprtConfig{}, caps);
  c.lifecycle.bench_max_samples = caps.max_samples;
  return c;
}

DefaultPolicyConfig default_policy_config(const Scenario& s, DefaultPolicyConfig c) {
  auto& p = c.policy;
  p.scoring.economics.revenue_per_proof_usd = s.economics.revenue_per_proof_usd;
  p.scoring.economics.target_cost_per_proof_usd = s.economics.target_cost_per_proof_usd;
  p.scoring.setup.params_bytes = s.params_bytes;
  if (!s.demand) {
    // /1: no jobs, so a proof moves nothing (the instance proves its benchmark input again) and
    // the engine bills none; where jobs arrive it bills each job's input down and proof up, as
    // serve's policy counts them ([economics] job_input_mb).
    p.scoring.economics.job_input_bytes = 0;
    p.scoring.economics.proof_bytes = 0;
  }
  if (s.economics.demand_proofs_per_hour) {
    p.demand_proofs_per_hour = s.economics.demand_proofs_per_hour;
  }
  p.stop_at = kDesEpoch + s.hours * 3600;
  return c;
}

DefaultPolicy::DefaultPolicy(DefaultPolicyConfig config)
    : config_(std::move(config)), sprt_(config_.sprt) {}

double DefaultPolicy::break_even_rate(const core::Offer& offer) const {
  return core::objective_break_even(offer, offer.dph_total, config_.policy.scoring);
}

int DefaultPolicy::plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                                   int after_oom) const {
  core::PlanInput in;
  in.ram_gib = probe.ram_gib;
  in.cores = probe.cores;
  in.gpus = probe.gpus;
  // A machine one of ours was killed for memory on starts below that plan.
  const auto known = oom_partitions_.find(offer.machine_id);
  auto plan = after_oom > 0
                  ? core::plan_after_oom(in, config_.planner, after_oom)
                  : core::plan_for_machine(in, config_.planner,
                                           known != oom_partitions_.end() ? known->second : 0);
  return plan ? plan->partitions : 0;
}

std::vector<core::Action> DefaultPolicy::decide(const DesView& view) {
  core::PolicyHistory history;
  history.measurements = view.history;
  history.exploration_spent_usd =
      core::exploration_spend(view.fleet, view.now, config_.policy.exploration_window_s);
  oom_partitions_ = core::oom_partitions_by_machine(view.fleet);
  if (!view.jobs) {
    return core::decide(view.fleet, view.offers, history, view.bad_hosts, view.now, config_.policy);
  }
  // /2: size the fleet for the demand the job queue shows (none seen yet: rent nothing).
  core::PolicyConfig policy = config_.policy;
  policy.demand_proofs_per_hour = 0;
  auto scaled = core::decide_for_jobs(view.fleet, view.offers, history, view.bad_hosts, view.now,
                                      std::move(policy), *view.jobs, demand_, config_.scale);
  if (scaled.demand) demand_ = scaled.demand->proofs_per_hour;
  return std::move(scaled.actions);
}

void DefaultPolicy::on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) {
  std::optional<core::Strike> strike = closed.strike;
  if (!strike) {
    strike = core::strike_for_close(closed.record, closed.state_before, closed.cause, closed.reason,
                                    closed.now, closed.our_others_on_machine);
  }
  if (!strike) return;
  core::StrikeOutcome out = core::apply_strike(bad_hosts, *strike, config_.policy.blocklist);
  if (out.entry) put_bad_host(bad_hosts, std::move(*out.entry));
}

// --- classic -------------------------------------------------------------------------------

core::Verdict ClassicAcceptance::evaluate(const core::BenchmarkInput& in) const {
  core::Verdict v;
  v.break_even_rate = in.break_even_rate;
  std::vector<double> at;
  for (const auto& s : in.samples) at.push_back(s.at);
  std::sort(at.begin(), at.end());
  v.samples = static_cast<int>(at.size());
  if (static_cast<int>(at.size()) < proofs_) {
    v.decision = core::Verdict::Decision::Continue;
    v.reason =
        "benchmark: " + std::to_string(at.size()) + " of " + std::to_string(proofs_) + " proofs";
    return v;
  }
  // The batch clock starts at the restart, so the preload is inside it.
  const double elapsed = at[static_cast<std::size_t>(proofs_) - 1] - in.since + preload_s_;
  v.samples = proofs_;
  v.rate = elapsed > 0 ? proofs_ * 3600.0 / elapsed : 0;
  v.low = v.high = v.rate;
  const double min_rate = std::ceil(in.break_even_rate - 1e-9);
  const bool pass = v.rate >= min_rate;
  v.decision = pass ? core::Verdict::Decision::Accept : core::Verdict::Decision::Reject;
  v.reason = std::string(pass ? "passed" : "failed") + ": " + fixed(v.rate, 1) + "/hr over a " +
             std::to_string(proofs_) + "-proof batch after warm-up and restart, min_rate " +
             fixed(min_rate, 0) + "/hr";
  return v;
}

ClassicPolicy::ClassicPolicy(const Scenario& s, ClassicConfig config, FleetCaps caps)
    : config_(std::move(config)),
      caps_(caps),
      target_(s.economics.target_cost_per_proof_usd),
      demand_(s.economics.demand_proofs_per_hour),
      acceptance_(config_.benchmark_proofs, config_.restart_preload_s) {
  // /2: the tool had no demand signal; its operator sized the fleet by hand from what Curio's
  // queue showed on average: the mean arrival rate over the run, held fixed.
  if (s.demand && s.hours > 0) {
    double jobs = 0;
    for (const auto& seg : s.demand->arrivals) {
      jobs += seg.proofs_per_hour * std::max(0.0, std::min(seg.to_h, s.hours) - seg.from_h);
    }
    demand_ = jobs / s.hours;
  }
  auto query = market::parse_query(config_.filter, false);
  if (!query) throw std::invalid_argument("classic filter: " + query.error());
  nlohmann::json body = query->filters;
  body["limit"] = static_cast<std::int64_t>(s.offers.size()) + 1;
  std::vector<nlohmann::json> offers;
  for (const auto& so : s.offers) offers.push_back(so.vast_json);
  auto matched = scenario::apply_search(offers, body);
  if (!matched) throw std::invalid_argument("classic filter: " + matched.error());
  for (const auto& o : *matched) passes_filter_.insert(o.at("id").get<std::int64_t>());
}

core::LifecycleConfig ClassicPolicy::lifecycle() const {
  core::LifecycleConfig c;
  // Loading (image pull, unbilled) had no timeout in the tool: the operator noticed.
  c.boot_loading_max_s = config_.operator_loading_s;
  // The monitor's 15 minutes: a labelled instance (running) whose agent never registered.
  c.boot_register_grace_s = config_.register_timeout_s;
  c.registered_max_s = config_.params_timeout_s;
  c.params_min_s = c.params_max_s = config_.params_timeout_s;
  // Backstops; the 45 minutes from parameters done are checked in decide().
  c.warmup_max_s = config_.benchmark_timeout_s;
  c.bench_min_s = c.bench_max_s = config_.benchmark_timeout_s;
  return c;
}

double ClassicPolicy::break_even_rate(const core::Offer& offer) const {
  return core::break_even_rate(offer.dph_total, target_);
}

int ClassicPolicy::plan_partitions(const core::Offer& offer, const AgentProbe&,
                                   int after_oom) const {
  if (after_oom > 0) return 0;  // the entrypoint dies with the prover
  const double ram_gb = offer.cpu_ram_gib * 1.073741824;
  return ram_gb > config_.large_ram_gb ? config_.partitions_large : config_.partitions;
}

std::vector<core::Action> ClassicPolicy::decide(const DesView& view) {
  std::vector<core::Action> actions;
  std::set<std::int64_t> never_again;
  for (const auto& b : view.bad_hosts) never_again.insert(b.machine_id);
  // host_perf: MAX(bench_rate) per (machine, GPU, count); by model, the mean of its hosts.
  using Host = std::tuple<std::int64_t, std::string, int>;
  using Model = std::pair<std::string, int>;
  std::map<Host, double> host_best;
  for (const auto& m : view.history) {
    if (m.run.kind != "benchmark") continue;
    auto& b = host_best[{m.run.host.machine_id, m.run.host.gpu_name, m.run.host.num_gpus}];
    b = std::max(b, m.run.rate);
  }
  std::map<Model, std::pair<double, int>> model_sum;
  for (const auto& [host, rate] : host_best) {
    auto& [sum, n] = model_sum[{std::get<1>(host), std::get<2>(host)}];
    sum += rate;
    ++n;
  }
  auto estimate = [&](const core::Offer& o) -> std::optional<double> {
    if (auto it = host_best.find({o.machine_id, o.gpu_name, o.num_gpus}); it != host_best.end())
      return it->second;
    if (auto it = model_sum.find({o.gpu_name, o.num_gpus}); it != model_sum.end())
      return it->second.first / it->second.second;
    for (const auto& k : config_.field_rates)
      if (k.gpu_name == o.gpu_name && k.num_gpus == o.num_gpus) return k.rate;
    return std::nullopt;
  };

  int in_setup = 0;
  int n_live = 0;
  double dph = 0;
  double capacity = 0;
  std::set<Model> models_in_setup;
  for (const auto& r : view.fleet) {
    if (!live(r)) continue;
    // The monitor's benchmark timeout counts from parameters done (warm-up, restart, batch).
    if (r.state == S::WarmingUp || r.state == S::Benchmarking) {
      const double done = params_done_at_.try_emplace(r.id, r.state_since).first->second;
      if (view.now - done >= config_.benchmark_timeout_s) {
        core::Action a;
        a.kind = core::Action::Kind::Drop;
        a.instance_id = r.id;
        a.offer = r.offer;
        a.reason = "classic: benchmark not done " + fixed(config_.benchmark_timeout_s / 60, 0) +
                   " min after the parameters";
        actions.push_back(std::move(a));
        continue;
      }
    }
    ++n_live;
    dph += r.offer.dph_total;
    if (core::in_setup(r.state)) {
      ++in_setup;
      models_in_setup.insert({r.offer.gpu_name, r.offer.num_gpus});
    }
    if (r.state == S::Proving) {
      capacity += host_best[{r.offer.machine_id, r.offer.gpu_name, r.offer.num_gpus}];
    }
  }

  struct Candidate {
    const core::Offer* offer;
    std::optional<double> rate;
  };
  std::vector<Candidate> known;
  std::vector<Candidate> unknown;
  for (const auto& o : view.offers) {
    if (!passes_filter_.count(o.id) || never_again.count(o.machine_id)) continue;
    if (o.inet_down_mbps < config_.slow_download_mbps) continue;
    const auto rate = estimate(o);
    if (!rate) {
      unknown.push_back({&o, rate});
    } else if (*rate >= std::ceil(break_even_rate(o) - 1e-9)) {
      known.push_back({&o, rate});
    }
  }
  std::sort(known.begin(), known.end(), [](const Candidate& a, const Candidate& b) {
    const double ra = *a.rate / a.offer->dph_total;
    const double rb = *b.rate / b.offer->dph_total;
    if (ra != rb) return ra > rb;
    return a.offer->id < b.offer->id;
  });
  std::sort(unknown.begin(), unknown.end(), [](const Candidate& a, const Candidate& b) {
    if (a.offer->dph_total != b.offer->dph_total) return a.offer->dph_total < b.offer->dph_total;
    return a.offer->id < b.offer->id;
  });
  for (const auto* list : {&known, &unknown}) {
    for (const Candidate& c : *list) {
      const core::Offer& o = *c.offer;
      if (in_setup >= config_.max_benchmarks || n_live >= caps_.max_instances) break;
      if (demand_ && capacity >= *demand_) break;
      if (dph + o.dph_total > caps_.max_dollars_per_hour) continue;
      const Model model{o.gpu_name, o.num_gpus};
      if (!c.rate && models_in_setup.count(model)) continue;  // one try per unknown model
      const std::string why = c.rate ? "estimated " + fixed(*c.rate, 1) + "/hr, " +
                                           fixed(*c.rate / o.dph_total, 0) + " proofs per dollar"
                                     : "unknown model, cheapest first";
      actions.push_back(
          rent_action(o, "classic operator: " + why + " ($" + fixed(o.dph_total, 3) + "/hr)"));
      ++in_setup;
      ++n_live;
      dph += o.dph_total;
      models_in_setup.insert(model);
    }
  }
  return actions;
}

void ClassicPolicy::on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) {
  params_done_at_.erase(closed.record.id);
  // Every close but the horizon's is a failure to the tool (its only drops are timeouts).
  if (closed.cause == CloseCause::Horizon) return;
  core::BadHost b;
  b.machine_id = closed.record.offer.machine_id;
  b.source = "auto";
  b.added_at = closed.now;
  b.reason = "classic: failed once (" + closed.reason + "), never retried";
  put_bad_host(bad_hosts, std::move(b));
}

// --- clairvoyant ---------------------------------------------------------------------------

namespace {

// /2: a new rental must be wanted over its first half hour of proving; an instance is kept
// while the arrivals until a replacement could be proving, plus half an hour, need it. (Tried
// on the bundled /2 scenarios: headroom above the arrival rate, longer windows or keeping
// through dips as long as a re-rent's setup costs all earned less.)
constexpr double kRentWindowH = 0.5;
constexpr double kKeepExtraH = 0.5;
// How far ahead (hours) a /2 rental is valued against the arrivals it would serve.
constexpr double kValueLookaheadH = 12;
constexpr double kValueStepH = 1.0 / 12;

}  // namespace

ClairvoyantPolicy::ClairvoyantPolicy(const Scenario& s, FleetCaps caps)
    : caps_(caps), revenue_(s.economics.revenue_per_proof_usd) {
  for (const auto& o : s.offers) partitions_[o.offer.id] = best_partitions(o.truth);
}

core::LifecycleConfig ClairvoyantPolicy::lifecycle() const {
  // It rents only what finishes in time by the truth, so no deadline may cut a rental short
  // (the old greedy "oracle"'s deadlines killed a slow download it then rented again, five times).
  constexpr double kNoDeadline = 1e9;
  core::LifecycleConfig c;
  c.renting_max_s = c.boot_loading_max_s = c.boot_register_grace_s = kNoDeadline;
  c.registered_max_s = c.warmup_max_s = kNoDeadline;
  c.params_min_s = c.params_max_s = kNoDeadline;
  c.bench_min_s = c.bench_max_s = kNoDeadline;
  return c;
}

double ClairvoyantPolicy::break_even_rate(const core::Offer& offer) const {
  return core::break_even_rate(offer.dph_total, revenue_);
}

int ClairvoyantPolicy::plan_partitions(const core::Offer& offer, const AgentProbe&,
                                       int after_oom) const {
  if (after_oom > 0) return 0;  // its plan fits the machine's real memory by construction
  const auto it = partitions_.find(offer.id);
  return it == partitions_.end() ? 0 : it->second;
}

std::vector<core::Action> ClairvoyantPolicy::decide(const DesView& view) {
  const Scenario& sc = view.scenario;
  const double end = kDesEpoch + sc.hours * 3600;
  const double now_h = (view.now - kDesEpoch) / 3600;
  const double v = revenue_;
  const double fixed_demand =
      sc.economics.demand_proofs_per_hour.value_or(std::numeric_limits<double>::infinity());
  // Proofs per hour worth having at hour h (/1: the rate cap; /2: the arrival rate).
  const auto needed_at = [&](double h) {
    return sc.demand ? scenario::arrival_rate(*sc.demand, h) : fixed_demand;
  };
  // Its largest value over [from_h, to_h].
  const auto needed_over = [&](double from_h, double to_h) {
    double most = needed_at(from_h);
    if (sc.demand) {
      for (const auto& seg : sc.demand->arrivals) {
        if (seg.from_h > from_h && seg.from_h < to_h) {
          most = std::max(most, seg.proofs_per_hour);
        }
      }
    }
    return most;
  };
  std::vector<core::Action> actions;
  auto drop = [&](const core::InstanceRecord& r, std::string reason) {
    core::Action a;
    a.kind = core::Action::Kind::Drop;
    a.instance_id = r.id;
    a.offer = r.offer;
    a.reason = "clairvoyant: " + std::move(reason);
    actions.push_back(std::move(a));
  };
  const auto contention_of = [&](std::size_t scenario_index) {
    return sc.offers[scenario_index].truth.contention;
  };

  // Our live instances per machine (contention) and their truth.
  std::map<std::int64_t, int> ours_on;
  for (const auto& r : view.fleet)
    if (live(r)) ++ours_on[r.offer.machine_id];
  struct Live {
    const core::InstanceRecord* rec;
    double rate;  // now, or once proving
    bool proving;
    double cost_per_proof;
    double setup_h;  // how long a replacement of it takes to prove
  };
  std::vector<Live> lives;
  double capacity = 0;  // proving and setting up
  double dph = 0;
  int n_live = 0;
  for (std::size_t j = 0; j < view.fleet.size(); ++j) {
    const auto& r = view.fleet[j];
    if (!live(r)) continue;
    const std::size_t k = view.fleet_offer_index[j];
    const RentalCurve curve(sc, sc.offers[k], r.offer.dph_total);
    const double age_h = (view.now - r.created_at) / 3600;
    const double planned = curve.best((end - r.created_at) / 3600, v).hours;
    if (age_h >= planned && planned < (end - r.created_at) / 3600) {
      drop(r, "its best length under the truth (" + fixed(planned, 1) +
                  " h) is over: throttled or failed, it no longer pays");
      continue;
    }
    const bool proving = age_h >= curve.proving_from_h();
    const double shared = std::pow(contention_of(k), ours_on[r.offer.machine_id] - 1);
    const double rate = (proving ? curve.rate_at(age_h) : curve.rate()) * shared;
    lives.push_back(
        {&r, rate, proving, rate > 0 ? r.offer.dph_total / rate : 1e9, curve.proving_from_h()});
    capacity += rate;
    dph += r.offer.dph_total;
    ++n_live;
  }

  // Surplus: the dearest proving instances whose proofs demand no longer needs, until a
  // replacement could be proving (so a dip shorter than a setup keeps them).
  std::sort(lives.begin(), lives.end(),
            [](const Live& a, const Live& b) { return a.cost_per_proof > b.cost_per_proof; });
  double proving_capacity = 0;
  for (const Live& l : lives)
    if (l.proving) proving_capacity += l.rate;
  std::set<std::int64_t> dropped;
  for (const Live& l : lives) {
    if (!l.proving) continue;
    const bool loses = l.rate * v < l.rec->offer.dph_total;
    const bool surplus =
        proving_capacity - l.rate >= needed_over(now_h, now_h + l.setup_h + kKeepExtraH);
    if (!loses && !surplus) continue;
    drop(*l.rec, loses ? "proves " + fixed(l.rate, 1) + "/hr, below break-even"
                       : "surplus: demand is covered without its " + fixed(l.rate, 1) + "/hr");
    proving_capacity -= l.rate;
    capacity -= l.rate;
    dph -= l.rec->offer.dph_total;
    --n_live;
    dropped.insert(l.rec->id);
  }
  // The dearest kept proving instance: what a swap would replace.
  double dearest = 0;
  double dearest_rate = 0;
  double dearest_setup_h = 0;
  for (const Live& l : lives) {
    if (l.proving && !dropped.count(l.rec->id) && l.cost_per_proof > dearest) {
      dearest = l.cost_per_proof;
      dearest_rate = l.rate;
      dearest_setup_h = l.setup_h;
    }
  }

  struct Pick {
    const core::Offer* offer;
    std::size_t index;
    RentalCurve curve;
    double rate;
    double hours;
    double proofs;
    double cost;
    double cost_per_proof;
  };
  std::vector<Pick> picks;
  const double left_h = (end - view.now) / 3600;
  for (std::size_t i = 0; i < view.offers.size(); ++i) {
    const std::size_t k = view.offer_index[i];
    // Priced as listed now: the rental pays this for its whole life.
    RentalCurve curve(sc, sc.offers[k], view.offers[i].dph_total);
    if (!curve.can_prove()) continue;
    const auto best = curve.best(left_h, v);
    if (best.profit_usd <= 0) continue;
    const double proofs = curve.proofs(best.hours);
    const double cost = curve.cost_usd(best.hours);
    const double rate = curve.rate();
    // /2: rentals last as long as the arrivals need them, so an offer's setup is spread over
    // the lookahead at most, not over the rest of the run.
    const double spread_h = sc.demand ? std::min(best.hours, kValueLookaheadH) : best.hours;
    const double spread_proofs = curve.proofs(spread_h);
    const double cost_per_proof =
        spread_proofs > 0 ? curve.cost_usd(spread_h) / spread_proofs : cost / proofs;
    picks.push_back(
        {&view.offers[i], k, std::move(curve), rate, best.hours, proofs, cost, cost_per_proof});
  }
  std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
    if (a.cost_per_proof != b.cost_per_proof) return a.cost_per_proof < b.cost_per_proof;
    return a.offer->id < b.offer->id;
  });
  // /2: what a rental earns over its first hours from the arrivals the fleet leaves to it
  // (capacity `cap` ahead of it), kept for the best length up to the lookahead.
  const auto arrivals_value = [&](const Pick& p, double share, double cap) {
    const double until = std::min({p.hours, left_h, kValueLookaheadH});
    double paid = 0;
    double best = 0;
    for (double age = p.curve.proving_from_h(); age < until; age += kValueStepH) {
      const double step = std::min(kValueStepH, until - age);
      const double room = std::max(0.0, needed_at(now_h + age) - cap);
      paid += std::min(p.curve.rate_at(age) * share, room) * step;
      best = std::max(best, v * paid - p.curve.cost_usd(age + step));
    }
    return best;
  };
  bool swapped = false;
  for (const Pick& p : picks) {
    if (n_live >= caps_.max_instances) break;
    if (dph + p.offer->dph_total > caps_.max_dollars_per_hour) continue;
    // Sharing a machine: every instance there, ours included, runs at the contention factor.
    const int there = ours_on[p.offer->machine_id];
    const double c = contention_of(p.index);
    const double share = std::pow(c, there);
    double loss = 0;
    if (there > 0) {
      for (const Live& l : lives) {
        if (l.rec->offer.machine_id != p.offer->machine_id || dropped.count(l.rec->id)) continue;
        loss += l.rate * (1 - c) * v * std::min(p.hours, left_h);
      }
    }
    // The demand when it would be proving (its setup counted).
    const double ready_h = now_h + p.curve.proving_from_h();
    const double room = needed_over(ready_h, ready_h + kRentWindowH) - capacity;
    // A swap must let the dearer instance go once the new one proves (by the surplus rule
    // above, its window included): otherwise that rule drops the new one and the swap repeats.
    const bool swap = room <= 0 && !swapped && p.cost_per_proof / share < 0.8 * dearest &&
                      capacity + p.rate * share - dearest_rate >=
                          needed_over(ready_h, ready_h + dearest_setup_h + kKeepExtraH);
    if (room <= 0 && !swap) continue;
    double value = 0;
    if (sc.demand && !swap) {
      value = arrivals_value(p, share, capacity) - loss;
    } else {
      const double paid =
          swap ? p.proofs * share : p.proofs * share * std::min(1.0, room / (p.rate * share));
      value = v * paid - p.cost - loss;
    }
    if (value <= 0) continue;
    actions.push_back(
        rent_action(*p.offer, "clairvoyant: the truth says " + fixed(p.rate * share, 1) +
                                  "/hr at $" + fixed(p.cost_per_proof / share * 1000, 2) +
                                  " per 1000 proofs over " + fixed(p.hours, 1) + " h earns $" +
                                  fixed(value, 2) + (swap ? " (replaces a dearer instance)" : "")));
    swapped = swapped || swap;
    capacity += p.rate * share;
    dph += p.offer->dph_total;
    ++n_live;
    ++ours_on[p.offer->machine_id];
  }
  return actions;
}

// --- registry ------------------------------------------------------------------------------

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"default", "classic", "clairvoyant"};
  return names;
}

std::unique_ptr<DesPolicy> make_policy(const std::string& name, const Scenario& scenario,
                                       const DefaultPolicyConfig& live) {
  const FleetCaps caps{live.policy.max_dollars_per_hour, live.policy.max_instances};
  if (name == "default") {
    return std::make_unique<DefaultPolicy>(default_policy_config(scenario, live));
  }
  if (name == "classic") return std::make_unique<ClassicPolicy>(scenario, ClassicConfig{}, caps);
  if (name == "clairvoyant") return std::make_unique<ClairvoyantPolicy>(scenario, caps);
  return nullptr;
}

}  // namespace pf::sim
