#include "core/fleet.h"

#include <array>
#include <utility>

namespace pf::core {
namespace {

constexpr std::array<std::pair<InstanceState, const char*>, 9> kStates{{
    {InstanceState::Renting, "renting"},
    {InstanceState::Booting, "booting"},
    {InstanceState::Registered, "registered"},
    {InstanceState::FetchingParams, "fetching_params"},
    {InstanceState::WarmingUp, "warming_up"},
    {InstanceState::Benchmarking, "benchmarking"},
    {InstanceState::Proving, "proving"},
    {InstanceState::Destroying, "destroying"},
    {InstanceState::Destroyed, "destroyed"},
}};

constexpr std::array<std::pair<ProofPhase, const char*>, 3> kPhases{{
    {ProofPhase::Warmup, "warmup"},
    {ProofPhase::Benchmark, "benchmark"},
    {ProofPhase::Production, "production"},
}};

}  // namespace

const char* to_string(InstanceState state) {
  for (const auto& [s, name] : kStates)
    if (s == state) return name;
  return "unknown";
}

std::optional<InstanceState> parse_instance_state(std::string_view text) {
  for (const auto& [s, name] : kStates)
    if (text == name) return s;
  return std::nullopt;
}

const char* to_string(ProofPhase p) {
  for (const auto& [ph, name] : kPhases)
    if (ph == p) return name;
  return "unknown";
}

std::optional<ProofPhase> parse_proof_phase(std::string_view text) {
  for (const auto& [ph, name] : kPhases)
    if (text == name) return ph;
  return std::nullopt;
}

const char* to_string(Verdict::Decision d) {
  switch (d) {
    case Verdict::Decision::Continue:
      return "continue";
    case Verdict::Decision::Accept:
      return "accept";
    case Verdict::Decision::Reject:
      return "reject";
  }
  return "continue";
}

}  // namespace pf::core
