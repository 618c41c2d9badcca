// Scoring: what renting an offer is expected to be worth, uncertainty included.
// value_offer (economics.h) gives the point-estimate economics with setup amortised; the score
// adds failure risk (reliability, the machine's failure history) and the value of finding out:
// an uncertain offer is rented, benchmarked and kept only if it pays, so its expected value is
//   −setup − benchmark + E[productive hours] · E[(revenue·R − price) · 1{R ≥ break-even}]
// with R lognormal around the prediction. What that adds to the point estimate is the
// exploration value; what it risks losing on a rejection is the exploration cost, which the
// policy draws from a bounded budget.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/economics.h"
#include "core/offer.h"
#include "core/predictor.h"

namespace pf::core {

struct ScoringConfig {
  EconomicsConfig economics;
  SetupConfig setup;
  // Break-even against revenue (keep whatever earns more than it costs) or against the
  // operator's classic $/proof target.
  bool profit_objective = true;
  // Failure hazard per hour: base + per_unreliability · (1 − reliability2) + per_strike · strikes.
  double hazard_base_per_h = 0.002;
  double hazard_per_unreliability = 0.1;
  double hazard_per_strike = 0.05;
  // Boot is not billed on vast (the image pulls while "loading"); setup cost counts download,
  // warm-up and benchmark only.
  bool boot_billed = false;
  double band_z = 1.645;  // the prediction band is ±band_z sd in log space
};

struct ScoreContext {
  double lifetime_h = 72;   // hours the instance could live from now (horizon, expected life)
  int failure_strikes = 0;  // failures recorded against this machine
  // Re-evaluating an instance already rented: setup still ahead replaces the offer's
  // estimate (boot done, download measured). nullopt: a fresh rental.
  std::optional<double> setup_hours_left;
  // Proofs/hour of demand still unserved: revenue beyond it earns nothing. nullopt: unlimited.
  std::optional<double> demand_room;
  // Where part of the room is transient (a job backlog being worked off: scale_to_demand.h):
  // the room that lasts, and how long the rest is expected to last from now. The proofs beyond
  // lasting_room are paid only for room_lasts_h·e^(−setup/room_lasts_h) hours (the transient
  // room decays over room_lasts_h; the rental proves only after its setup); the rest of its
  // life the rental earns on the lasting room, or is dropped as surplus where that does not
  // pay. nullopt: demand_room lasts the whole lifetime.
  std::optional<double> lasting_room;
  double room_lasts_h = 0;
  // Parameter download rate this machine delivered to one of ours before (Mb/s, actual): it
  // replaces the estimate from the advertised speed, which the machine measures itself and
  // shares with its other tenants. nullopt: never measured.
  std::optional<double> measured_download_mbps;
  // Whether Score::reasons are written. Screening every listed offer each decision needs only
  // the numbers (the reasons were a fifth of the simulator's decision time): the decision
  // writes them for the offers it acts on (explain_score). Changes no number.
  bool explain = true;
};

struct Score {
  double break_even_rate = 0;   // price ÷ revenue (or ÷ target $/proof)
  double p_pays = 0;            // probability the sustained rate clears break-even
  double rate_if_accepted = 0;  // E[rate | it clears break-even]
  double setup_hours = 0;
  double setup_cost_usd = 0;    // download + warm-up + benchmark + parameter bandwidth
  double failure_risk = 0;      // probability of a failure within the lifetime
  double productive_hours = 0;  // expected hours of production, failures and setup deducted
  // At the point estimate, setup amortised over the lifetime, risk included.
  double profit_per_hour = 0;
  std::optional<double> cost_per_proof;
  double paid_rate = 0;              // E[min(rate, demand room) | it pays]
  double transient_hours = 0;        // productive hours the room above the lasting room is paid for
  double value_usd = 0;              // rent, benchmark, keep only if it pays
  double exploit_value_usd = 0;      // rent and keep on the point estimate
  double exploration_value_usd = 0;  // value_usd − max(0, exploit_value_usd)
  double exploration_cost_usd = 0;   // expected spend lost to a rejection
  double expected_proofs = 0;        // over the lifetime, if kept only when it pays
  double value_per_proof_usd = 0;    // value_usd ÷ expected_proofs (0 when none)
  bool exploratory() const { return exploit_value_usd <= 0 && value_usd > 0; }
  std::vector<std::string> reasons;
};

Score score_offer(const Offer& offer, const Prediction& prediction, const ScoringConfig& config,
                  const ScoreContext& context);
// Writes the reasons of a score made with ctx.explain false, as score_offer would have with it
// true (the numbers are not touched).
void explain_score(Score& score, const Offer& offer, const Prediction& prediction,
                   const ScoringConfig& config, ScoreContext ctx);

// Break-even rate for an instance of `offer` paying `dph_total` (the listed price, or what the
// rental pays: an interruptible one's bid) under the config's objective, its proofs' transfer
// (core::transfer_per_proof_usd) counted.
double objective_break_even(const Offer& offer, double dph_total, const ScoringConfig& config);

// Standard normal CDF.
double normal_cdf(double x);

}  // namespace pf::core
