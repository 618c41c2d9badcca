#include "sim/profit_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/economics.h"
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

// The per-bucket relaxation's grid: value cells of kCellH; an offer whose prover can start
// within a cell is scheduled on a finer grid of kCellH / k (k ≤ kMaxSubcells).
constexpr double kCellH = 0.25;
constexpr std::size_t kMaxSubcells = 15;
// The per-bucket dual's search stops once its target is within this share of the best bound.
constexpr double kDualTolerance = 1e-3;

// What each proof of `o` pays to cross its network where jobs arrive (/2, /3: the job's input
// down, the proof up, as the engine bills them; core::transfer_per_proof_usd); nothing in /1.
// Taking it off a proof's value keeps the bound a bound: a paid proof is a proved job, and every
// proved job paid it (revenue·paid − transfer·proved ≤ (revenue − transfer)·paid).
double proof_transfer_usd(const Scenario& sc, const ScenarioOffer& o) {
  return sc.demand ? core::transfer_per_proof_usd(o.offer, core::EconomicsConfig{}) : 0;
}

// One offer on its grid (cells of kCellH / k): what its rentals can deliver per age cell and
// cost per length.
struct GridOffer {
  const ScenarioOffer* offer = nullptr;
  double transfer = 0;          // what each of its proofs pays to move (proof_transfer_usd)
  std::size_t k = 1;            // grid cells per value cell
  std::size_t first_start = 0;  // start cells [first_start, end_start)
  std::size_t end_start = 0;
  std::size_t max_cells = 0;   // longer rentals only cost more (failed by then)
  std::vector<double> proofs;  // fluid proofs in age cell a
  // A rental kept ℓ ∈ [aδ, (a+1)δ): profit is linear in ℓ between the curve's knots, so its
  // best is at aδ, (a+1)δ or a knot inside; per candidate ℓ, the fluid proofs of age cell a
  // up to ℓ and the rental's cost. Age cell a's candidates: [cand_begin[a], cand_begin[a+1]).
  struct Candidate {
    double proofs = 0;     // fluid proofs of the age cell up to ℓ
    double billed_h = 0;   // hours billed at the rental's price
    double bandwidth = 0;  // $ of the parameter download and of the disk before boot
  };
  std::vector<Candidate> candidates;
  std::vector<std::size_t> cand_begin;
  // The price a rental starting in each grid cell pays at least: the lowest listed during the
  // cell (a rental pays the price listed when it is created; /2 dph_changes).
  std::vector<double> start_dph;
  // Age cells with a knot of the rate strictly inside (proving starts, throttle, crash,
  // offline): their proofs are not spread evenly over the cell.
  std::vector<char> uneven;
  double slack = 0;              // Lorden's cv²
  std::size_t proving_cell = 0;  // first age cell that can end in a proof
};

// The grid factor an offer needs: its rentals must earn nothing before their first cell ends
// (the DP never starts two rentals in one cell). 0: not even kMaxSubcells is fine enough.
std::size_t subcells_for(const RentalCurve& curve) {
  for (std::size_t k = 1; k <= kMaxSubcells; ++k) {
    if (curve.proving_from_h() >= kCellH / static_cast<double>(k)) return k;
  }
  return 0;
}

GridOffer grid_offer(const Scenario& sc, const ScenarioOffer& o, const RentalCurve& curve,
                     std::size_t value_cells, std::size_t k) {
  GridOffer g;
  g.offer = &o;
  g.transfer = proof_transfer_usd(sc, o);
  g.k = k;
  const double cell_h = kCellH / static_cast<double>(k);
  const std::size_t cells = value_cells * k;
  const double from = std::max(0.0, o.listed_from_h);
  const double until = std::min(o.listed_until_h, sc.hours);
  g.first_start = static_cast<std::size_t>(std::floor(from / cell_h));
  g.end_start = std::min(cells, static_cast<std::size_t>(std::ceil(until / cell_h)));
  g.slack = curve.renewal_slack();
  const auto fluid = [&](double h) {
    return h < curve.proving_from_h() ? 0.0 : std::max(0.0, curve.proofs(h) - g.slack);
  };
  double last_proof_h = sc.hours;
  for (double knot : curve.knots()) {
    if (curve.rate_at(knot) <= 0 && knot >= curve.proving_from_h())
      last_proof_h = std::min(last_proof_h, knot);
  }
  g.max_cells = std::min(cells, static_cast<std::size_t>(std::ceil(last_proof_h / cell_h)) + 1);
  g.proving_cell = static_cast<std::size_t>(std::floor(curve.proving_from_h() / cell_h));
  for (std::size_t a = 0; a <= cells; ++a) {
    const double from_h = static_cast<double>(a) * cell_h;
    const double to_h = static_cast<double>(a + 1) * cell_h;
    g.proofs.push_back(fluid(to_h) - fluid(from_h));
    g.cand_begin.push_back(g.candidates.size());
    const auto add = [&](double h) {
      g.candidates.push_back({fluid(h) - fluid(from_h), curve.billed_h(h),
                              curve.bandwidth_usd(h) + curve.storage_before_boot_usd(h)});
    };
    add(from_h);
    for (double knot : curve.knots())
      if (knot > from_h && knot < to_h) add(knot);
    add(to_h);
  }
  g.cand_begin.push_back(g.candidates.size());
  g.uneven.assign(cells + 1, 0);
  for (double knot : curve.knots()) {
    const double at = knot / cell_h;
    const double cell = std::floor(at);
    if (at > cell && cell <= static_cast<double>(cells))
      g.uneven[static_cast<std::size_t>(cell)] = 1;
  }
  g.start_dph.resize(cells);
  for (std::size_t i = 0; i < cells; ++i) {
    const double from_h = static_cast<double>(i) * cell_h;
    double lowest = scenario::listed_dph(o, from_h);
    for (const auto& change : o.dph_changes) {
      if (change.at_h > from_h && change.at_h < from_h + cell_h) {
        lowest = std::min(lowest, change.dph_total);
      }
    }
    g.start_dph[i] = std::min(lowest, curve.lowest_bid_dph());
  }
  return g;
}

// The best schedule of one offer when a proof delivered in grid cell c is worth at most
// `value[c]`, as an over-statement (profit_bound.h). A rental that starts θ ∈ [0, δ) into cell
// i is scheduled from cell i: each proof of its age cell a lands in grid cell i + a or
// i + a + 1. Where the rate is constant over age cell a, the share landing in i + a + 1 is θ/δ
// for every such cell, so that part of the rental's value is linear in θ and at most the
// larger of its values at θ = 0 and θ = δ (all of them in i + a, or all in i + a + 1). The
// proofs of an age cell with a knot of the rate inside, and of the last (partial) one, are each
// valued at the better of their two cells. When `delivered` is given, it receives the fluid
// proofs of that schedule per grid cell, where the bound placed them (the subgradient's
// attribution; the slack is left out).
double grid_schedule(const GridOffer& g, const std::vector<double>& value,
                     std::vector<double>* delivered = nullptr) {
  const std::size_t n = value.size();
  // Worth nothing past the horizon (a rental touches at most two cells beyond its start).
  std::vector<double> padded(value);
  padded.resize(n + 2, 0.0);
  // A proof is worth its cell's value less its own transfer, and never less than nothing (the
  // offer need not prove there: an idle instance moves no job).
  const auto w = [&padded, &g](std::size_t c) { return std::max(0.0, padded[c] - g.transfer); };
  std::vector<double> best(n + 1, 0);
  // The choice at each start cell: kept m cells (0: no rental starts there), the candidate
  // length of its last age cell, and whether its even proofs are placed one cell later.
  std::vector<std::size_t> kept(n, 0);
  std::vector<std::size_t> last(n, 0);
  std::vector<char> later(n, 0);
  for (std::size_t i = n; i-- > 0;) {
    best[i] = best[i + 1];
    if (i < g.first_start || i >= g.end_start) continue;
    const double dph = g.start_dph[i];
    // Age cells before m: even proofs valued all in place (here) or all one cell later
    // (there); uneven ones at the better of the two.
    double here = 0;
    double there = 0;
    double uneven = 0;
    // w at the start plus every rise of w over the cells the rental can touch (i .. i + m + 1).
    double rises = w(i) + std::max(0.0, w(i + 1) - w(i));
    const std::size_t longest = std::min(n - i, g.max_cells);
    for (std::size_t m = 1; m <= longest; ++m) {
      // Kept ℓ ∈ [m, m + 1) cells: the next rental starts in cell i + m or later.
      const std::size_t a = m - 1;
      if (g.uneven[a]) {
        uneven += g.proofs[a] * std::max(w(i + a), w(i + a + 1));
      } else {
        here += g.proofs[a] * w(i + a);
        there += g.proofs[a] * w(i + a + 1);
      }
      rises += std::max(0.0, w(i + m + 1) - w(i + m));
      const double end_value = std::max(w(i + m), w(i + m + 1));
      const double slack = m + 1 > g.proving_cell ? (1 + g.slack) * rises : 0;
      double most = -std::numeric_limits<double>::infinity();
      std::size_t most_at = g.cand_begin[m];
      for (std::size_t c = g.cand_begin[m]; c < g.cand_begin[m + 1]; ++c) {
        const auto& cand = g.candidates[c];
        const double p = end_value * cand.proofs - dph * cand.billed_h - cand.bandwidth;
        if (p > most) most = p, most_at = c;
      }
      const double total = std::max(here, there) + uneven + most + slack + best[i + m];
      if (total > best[i]) {
        best[i] = total;
        kept[i] = m;
        last[i] = most_at;
        later[i] = there > here;
      }
    }
  }
  if (delivered) {
    delivered->assign(n, 0);
    const auto place = [&](std::size_t c, double proofs) {
      if (c < n) (*delivered)[c] += proofs;
    };
    for (std::size_t i = 0; i < n;) {
      if (kept[i] == 0 || best[i] <= best[i + 1]) {
        ++i;
        continue;
      }
      const std::size_t m = kept[i];
      for (std::size_t a = 0; a < m; ++a) {
        const bool next = g.uneven[a] ? w(i + a + 1) > w(i + a) : later[i] != 0;
        place(i + a + (next ? 1 : 0), g.proofs[a]);
      }
      place(i + m + (w(i + m + 1) > w(i + m) ? 1 : 0), g.candidates[last[i]].proofs);
      i += m;
    }
  }
  return best[0];
}

// The relaxation's demand on the value cells: expected jobs (/2) or the hourly cap (/1) per
// bucket, and the buckets [first, last] a proof delivered in each cell may serve.
struct DemandGrid {
  std::vector<double> amount;
  std::vector<std::pair<std::size_t, std::size_t>> serves;
};

DemandGrid demand_grid(const Scenario& sc, std::size_t cells) {
  DemandGrid d;
  d.serves.resize(cells);
  if (sc.demand) {
    // Bucket j = cell j: the jobs arriving in it; a proof delivered in cell c may serve a job
    // that arrived in buckets [c − reach, c] (one arriving in bucket j is due before the end
    // of cell j + reach at the latest; one arriving after its proof is counted all the same).
    d.amount.assign(cells, 0);
    for (const auto& seg : sc.demand->arrivals) {
      for (std::size_t j = 0; j < cells; ++j) {
        const double a = std::max(seg.from_h, static_cast<double>(j) * kCellH);
        const double b = std::min({seg.to_h, static_cast<double>(j + 1) * kCellH, sc.hours});
        if (b > a) d.amount[j] += seg.proofs_per_hour * (b - a);
      }
    }
    const auto reach =
        static_cast<std::size_t>(std::floor(sc.demand->deadline_min / 60 / kCellH + 1e-9));
    for (std::size_t c = 0; c < cells; ++c) d.serves[c] = {c >= reach ? c - reach : 0, c};
    return d;
  }
  // /1: the engine pays at most demand_proofs_per_hour proofs delivered in each hour [h, h + 1).
  const auto per_hour = static_cast<std::size_t>(std::llround(1 / kCellH));
  const std::size_t hours = (cells + per_hour - 1) / per_hour;
  d.amount.assign(hours, sc.economics.demand_proofs_per_hour.value_or(0));
  for (std::size_t c = 0; c < cells; ++c) d.serves[c] = {c / per_hour, c / per_hour};
  return d;
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
                         std::optional<double> dph, double disk_gb) {
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
  storage_usd_per_h_ = core::storage_usd_per_hour(offer.offer, disk_gb);
  // /3: a bid may rent it for as little as min_bid (plus storage); preemptions only cost more.
  if (offer.bid_market) {
    lowest_bid_dph_ = offer.bid_market->min_bid + storage_usd_per_h_;
    if (!dph) dph_ = std::min(dph_, lowest_bid_dph_);
  }
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

double RentalCurve::billed_h(double hours) const {
  double billed_until = hours;
  if (offline_at_h_ >= 0) billed_until = std::min(billed_until, offline_at_h_);
  return std::max(0.0, billed_until - boot_h_);
}

double RentalCurve::bandwidth_usd(double hours) const {
  if (hours <= boot_h_) return 0;
  const bool download_started = offline_at_h_ < 0 || offline_at_h_ > boot_h_;
  return download_started ? bandwidth_usd_ : 0;
}

double RentalCurve::storage_before_boot_usd(double hours) const {
  return storage_usd_per_h_ * std::clamp(hours, 0.0, boot_h_);
}

double RentalCurve::cost_usd(double hours) const {
  return dph_ * billed_h(hours) + bandwidth_usd(hours) + storage_before_boot_usd(hours);
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
  value_per_proof -= proof_transfer_usd(scenario, offer);
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
  return bucketed_profit_bound(scenario, out);
}

}  // namespace pf::sim

namespace pf::sim {

ProfitBound bucketed_profit_bound(const Scenario& sc, const ProfitBound& uniform, int iterations) {
  const bool capped = sc.demand || sc.economics.demand_proofs_per_hour;
  if (!capped || sc.hours <= 0 || iterations <= 0) return uniform;
  const double v = sc.economics.revenue_per_proof_usd;
  const auto n = static_cast<std::size_t>(std::ceil(sc.hours / kCellH));
  const DemandGrid demand = demand_grid(sc, n);
  const std::size_t buckets = demand.amount.size();
  // Offers that can earn anything, each on a grid fine enough for its setup; one whose prover
  // starts within a minute is scheduled at the best value anywhere instead (no grid bounds it).
  std::vector<GridOffer> grid;
  std::vector<const ScenarioOffer*> fallback;
  for (const auto& o : sc.offers) {
    if (best_offer_profit(sc, o, v) <= 0) continue;
    const RentalCurve curve(sc, o);
    if (const std::size_t k = subcells_for(curve); k > 0) {
      grid.push_back(grid_offer(sc, o, curve, n, k));
    } else {
      fallback.push_back(&o);
    }
  }
  std::vector<double> lambda(buckets, std::clamp(uniform.demand_price_usd, 0.0, v));
  std::vector<double> served(buckets, 0);
  // The dual at `lambda` and, in `served`, what the offers' best schedules deliver to each
  // bucket (the bucket whose price sets the value of the cell each proof is valued at).
  const auto dual = [&] {
    std::vector<double> raw(n + 1, 0);
    std::vector<std::size_t> priced_by(n + 1, buckets);  // buckets: worth nothing
    for (std::size_t c = 0; c < n; ++c) {
      std::size_t cheapest = demand.serves[c].first;
      for (std::size_t j = demand.serves[c].first; j <= demand.serves[c].second; ++j)
        if (lambda[j] < lambda[cheapest]) cheapest = j;
      raw[c] = std::max(0.0, v - lambda[cheapest]);
      if (raw[c] > 0) priced_by[c] = cheapest;
    }
    std::fill(served.begin(), served.end(), 0.0);
    double total = 0;
    for (std::size_t j = 0; j < buckets; ++j) total += lambda[j] * demand.amount[j];
    // Per grid factor: each grid cell's value (its value cell's).
    std::map<std::size_t, std::vector<double>> on_grid;
    std::vector<double> delivered;
    for (const auto& g : grid) {
      auto [it, fresh] = on_grid.try_emplace(g.k);
      std::vector<double>& value = it->second;
      if (fresh) {
        value.resize(n * g.k);
        for (std::size_t c = 0; c < value.size(); ++c) value[c] = raw[c / g.k];
      }
      total += grid_schedule(g, value, &delivered);
      for (std::size_t c = 0; c < delivered.size(); ++c) {
        const std::size_t j = priced_by[c / g.k];
        if (j < buckets) served[j] += delivered[c];
      }
    }
    const double top = *std::max_element(raw.begin(), raw.end());
    for (const auto* o : fallback) total += best_offer_profit(sc, *o, top);
    return total;
  };
  ProfitBound out = uniform;
  double best = dual();
  std::vector<double> best_lambda = lambda;
  // Subgradient descent on the convex dual: every λ ≥ 0 gives a valid bound, so the search
  // only decides how tight it gets. Polyak steps towards a target below the best value so far;
  // the target's distance halves when progress stalls.
  double gap = 0.1 * std::max(1.0, std::abs(best));
  int stalled = 0;
  double value = best;
  for (int it = 0; it < iterations; ++it) {
    double norm = 0;
    for (std::size_t j = 0; j < buckets; ++j) {
      const double g = demand.amount[j] - served[j];
      norm += g * g;
    }
    if (norm <= 1e-12) break;  // a stationary point: the optimum
    const double step = (value - (best - gap)) / norm;
    for (std::size_t j = 0; j < buckets; ++j) {
      lambda[j] = std::clamp(lambda[j] - step * (demand.amount[j] - served[j]), 0.0, v);
    }
    value = dual();
    if (value < best - 1e-9) {
      best = value;
      best_lambda = lambda;
      stalled = 0;
    } else if (++stalled >= 8) {
      gap /= 2;
      stalled = 0;
      lambda = best_lambda;
      value = dual();
      ++it;
    }
    if (gap < kDualTolerance * std::max(1.0, std::abs(best))) break;
  }
  if (best < out.profit_usd) {
    out.profit_usd = best;
    out.demand_buckets = static_cast<int>(buckets);
  }
  return out;
}

}  // namespace pf::sim
