// The learning predictor: what an offer will really deliver, from the fleet's own measurements.
// Sources, most specific first:
//   "host"  — this machine with this GPU slice was measured before (robust median, never MAX);
//   "model" — fleet data for the GPU model, each host's rate normalised by the hardware that
//             matters (partitions the memory allows, effective cores, PCIe, GPU count);
//   "prior" — the configured priors of predictor.h.
// It also learns, from samples and not per model by hand, how much slower a slice runs while
// another of our instances shares its machine, and how sublinearly multi-GPU boxes scale.
// The hardware adjustments themselves are predict_from_prior's; this file only feeds it
// learned numbers, so there is one place that knows how RAM, cores and PCIe shape a rate.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/fleet.h"
#include "core/predictor.h"

namespace pf::core {

// A measured run together with the hardware it ran on.
struct Measurement {
  BenchRun run;
  Offer offer;                    // snapshot of the measured instance's offer
  std::optional<double> ram_gib;  // memory the agent probed (the plan followed it); else offer's
  // Other instances of ours alive on the machine during the run; when run.contended is set and
  // this is 0, one is assumed.
  int our_others_on_machine = 0;
};

// Pairs runs with the offers of the instances that produced them (by instance_id). Runs whose
// instance is not in `instances` are skipped: without hardware they cannot be normalised.
std::vector<Measurement> join_measurements(const std::vector<BenchRun>& runs,
                                           const std::vector<InstanceRecord>& instances);

struct LearnedPredictorConfig {
  PredictorConfig base = default_predictor_config();
  // The prior counts as this many measured hosts when blended with a model's fleet data.
  double model_prior_weight = 2;
  // Host-to-host spread within one GPU model (sd of log rate) before data says otherwise, and
  // how many hosts' worth of weight that guess carries.
  double spread_prior = 0.35;
  double spread_prior_weight = 3;
  // Rate multiplier per other instance of ours on the machine, before data, and its weight in
  // contended runs.
  double contention_prior = 0.8;
  double contention_prior_weight = 2;
  // Weight of base.multi_gpu_exponent, in 2-GPU hosts' worth of data. One: the prior (0.7)
  // is a guess (the field notes say only "sublinear"), so the first measured multi-GPU host
  // already moves it halfway. At 3 it took several hosts: on tight-margins a measured 2x 5070 Ti
  // scaling ~x1.8 still left 2x 5060 Ti rated at break-even (24/hr, truly 35) and never rented.
  double exponent_prior_weight = 1;
  // Spread of one host's repeated runs (sd of log rate): how well a host predicts itself.
  double host_log_sd = 0.08;
  // The band is ±band_z standard deviations in log space.
  double band_z = 1.645;
  // CPU model (offer.cpu_name): how much faster or slower hosts with this CPU run than their
  // GPU model's learned rate on their hardware. Before data every CPU is 1; the prior sd of a
  // CPU's effect (log) sets its weight against host spread (empirical Bayes: a CPU seen on
  // few hosts moves little), and the factor stays within [cpu_factor_min, cpu_factor_max].
  // The field saw a 16-core Broadwell feed a new GPU too slowly.
  double cpu_effect_prior_sd = 0.12;
  double cpu_factor_min = 0.6;
  double cpu_factor_max = 1.2;
  // Parameter download: the fleet's measured speed over the advertised one, per machine (the
  // latest rental of each): the weighted median of those ratios and the configured
  // download_speed_fraction, which weighs as this many machines; bounded to
  // [download_fraction_min, 1].
  double download_prior_weight = 3;
  double download_fraction_min = 0.02;
  // Whether downloads faster than the configured fraction may shorten the setup estimate. Off:
  // the fleet's ratio only ever lengthens it. Measured on demo-small (the simulator's advertised
  // speeds are truly 5–99% real, median 0.6): learning upward cost $0.97 of $30.68 (88.8% →
  // 86.0% of the bound) by renting unmeasured slow-download hosts on a rosier average.
  bool download_fraction_may_rise = false;
};

struct ModelKnowledge {
  std::string gpu_name;
  double rate_per_gpu = 0;        // learned: one GPU with enough RAM, cores and PCIe
  double prior_rate_per_gpu = 0;  // what the prior said
  int hosts = 0;                  // hosts of this model that contributed
};

struct CpuKnowledge {
  std::string cpu_name;  // as the market spells it
  double factor = 1;     // multiplies model/prior predictions of offers with this CPU
  int hosts = 0;         // measured hosts with this CPU
};

struct HostKnowledge {
  HostKey host;
  double rate = 0;       // sustained proofs/hour alone on the machine (throttling included)
  int runs = 0;          // runs the estimate rests on
  bool derived = false;  // only contended runs: the rate was corrected for contention
  bool throttles = false;
  double last_at = 0;
};

struct FleetKnowledge {
  std::vector<ModelKnowledge> models;  // sorted by gpu_name
  std::vector<HostKnowledge> hosts;    // sorted by (machine_id, gpu_name, num_gpus)
  std::vector<CpuKnowledge> cpus;      // sorted by cpu_name
  double spread_log_sd = 0;            // learned host-to-host spread within a model
  double contention_factor = 1;
  int contention_runs = 0;
  double multi_gpu_exponent = 0.7;
  int multi_gpu_hosts = 0;
  int measurements = 0;

  const ModelKnowledge* model(const std::string& gpu_name) const;
  const HostKnowledge* host(const HostKey& key) const;
  const CpuKnowledge* cpu(const std::string& cpu_name) const;
};

// Learns from every measurement (benchmark verdicts and production windows alike). Pure and
// deterministic; the order of `history` does not matter.
FleetKnowledge learn_fleet(std::span<const Measurement> history,
                           const LearnedPredictorConfig& config);

// Predicts the offer's sustained rate. `our_others_on_machine` is how many of our instances
// would share the machine with it (their contention is applied). Reasons::Skipped: the same
// numbers, no words (predictor.h).
Prediction predict_offer(const Offer& offer, const FleetKnowledge& knowledge,
                         const LearnedPredictorConfig& config, int our_others_on_machine = 0,
                         Reasons reasons = Reasons::Written);

// What the fleet's parameter downloads say about advertised speeds.
struct DownloadKnowledge {
  double fraction = 0.35;        // expected real ÷ advertised download speed
  double prior_fraction = 0.35;  // the configured SetupConfig::download_speed_fraction
  int machines = 0;              // machines with a measured download and an advertised speed
};

// Learns the real/advertised download ratio from the fleet (any order, destroyed rows
// included): each machine's latest rental with a measured rate (params_rate_bps) and an
// advertised inet_down. Pure; bounded (see LearnedPredictorConfig); never above the configured
// fraction unless download_fraction_may_rise.
DownloadKnowledge learn_download_fraction(const std::vector<InstanceRecord>& fleet,
                                          double prior_fraction,
                                          const LearnedPredictorConfig& config);

// The standard deviation of log rate a prediction's band stands for, given the band is
// ±z standard deviations (works for the prior's linear band too).
double prediction_log_sd(const Prediction& prediction, double z);

}  // namespace pf::core
