#include "sim/profit_bound.h"

#include <algorithm>
#include <cmath>

#include "core/memory_model.h"
#include "scenario/truth_model.h"

namespace pf::sim {
namespace {

// Every job that arrives over the horizon, in expectation (/2): no schedule serves more.
double expected_jobs(const scenario::Demand& demand, double hours) {
  double jobs = 0;
  for (const auto& segment : demand.arrivals) {
    jobs += segment.proofs_per_hour * std::max(0.0, std::min(segment.to_h, hours) - segment.from_h);
  }
  return jobs;
}

}  // namespace

int best_partitions(const Truth& truth) {
  const int full = std::max(1, truth.partitions_full);
  int best = 0;
  for (int p = 1; p <= full; ++p) {
    // The machine's real peak (truth_model.h; /1: the spec's 70 + 14·p).
    if (!scenario::out_of_memory(truth, p)) best = p;
  }
  return best;
}

RentalCurve::RentalCurve(const Scenario& scenario, const ScenarioOffer& offer) {
  const Truth& t = offer.truth;
  // The cheapest price the offer is ever listed at (/2 dph_changes): a relaxation.
  dph_ = offer.offer.dph_total;
  for (const auto& change : offer.dph_changes) dph_ = std::min(dph_, change.dph_total);
  const int partitions = best_partitions(t);
  if (t.failure.kind == FailureKind::NeverBoots || t.download_mbps <= 0 || partitions == 0) {
    return;
  }
  rate_ = t.rate_full * core::rate_fraction(partitions, t.partitions_full);
  // Contention never helps in the bundled scenarios (< 1); a multiplier above 1 is granted for
  // every other offer on the machine, so the bound stays an upper one.
  if (t.contention > 1) {
    int others = -1;
    for (const auto& o : scenario.offers) others += o.offer.machine_id == offer.offer.machine_id;
    rate_ *= std::pow(t.contention, std::max(0, others));
  }
  boot_h_ = t.boot_min / 60;
  prover_h_ = boot_h_ + scenario.params_bytes * 8 / (t.download_mbps * 1e6) / 3600;
  warmup_h_ = t.warmup_min / 60;
  const double proving_from = prover_h_ + warmup_h_;
  if (t.throttle) {
    throttle_at_h_ = proving_from + t.throttle->after_h;
    throttle_factor_ = t.throttle->factor;
  }
  if (t.failure.kind == FailureKind::Crash) stop_at_h_ = proving_from + t.failure.after_h;
  if (t.failure.kind == FailureKind::Offline) offline_at_h_ = boot_h_ + t.failure.after_h;
  bandwidth_usd_ = scenario.params_bytes / 1e9 * offer.offer.inet_down_cost_per_gb;
  renewal_slack_ = t.proof_time_cv * t.proof_time_cv;
  for (double k : {boot_h_, prover_h_, proving_from, throttle_at_h_, stop_at_h_, offline_at_h_}) {
    if (k >= 0) knots_.push_back(k);
  }
  std::sort(knots_.begin(), knots_.end());
  knots_.erase(std::unique(knots_.begin(), knots_.end()), knots_.end());
}

double RentalCurve::rate_at(double hours) const {
  if (rate_ <= 0 || hours < proving_from_h()) return 0;
  if (stop_at_h_ >= 0 && hours >= stop_at_h_) return 0;
  if (offline_at_h_ >= 0 && hours >= offline_at_h_) return 0;
  if (throttle_at_h_ >= 0 && hours >= throttle_at_h_) return rate_ * throttle_factor_;
  return rate_;
}

double RentalCurve::proofs(double hours) const {
  const double from = proving_from_h();
  if (rate_ <= 0 || hours < from) return 0;
  double end = hours;
  if (stop_at_h_ >= 0) end = std::min(end, stop_at_h_);
  if (offline_at_h_ >= 0) end = std::min(end, offline_at_h_);
  if (end < from) return 0;
  double fluid = 0;
  const double cool_end = throttle_at_h_ >= 0 ? std::min(end, throttle_at_h_) : end;
  fluid += rate_ * std::max(0.0, cool_end - from);
  if (throttle_at_h_ >= 0 && end > throttle_at_h_) {
    fluid += rate_ * throttle_factor_ * (end - std::max(from, throttle_at_h_));
  }
  return fluid + renewal_slack_;
}

double RentalCurve::cost_usd(double hours) const {
  if (hours <= boot_h_) return 0;
  double billed_until = hours;
  if (offline_at_h_ >= 0) billed_until = std::min(billed_until, offline_at_h_);
  const bool download_started = offline_at_h_ < 0 || offline_at_h_ > boot_h_;
  return dph_ * std::max(0.0, billed_until - boot_h_) + (download_started ? bandwidth_usd_ : 0);
}

RentalCurve::Best RentalCurve::best(double limit_h, double value_per_proof) const {
  Best out;
  if (rate_ <= 0 || limit_h <= 0) return out;
  auto consider = [&](double h) {
    const double p = profit_usd(h, value_per_proof);
    if (p > out.profit_usd) out = Best{h, p};
  };
  for (double k : knots_) {
    if (k > limit_h) break;
    consider(k);
  }
  consider(limit_h);
  return out;
}

double best_offer_profit(const Scenario& scenario, const ScenarioOffer& offer,
                         double value_per_proof) {
  const RentalCurve curve(scenario, offer);
  if (!curve.can_prove() || value_per_proof <= 0) return 0;
  const double horizon = scenario.hours;
  const double from = std::max(0.0, offer.listed_from_h);
  const double until = std::min(offer.listed_until_h, horizon);
  if (from >= until) return 0;
  const double total = horizon - from;  // all rentals lie in [from, horizon]
  const double starts = until - from;   // ... and each starts before `until`
  const double v = value_per_proof;
  auto best_within = [&](double h) { return curve.best(h, v).profit_usd; };
  const double one = best_within(total);
  if (one <= 0) return 0;

  // ℓ0: the shortest rental that breaks even. Past it the curve's running maximum is concave
  // (the rate only falls after warm-up), so n productive rentals do best with equal lengths.
  std::vector<double> points;
  for (double k : curve.knots())
    if (k >= curve.proving_from_h() && k < total) points.push_back(k);
  points.push_back(total);
  double breakeven = -1;
  double prev_h = -1;
  double prev_p = 0;
  for (double h : points) {
    const double p = curve.profit_usd(h, v);
    if (p >= 0) {
      breakeven = prev_h < 0 || prev_p >= 0 ? h : prev_h + (h - prev_h) * (-prev_p) / (p - prev_p);
      break;
    }
    prev_h = h;
    prev_p = p;
  }
  if (breakeven <= 0) return one;

  std::vector<double> knots = curve.knots();
  double best = one;
  const int max_rentals =
      static_cast<int>(std::min(10'000.0, std::floor(std::min(starts, total) / breakeven) + 1));
  for (int n = 2; n <= max_rentals; ++n) {
    // n − 1 equal rentals fill [from, from + a] (a ≤ starts: the last starts before `until`),
    // the last one [from + a, horizon].
    const double m = n - 1;
    const double lo = m * breakeven;
    const double hi = std::min(starts, total - breakeven);
    if (lo > hi) break;
    std::vector<double> candidates = {lo, hi};
    for (double k : knots) {
      candidates.push_back(m * k);
      candidates.push_back(total - k);
    }
    for (double a : candidates) {
      if (a < lo || a > hi) continue;
      best = std::max(best, m * best_within(a / m) + best_within(total - a));
    }
  }
  return best;
}

ProfitBound profit_bound(const Scenario& scenario) {
  const double revenue = scenario.economics.revenue_per_proof_usd;
  std::vector<std::size_t> useful;
  for (std::size_t i = 0; i < scenario.offers.size(); ++i) {
    if (best_offer_profit(scenario, scenario.offers[i], revenue) > 0) useful.push_back(i);
  }
  auto offers_at = [&](double value, int* used) {
    double sum = 0;
    for (std::size_t i : useful) {
      const double p = best_offer_profit(scenario, scenario.offers[i], value);
      sum += p;
      if (used && p > 0) ++*used;
    }
    return sum;
  };
  ProfitBound out;
  // /1: a rate cap per hour; /2: the jobs that arrive (late and unserved ones only lower it).
  const std::optional<double> total =
      scenario.demand ? std::optional(expected_jobs(*scenario.demand, scenario.hours))
      : scenario.economics.demand_proofs_per_hour
          ? std::optional(*scenario.economics.demand_proofs_per_hour * scenario.hours)
          : std::nullopt;
  if (!total) {
    out.profit_usd = offers_at(revenue, &out.offers_used);
    return out;
  }
  // Weak duality: every λ gives an upper bound; the dual is convex in λ, so a golden-section
  // search finds the tightest one.
  const double total_demand = *total;
  out.demand_proofs = total_demand;
  auto dual = [&](double lambda) {
    return lambda * total_demand + offers_at(revenue - lambda, nullptr);
  };
  double lo = 0;
  double hi = revenue;
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double x1 = hi - phi * (hi - lo);
  double x2 = lo + phi * (hi - lo);
  double f1 = dual(x1);
  double f2 = dual(x2);
  double best_lambda = 0;
  double best_value = dual(0);
  if (const double f = dual(revenue); f < best_value) {
    best_value = f;
    best_lambda = revenue;
  }
  for (int it = 0; it < 48 && hi - lo > 1e-12; ++it) {
    if (f1 <= f2) {
      hi = x2;
      x2 = x1;
      f2 = f1;
      x1 = hi - phi * (hi - lo);
      f1 = dual(x1);
    } else {
      lo = x1;
      x1 = x2;
      f1 = f2;
      x2 = lo + phi * (hi - lo);
      f2 = dual(x2);
    }
    for (auto [x, f] : {std::pair{x1, f1}, std::pair{x2, f2}}) {
      if (f < best_value) {
        best_value = f;
        best_lambda = x;
      }
    }
  }
  out.profit_usd = best_value;
  out.demand_price_usd = best_lambda;
  offers_at(revenue - best_lambda, &out.offers_used);
  return out;
}

}  // namespace pf::sim
