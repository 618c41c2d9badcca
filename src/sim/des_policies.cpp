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

DefaultPolicyConfig default_policy_config(const Scenario& s, const FleetCaps& caps) {
  DefaultPolicyConfig c;
  auto& p = c.policy;
  p.scoring.economics.revenue_per_proof_usd = s.economics.revenue_per_proof_usd;
  p.scoring.economics.target_cost_per_proof_usd = s.economics.target_cost_per_proof_usd;
  p.scoring.setup.params_bytes = s.params_bytes;
  p.demand_proofs_per_hour = s.economics.demand_proofs_per_hour;
  p.stop_at = kDesEpoch + s.hours * 3600;
  p.max_dollars_per_hour = caps.max_dollars_per_hour;
  p.max_instances = caps.max_instances;
  c.lifecycle.bench_max_samples = c.sprt.max_samples;
  return c;
}

DefaultPolicy::DefaultPolicy(DefaultPolicyConfig config)
    : config_(std::move(config)), sprt_(config_.sprt) {}

double DefaultPolicy::break_even_rate(const core::Offer& offer) const {
  return core::objective_break_even(offer.dph_total, config_.policy.scoring);
}

int DefaultPolicy::plan_partitions(const core::Offer&, const AgentProbe& probe,
                                   int after_oom) const {
  core::PlanInput in;
  in.ram_gib = probe.ram_gib;
  in.cores = probe.cores;
  in.gpus = probe.gpus;
  auto plan = after_oom > 0 ? core::plan_after_oom(in, config_.planner, after_oom)
                            : core::plan_prover(in, config_.planner);
  return plan ? plan->partitions : 0;
}

std::vector<core::Action> DefaultPolicy::decide(const DesView& view) {
  core::PolicyHistory history;
  history.measurements = view.history;
  history.exploration_spent_usd =
      core::exploration_spend(view.fleet, view.now, config_.policy.exploration_window_s);
  return core::decide(view.fleet, view.offers, history, view.bad_hosts, view.now, config_.policy);
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
  const double elapsed = at[static_cast<std::size_t>(proofs_) - 1] - in.since;
  v.samples = proofs_;
  v.rate = elapsed > 0 ? proofs_ * 3600.0 / elapsed : 0;
  v.low = v.high = v.rate;
  const double min_rate = std::ceil(in.break_even_rate - 1e-9);
  const bool pass = v.rate >= min_rate;
  v.decision = pass ? core::Verdict::Decision::Accept : core::Verdict::Decision::Reject;
  v.reason = std::string(pass ? "passed" : "failed") + ": " + fixed(v.rate, 1) + "/hr over " +
             std::to_string(proofs_) + " proofs from the first, min_rate " + fixed(min_rate, 0) +
             "/hr";
  return v;
}

ClassicPolicy::ClassicPolicy(const Scenario& s, ClassicConfig config, FleetCaps caps)
    : config_(std::move(config)),
      caps_(caps),
      target_(s.economics.target_cost_per_proof_usd),
      demand_(s.economics.demand_proofs_per_hour),
      acceptance_(config_.benchmark_proofs) {
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
  c.boot_loading_max_s = config_.register_timeout_s;
  c.boot_register_grace_s = config_.register_timeout_s;
  c.registered_max_s = config_.register_timeout_s;
  c.params_min_s = c.params_max_s = config_.params_timeout_s;
  c.bench_min_s = c.bench_max_s = config_.benchmark_timeout_s;
  c.warmup_max_s = config_.benchmark_timeout_s;
  return c;
}

double ClassicPolicy::break_even_rate(const core::Offer& offer) const {
  return core::break_even_rate(offer.dph_total, target_);
}

int ClassicPolicy::plan_partitions(const core::Offer& offer, const AgentProbe&,
                                   int after_oom) const {
  if (after_oom > 0) return 0;  // the entrypoint dies with the prover
  const double ram_gb = offer.cpu_ram_gib * 1.073741824;
  const int gpus = std::max(1, offer.num_gpus);
  const double by_ram = std::floor((ram_gb - config_.ram_overhead_gb) /
                                   (config_.partition_workers * config_.gb_per_worker));
  const int concurrency =
      std::max(1, std::min(static_cast<int>(by_ram), config_.concurrency_per_gpu * gpus));
  return concurrency * config_.partition_workers;
}

std::vector<core::Action> ClassicPolicy::decide(const DesView& view) {
  std::set<std::int64_t> never_again;
  for (const auto& b : view.bad_hosts) never_again.insert(b.machine_id);
  // MAX(bench_rate) per host, as host_perf kept it.
  std::map<std::tuple<std::int64_t, std::string, int>, double> best;
  for (const auto& m : view.history) {
    if (m.run.kind != "benchmark") continue;
    auto& b = best[{m.run.host.machine_id, m.run.host.gpu_name, m.run.host.num_gpus}];
    b = std::max(b, m.run.rate);
  }
  int in_setup = 0;
  int n_live = 0;
  double dph = 0;
  double capacity = 0;
  for (const auto& r : view.fleet) {
    if (!live(r)) continue;
    ++n_live;
    dph += r.offer.dph_total;
    if (core::in_setup(r.state)) ++in_setup;
    if (r.state == S::Proving) {
      capacity += best[{r.offer.machine_id, r.offer.gpu_name, r.offer.num_gpus}];
    }
  }
  std::vector<const core::Offer*> candidates;
  for (const auto& o : view.offers) {
    if (passes_filter_.count(o.id) && !never_again.count(o.machine_id)) candidates.push_back(&o);
  }
  std::sort(candidates.begin(), candidates.end(), [](const core::Offer* a, const core::Offer* b) {
    if (a->dph_total != b->dph_total) return a->dph_total < b->dph_total;
    return a->id < b->id;
  });
  std::vector<core::Action> actions;
  for (const core::Offer* o : candidates) {
    if (in_setup >= config_.max_benchmarks || n_live >= caps_.max_instances) break;
    if (demand_ && capacity >= *demand_) break;
    if (dph + o->dph_total > caps_.max_dollars_per_hour) continue;
    actions.push_back(rent_action(*o, "classic: cheapest offer passing the fixed filter ($" +
                                          fixed(o->dph_total, 3) + "/hr), " +
                                          std::to_string(in_setup + 1) + "/" +
                                          std::to_string(config_.max_benchmarks) + " benchmarks"));
    ++in_setup;
    ++n_live;
    dph += o->dph_total;
  }
  return actions;
}

void ClassicPolicy::on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) {
  const bool failed = closed.cause != CloseCause::Horizon && closed.cause != CloseCause::Dropped;
  if (!failed) return;
  core::BadHost b;
  b.machine_id = closed.record.offer.machine_id;
  b.source = "auto";
  b.added_at = closed.now;
  b.reason = "classic: failed once (" + closed.reason + "), never retried";
  put_bad_host(bad_hosts, std::move(b));
}

// --- oracle --------------------------------------------------------------------------------

OraclePolicy::OraclePolicy(const Scenario& s, FleetCaps caps)
    : caps_(caps), revenue_(s.economics.revenue_per_proof_usd) {}

double OraclePolicy::break_even_rate(const core::Offer& offer) const {
  return core::break_even_rate(offer.dph_total, revenue_);
}

int OraclePolicy::plan_partitions(const core::Offer&, const AgentProbe& probe,
                                  int after_oom) const {
  if (after_oom > 0) return 0;  // its plan fits by construction
  return planned_partitions(probe);
}

std::vector<core::Action> OraclePolicy::decide(const DesView& view) {
  const Scenario& sc = view.scenario;
  const double end = kDesEpoch + sc.hours * 3600;
  const auto& demand = sc.economics.demand_proofs_per_hour;
  std::vector<core::Action> actions;

  std::set<std::int64_t> our_machines;
  double committed = 0;
  double dph = 0;
  int n_live = 0;
  for (std::size_t j = 0; j < view.fleet.size(); ++j) {
    const auto& r = view.fleet[j];
    if (!live(r)) continue;
    const Truth& t = sc.offers[view.fleet_offer_index[j]].truth;
    our_machines.insert(r.offer.machine_id);
    bool throttled = false;
    if (r.state == S::Proving && t.throttle) {
      const double prover_start = r.state_since - t.warmup_min * 60;
      throttled = view.now >= prover_start + t.throttle->after_h * 3600;
    }
    const double rate = truth_rate(
        t, planned_partitions(probe_of(sc.offers[view.fleet_offer_index[j]])), 0, throttled);
    if (r.state == S::Proving && rate * revenue_ < r.offer.dph_total) {
      core::Action a;
      a.kind = core::Action::Kind::Drop;
      a.instance_id = r.id;
      a.offer = r.offer;
      a.reason = "oracle: the truth says it proves " + fixed(rate, 1) +
                 "/hr now, below break-even " + fixed(r.offer.dph_total / revenue_, 1) + "/hr";
      actions.push_back(std::move(a));
      continue;
    }
    ++n_live;
    dph += r.offer.dph_total;
    committed += rate;
  }

  struct Pick {
    const core::Offer* offer;
    double rate;
    double cost_per_proof;
    double life_h, setup_h, productive_h, bandwidth_usd;
  };
  std::vector<Pick> picks;
  for (std::size_t k = 0; k < view.offers.size(); ++k) {
    const core::Offer& o = view.offers[k];
    const Truth& t = sc.offers[view.offer_index[k]].truth;
    if (t.failure.kind == FailureKind::NeverBoots || our_machines.count(o.machine_id)) continue;
    const double full =
        truth_rate(t, planned_partitions(probe_of(sc.offers[view.offer_index[k]])), 0, false);
    if (full <= 0 || t.download_mbps <= 0) continue;
    const double boot_h = t.boot_min / 60;
    const double download_h = sc.params_bytes * 8 / (t.download_mbps * 1e6) / 3600;
    const double warm_h = t.warmup_min / 60 + 1 / full;
    double life_h = (end - view.now) / 3600 - boot_h;
    if (t.failure.kind == FailureKind::Crash)
      life_h = std::min(life_h, download_h + t.failure.after_h);
    if (t.failure.kind == FailureKind::Offline) life_h = std::min(life_h, t.failure.after_h);
    const double productive_h = life_h - download_h - warm_h;
    if (productive_h <= 0) continue;
    double rate = full;
    if (t.throttle) {
      const double hot_from = std::max(0.0, t.throttle->after_h - warm_h);
      const double cool = std::min(productive_h, hot_from);
      rate = (cool * full + (productive_h - cool) * full * t.throttle->factor) / productive_h;
    }
    picks.push_back({&o, rate, o.dph_total / rate, life_h, download_h + warm_h, productive_h,
                     sc.params_bytes / 1e9 * o.inet_down_cost_per_gb});
  }
  std::sort(picks.begin(), picks.end(), [](const Pick& a, const Pick& b) {
    if (a.cost_per_proof != b.cost_per_proof) return a.cost_per_proof < b.cost_per_proof;
    return a.offer->id < b.offer->id;
  });
  std::set<std::int64_t> taken;
  for (const Pick& p : picks) {
    if (n_live >= caps_.max_instances) break;
    if (taken.count(p.offer->machine_id)) continue;
    if (dph + p.offer->dph_total > caps_.max_dollars_per_hour) continue;
    const double room =
        demand ? std::max(0.0, *demand - committed) : std::numeric_limits<double>::infinity();
    const double paid = std::min(p.rate, room);
    const double profit =
        p.productive_h * paid * revenue_ - p.life_h * p.offer->dph_total - p.bandwidth_usd;
    if (profit <= 0) continue;
    actions.push_back(rent_action(
        *p.offer, "oracle: the truth says " + fixed(p.rate, 1) + "/hr at $" +
                      fixed(p.cost_per_proof * 1000, 2) + " per 1000 proofs earns $" +
                      fixed(profit, 2) + " over the remaining " + fixed(p.life_h, 1) + " h"));
    taken.insert(p.offer->machine_id);
    committed += p.rate;
    dph += p.offer->dph_total;
    ++n_live;
  }
  return actions;
}

// --- registry ------------------------------------------------------------------------------

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = {"default", "classic", "oracle"};
  return names;
}

std::unique_ptr<DesPolicy> make_policy(const std::string& name, const Scenario& scenario) {
  if (name == "default") return std::make_unique<DefaultPolicy>(default_policy_config(scenario));
  if (name == "classic") return std::make_unique<ClassicPolicy>(scenario, ClassicConfig{});
  if (name == "oracle") return std::make_unique<OraclePolicy>(scenario);
  return nullptr;
}

}  // namespace pf::sim
