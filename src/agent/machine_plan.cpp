#include "agent/machine_plan.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "agent/json_setting.h"
#include "core/text.h"
#include "util/bounded_json.h"

namespace pf::agent {
namespace {

// agent.json holds one small object of our own making.
constexpr util::JsonLimits kStateFileLimits{
    .max_bytes = 64u << 10, .max_depth = 8, .max_values = 1000, .max_string_bytes = 4096};

}  // namespace

std::string probe_summary(const ProbeResult& probe) {
  return "memory " + core::fixed(probe.memory.usable_gib, 1) + " GiB usable (" +
         probe.memory.usable_source + "), " + core::fixed(probe.cpu.usable, 1) + " cores (" +
         probe.cpu.usable_source + "), " + std::to_string(probe.gpus.size()) + " GPU(s)" +
         (probe.disk ? ", " + core::fixed(probe.disk->free_gib, 1) + " GiB free disk" : "");
}

core::PlanInput plan_input(const ProbeResult& probe, bool pce_cached) {
  core::PlanInput in;
  in.ram_gib = probe.memory.usable_gib;
  in.cores = probe.cpu.usable;
  in.gpus = std::max<int>(1, static_cast<int>(probe.gpus.size()));
  in.pce_cached = pce_cached;
  return in;
}

core::PlanLimits plan_limits(const PartitionCaps& caps, double machine_per_partition_gib) {
  core::PlanLimits lim;
  lim.model.per_partition_gib = std::max(lim.model.per_partition_gib, machine_per_partition_gib);
  std::optional<int> cap = caps.first_cap;
  auto tighten = [&](std::optional<int> c) {
    if (c && *c > 0) cap = cap ? std::min(*cap, *c) : *c;
  };
  tighten(caps.option);
  tighten(caps.settings);
  tighten(caps.command);
  if (cap) lim.partition_cap = *cap;
  return lim;
}

int proofs_in_flight(const core::ProverPlan& plan, std::optional<int> command,
                     std::optional<int> option, std::optional<int> settings) {
  if (command) return *command;
  if (option && *option > 0) return *option;
  if (settings && *settings > 0) return *settings;
  return std::max(1, plan.proofs_in_flight);
}

std::optional<int> PartitionCapFile::load() const {
  const nlohmann::json s =
      util::parse_json_file(path_, kStateFileLimits).value_or(nlohmann::json());
  if (!s.is_object()) return std::nullopt;
  auto cap = setting<int>(s, "partition_cap");
  if (cap && *cap > 0) return cap;
  return std::nullopt;
}

std::optional<std::string> PartitionCapFile::save(int cap) const {
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << nlohmann::json{{"partition_cap", cap}}.dump() << "\n";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path_, ec);
  if (ec) return "cannot save " + path_ + ": " + ec.message();
  return std::nullopt;
}

}  // namespace pf::agent
