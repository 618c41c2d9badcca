// An upper bound on the profit any policy can expect on a scenario (`sim --compare`'s yardstick:
// every policy is reported as a share of it).
//
// The relaxation, each step of which can only raise the optimum:
//  - every offer is scheduled on its own, as if alone on its machine (no contention between our
//    instances, no fleet caps), at the largest partition count the truth's memory holds;
//  - each rental is billed and paid by the truth's timeline (boot unbilled, download billed
//    with its bandwidth, warm-up, then the sustained rate; throttle and crash counted from the
//    end of warm-up, the later of the readings the engine and the spec allow; offline from
//    boot), proofs counted as a fluid plus Lorden's renewal slack (cv²) per rental, so the
//    expected count is never under-stated;
//  - an offer may be rented again and again inside its listing window (each rental repeats its
//    failure), its rentals' lengths chosen freely: the best is found exactly through the
//    rental curve's concavity after its break-even point (Jensen: equal cycles);
//  - demand is one total over the horizon, not a cap per hour; it is priced by Lagrange
//    duality: bound = min over λ ∈ [0, revenue] of λ·demand + Σ_offers best(revenue − λ), which
//    is ≥ the relaxed optimum for every λ and equals the fractional "fill demand greedily by
//    $/proof" optimum at the minimising λ.
//  - per bucket, tighter (both formats): demand is a cap per bucket that a proof may only
//    serve from where it is delivered. /2: a job arriving at a pays only for a proof delivered
//    in [a, a + deadline], so the expected arrivals of each 15-min bucket j can be served by
//    proofs delivered in cells j .. j + ⌊deadline / 15 min⌋. /1: the engine pays at most
//    demand_proofs_per_hour of the proofs delivered in each hour [h, h + 1). Each bucket gets
//    a multiplier λ_j ∈ [0, revenue]; a proof delivered at t is worth w(t) = revenue − min λ_j
//    over the buckets it may serve; since revenue·min(cap, delivered) ≤ λ·cap +
//    (revenue − λ)·delivered for every λ in [0, revenue], Σ_j λ_j·cap_j + Σ_offers best
//    schedule under w(t) bounds the expected profit for every λ (weak duality; the arrivals
//    are independent of the schedule, so their expectation may stand in for them). Each
//    offer's best schedule is a DP over start cells that only over-states it: a start is
//    rounded down to its cell; the rental shifts as a whole within it, so the proofs of the
//    age cells where its rate is constant are valued all in place or all one cell later,
//    whichever is more, and those of a cell where the rate changes (and of the last, partial
//    cell) each at the better of their cell and the next; the length's cost is its exact
//    cost at the lowest price listed during the start cell (a rental pays the price listed
//    when it is created); Lorden's slack plus one proof per rise of w over the cells the
//    rental can touch is added at the rise's value. The cells are 15 min, or 15/k min for an
//    offer whose prover can start within 15 min (k ≤ 15: no rental earns before its first
//    cell ends, so no two rentals of it need one cell); one that starts proving within a
//    minute is valued at the best w anywhere. Subgradient descent (Polyak steps) over the
//    λ_j from the single-λ optimum lowers it within a fixed number of evaluations; the lowest
//    of the bounds met is reported.
// What the bound still relaxes: an offer may be rented fractionally (the dual prices demand as
// a linear programme would), the jobs are a fluid of their expected arrivals (no Poisson
// bunching, no queue order), warm-ups after the first are free, offers on one machine do not
// contend, and fleet caps are ignored. Where jobs arrive (/2, /3) a proof is worth its value less
// what its job's input and proof cost to move on its offer (core::transfer_per_proof_usd), as
// the engine bills every proved job. /3: an offer that takes bids is priced as a bid at its
// min_bid (plus storage) that is never outbid, and contracts never end: both only raise it.
// Measured (docs/decision-engine.md, "The /2 gap, decomposed"): the relaxation is within 3% of a
// whole-instance plan's fluid value on /2; what keeps policies far below it is the engine's
// job-level randomness and the policies' own waste. Pure and deterministic; about 2 s on market-72h
// and market-72h-v2 (150 evaluations of the per-bucket dual, fewer once its target is within 0.1%),
// milliseconds where demand never binds.
#pragma once

#include <limits>
#include <optional>
#include <vector>

#include "core/billing.h"
#include "sim/scenario_vocabulary.h"

namespace pf::sim {

// Partitions at which the truth's instance reaches its best rate without running out of memory
// (70 + 14·p GiB ≤ the truth's visible RAM, no gain beyond partitions_full). 0: none fits.
int best_partitions(const Truth& truth);

// One rental of an offer under the truth, as a function of how long it is kept (hours from
// the rent): profit(ℓ) = value·proofs(ℓ) − cost(ℓ), piecewise linear with the knots below.
class RentalCurve {
 public:
  // `dph`: the price the rental pays (the price listed when it is created); by default the
  // cheapest the offer is ever listed at (/2 dph_changes), a relaxation for the bound.
  // `disk_gb`: the disk it rents, whose storage vast bills from creation — before boot too,
  // where the listed dph (compute + that storage) is not yet billed (core/billing.h).
  RentalCurve(const Scenario& scenario, const ScenarioOffer& offer,
              std::optional<double> dph = std::nullopt, double disk_gb = core::kDefaultDiskGb);

  bool can_prove() const { return rate_ > 0; }
  double rate() const { return rate_; }  // unthrottled, alone, at best_partitions
  double proving_from_h() const { return prover_h_ + warmup_h_; }
  // Lorden's slack (cv²): expected completions beyond the fluid, counted once per rental.
  double renewal_slack() const { return renewal_slack_; }
  // /3: the lowest an hour of it can cost, as a bid at the offer's min_bid plus its storage
  // (+inf where it takes no bids): a bid rental pays at least that while it runs.
  double lowest_bid_dph() const { return lowest_bid_dph_; }

  // The truth's rate ℓ hours after the rent (0 before proving and after a failure).
  double rate_at(double hours) const;
  // Expected proofs and cost (compute + bandwidth) of a rental kept ℓ hours.
  double proofs(double hours) const;
  double cost_usd(double hours) const;  // dph · billed_h + bandwidth + storage before boot
  double billed_h(double hours) const;  // compute hours billed (from boot until offline)
  double bandwidth_usd(double hours) const;
  double storage_before_boot_usd(double hours) const;  // the disk while the image loads
  double profit_usd(double hours, double value_per_proof) const {
    return value_per_proof * proofs(hours) - cost_usd(hours);
  }
  // The knots of profit(ℓ) (sorted, ≥ 0): where the rate or the billing changes.
  const std::vector<double>& knots() const { return knots_; }
  // The best length to keep a rental within `limit_h` hours, and its profit (0 and 0 when no
  // length earns anything).
  struct Best {
    double hours = 0;
    double profit_usd = 0;
  };
  Best best(double limit_h, double value_per_proof) const;

 private:
  double boot_h_ = 0;
  double prover_h_ = 0;  // boot + download
  double warmup_h_ = 0;
  double rate_ = 0;
  double throttle_at_h_ = -1;  // -1: none
  double throttle_factor_ = 1;
  double stop_at_h_ = -1;     // crash (still billed) or -1
  double offline_at_h_ = -1;  // offline (billing stops) or -1
  double dph_ = 0;
  double bandwidth_usd_ = 0;
  double storage_usd_per_h_ = 0;  // the rented disk (core/billing.h)
  double lowest_bid_dph_ = std::numeric_limits<double>::infinity();
  double renewal_slack_ = 0;  // cv²: Lorden's bound on expected completions beyond the fluid
  std::vector<double> knots_;
};

// The best an offer can earn over the scenario's horizon with rentals that start inside its
// listing window, at `value_per_proof` per proof (see the file comment).
double best_offer_profit(const Scenario& scenario, const ScenarioOffer& offer,
                         double value_per_proof);

struct ProfitBound {
  double profit_usd = 0;
  double demand_price_usd = 0;  // λ at the optimum: what one proof of demand is worth at most
  double demand_proofs = -1;    // the demand total the relaxation used (-1: unlimited)
  int offers_used = 0;          // offers with a paying schedule at the optimum
  int demand_buckets = 0;       // /2: buckets priced apart (0: one total)
};

// The bound with per-bucket multipliers (see the file comment; /2 arrivals or the /1 hourly
// cap), from the single-λ bound `uniform`: at most `iterations` subgradient steps (~10 ms each
// on market-72h-v2). Never above `uniform.profit_usd`; `uniform` itself without a demand.
ProfitBound bucketed_profit_bound(const Scenario& scenario, const ProfitBound& uniform,
                                  int iterations = 150);

ProfitBound profit_bound(const Scenario& scenario);

}  // namespace pf::sim
