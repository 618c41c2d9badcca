// Predicts the sustained proofs/hour an offer would deliver, with a band and its source.
// This first predictor uses configured per-GPU-model priors adjusted by the hardware the
// offer advertises (memory → partitions, cores, PCIe). Host history arrives later and will
// take precedence over the prior; every prediction names the source it used.
#pragma once

#include <string>
#include <vector>

#include "core/memory_model.h"
#include "core/offer.h"

namespace pf::core {

struct GpuPrior {
  std::string gpu_name;     // as the market spells it: "RTX 4090"
  double rate_per_gpu = 0;  // sustained proofs/hour of one GPU with enough RAM and cores
  double band = 0.3;        // relative half-width of the band (0.3 → ±30%)
  std::string basis;        // where the number comes from, shown in reasons
};

struct PredictorConfig {
  std::vector<GpuPrior> priors;
  GpuPrior unknown_gpu{"", 25, 0.7, "no data for this model: wide guess"};
  // Multi-GPU boxes scale sublinearly: rate(n) = rate(1) · n^exponent.
  double multi_gpu_exponent = 0.7;
  // Cores one GPU needs to be fed at full rate; fewer scale the rate down linearly.
  double cores_per_gpu_full = 32;
  // Below this CPU↔GPU bandwidth (GB/s) per GPU the rate is scaled by pcie_slow_factor.
  double pcie_slow_gbs_per_gpu = 5;
  double pcie_slow_factor = 0.9;
  // Extra relative band for each data flag on the offer (fields the market left empty).
  double band_per_data_flag = 0.1;
  MemoryModel memory;
};

struct Prediction {
  double rate = 0;  // proofs/hour, whole offer
  double low = 0;
  double high = 0;
  std::string source;  // "prior" (later: "host", "model")
  int partitions = 0;  // concurrent partitions the memory model allows
  int partitions_full = 0;
  std::vector<std::string> reasons;
};

// The default prior table, seeded from field measurements (see docs/architecture.md).
PredictorConfig default_predictor_config();

// Looks up the prior for a GPU model (exact name match, case-insensitive); nullptr if unknown.
const GpuPrior* find_prior(const PredictorConfig& config, const std::string& gpu_name);

// Whether a prediction writes its reasons (words for people) or only its numbers: a decision
// screens every listed offer and puts into words only those it acts on (the numbers are the
// same either way; formatting them was a tenth of a simulated run's CPU).
enum class Reasons { Written, Skipped };

Prediction predict_from_prior(const Offer& offer, const PredictorConfig& config,
                              Reasons reasons = Reasons::Written);

// predict_from_prior with `prior` in place of the table's entry for the offer's model (nullptr:
// the config's unknown-model guess) and `multi_gpu_exponent` in place of the config's: what a
// learned model rate or a unit rate needs, without copying the table.
Prediction predict_with_prior(const Offer& offer, const PredictorConfig& config,
                              const GpuPrior* prior, double multi_gpu_exponent, Reasons reasons);

}  // namespace pf::core
