// The default fleet policy: which offers to rent now and which instances to drop, from the
// fleet, the listed offers, everything measured so far and the bad-host list. Pure: the
// manager's autopilot and the simulator call the same function with their own `now`.
//
// One decision, in order:
//  1. learn from history (learned_predictor.h);
//  2. production watch: a proving instance whose recent production rate is clearly below
//     break-even loses money every hour → drop (it is replaced by the renting step when a
//     candidate pays);
//  3. setup watch: an instance still downloading parameters so slowly that finishing no longer
//     pays → drop (with a strike against the host);
//  4. demand: proving capacity beyond demand whose proofs would earn nothing → drop the most
//     expensive per proof;
//  5. rent (and swap): score every listed candidate (scoring.h), skip live blocks (blocklist.h),
//  machines
//     where one of our instances is still being set up or benchmarked, and offers not worth
//     it; rent the best per proof first while the caps allow (max $/hour, max instances,
//     max concurrent benchmarks, demand, exploration budget for offers rented to find out).
//     Where demand leaves too little room for a candidate, it is valued as a swap: renting it
//     to replace the proving instances that cost the most per proof (swap_value below).
// Every action carries a human-readable reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "core/blocklist.h"
#include "core/fleet.h"
#include "core/learned_predictor.h"
#include "core/offer.h"
#include "core/scoring.h"

namespace pf::core {

struct WatchConfig {
  int min_samples = 6;  // a production window needs this many proofs to be judged
  // Drop when the window's whole interval is below break-even, or when this many consecutive
  // windows have their point estimate below it.
  int consecutive_below = 2;
};

struct PolicyConfig {
  LearnedPredictorConfig predictor;
  ScoringConfig scoring;
  BlocklistConfig blocklist;
  WatchConfig watch;
  // Caps.
  double max_dollars_per_hour = 30;
  int max_instances = 40;
  int max_concurrent_benchmarks = 6;             // instances between rent and verdict at once
  std::optional<double> demand_proofs_per_hour;  // nullopt: unlimited
  double demand_headroom = 1.0;  // rent until expected capacity reaches demand × this
  // Where demand is read from a job queue (scale_to_demand.h): the part of
  // demand_proofs_per_hour that lasts (arrivals), and how long the rest (a backlog being
  // drained) is expected to last from now. A candidate's room beyond the lasting demand is
  // valued only over transient_room_h·e^(−setup/transient_room_h) hours (scoring.h), so the
  // fleet does not rent for a queue that is worked off before the rental proves. nullopt: all
  // of the demand lasts (a configured demand).
  std::optional<double> lasting_demand_proofs_per_hour;
  double transient_room_h = 0;
  // Drop the dearest proving instance when the proofs it adds within demand earn less than
  // this share of its price (hysteresis against rent/drop flapping on noisy rates: at 0.8 a
  // small instance filling the last few proofs/hour was rented and dropped again up to six
  // times in 72 h as measured rates moved, each rental paying its setup again).
  double surplus_keep_share = 0.5;
  // A proving instance whose host's contract ends (offer end_date) within this many hours is
  // not counted as capacity when new rentals are valued: vast stops it at end_date for good, and
  // a replacement rented now proves only after its setup (boot, parameters, warm-up, benchmark:
  // about an hour), so it is rented while the old one still proves (make before break).
  double replace_before_contract_end_h = 1.5;
  // Swap: when demand is covered, a candidate may still be rented to replace the proving
  // instances that cost the most per proof (make before break: they keep proving until the
  // candidate is accepted, then the surplus step drops them). Only instances whose measured
  // $/proof is above the candidate's predicted one by this share are displaced, at most
  // swap_max_displaced of them per candidate, and the swap must be expected to gain at least
  // swap_min_gain_usd over the candidate's lifetime, its setup and the risk of a rejection
  // counted (hysteresis against swapping back and forth on noise).
  double swap_margin = 0.1;
  int swap_max_displaced = 3;
  double swap_min_gain_usd = 0.5;
  double exploration_budget_usd = 15;  // what rentals made to find out may lose per window
  double exploration_window_s = 24 * 3600;
  // When the operator stops the fleet (the simulator's horizon); caps every lifetime.
  std::optional<double> stop_at;
  double min_value_usd = 0.1;  // an offer must be expected to earn at least this
  int max_rents_per_decision = 6;
  // A second instance on a machine we already prove on is allowed when it pays despite the
  // contention it causes (never while one of ours there is still being set up).
  bool allow_shared_machines = true;
  // A parameter download is judged once it has run this long.
  double download_judge_after_s = 10 * 60;
  // A machine whose instance the operator destroyed (stored close cause Operator) is not
  // rented again for this long: the operator's destroy is a judgement about the machine.
  double operator_cooldown_s = 24 * 3600;
};

// What decide() learns from, beyond the fleet. A view: the caller keeps the data alive.
struct PolicyHistory {
  std::span<const Measurement> measurements;  // benchmark verdicts and production windows
  double exploration_spent_usd = 0;           // see exploration_spend()
};

struct Action {
  enum class Kind { Rent, Drop };
  Kind kind = Kind::Rent;
  // Rent
  Offer offer;
  Prediction prediction;
  Score score;
  bool exploratory = false;
  int partitions = 0;  // plan from the advertised RAM; the agent re-plans from what it probes
  // Drop
  std::int64_t instance_id = 0;
  std::optional<Strike> strike;  // blame to record against the host, if any
  std::string reason;
};
const char* to_string(Action::Kind kind);

std::vector<Action> decide(const std::vector<InstanceRecord>& fleet,
                           const std::vector<Offer>& offers, const PolicyHistory& history,
                           const std::vector<BadHost>& bad_hosts, double now,
                           const PolicyConfig& config);

// Machines left alone at `now` because the operator destroyed one of our instances on them
// within cooldown_s (an operator close not yet confirmed counts from now).
std::set<std::int64_t> operator_cooldown_machines(const std::vector<InstanceRecord>& fleet,
                                                  double now, double cooldown_s);

// Spend of instances destroyed without being accepted, within the last `window_s`: what
// finding out has cost lately.
double exploration_spend(const std::vector<InstanceRecord>& fleet, double now, double window_s);

// Production watch for one proving instance. `windows` are its production runs (kind
// "production", any order).
struct WatchResult {
  bool drop = false;
  bool below = false;  // latest window's point estimate below break-even
  std::string reason;
};
WatchResult watch_production(const InstanceRecord& instance, const std::vector<BenchRun>& windows,
                             double break_even_rate, const WatchConfig& config);

// Setup watch for one instance fetching parameters: once it has fetched for
// download_judge_after_s, a download so slow that finishing no longer pays (the offer scored
// with the setup hours left), or that cannot finish before its deadline, is judged with a
// slow-download strike against the host. `pred` is the instance's prediction with `others` of
// ours on the machine; `failure_strikes` the machine's automatic strikes. decide() drops on it;
// the alert watch (core/alerts.h) reports it for every instance, whoever rented it.
struct DownloadJudgement {
  std::string reason;
  Strike strike;
};
std::optional<DownloadJudgement> judge_download(const InstanceRecord& instance,
                                                const Prediction& pred, int others,
                                                int failure_strikes, double now,
                                                const PolicyConfig& config);

// A complete production window of one instance: its production proofs (agent clock) within
// [start, start + window_s).
struct ProductionWindow {
  double start = 0;
  std::vector<ProofSample> samples;
};
// Consecutive windows of window_s from the instance's first production proof; only windows a
// later proof has closed are returned (the open one is still filling). Deterministic, so a
// restarted manager finds the same windows again.
std::vector<ProductionWindow> complete_production_windows(const std::vector<ProofSample>& samples,
                                                          double window_s);

// A proving instance a swap could replace: its measured rate and price.
struct Displaceable {
  std::int64_t instance_id = 0;
  std::int64_t machine_id = 0;
  double rate = 0;  // measured proofs/hour
  double dph = 0;
  double cost_per_proof() const { return rate > 0 ? dph / rate : 0; }
};
// Renting a candidate to replace some proving instances. Value: the candidate's score against
// the demand room the displaced instances leave, less — once it is accepted (p_pays), over its
// productive hours — what they would have added without it (their paid proofs less their
// price; nothing where that is negative, as the surplus step drops them anyway).
struct SwapPlan {
  std::vector<Displaceable> displaced;
  double displaced_rate = 0;
  Score score;           // the candidate against the room with the displaced gone
  ScoreContext context;  // what `score` was made with (explain_score writes its words)
  double value_usd = 0;
};
// The best swap for the candidate among `proving` (any order): the costliest per proof first,
// only those above the candidate's predicted $/proof by `margin`, none on the candidate's
// machine, at most `max_displaced`. `context.demand_room` is the room open now (may be
// negative); `lost_rate` is what ours on the candidate's machine would lose to contention.
// nullopt when nothing qualifies.
std::optional<SwapPlan> best_swap(const Offer& offer, const Prediction& prediction,
                                  const ScoringConfig& scoring, const ScoreContext& context,
                                  std::vector<Displaceable> proving, double lost_rate,
                                  double margin, int max_displaced);

// The parameter download rate (Mb/s) each machine last delivered to one of ours (the latest
// rental with a measured rate, any state): candidates on it are scored with it instead of the
// advertised speed, so a host that downloaded slowly is not rented again on its advertisement.
std::map<std::int64_t, double> measured_download_mbps(const std::vector<InstanceRecord>& fleet);

// States between rent and verdict: what counts against max_concurrent_benchmarks.
bool in_setup(InstanceState state);

// The lifetime an instance rented now can have under the config (hours).
double lifetime_hours(double now, const PolicyConfig& config);

}  // namespace pf::core
