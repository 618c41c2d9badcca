#include "core/memory_model.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "core/text.h"

namespace pf::core {

int partitions_for_ram(double usable_ram_gib, const MemoryModel& m) {
  if (m.per_partition_gib <= 0) return 0;
  double room = usable_ram_gib - m.base_gib - m.headroom_gib;
  if (room <= 0) return 0;
  return static_cast<int>(std::floor(room / m.per_partition_gib));
}

double peak_memory_gib(int partitions, const MemoryModel& m) {
  return m.base_gib + m.per_partition_gib * std::max(0, partitions);
}

double rate_fraction(int partitions, int partitions_full) {
  if (partitions <= 0) return 0;
  if (partitions_full <= 0) return 1;
  double x = static_cast<double>(partitions) / partitions_full;
  double g = (1 - std::exp(-3 * x)) / (1 - std::exp(-3.0));
  return std::min(1.0, g);
}

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// GiB per partition one observation implies, if it says anything.
std::optional<double> implied_per_partition(const MemoryObservation& o, const MemoryModel& m,
                                            const MemoryLearningConfig& cfg) {
  if (o.partitions <= 0) return std::nullopt;
  double peak = 0;
  if (o.oom) {
    // Killed: the peak exceeded the limit (or the reading, whichever is higher).
    peak = std::max(o.usable_ram_gib, o.observed_peak_gib) * cfg.oom_margin;
  } else {
    peak = o.observed_peak_gib;
  }
  if (!std::isfinite(peak) || peak <= m.base_gib) return std::nullopt;
  const double per = (peak - m.base_gib) / o.partitions;
  if (!std::isfinite(per) || per <= 0) return std::nullopt;
  return std::min(per, cfg.max_per_partition_gib);
}

}  // namespace

LearnedMemory learned_memory_model(const MemoryModel& configured,
                                   std::span<const MemoryObservation> observations,
                                   std::int64_t machine_id, const std::string& gpu_name,
                                   const MemoryLearningConfig& cfg) {
  LearnedMemory out;
  out.model = configured;
  const double floor = configured.per_partition_gib;
  std::vector<double> own;
  std::map<std::int64_t, std::vector<double>> by_machine;  // same GPU model, other machines
  const std::string model = lower(gpu_name);
  for (const auto& o : observations) {
    const auto per = implied_per_partition(o, configured, cfg);
    if (!per) continue;
    if (o.machine_id == machine_id) {
      own.push_back(*per);
    } else if (!model.empty() && lower(o.gpu_name) == model) {
      by_machine[o.machine_id].push_back(*per);
    }
  }
  if (!own.empty()) {
    const double seen = median(own);
    out.source = "machine";
    out.observations = static_cast<int>(own.size());
    out.model.per_partition_gib = std::max(floor, seen);
    out.reason = "memory model from this machine's " + std::to_string(own.size()) +
                 " observation(s): " + fixed(seen, 1) + " GiB per partition seen (configured " +
                 fixed(floor, 1) + ")";
    return out;
  }
  if (!by_machine.empty()) {
    std::vector<double> machines;
    int n = 0;
    for (const auto& [id, values] : by_machine) {
      machines.push_back(median(values));
      n += static_cast<int>(values.size());
    }
    const double seen = median(machines);
    const double w = std::max(0.0, cfg.model_prior_weight);
    const double k = static_cast<double>(machines.size());
    const double blended = (w * floor + k * seen) / (w + k);
    out.source = "model";
    out.observations = n;
    out.model.per_partition_gib = std::max(floor, blended);
    out.reason = "memory model from " + std::to_string(machines.size()) + " " + gpu_name +
                 " machine(s): " + fixed(seen, 1) + " GiB per partition seen, " +
                 fixed(out.model.per_partition_gib, 1) + " planned (configured " + fixed(floor, 1) +
                 ")";
    return out;
  }
  out.reason = "configured memory model: " + fixed(floor, 1) + " GiB per partition";
  return out;
}

}  // namespace pf::core
