// The one break-even of an instance, for the manager and the simulator alike: the $/proof it
// must beat (what a proof earns under the profit objective, the operator's classic $/proof
// target otherwise) and the rate that price implies at the instance's $/hour. Benchmark
// verdicts, benchmark deadlines, the policy's scores and the offers table all read it from here.
#pragma once

#include "core/economics.h"

namespace pf::core {

// The $/proof an instance must beat.
double break_even_price(const EconomicsConfig& economics, bool profit_objective);

// Proofs/hour at which an instance costing `dph_total` breaks even when each paid proof also
// pays `transfer_per_proof_usd` for its input and proof (core::transfer_per_proof_usd of its
// offer); infinite where that transfer costs what a proof may (it never breaks even).
double instance_break_even_rate(double dph_total, double transfer_per_proof_usd,
                                const EconomicsConfig& economics, bool profit_objective);

// Both break-evens of an offer, for display next to the one every decision uses: the rate at
// which a proof earns what it costs (revenue) and the rate that meets the operator's $/proof
// target. They differ whenever the target is not the revenue; `rate` is the objective's.
struct BreakEvenRates {
  double rate = 0;          // what verdicts, deadlines, the autopilot and the ranking use
  double revenue_rate = 0;  // dph ÷ revenue per proof
  double target_rate = 0;   // dph ÷ the operator's $/proof target
  bool profit_objective = true;
  const char* objective() const { return profit_objective ? "revenue" : "target"; }
  bool differ() const;  // the two differ by more than 0.5% (worth a second figure)
};
BreakEvenRates break_even_rates(double dph_total, double transfer_per_proof_usd,
                                const EconomicsConfig& economics, bool profit_objective);

}  // namespace pf::core
