#include "core/break_even.h"

#include <algorithm>
#include <cmath>

namespace pf::core {

double break_even_price(const EconomicsConfig& economics, bool profit_objective) {
  return profit_objective ? economics.revenue_per_proof_usd : economics.target_cost_per_proof_usd;
}

double instance_break_even_rate(double dph_total, double transfer_per_proof_usd,
                                const EconomicsConfig& economics, bool profit_objective) {
  return break_even_rate(dph_total,
                         break_even_price(economics, profit_objective) - transfer_per_proof_usd);
}

bool BreakEvenRates::differ() const {
  const double scale = std::max(std::fabs(revenue_rate), std::fabs(target_rate));
  return std::fabs(revenue_rate - target_rate) > 0.005 * scale;
}

BreakEvenRates break_even_rates(double dph_total, double transfer_per_proof_usd,
                                const EconomicsConfig& economics, bool profit_objective) {
  BreakEvenRates out;
  out.profit_objective = profit_objective;
  out.revenue_rate =
      break_even_rate(dph_total, economics.revenue_per_proof_usd - transfer_per_proof_usd);
  out.target_rate =
      break_even_rate(dph_total, economics.target_cost_per_proof_usd - transfer_per_proof_usd);
  out.rate = profit_objective ? out.revenue_rate : out.target_rate;
  return out;
}

}  // namespace pf::core
