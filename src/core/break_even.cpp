#include "core/break_even.h"

namespace pf::core {

double break_even_price(const EconomicsConfig& economics, bool profit_objective) {
  return profit_objective ? economics.revenue_per_proof_usd : economics.target_cost_per_proof_usd;
}

double instance_break_even_rate(double dph_total, const EconomicsConfig& economics,
                                bool profit_objective) {
  return break_even_rate(dph_total, break_even_price(economics, profit_objective));
}

}  // namespace pf::core
