#include "core/predictor.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/text.h"

namespace pf::core {

PredictorConfig default_predictor_config() {
  PredictorConfig c;
  // Field measurements (reference/field-notes.md), whole instance, 1 GPU unless noted.
  // Bands reflect the observed host-to-host spread (8% average, up to 22%, outliers 1.5x).
  c.priors = {
      {"RTX 4090", 58, 0.3, "field: 61.4 clean, 46.2 contended on one host"},
      {"RTX PRO 4000", 55, 0.3, "field: 55.1"},
      {"RTX 3090", 35, 0.3, "field: 35.6"},
      {"RTX 5090", 26, 0.35, "field: 25.9, far below its spec sheet"},
      {"RTX 5060 Ti", 15, 0.4, "field: 38.8 on 4 GPUs"},
      {"RTX 5070 Ti", 55, 0.4, "cuzk docs: 68-95 with 256-512 GiB; field fleets see less"},
      {"A40", 22, 0.45, "field: 2x A40 finished below 50/hr"},
      // No field measurement yet: educated guesses with wide bands, to be replaced by data.
      {"RTX 4080", 42, 0.5, "guess: between 3090 and 4090"},
      {"RTX 5080", 42, 0.5, "guess: between 3090 and 4090"},
      {"RTX A6000", 38, 0.5, "guess: Ampere workstation, like a 3090"},
      {"RTX 5000Ada", 40, 0.5, "guess: Ada workstation"},
      {"RTX 6000Ada", 55, 0.5, "guess: Ada workstation, like a 4090"},
      {"L40S", 50, 0.5, "guess: Ada datacenter"},
      {"A100 SXM4", 40, 0.5, "guess: datacenter Ampere"},
      {"H100 SXM", 60, 0.5, "guess: datacenter Hopper"},
  };
  return c;
}

const GpuPrior* find_prior(const PredictorConfig& config, const std::string& gpu_name) {
  for (const auto& p : config.priors) {
    if (iequals(p.gpu_name, gpu_name)) return &p;
  }
  return nullptr;
}

Prediction predict_from_prior(const Offer& offer, const PredictorConfig& config, Reasons reasons) {
  return predict_with_prior(offer, config, find_prior(config, offer.gpu_name),
                            config.multi_gpu_exponent, reasons);
}

Prediction predict_with_prior(const Offer& offer, const PredictorConfig& config,
                              const GpuPrior* prior, double multi_gpu_exponent, Reasons reasons) {
  Prediction out;
  out.source = "prior";
  const int gpus = std::max(1, offer.num_gpus);
  const GpuPrior& used = prior ? *prior : config.unknown_gpu;
  double band = used.band;
  // The reasons, only when wanted (the numbers do not depend on them).
  const bool explain = reasons == Reasons::Written;
  auto say = [&](auto&& words) {
    if (explain) out.reasons.push_back(words());
  };

  double rate = used.rate_per_gpu * std::pow(gpus, multi_gpu_exponent);
  say([&] {
    return prior ? offer.gpu_name + " prior " + fixed(used.rate_per_gpu, 1) + "/hr per GPU (" +
                       used.basis + ")"
                 : "unknown GPU model '" + offer.gpu_name + "': wide prior " +
                       fixed(used.rate_per_gpu, 0) + "/hr per GPU";
  });
  if (gpus > 1) {
    say([&] {
      return std::to_string(gpus) + " GPUs scale sublinearly: x" +
             fixed(std::pow(gpus, multi_gpu_exponent), 2) + ", not x" + std::to_string(gpus);
    });
  }

  // Memory decides how many partitions run at once (field note 1: RAM, not the GPU, limits).
  out.partitions_full = config.memory.partitions_per_proof * gpus;
  if (offer.usable_ram_gib > 0) {
    out.partitions = partitions_for_ram(offer.usable_ram_gib, config.memory);
    double f = rate_fraction(out.partitions, out.partitions_full);
    if (out.partitions == 0) {
      say([&] {
        return "RAM " + fixed(offer.usable_ram_gib, 0) + " GiB is below the prover's " +
               fixed(peak_memory_gib(1, config.memory) + config.memory.headroom_gib, 0) +
               " GiB minimum: cannot prove";
      });
    } else if (f < 0.999) {
      say([&] {
        return "RAM " + fixed(offer.usable_ram_gib, 0) + " GiB allows " +
               std::to_string(out.partitions) + " partitions of " +
               std::to_string(out.partitions_full) + " → ~" + percent(f) + " of full rate";
      });
    }
    rate *= f;
  } else {
    // Unknown memory: plan for one partition; the agent measures the real limit.
    out.partitions = 1;
    double f = rate_fraction(1, out.partitions_full);
    rate *= f;
    say([&] { return "RAM unknown: assuming 1 partition → ~" + percent(f) + " of full rate"; });
  }

  if (offer.usable_cores > 0) {
    double need = config.cores_per_gpu_full * gpus;
    if (offer.usable_cores < need) {
      double f = offer.usable_cores / need;
      rate *= f;
      say([&] {
        return fixed(offer.usable_cores, 0) + " cores for " + std::to_string(gpus) +
               " GPU(s) (want " + fixed(need, 0) + ") → ~" + percent(f) + " of rate";
      });
    }
  }

  if (offer.pcie_bw_gbs > 0 && offer.pcie_bw_gbs / gpus < config.pcie_slow_gbs_per_gpu) {
    rate *= config.pcie_slow_factor;
    say([&] {
      return "PCIe " + fixed(offer.pcie_bw_gbs, 1) + " GB/s" +
             (offer.pci_gen > 0 ? " (gen " + std::to_string(offer.pci_gen) + ")" : "") +
             " is slow for " + std::to_string(gpus) + " GPU(s) → x" +
             fixed(config.pcie_slow_factor, 2);
    });
  }

  if (!offer.data_flags.empty()) {
    band += config.band_per_data_flag * static_cast<double>(offer.data_flags.size());
    say([&] {
      return "incomplete market data (" + offer.data_flags.front() +
             (offer.data_flags.size() > 1 ? ", ..." : "") + "): band widened";
    });
  }
  band = std::clamp(band, 0.0, 0.95);
  out.rate = std::max(0.0, rate);
  out.low = out.rate * (1 - band);
  out.high = out.rate * (1 + band);
  return out;
}

}  // namespace pf::core
