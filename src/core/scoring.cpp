#include "core/scoring.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "core/break_even.h"
#include "core/learned_predictor.h"
#include "core/text.h"

namespace pf::core {

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double objective_break_even(const Offer& offer, double dph_total, const ScoringConfig& cfg) {
  return instance_break_even_rate(dph_total, transfer_per_proof_usd(offer, cfg.economics),
                                  cfg.economics, cfg.profit_objective);
}

Score score_offer(const Offer& offer, const Prediction& pred, const ScoringConfig& cfg,
                  const ScoreContext& ctx) {
  Score sc;
  EconomicsConfig econ = cfg.economics;
  econ.target_cost_per_proof_usd = break_even_price(cfg.economics, cfg.profit_objective);
  SetupConfig setup = cfg.setup;
  const double lifetime = std::max(0.0, ctx.lifetime_h);
  setup.expected_lifetime_h = lifetime;
  std::optional<Offer> as_measured;  // a copy only where the speed is measured
  if (ctx.measured_download_mbps && *ctx.measured_download_mbps > 0 &&
      setup.download_speed_fraction > 0) {
    // download_hours() derates the advertised speed; the measured one needs no derating.
    as_measured = offer;
    as_measured->inet_down_mbps = *ctx.measured_download_mbps / setup.download_speed_fraction;
  }
  const Valuation v = value_offer(as_measured ? *as_measured : offer, pred, econ, setup,
                                  ctx.explain ? Reasons::Written : Reasons::Skipped);
  const double dph = offer.dph_total;
  // What a paid proof brings in once its own input and proof have crossed the network.
  const double revenue = cfg.economics.revenue_per_proof_usd - transfer_per_proof_usd(offer, econ);

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
  const bool point = s < 1e-9;
  const double mean = m > 0 && !point ? m * std::exp(s * s / 2) : m;
  auto d = [m, s](double x) {
    return x <= 0 ? std::numeric_limits<double>::infinity() : (std::log(m) - std::log(x)) / s;
  };
  auto tail_mass = [&](double x) { return std::isinf(x) ? 0.0 : normal_cdf(d(x)); };
  auto tail_mean = [&](double x) { return std::isinf(x) ? 0.0 : mean * normal_cdf(d(x) + s); };
  if (m <= 0) {
    sc.p_pays = 0;
  } else if (point) {
    sc.p_pays = m >= b ? 1 : 0;
  } else {
    sc.p_pays = b > 0 ? normal_cdf(d(b)) : 1;
  }
  // E[R · 1{R ≥ b}]
  const double partial = m <= 0 ? 0.0 : point ? sc.p_pays * m : b > 0 ? tail_mean(b) : mean;
  struct Paid {
    double kept = 0;  // E[min(R, room) · 1{R ≥ b}]: rent, benchmark, keep only if it pays
    double all = 0;   // E[min(R, room)]: keep blindly
  };
  auto paid_within = [&](double room) {
    if (m <= 0) return Paid{};
    if (point) return Paid{sc.p_pays * std::min(m, room), std::min(m, room)};
    const double u = std::max(b, room);
    const bool open = std::isinf(room);
    return Paid{partial - tail_mean(u) + (open ? 0.0 : room * tail_mass(u)),
                mean - tail_mean(room) + (open ? 0.0 : room * tail_mass(room))};
  };
  const Paid paid = paid_within(cap);
  sc.rate_if_accepted = sc.p_pays > 0 ? partial / sc.p_pays : 0;
  sc.paid_rate = sc.p_pays > 0 ? paid.kept / sc.p_pays : 0;

  sc.value_usd = -sc.setup_cost_usd + sc.productive_hours * (revenue * paid.kept - dph * sc.p_pays);
  sc.exploit_value_usd = -sc.setup_cost_usd + sc.productive_hours * (revenue * paid.all - dph);
  sc.expected_proofs = sc.productive_hours * paid.kept;
  sc.transient_hours = sc.productive_hours;
  if (ctx.demand_room && ctx.lasting_room && *ctx.lasting_room < cap) {
    // The room above the lasting level decays over room_lasts_h from now: the rental proves
    // into it for room_lasts_h·e^(−setup/room_lasts_h) hours at most. The rest of its life it
    // earns on the lasting room, or is dropped as surplus where that does not pay (never below
    // zero: it stops costing once dropped).
    const double lasts = std::max(0.0, ctx.room_lasts_h);
    sc.transient_hours =
        lasts > 0 ? std::min(sc.productive_hours, lasts * std::exp(-sc.setup_hours / lasts)) : 0;
    const double rest_h = sc.productive_hours - sc.transient_hours;
    const Paid lasting = paid_within(std::max(0.0, *ctx.lasting_room));
    const double kept_rest = std::max(0.0, revenue * lasting.kept - dph * sc.p_pays);
    const double all_rest = std::max(0.0, revenue * lasting.all - dph);
    sc.value_usd = -sc.setup_cost_usd +
                   sc.transient_hours * (revenue * paid.kept - dph * sc.p_pays) +
                   rest_h * kept_rest;
    sc.exploit_value_usd =
        -sc.setup_cost_usd + sc.transient_hours * (revenue * paid.all - dph) + rest_h * all_rest;
    sc.expected_proofs =
        sc.transient_hours * paid.kept + (kept_rest > 0 ? rest_h * lasting.kept : 0.0);
  }
  sc.exploration_value_usd = sc.value_usd - std::max(0.0, sc.exploit_value_usd);
  sc.exploration_cost_usd = (1 - sc.p_pays) * sc.setup_cost_usd;
  sc.value_per_proof_usd = sc.expected_proofs > 0 ? sc.value_usd / sc.expected_proofs : 0;
  sc.profit_per_hour = lifetime > 0 ? sc.exploit_value_usd / lifetime : 0;

  if (!ctx.explain) return sc;
  sc.reasons.push_back("predicted " + fixed(m, 1) + "/hr [" + fixed(pred.low, 1) + ", " +
                       fixed(pred.high, 1) + "] from " + pred.source + "; P(≥ break-even " +
                       fixed(b, 1) + "/hr) = " + percent(sc.p_pays) +
                       (ctx.demand_room ? "; demand left " + fixed(cap, 0) + "/hr" : "") +
                       (sc.transient_hours < sc.productive_hours
                            ? " (beyond " + fixed(std::max(0.0, *ctx.lasting_room), 0) +
                                  "/hr for ~" + fixed(sc.transient_hours, 1) + " h)"
                            : ""));
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

void explain_score(Score& score, const Offer& offer, const Prediction& prediction,
                   const ScoringConfig& config, ScoreContext ctx) {
  ctx.explain = true;
  score.reasons = score_offer(offer, prediction, config, ctx).reasons;
}

}  // namespace pf::core
