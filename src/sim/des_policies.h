// The policies `proverfleet sim` compares:
//  - default: proverfleet's own decision engine (core::decide, SprtAcceptance, the planner on
//    probed memory, the automatic blocklist) with the settings `serve` runs (cli::fleet_settings);
//  - classic: the earlier tool as it really ran (field-notes.md, cuzk.md §7), its operator
//    choosing offers;
//  - clairvoyant: reads the hidden truth and plays it well (a strong achievable policy, not a
//    bound; the bound is profit_bound.h).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/billing.h"
#include "core/memory_model.h"
#include "core/oom_memory.h"
#include "core/planner.h"
#include "core/policy.h"
#include "core/scale_to_demand.h"
#include "core/sprt_acceptance.h"
#include "sim/des_engine.h"

namespace pf::sim {

// Caps every policy runs under (the operator's, not the policy's).
struct FleetCaps {
  double max_dollars_per_hour = 30;
  int max_instances = 40;
};

struct DefaultPolicyConfig {
  double disk_gb = core::kDefaultDiskGb;  // [deploy] disk_gb: rentals pay its storage
  core::PolicyConfig policy;
  core::SprtConfig sprt;  // tuning with the [acceptance] caps applied (core::with_caps)
  core::LifecycleConfig lifecycle;
  core::PlanLimits planner;
  // Where jobs arrive (/2), the demand decide() sizes the fleet for comes from the queue: the
  // same decision the autopilot makes (core/scale_to_demand.h).
  core::ScaleToDemandConfig scale;
  core::BidConfig bids;  // [bids]: on-demand or a bid per rental
  // Hedged proving (core/job_hedge.h): [jobs] hedge*, what serve's job queue hedges.
  core::HedgeConfig hedging;
};

// What `serve` runs when proverfleet.toml sets nothing: core's defaults with the [acceptance]
// caps (6 / 20 samples, 4 h) on the sequential test and the benchmark deadline sized for them.
// cli::fleet_settings of the built-in config equals this (config_test keeps them equal).
DefaultPolicyConfig serve_defaults();

// `live` (what serve would run) on this scenario's market: the scenario's revenue, target,
// parameter size and demand replace the configured ones (they are the simulated world), and
// the horizon stops the fleet. Everything else (caps, lifecycle, acceptance, predictor,
// profit objective) stays as configured.
DefaultPolicyConfig default_policy_config(const Scenario& scenario,
                                          DefaultPolicyConfig live = serve_defaults());

class DefaultPolicy final : public DesPolicy {
 public:
  explicit DefaultPolicy(DefaultPolicyConfig config);
  std::string name() const override { return "default"; }
  core::LifecycleConfig lifecycle() const override { return config_.lifecycle; }
  const core::Acceptance* acceptance() const override { return &sprt_; }
  double break_even_rate(const core::Offer& offer) const override;
  int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                      int after_oom) const override;
  std::vector<core::Action> decide(const DesView& view) override;
  void on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) override;
  const core::BidConfig& bids() const override { return config_.bids; }
  const core::HedgeConfig& hedging() const override { return config_.hedging; }

 private:
  DefaultPolicyConfig config_;
  core::SprtAcceptance sprt_;
  std::optional<double> demand_;  // /2: the demand the fleet was last sized for
  // Per machine, the smallest plan ours were killed for memory at (from the fleet at the last
  // decision; a rental is planned after the decision that rented it).
  std::map<std::int64_t, int> oom_partitions_;
};

// The earlier tool as it ran (field-notes.md "How the earlier system worked", cuzk.md §7):
//  - offers: its fixed filter (vast query language, plus the CLI's verified=true); its operator
//    picks by estimated rate per dollar: the host's MAX(bench rate) from host_perf, else the
//    mean of that model's hosts (GPU, count), else what the field had measured of the model;
//    skips advertised downloads below `slow_download_mbps`, hosts on the bad list and hosts or
//    models known to be below min_rate; unknown models are tried after known ones, one at a
//    time per model; at most `max_benchmarks` instances being set up at once;
//  - agent: 10 concurrent partitions (16 when the offer advertises more than 400 GB RAM);
//    after an OOM the entrypoint dies with the prover;
//  - benchmark: a separate warm-up proof (not timed), a daemon restart with parameter preload
//    (timed: the batch clock includes it), then a 12-proof batch; rate = 12 · 3600 / batch
//    time; pass if rate ≥ min_rate = ⌈dph / target $/proof⌉;
//  - its monitor: labelled instances running but unregistered after 15 min, parameter fetches
//    after 90 min, benchmarks 45 min after the parameters are done, any benchmark below
//    min_rate; a host that failed once goes on the bad list for good. Instances still loading
//    are the operator's to notice (`operator_loading_s`).
// It stops renting once the MAX rates of its proving instances cover demand; proving
// instances are never re-evaluated. /2 gives it no rate cap: its operator set the fleet size
// from Curio's queue, modelled as the mean job arrival rate over the run, held fixed.
struct ClassicConfig {
  std::string filter =
      "disk_space>=250 dph<=0.9 gpu_ram>12.5 cpu_ram>=240 cpu_cores>25 inet_down>100 "
      "cuda_vers>=13.0 verified=true";
  int max_benchmarks = 4;
  int benchmark_proofs = 12;
  double restart_preload_s = 90;  // daemon restart + parameter preload inside the timed batch
  int partitions = 10;
  int partitions_large = 16;
  double large_ram_gb = 400;
  double slow_download_mbps = 500;  // "534 Mb/s advertised means hours in params"
  double register_timeout_s = 15 * 60;
  double params_timeout_s = 90 * 60;
  double benchmark_timeout_s = 45 * 60;  // from parameters done: warm-up, restart and batch
  double operator_loading_s = 60 * 60;
  // Whole-instance rates the field had measured (field-notes.md, "Observed benchmark
  // results"): the operator's knowledge before this run's host_perf fills.
  struct Known {
    std::string gpu_name;
    int num_gpus = 1;
    double rate = 0;
  };
  std::vector<Known> field_rates = {{"RTX 4090", 1, 61.4},    {"RTX PRO 4000", 1, 55.1},
                                    {"RTX 3090", 1, 35.6},    {"RTX 5090", 1, 25.9},
                                    {"RTX 5060 Ti", 4, 38.8}, {"A40", 2, 45},
                                    {"RTX 5070 Ti", 1, 68}};
};

// The classic benchmark rule as an Acceptance: the batch clock starts when the benchmark
// phase does (after the warm-up proof) and includes the restart's preload.
class ClassicAcceptance final : public core::Acceptance {
 public:
  ClassicAcceptance(int proofs, double preload_s) : proofs_(proofs), preload_s_(preload_s) {}
  core::Verdict evaluate(const core::BenchmarkInput& input) const override;

 private:
  int proofs_;
  double preload_s_;
};

class ClassicPolicy final : public DesPolicy {
 public:
  ClassicPolicy(const Scenario& scenario, ClassicConfig config, FleetCaps caps = {});
  std::string name() const override { return "classic"; }
  core::LifecycleConfig lifecycle() const override;
  const core::Acceptance* acceptance() const override { return &acceptance_; }
  double break_even_rate(const core::Offer& offer) const override;
  int warmup_proofs() const override { return 1; }
  int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                      int after_oom) const override;
  std::vector<core::Action> decide(const DesView& view) override;
  void on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) override;

 private:
  ClassicConfig config_;
  FleetCaps caps_;
  double target_;
  std::optional<double> demand_;
  std::set<std::int64_t> passes_filter_;           // offer ids
  std::map<std::int64_t, double> params_done_at_;  // instance id → when first seen past params
  ClassicAcceptance acceptance_;
};

// Reads the truth and plays it well, as a strong policy could with perfect knowledge (not
// a bound: profit_bound.h is). Each rental is valued on its truth rental curve
// (profit_bound.h: boot, download, warm-up, throttle, failure, horizon) and kept for its best
// length, so its deadlines never contradict what it knows (no lifecycle timeouts: it never
// rents what would not finish). It rents the cheapest proofs first until demand is covered,
// drops surplus, swaps a dear instance for a clearly cheaper offer, re-rents an offer whose
// rental ended when another pays, puts a second instance on a machine when the contention
// still pays, never benchmarks, and proves for money from the first proof. Its plan is the
// largest partition count the machine's real memory holds (no OOM), a rental is valued at the
// price listed when it is rented, and on /2 it reads the job arrival rate over time: it rents
// so that capacity is ready (setup counted) before the rate rises, values a rental by the jobs
// the arrival rate leaves for it, and drops an instance once the arrivals until a replacement
// could be ready are covered without it.
class ClairvoyantPolicy final : public DesPolicy {
 public:
  ClairvoyantPolicy(const Scenario& scenario, FleetCaps caps = {});
  std::string name() const override { return "clairvoyant"; }
  core::LifecycleConfig lifecycle() const override;
  const core::Acceptance* acceptance() const override { return nullptr; }
  double break_even_rate(const core::Offer& offer) const override;
  int warmup_proofs() const override { return 0; }
  int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                      int after_oom) const override;
  std::vector<core::Action> decide(const DesView& view) override;

 private:
  FleetCaps caps_;
  double revenue_;
  std::map<std::int64_t, int> partitions_;  // offer id → the most its machine's memory holds
};

// "default", "classic", "clairvoyant".
const std::vector<std::string>& policy_names();

// A policy by name for `scenario`, with the live settings `live` (default's settings; every
// policy runs under its caps); nullptr for an unknown name.
std::unique_ptr<DesPolicy> make_policy(const std::string& name, const Scenario& scenario,
                                       const DefaultPolicyConfig& live = serve_defaults());

}  // namespace pf::sim
