// The policy simulator speaks the scenario model's vocabulary (src/scenario): these names are
// used unqualified throughout pf::sim.
#pragma once

#include "scenario/scenario.h"
#include "scenario/truth_model.h"

namespace pf::sim {

using scenario::Failure;
using scenario::FailureKind;
using scenario::Scenario;
using scenario::ScenarioOffer;
using scenario::Throttle;
using scenario::Truth;

// The true sustained rate (truth_model.h), shared by the engine and the policies.
using scenario::truth_rate;

}  // namespace pf::sim
