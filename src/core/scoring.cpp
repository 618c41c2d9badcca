#include "core/scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/break_even.h"
#include "core/learned_predictor.h"
#include "core/text.h"

namespace pf::core {

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double objective_break_even(double dph_total, const ScoringConfig& cfg) {
  return instance_break_even_rate(dph_total, cfg.economics, cfg.profit_objective);
}

Score score_offer(const Offer& offer, const Prediction& pred, const ScoringConfig& cfg,
                  const ScoreContext& ctx) {
  Score sc;
  EconomicsConfig econ = cfg.economics;
  econ.target_cost_per_proof_usd = break_even_price(cfg.economics, cfg.profit_objective);
  SetupConfig setup = cfg.setup;
  const double lifetime = std::max(0.0, ctx.lifetime_h);
  setup.expected_lifetime_h = lifetime;
  Offer as_measured = offer;
  if (ctx.measured_download_mbps && *ctx.measured_download_mbps > 0 &&
      setup.download_speed_fraction > 0) {
    // download_hours() derates the advertised speed; the measured one needs no derating.
    as_measured.inet_down_mbps = *ctx.measured_download_mbps / setup.download_speed_fraction;
  }
  const Valuation v = value_offer(as_measured, pred, econ, setup);
  const double dph = offer.dph_total;
  const double revenue = cfg.economics.revenue_per_proof_usd;

  sc.break_even_rate = v.min_rate;
  sc.cost_per_proof = v.expected_cost_per_proof;
  if (ctx.setup_hours_left) {
    // Bandwidth is mostly paid by now; what is ahead is billed time.
    sc.setup_hours = std::max(0.0, *ctx.setup_hours_left);
    sc.setup_cost_usd = sc.setup_hours * dph;
  } else {
    sc.setup_hours = v.setup_hours;
    sc.setup_cost_usd = v.setup_cost_usd - (cfg.boot_billed ? 0 : setup.boot_h * dph);
  }

  const double hazard = cfg.hazard_base_per_h +
                        cfg.hazard_per_unreliability * std::clamp(1 - offer.reliability, 0.0, 1.0) +
                        cfg.hazard_per_strike * std::max(0, ctx.failure_strikes);
  sc.failure_risk = 1 - std::exp(-hazard * lifetime);
  if (lifetime > sc.setup_hours) {
    sc.productive_hours =
        hazard > 1e-12
            ? (std::exp(-hazard * sc.setup_hours) - std::exp(-hazard * lifetime)) / hazard
            : lifetime - sc.setup_hours;
  }

  const double s = prediction_log_sd(pred, cfg.band_z);
  const double m = pred.rate;
  const double b = sc.break_even_rate;
  const double cap =
      ctx.demand_room ? std::max(0.0, *ctx.demand_room) : std::numeric_limits<double>::infinity();
  // With R lognormal (median m, log-sd s): P(R ≥ x) = Φ(d(x)), E[R·1{R ≥ x}] = mean·Φ(d(x) + s),
  // d(x) = (ln m − ln x) / s. Revenue counts min(R, cap).
  double mean = m;
  double partial = 0;   // E[R · 1{R ≥ b}]
  double paid = 0;      // E[min(R, cap) · 1{R ≥ b}]
  double paid_all = 0;  // E[min(R, cap)]
  if (m <= 0) {
    sc.p_pays = 0;
  } else if (s < 1e-9) {
    sc.p_pays = m >= b ? 1 : 0;
    partial = sc.p_pays * m;
    paid = sc.p_pays * std::min(m, cap);
    paid_all = std::min(m, cap);
  } else {
    mean = m * std::exp(s * s / 2);
    auto d = [&](double x) {
      return x <= 0 ? std::numeric_limits<double>::infinity() : (std::log(m) - std::log(x)) / s;
    };
    auto tail_mass = [&](double x) { return std::isinf(x) ? 0.0 : normal_cdf(d(x)); };
    auto tail_mean = [&](double x) { return std::isinf(x) ? 0.0 : mean * normal_cdf(d(x) + s); };
    sc.p_pays = b > 0 ? normal_cdf(d(b)) : 1;
    partial = b > 0 ? tail_mean(b) : mean;
    const double u = std::max(b, cap);
    paid = partial - tail_mean(u) + (std::isinf(cap) ? 0.0 : cap * tail_mass(u));
    paid_all = mean - tail_mean(cap) + (std::isinf(cap) ? 0.0 : cap * tail_mass(cap));
  }
  sc.rate_if_accepted = sc.p_pays > 0 ? partial / sc.p_pays : 0;
  sc.paid_rate = sc.p_pays > 0 ? paid / sc.p_pays : 0;

  sc.value_usd = -sc.setup_cost_usd + sc.productive_hours * (revenue * paid - dph * sc.p_pays);
  sc.exploit_value_usd = -sc.setup_cost_usd + sc.productive_hours * (revenue * paid_all - dph);
  sc.exploration_value_usd = sc.value_usd - std::max(0.0, sc.exploit_value_usd);
  sc.exploration_cost_usd = (1 - sc.p_pays) * sc.setup_cost_usd;
  sc.expected_proofs = sc.productive_hours * paid;
  sc.value_per_proof_usd = sc.expected_proofs > 0 ? sc.value_usd / sc.expected_proofs : 0;
  sc.profit_per_hour = lifetime > 0 ? sc.exploit_value_usd / lifetime : 0;

  sc.reasons.push_back("predicted " + fixed(m, 1) + "/hr [" + fixed(pred.low, 1) + ", " +
                       fixed(pred.high, 1) + "] from " + pred.source + "; P(≥ break-even " +
                       fixed(b, 1) + "/hr) = " + percent(sc.p_pays) +
                       (ctx.demand_room ? "; demand left " + fixed(cap, 0) + "/hr" : ""));
  sc.reasons.push_back("expected value $" + fixed(sc.value_usd, 2) + " over " + fixed(lifetime, 1) +
                       " h (point estimate $" + fixed(sc.exploit_value_usd, 2) +
                       ", exploration value $" + fixed(sc.exploration_value_usd, 2) + ")");
  sc.reasons.push_back("setup ~" + fixed(sc.setup_hours, 1) + " h costs $" +
                       fixed(sc.setup_cost_usd, 2) + "; failure risk " + percent(sc.failure_risk) +
                       " (reliability " + fixed(offer.reliability, 3) +
                       (ctx.failure_strikes > 0
                            ? ", " + std::to_string(ctx.failure_strikes) + " strike(s) on record"
                            : "") +
                       ")");
  for (const auto& r : v.reasons) {
    if (r.rfind("setup ~", 0) != 0) sc.reasons.push_back(r);
  }
  return sc;
}

}  // namespace pf::core
