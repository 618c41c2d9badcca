// The prover the agent drives, by kind: the options' test seam first, else `sim` (the
// scenario truth), `command` (an external program per proof) or `cuzk` (the daemon). Each is
// configured from the agent's flags, which win, then the manager's prover settings.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>

#include "agent/agent.h"
#include "agent/clock.h"
#include "agent/prover.h"

namespace pf::agent {

// --prover, else the manager's prover.kind, else cuzk.
std::string prover_kind(const AgentOptions& options, const nlohmann::json& prover_settings);

struct ProverInputs {
  const AgentOptions& options;
  const nlohmann::json& prover_settings;
  const std::string& benchmark_input_path;  // the verified local copy; empty: none
  const AgentClock& clock;                  // must outlive the prover (sim, command)
  std::function<void(const std::string& line)> prover_log;  // cuzk's output lines
};

tl::expected<std::unique_ptr<Prover>, std::string> make_prover(const std::string& kind,
                                                               const ProverInputs& in);

}  // namespace pf::agent
