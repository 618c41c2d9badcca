// What an agent's memory reports teach the memory model (core/memory_model.h): the `memory_check`
// event after warm-up (plan, observed peak) and the `oom` event (the plan it was killed at) become
// core::MemoryObservation rows in the store, so the next plan on that machine, or on a machine
// of that GPU model, starts from what was seen, after a manager restart too.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/fleet.h"
#include "core/memory_model.h"

namespace pf::manager {

// The observation an agent event of `type` ("memory_check" or "oom") with `data` reports for
// `rec`, or nullopt when it says nothing usable: another type, no plan size in 1..the planner's
// maximum, or numbers outside what a machine can have (the agent's report is outside input; a
// missing reading is 0, never a guess).
std::optional<core::MemoryObservation> memory_observation(const core::InstanceRecord& rec,
                                                          const std::string& type,
                                                          const nlohmann::json& data, double at);

// The `machine.memory_model` object of the register reply: the learned per-partition figure
// the agent plans with, and why.
nlohmann::json memory_model_json(const core::LearnedMemory& learned);

}  // namespace pf::manager
