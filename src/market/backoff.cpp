#include "market/backoff.h"

#include <algorithm>
#include <cmath>

namespace pf::market {
namespace {

double non_negative(double v) {
  return std::isfinite(v) && v > 0 ? v : 0.0;
}

}  // namespace

double backoff_ceiling_s(int retry, double base_s, double cap_s) {
  const double base = non_negative(base_s);
  const double cap = non_negative(cap_s);
  // 2^60 already exceeds any sane cap; clamping the exponent keeps ldexp finite.
  const int exponent = std::clamp(retry, 0, 60);
  return std::min(cap, std::ldexp(base, exponent));
}

double full_jitter_delay_s(int retry, double base_s, double cap_s, std::mt19937_64& rng) {
  const double ceiling = backoff_ceiling_s(retry, base_s, cap_s);
  if (ceiling <= 0) return 0.0;
  std::uniform_real_distribution<double> draw(0.0, ceiling);
  return draw(rng);
}

}  // namespace pf::market
