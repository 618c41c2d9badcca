// The report of a policy simulation (`proverfleet sim`): the keys of the scenario spec
// ("The report") plus a few that explain them, as JSON, as a human-readable text and as a
// side-by-side comparison of several policies.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace pf::sim {

// What happened to one rental, for --details and for debugging a policy.
struct InstanceOutcome {
  std::int64_t instance_id = 0;
  std::int64_t offer_id = 0;
  std::int64_t machine_id = 0;
  std::string gpu;  // "2x RTX 4090"
  double dph = 0;
  double rented_h = 0;
  std::optional<double> closed_h;  // nullopt: still rented at the horizon
  std::string final_state;
  std::string close_reason;
  std::string close_cause;  // core::to_string(CloseCause); empty while rented
  bool accepted = false;
  double verdict_rate = 0;  // measured rate at the verdict (0 = none)
  int verdict_samples = 0;
  double truth_rate = 0;  // sustained rate the truth gives this host at the best plan, alone
  int partitions = 0;     // plan the prover ran last
  int ooms = 0;
  int proofs_paid = 0;
  double spend_usd = 0;
  double revenue_usd = 0;
  bool accepted_unprofitable = false;
  bool rejected_profitable = false;
  bool rejected_by_target = false;
};

inline constexpr double kShortRentalH = 2;  // what DesReport::short_rentals counts as short

struct DesReport {
  std::string scenario;
  std::string policy;
  std::uint64_t seed = 0;
  double hours = 0;
  long proofs = 0;         // production proofs that earned (within demand)
  long proofs_unpaid = 0;  // production proofs beyond demand
  double revenue_usd = 0;
  double spend_usd = 0;  // compute + storage + parameter bandwidth (core/billing.h)
  double profit_usd = 0;
  std::optional<double> cost_per_proof_usd;  // spend ÷ proofs; nullopt without proofs
  double benchmark_spend_usd = 0;            // spend on instances before their verdict
  double bandwidth_usd = 0;
  double storage_usd = 0;  // the rented disks, billed from creation in every state but offline
  int instances_rented = 0;
  // /3: rentals made interruptible (a bid, core/rental_terms.h) and the market's stops of them
  // (a contract's end is not counted: it ends the rental).
  int bid_rentals = 0;
  int preemptions = 0;
  // Changes of bid (core/bid_change.h): raised while stopped, lowered once a raise had its time.
  int bid_raises = 0;
  int bid_lowerings = 0;
  int instances_accepted = 0;
  int instances_rejected = 0;  // destroyed before being accepted, for any reason
  // Closed by the policy's own choice (dropped: surplus, a swap, a download or state it judged
  // not worth finishing) within kShortRentalH of being rented: churn, paid setups that earned
  // little. Benchmark rejections, host failures, market stops and the horizon are not counted.
  int short_rentals = 0;
  // Accepted, and over its production life the truth's $/proof (billed cost ÷ the proofs the
  // truth says it delivers) exceeded revenue per proof.
  int accepted_unprofitable = 0;
  // Destroyed (not by a failure of the host, not at the horizon) while the truth says keeping
  // it paid: its sustained rate, alone at the best plan with our other instances on the
  // machine, times revenue — counting only proofs within demand left by our other provers —
  // exceeded its price.
  // Not counting those whose truth rate was below the policy's own break-even (its $/proof
  // target, e.g. the classic's $0.008): rejected by its rule, not by a wrong measurement.
  int rejected_profitable = 0;
  int rejected_by_target = 0;  // destroyed, profitable by the truth, but above its own target
  int ooms = 0;
  int ooms_after_first_on_host = 0;  // OOMs on a machine that had OOMed before
  double mean_proofs_per_hour = 0;   // proofs ÷ hours
  int decisions = 0;                 // policy actions taken (rents + drops)
  // /2 scenarios (jobs with deadlines); `jobs` says the fields apply.
  bool jobs = false;
  std::int64_t jobs_arrived = 0;
  std::int64_t jobs_served_on_time = 0;  // delivered within the deadline: the paid proofs
  std::int64_t jobs_late = 0;            // delivered after it: unpaid
  std::int64_t jobs_unserved = 0;        // expired in the queue or still unfinished at the end
  // Hedged proving (core/job_hedge.h): second copies started, those whose copy finished first
  // (the hedge won) and of those how many were on time, and what the copies that lost cost —
  // their prover's compute while they ran and the hedge's input download (part of spend).
  std::int64_t hedges = 0;
  std::int64_t hedges_won = 0;
  std::int64_t hedges_won_on_time = 0;
  double hedge_usd = 0;
  double queue_wait_p95_min = 0;   // arrival to being taken, over the jobs taken
  double idle_instance_hours = 0;  // accepted instances waiting with no job to prove
  // The scenario's profit bound (profit_bound.h), when the caller computed it: the report then
  // says what share of it this policy earned.
  std::optional<double> bound_profit_usd;
  std::vector<InstanceOutcome> instances;  // filled only when asked for
};

// profit ÷ bound; nullopt without a positive bound.
std::optional<double> share_of_bound(const DesReport& report);

// The report as one JSON object (spec keys first). `details` adds "instances".
nlohmann::json report_json(const DesReport& report, bool details = false);

// A human-readable summary of one run.
std::string report_text(const DesReport& report);

// Side-by-side table of several runs on one scenario: profit as a share of the bound (when the
// reports carry it), and profit and $/proof of each policy relative to the one named
// `reference` (e.g. "clairvoyant") when present.
std::string compare_text(const std::vector<DesReport>& reports, const std::string& reference);

}  // namespace pf::sim
