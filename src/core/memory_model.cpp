#include "core/memory_model.h"

#include <algorithm>
#include <cmath>

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

}  // namespace pf::core
