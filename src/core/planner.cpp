#include "core/planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/text.h"

namespace pf::core {
namespace {

std::string gib(double value) {
  const bool whole = std::fabs(value - std::round(value)) < 1e-9;
  return fixed(value, whole ? 0 : 1) + " GiB";
}

}  // namespace

tl::expected<ProverPlan, std::string> plan_prover(const PlanInput& in, const PlanLimits& lim) {
  const MemoryModel& m = lim.model;
  if (!std::isfinite(in.ram_gib) || in.ram_gib <= 0 || in.ram_gib > kMaxPlanRamGib) {
    return tl::unexpected("usable RAM must be a positive number of GiB up to " +
                          fixed(kMaxPlanRamGib, 0) + ", got " + fixed(in.ram_gib, 1));
  }
  if (!std::isfinite(in.cores) || in.cores <= 0 || in.cores > kMaxPlanCores) {
    return tl::unexpected("usable cores must be a positive number up to " +
                          fixed(kMaxPlanCores, 0) + ", got " + fixed(in.cores, 1));
  }
  if (in.gpus <= 0) {
    return tl::unexpected("no GPU: the prover needs at least one, got " + std::to_string(in.gpus));
  }
  if (in.gpus > kMaxPlanGpus) {
    return tl::unexpected("at most " + std::to_string(kMaxPlanGpus) +
                          " GPUs can be planned for, got " + std::to_string(in.gpus));
  }
  const int by_memory = partitions_for_ram(in.ram_gib, m);
  if (by_memory < 1) {
    return tl::unexpected(
        gib(in.ram_gib) + " of usable memory is below the prover's minimum: one partition peaks " +
        "at " + gib(peak_memory_gib(1, m)) + " (" + gib(m.base_gib) + " + " +
        gib(m.per_partition_gib) + ") and " + gib(m.headroom_gib) + " stay free, so at least " +
        gib(peak_memory_gib(1, m) + m.headroom_gib) + " are needed");
  }

  ProverPlan plan;
  plan.usable_ram_gib = in.ram_gib;
  plan.gpus = in.gpus;
  int p = by_memory;
  plan.reasons.push_back("memory: " + gib(in.ram_gib) + " usable allows " +
                         std::to_string(by_memory) + " concurrent partitions (peak " +
                         gib(m.base_gib) + " + " + gib(m.per_partition_gib) + "·p, " +
                         gib(m.headroom_gib) + " kept free)");
  const int gpu_cap = lim.max_partitions_per_gpu * in.gpus;
  if (lim.max_partitions_per_gpu > 0 && p > gpu_cap) {
    p = gpu_cap;
    plan.reasons.push_back("capped at " + std::to_string(gpu_cap) +
                           " partitions: " + std::to_string(lim.max_partitions_per_gpu) +
                           " per GPU; more gain nothing in the published sweep");
  }
  if (lim.cores_per_partition > 0) {
    const int core_cap =
        std::max(1, static_cast<int>(std::floor(in.cores / lim.cores_per_partition)));
    if (p > core_cap) {
      p = core_cap;
      plan.reasons.push_back("capped at " + std::to_string(core_cap) +
                             " partitions: " + fixed(in.cores, 0) + " usable cores at " +
                             fixed(lim.cores_per_partition, 0) +
                             " per partition synthesis; oversubscribed cores regress badly");
    }
  }
  if (lim.partition_cap > 0 && p > lim.partition_cap) {
    p = lim.partition_cap;
    plan.reasons.push_back("capped at " + std::to_string(p) +
                           " partitions by an earlier out-of-memory kill or the operator");
  }
  plan.partitions = p;
  plan.expected_peak_gib = peak_memory_gib(p, m);
  plan.total_budget_gib = std::ceil(plan.expected_peak_gib);
  plan.reasons.push_back(
      "memory.total_budget = " + gib(plan.total_budget_gib) + ": the model peak at " +
      std::to_string(p) + " partitions, inside the " + gib(in.ram_gib) +
      " limit (cuzk's \"auto\" would read /proc/meminfo, which in a container is the whole host)");

  // Without the PCE file the first proof also pays the extraction transient, so it runs
  // smaller; at the one-partition floor it cannot run smaller and is allowed to try.
  const int warm_by_memory = partitions_for_ram(in.ram_gib - lim.pce_extraction_gib, m);
  plan.warmup_partitions = std::clamp(warm_by_memory, 1, p);
  plan.warmup_budget_gib =
      std::ceil(peak_memory_gib(plan.warmup_partitions, m) + lim.pce_extraction_gib);
  if (in.pce_cached) {
    plan.reasons.push_back("warm-up: the PCE file exists, so the first proof runs the full plan");
  } else {
    plan.reasons.push_back("warm-up: no PCE file yet, so the first proof runs " +
                           std::to_string(plan.warmup_partitions) + " partitions with a " +
                           gib(plan.warmup_budget_gib) + " budget (+" +
                           gib(lim.pce_extraction_gib) + " extraction transient)");
  }
  if (warm_by_memory < 1) {
    plan.reasons.push_back("warning: warm-up at 1 partition needs " +
                           gib(plan.warmup_budget_gib + m.headroom_gib) + ", more than the " +
                           gib(in.ram_gib) + " usable; the first proof may be killed for memory");
  }

  const double per_gpu = static_cast<double>(p) / in.gpus;
  plan.gpu_workers_per_device = per_gpu >= lim.dual_worker_min_partitions_per_gpu ? 2 : 1;
  plan.reasons.push_back("gpu_workers_per_device = " + std::to_string(plan.gpu_workers_per_device) +
                         ": " + fixed(per_gpu, 1) + " partitions per GPU " +
                         (plan.gpu_workers_per_device == 2 ? "reach" : "stay below") + " the " +
                         std::to_string(lim.dual_worker_min_partitions_per_gpu) +
                         " where a second worker starts to pay");

  const int whole_cores = std::max(1, static_cast<int>(std::floor(in.cores)));
  plan.synthesis_threads = whole_cores;
  plan.gpu_threads = std::max(1, std::min(lim.gpu_threads_max, whole_cores));
  plan.reasons.push_back("synthesis threads = " + std::to_string(whole_cores) +
                         ", the usable cores (cuzk's 0 counts every host CPU, which a "
                         "container over-reports); gpu_threads = " +
                         std::to_string(plan.gpu_threads) + " (at most " +
                         std::to_string(lim.gpu_threads_max) + ", cuzk's recommendation)");

  const int per_proof = std::max(1, m.partitions_per_proof);
  plan.proofs_in_flight = (p + per_proof - 1) / per_proof + std::max(0, lim.extra_proofs_in_flight);
  plan.reasons.push_back("proofs in flight = " + std::to_string(plan.proofs_in_flight) +
                         ": enough " + std::to_string(per_proof) +
                         "-partition proofs to keep every partition busy, plus " +
                         std::to_string(std::max(0, lim.extra_proofs_in_flight)) + " queued");
  return plan;
}

tl::expected<ProverPlan, std::string> plan_after_oom(const PlanInput& input,
                                                     const PlanLimits& limits,
                                                     int running_partitions) {
  if (running_partitions <= 1) {
    return tl::unexpected(
        "killed for memory at the floor: the prover ran a single partition (model peak " +
        gib(peak_memory_gib(1, limits.model)) + ") with " + gib(input.ram_gib) +
        " usable; nothing smaller exists, so this machine cannot run the prover");
  }
  const int smaller = std::max(
      1, std::min(running_partitions - 1, static_cast<int>(std::floor(0.75 * running_partitions))));
  PlanLimits capped = limits;
  capped.partition_cap =
      limits.partition_cap > 0 ? std::min(limits.partition_cap, smaller) : smaller;
  auto plan = plan_prover(input, capped);
  if (plan) {
    plan->reasons.insert(plan->reasons.begin(),
                         "re-planned after the prover was killed for memory at " +
                             std::to_string(running_partitions) + " partitions");
  }
  return plan;
}

std::string cuzk_config_toml(const ProverPlan& plan, bool warmup, const CuzkEndpoints& ep) {
  // Strings are written as TOML basic strings; endpoints come from our own settings, but a
  // quote or backslash in a path must still not break the file.
  auto quote = [](const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    return out + "\"";
  };
  const int partitions = warmup ? plan.warmup_partitions : plan.partitions;
  const double budget = warmup ? plan.warmup_budget_gib : plan.total_budget_gib;
  std::string devices;
  for (int i = 0; i < plan.gpus; ++i) devices += (i ? ", " : "") + std::to_string(i);

  std::string t;
  t += "# Generated by proverfleet agent: ";
  t += warmup ? "warm-up plan (no PCE file yet)" : "full plan";
  t += ", " + std::to_string(partitions) + " partitions, model peak " + fixed(budget, 0) +
       " GiB.\n\n";
  t += "[daemon]\nlisten = " + quote(ep.listen) + "\nstatus_listen = " + quote(ep.status_listen) +
       "\n\n";
  t += "[srs]\nparam_cache = " + quote(ep.param_cache) + "\n\n";
  t += "[memory]\ntotal_budget = " + quote(fixed(budget, 0) + "GiB") + "\n\n";
  t += "[gpus]\ndevices = [" + devices + "]\ngpu_threads = " + std::to_string(plan.gpu_threads) +
       "\ngpu_workers_per_device = " + std::to_string(plan.gpu_workers_per_device) + "\n\n";
  t += "[synthesis]\nthreads = " + std::to_string(plan.synthesis_threads) + "\n\n";
  t += "[pipeline]\nenabled = true\n\n";
  t += "[logging]\nlevel = " + quote(ep.log_level) + "\n";
  return t;
}

tl::expected<double, std::string> parse_gib(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const char* begin = text.c_str() + i;
  char* end = nullptr;
  const double number = std::strtod(begin, &end);
  if (end == begin || !std::isfinite(number) || number < 0) {
    return tl::unexpected("'" + text + "' is not a size: expected e.g. 256G, 240GB or 1TiB");
  }
  std::string unit(end);
  unit.erase(
      std::remove_if(unit.begin(), unit.end(), [](unsigned char c) { return std::isspace(c); }),
      unit.end());
  for (auto& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  double factor = 0;
  if (unit.empty() || unit == "G" || unit == "GI" || unit == "GIB") {
    factor = 1;
  } else if (unit == "T" || unit == "TI" || unit == "TIB") {
    factor = 1024;
  } else if (unit == "M" || unit == "MI" || unit == "MIB") {
    factor = 1.0 / 1024;
  } else if (unit == "GB") {
    factor = 1e9 / kGiB;
  } else if (unit == "TB") {
    factor = 1e12 / kGiB;
  } else if (unit == "MB") {
    factor = 1e6 / kGiB;
  } else {
    return tl::unexpected("'" + text + "' has an unknown unit '" + std::string(end) +
                          "': use G/GiB, T/TiB, M/MiB, GB, TB or MB");
  }
  return number * factor;
}

}  // namespace pf::core
