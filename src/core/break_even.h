// The one break-even of an instance, for the manager and the simulator alike: the $/proof it
// must beat (what a proof earns under the profit objective, the operator's classic $/proof
// target otherwise) and the rate that price implies at the instance's $/hour. Benchmark
// verdicts, benchmark deadlines and the policy's scores all read it from here.
#pragma once

#include "core/economics.h"

namespace pf::core {

// The $/proof an instance must beat.
double break_even_price(const EconomicsConfig& economics, bool profit_objective);

// Proofs/hour at which an instance costing `dph_total` breaks even (0 when the price is not
// positive).
double instance_break_even_rate(double dph_total, const EconomicsConfig& economics,
                                bool profit_objective);

}  // namespace pf::core
