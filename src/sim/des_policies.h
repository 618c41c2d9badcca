// The policies `proverfleet sim` compares:
//  - default: proverfleet's own decision engine (core::decide, SprtAcceptance, the planner on
//    probed memory, the automatic blocklist) — exactly what the manager's autopilot runs;
//  - classic: the earlier tool's rules as field-notes.md records them;
//  - oracle: reads the hidden truth and rents exactly the offers that pay (an upper bound).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/memory_model.h"
#include "core/planner.h"
#include "core/policy.h"
#include "core/sprt_acceptance.h"
#include "sim/des_engine.h"

namespace pf::sim {

// Caps every policy runs under (the operator's, not the policy's).
struct FleetCaps {
  double max_dollars_per_hour = 30;
  int max_instances = 40;
};

struct DefaultPolicyConfig {
  core::PolicyConfig policy;
  core::SprtConfig sprt;
  core::LifecycleConfig lifecycle;
  core::PlanLimits planner;
};

// The default configuration for a scenario: its economics, parameter size, demand and horizon.
DefaultPolicyConfig default_policy_config(const Scenario& scenario, const FleetCaps& caps = {});

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

 private:
  DefaultPolicyConfig config_;
  core::SprtAcceptance sprt_;
};

// The earlier tool (field-notes.md, "How the earlier system worked"):
//  - offers: its fixed filter (vast query language, plus the CLI's verified=true), cheapest
//    dph first; at most 4 benchmarks at once; a host that failed once is never retried;
//  - agent: partitions from its concurrency formula on the *advertised* RAM,
//    c = min(⌊(RAM_GB − 100) / (partition_workers · 6)⌋, 3 · GPUs), p = c · partition_workers
//    with partition_workers = 2; after an OOM the prover is not restarted;
//  - benchmark: 12 proofs counted from the first proof after the parameters (warm-up
//    included), rate = 12 / elapsed, pass if rate ≥ ⌈dph / target $/proof⌉;
//  - timeouts: 15 min unregistered, 90 min parameters, 45 min benchmark;
//  - MAX(bench rate) per host is its capacity estimate; proving instances are never
//    re-evaluated.
// It stops renting once the MAX rates of its proving instances cover demand.
struct ClassicConfig {
  std::string filter =
      "disk_space>=250 dph<=0.9 gpu_ram>12.5 cpu_ram>=240 cpu_cores>25 inet_down>100 "
      "cuda_vers>=13.0 verified=true";
  int max_benchmarks = 4;
  int benchmark_proofs = 12;
  int partition_workers = 2;
  double ram_overhead_gb = 100;
  double gb_per_worker = 6;
  int concurrency_per_gpu = 3;
  double register_timeout_s = 15 * 60;
  double params_timeout_s = 90 * 60;
  double benchmark_timeout_s = 45 * 60;
};

// The classic benchmark rule as an Acceptance.
class ClassicAcceptance final : public core::Acceptance {
 public:
  explicit ClassicAcceptance(int proofs) : proofs_(proofs) {}
  core::Verdict evaluate(const core::BenchmarkInput& input) const override;

 private:
  int proofs_;
};

class ClassicPolicy final : public DesPolicy {
 public:
  ClassicPolicy(const Scenario& scenario, ClassicConfig config, FleetCaps caps = {});
  std::string name() const override { return "classic"; }
  core::LifecycleConfig lifecycle() const override;
  const core::Acceptance* acceptance() const override { return &acceptance_; }
  double break_even_rate(const core::Offer& offer) const override;
  int warmup_proofs() const override { return 0; }
  int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                      int after_oom) const override;
  std::vector<core::Action> decide(const DesView& view) override;
  void on_closed(const ClosedInstance& closed, std::vector<core::BadHost>& bad_hosts) override;

 private:
  ClassicConfig config_;
  FleetCaps caps_;
  double target_;
  std::optional<double> demand_;
  std::set<std::int64_t> passes_filter_;  // offer ids
  ClassicAcceptance acceptance_;
};

// Reads the truth: rents, cheapest true $/proof first, every offer whose expected profit over
// the rest of the horizon (its real download, warm-up, failures, throttling and the demand
// still open) is positive; never benchmarks; drops an instance once its throttled rate no
// longer pays. Its agent plans like the default one (core/planner.h on the probe).
class OraclePolicy final : public DesPolicy {
 public:
  OraclePolicy(const Scenario& scenario, FleetCaps caps = {});
  std::string name() const override { return "oracle"; }
  core::LifecycleConfig lifecycle() const override { return {}; }
  const core::Acceptance* acceptance() const override { return nullptr; }
  double break_even_rate(const core::Offer& offer) const override;
  int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                      int after_oom) const override;
  std::vector<core::Action> decide(const DesView& view) override;

 private:
  FleetCaps caps_;
  double revenue_;
};

// "default", "classic", "oracle".
const std::vector<std::string>& policy_names();

// A policy by name with its configuration for `scenario`; nullptr for an unknown name.
std::unique_ptr<DesPolicy> make_policy(const std::string& name, const Scenario& scenario);

}  // namespace pf::sim
