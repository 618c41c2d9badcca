#include "sim/profit_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

// The /2 per-bucket relaxation's grid: rental starts, value cells and arrival buckets.
constexpr double kCellH = 0.25;

// One offer on the grid: what its rentals can deliver per age cell and cost per length.
struct GridOffer {
  const ScenarioOffer* offer = nullptr;
  std::size_t first_start = 0;  // start cells [first_start, end_start)
  std::size_t end_start = 0;
  std::size_t max_cells = 0;   // longer rentals only cost more (failed by then)
  std::vector<double> proofs;  // fluid proofs in age cell k
  // A rental kept ℓ ∈ [kδ, (k+1)δ): profit is linear in ℓ between the curve's knots, so its
  // best is at kδ, (k+1)δ or a knot inside; per candidate ℓ, the fluid proofs of age cell k
  // up to ℓ and the rental's cost. Age cell k's candidates: [cand_begin[k], cand_begin[k+1]).
  std::vector<std::pair<double, double>> candidates;
  std::vector<std::size_t> cand_begin;
  double slack = 0;              // Lorden's cv²
  std::size_t proving_cell = 0;  // first age cell that can end in a proof
};

GridOffer grid_offer(const Scenario& sc, const ScenarioOffer& o, const RentalCurve& curve,
                     std::size_t cells) {
  GridOffer g;
  g.offer = &o;
  const double from = std::max(0.0, o.listed_from_h);
  const double until = std::min(o.listed_until_h, sc.hours);
  g.first_start = static_cast<std::size_t>(std::floor(from / kCellH));
  g.end_start = std::min(cells, static_cast<std::size_t>(std::ceil(until / kCellH)));
  g.slack = curve.renewal_slack();
  const auto fluid = [&](double h) {
    return h < curve.proving_from_h() ? 0.0 : std::max(0.0, curve.proofs(h) - g.slack);
  };
  double last_proof_h = sc.hours;
  for (double k : curve.knots()) {
    if (curve.rate_at(k) <= 0 && k >= curve.proving_from_h())
      last_proof_h = std::min(last_proof_h, k);
  }
  g.max_cells = std::min(cells, static_cast<std::size_t>(std::ceil(last_proof_h / kCellH)) + 1);
  g.proving_cell = static_cast<std::size_t>(std::floor(curve.proving_from_h() / kCellH));
  for (std::size_t k = 0; k <= cells; ++k) {
    const double from_h = k * kCellH;
    const double to_h = (k + 1) * kCellH;
    g.proofs.push_back(fluid(to_h) - fluid(from_h));
    g.cand_begin.push_back(g.candidates.size());
    const auto add = [&](double h) {
      g.candidates.emplace_back(fluid(h) - fluid(from_h), curve.cost_usd(h));
    };
    add(from_h);
    for (double knot : curve.knots())
      if (knot > from_h && knot < to_h) add(knot);
    add(to_h);
  }
  g.cand_begin.push_back(g.candidates.size());
  return g;
}

// The best schedule of one offer when a proof delivered in cell c is worth at most
// `cell_value[c]` (already the larger of c and c + 1), as an over-statement (profit_bound.h).
double grid_schedule(const GridOffer& g, const std::vector<double>& cell_value) {
  const std::size_t n = cell_value.size();
  std::vector<double> best(n + 1, 0);
  for (std::size_t i = n; i-- > 0;) {
    best[i] = best[i + 1];
    if (i < g.first_start || i >= g.end_start) continue;
    double value = cell_value[i] * g.proofs[0];  // age cells before m
    double rises = cell_value[i];
    double prev = cell_value[i];
    const std::size_t longest = std::min(n - i, g.max_cells);
    for (std::size_t m = 1; m <= longest; ++m) {
      // Kept ℓ ∈ [m, m + 1) cells: the next rental starts in cell i + m or later.
      const double w = i + m < n ? cell_value[i + m] : 0;
      rises += std::max(0.0, w - prev);
      prev = w;
      const double slack = m + 1 > g.proving_cell ? (1 + g.slack) * rises : 0;
      double most = -std::numeric_limits<double>::infinity();
      for (std::size_t c = g.cand_begin[m]; c < g.cand_begin[m + 1]; ++c) {
        most = std::max(most, w * g.candidates[c].first - g.candidates[c].second);
      }
      best[i] = std::max(best[i], value + most + slack + best[i + m]);
      value += w * g.proofs[m];
    }
  }
  return best[0];
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

RentalCurve::RentalCurve(const Scenario& scenario, const ScenarioOffer& offer,
                         std::optional<double> dph) {
  const Truth& t = offer.truth;
  // Unless given: the cheapest price the offer is ever listed at (/2 dph_changes), a relaxation.
  dph_ = offer.offer.dph_total;
  for (const auto& change : offer.dph_changes) dph_ = std::min(dph_, change.dph_total);
  if (dph) dph_ = *dph;
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
  return scenario.demand ? bucketed_profit_bound(scenario, out) : out;
}

}  // namespace pf::sim

namespace pf::sim {

ProfitBound bucketed_profit_bound(const Scenario& sc, const ProfitBound& uniform, int sweeps,
                                  int max_evaluations) {
  if (!sc.demand || sc.hours <= 0) return uniform;
  const double v = sc.economics.revenue_per_proof_usd;
  const std::size_t n = static_cast<std::size_t>(std::ceil(sc.hours / kCellH));
  // Expected arrivals per bucket (bucket j = cell j).
  std::vector<double> arrivals(n, 0);
  for (const auto& seg : sc.demand->arrivals) {
    for (std::size_t j = 0; j < n; ++j) {
      const double a = std::max(seg.from_h, j * kCellH);
      const double b = std::min({seg.to_h, (j + 1) * kCellH, sc.hours});
      if (b > a) arrivals[j] += seg.proofs_per_hour * (b - a);
    }
  }
  // A proof delivered in cell c may serve a job that arrived in buckets [c − reach, c].
  const auto reach =
      static_cast<std::size_t>(std::floor(sc.demand->deadline_min / 60 / kCellH + 1e-9));
  // Offers that can earn anything; one whose prover may start within a cell is scheduled at
  // the constant best value instead (the grid would not bound its sub-cell rentals).
  std::vector<GridOffer> grid;
  std::vector<const ScenarioOffer*> fallback;
  for (const auto& o : sc.offers) {
    if (best_offer_profit(sc, o, v) <= 0) continue;
    const RentalCurve curve(sc, o);
    if (curve.proving_from_h() < kCellH) {
      fallback.push_back(&o);
    } else {
      grid.push_back(grid_offer(sc, o, curve, n));
    }
  }
  std::vector<double> lambda(n, std::clamp(uniform.demand_price_usd, 0.0, v));
  std::vector<double> cell_value(n, 0);
  const auto dual = [&] {
    for (std::size_t c = 0; c < n; ++c) {
      double cheapest = lambda[c];
      for (std::size_t j = c >= reach ? c - reach : 0; j < c; ++j)
        cheapest = std::min(cheapest, lambda[j]);
      cell_value[c] = std::max(0.0, v - cheapest);
    }
    for (std::size_t c = 0; c + 1 < n; ++c) {
      cell_value[c] = std::max(cell_value[c], cell_value[c + 1]);
    }
    double total = 0;
    for (std::size_t j = 0; j < n; ++j) total += lambda[j] * arrivals[j];
    for (const auto& g : grid) total += grid_schedule(g, cell_value);
    const double top = *std::max_element(cell_value.begin(), cell_value.end());
    for (const auto* o : fallback) total += best_offer_profit(sc, *o, top);
    return total;
  };
  // Blocks of buckets priced together: between the demand's segment edges, at most 2 h each
  // (a single bucket's price hardly moves the dual, since each proof may serve several buckets).
  std::vector<std::size_t> edges = {0, n};
  for (const auto& seg : sc.demand->arrivals) {
    for (double h : {seg.from_h, seg.to_h}) {
      edges.push_back(std::min(n, static_cast<std::size_t>(std::llround(h / kCellH))));
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  constexpr std::size_t kBlockCells = 8;
  std::vector<std::pair<std::size_t, std::size_t>> blocks;  // [first, end) buckets
  for (std::size_t e = 0; e + 1 < edges.size(); ++e) {
    for (std::size_t first = edges[e]; first < edges[e + 1]; first += kBlockCells) {
      blocks.emplace_back(first, std::min(edges[e + 1], first + kBlockCells));
    }
  }
  ProfitBound out = uniform;
  double best = dual();
  // Block coordinate descent: the dual is convex in each block's price, so a golden-section
  // search on [0, revenue] finds its best for the others fixed; sweeps until the budget ends.
  const double phi = (std::sqrt(5.0) - 1) / 2;
  int evaluations = 0;
  const auto set_block = [&](std::pair<std::size_t, std::size_t> block, double price) {
    for (std::size_t j = block.first; j < block.second; ++j) lambda[j] = price;
  };
  for (int sweep = 0; sweep < sweeps && evaluations < max_evaluations; ++sweep) {
    const double before = best;
    for (const auto& block : blocks) {
      if (evaluations >= max_evaluations) break;
      const double current = lambda[block.first];
      double lo = 0;
      double hi = v;
      double x1 = hi - phi * (hi - lo);
      double x2 = lo + phi * (hi - lo);
      set_block(block, x1);
      double f1 = dual();
      set_block(block, x2);
      double f2 = dual();
      evaluations += 2;
      double best_x = current;
      double best_f = best;
      for (int it = 0; it < 10; ++it) {
        if (f1 < best_f) best_f = f1, best_x = x1;
        if (f2 < best_f) best_f = f2, best_x = x2;
        if (f1 <= f2) {
          hi = x2;
          x2 = x1;
          f2 = f1;
          x1 = hi - phi * (hi - lo);
          set_block(block, x1);
          f1 = dual();
        } else {
          lo = x1;
          x1 = x2;
          f1 = f2;
          x2 = lo + phi * (hi - lo);
          set_block(block, x2);
          f2 = dual();
        }
        ++evaluations;
      }
      if (f1 < best_f) best_f = f1, best_x = x1;
      if (f2 < best_f) best_f = f2, best_x = x2;
      set_block(block, best_x);
      best = best_f;
    }
    if (before - best < 1e-3) break;
  }
  if (best < out.profit_usd) {
    out.profit_usd = best;
    out.demand_buckets = static_cast<int>(n);
  }
  return out;
}

}  // namespace pf::sim
