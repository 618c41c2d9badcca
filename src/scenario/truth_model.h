// The one truth model: how a rented machine of a scenario really behaves (spec:
// /work/shared/spec/scenario.md, "Physics" and /2's "More truth"). The policy simulator
// (src/sim), market-sim (src/market_sim) and the agent's sim prover (src/agent/prover_sim) all
// take their behaviour from these functions, so the three agree by construction.
//
// Time conventions: seconds, relative to the event named (rent, boot, prover start). "Proving
// time" is time the prover process has been running (warming up or proving), summed over its
// restarts on one rental; throttle and crash count it, offline counts time since boot.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "scenario/draws.h"
#include "scenario/scenario.h"

namespace pf::scenario {

inline constexpr double kNeverS = 1e300;  // "never" for the timeline functions (finite: sortable)

// --- rate ---------------------------------------------------------------------------------------

// Rate multiplier from `others` of our instances alive on the same machine *now*:
// contention^others. Recompute it whenever an instance on the machine comes or goes.
double contention_factor(const Truth& truth, int others);

// The true sustained rate (proofs/hour) at `partitions` concurrent partitions, with `others` of
// our instances on the machine, throttled or not:
// rate_full · g(p / partitions_full) · contention^others · (throttle factor).
double truth_rate(const Truth& truth, int partitions, int others, bool throttled);

// --- memory -------------------------------------------------------------------------------------

// The machine's real prover peak with p partitions: mem_base_gib + mem_per_partition_gib · p
// (/1: the planner's 70 + 14·p).
double peak_memory_gib(const Truth& truth, int partitions);

// Whether a prover with p partitions is killed for memory (its real peak exceeds the visible
// RAM) during the warm-up of its first proof.
bool out_of_memory(const Truth& truth, int partitions);

// Seconds after a prover start at which an out-of-memory plan is killed: at the end of the
// first proof's warm-up, where the peak is reached (at least 1 s).
double oom_after_start_s(const Truth& truth);

// What the instance's memory meter shows at the peak (the cgroup caps it at the visible RAM).
double observed_peak_memory_gib(const Truth& truth, int partitions);

// --- proofs -------------------------------------------------------------------------------------

// Extra seconds of the k-th proof (1-based) after a prover (re)start: the first warmup_proofs
// proofs are slow, the k-th by warmup_min · 0.5^(k−1) minutes (/1: only the first, by warmup_min).
double warmup_extra_s(const Truth& truth, int proof_index);

// The work of one proof in units of "proofs at the current rate": lognormal, mean 1, CV
// proof_time_cv, drawn from the rental's stream. Seconds = work · 3600 / rate (rate may change
// mid-proof: work is done at whatever rate holds).
double draw_proof_work(const Truth& truth, Stream& stream);

// --- timeline -----------------------------------------------------------------------------------

// Seconds from rent until the container runs (kNeverS: never boots).
double boot_after_rent_s(const Truth& truth);

// Seconds to download the proving parameters at the real speed (kNeverS: no bandwidth).
double download_s(const Truth& truth, double params_bytes);

// Proving time after which the throttle starts (nullopt: never throttles).
std::optional<double> throttle_after_proving_s(const Truth& truth);

// Whether a throttle shows as a GPU throttle reason (/2 throttle.reported; /1 always).
bool throttle_reported(const Truth& truth);

// Proving time after which the prover dies for good ("crash"; nullopt: no crash).
std::optional<double> crash_after_proving_s(const Truth& truth);

// Seconds after boot at which the host disconnects ("offline"; nullopt: never).
std::optional<double> offline_after_boot_s(const Truth& truth);

// One rental's timeline as a market sees it, assuming the agent starts proving as soon as the
// parameters are down and keeps the prover running: seconds after rent (kNeverS: never).
struct RentalTimeline {
  double boot_s = kNeverS;          // the container runs (billing starts)
  double prover_start_s = kNeverS;  // parameters downloaded, the prover starts
  double exit_s = kNeverS;          // crash: the container shows "exited"
  double offline_s = kNeverS;       // offline: the host disappears
};
RentalTimeline rental_timeline(const Truth& truth, double params_bytes);

// --- market -------------------------------------------------------------------------------------

// The price the offer is listed at at hour `at_h` (its dph_changes applied); a rental created
// then pays this for its whole life.
double listed_dph(const ScenarioOffer& offer, double at_h);

// --- demand (/2) --------------------------------------------------------------------------------

// The job arrival rate (jobs/hour) at hour `at_h`; 0 in gaps.
double arrival_rate(const Demand& demand, double at_h);

// Every job arrival (seconds) in [0, horizon_s): a Poisson process at the piecewise-constant
// rate, drawn from `stream`, ascending.
std::vector<double> draw_arrivals(const Demand& demand, double horizon_s, Stream& stream);

}  // namespace pf::scenario
