// The fleet's records: one rental from rent to destroy, its audit trail, its measurements,
// and what we know about hosts. Plain data shared by the lifecycle core, the store and the
// shells. Times are epoch seconds (double); the core never reads a clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/close_cause.h"
#include "core/offer.h"

namespace pf::core {

enum class InstanceState {
  Renting,         // create sent (or about to be); no market id confirmed yet
  Booting,         // market has it; image pulling / agent not yet registered
  Registered,      // agent registered
  FetchingParams,  // agent downloading parameters
  WarmingUp,       // prover started, first proofs (not measured)
  Benchmarking,    // measured proofs feed the acceptance test
  Proving,         // accepted, producing
  Destroying,      // destroy requested; retried until the market confirms
  Destroyed,       // market confirmed (or instance gone); terminal
};

const char* to_string(InstanceState state);
std::optional<InstanceState> parse_instance_state(std::string_view text);
inline bool is_terminal(InstanceState s) {
  return s == InstanceState::Destroyed;
}
// Every state from which the market may be billing us.
inline bool may_bill(InstanceState s) {
  return s != InstanceState::Destroyed;
}

// Identifies a host for history: the same machine with the same GPU slice.
struct HostKey {
  std::int64_t machine_id = 0;
  std::string gpu_name;
  int num_gpus = 0;
  bool operator==(const HostKey&) const = default;
};

struct Verdict {
  enum class Decision { Continue, Accept, Reject };
  Decision decision = Decision::Continue;
  double rate = 0;  // proofs/hour estimate from measured samples
  double low = 0;   // interval on the rate
  double high = 0;
  int samples = 0;
  double break_even_rate = 0;
  std::string reason;

  bool operator==(const Verdict&) const = default;
};
const char* to_string(Verdict::Decision d);

struct InstanceRecord {
  std::int64_t id = 0;        // ours (store-assigned)
  std::string deployment_id;  // unique; the market label is "proverfleet:<deployment_id>"
  std::optional<std::int64_t> market_id;
  Offer offer;  // snapshot at rent time
  InstanceState state = InstanceState::Renting;
  double created_at = 0;
  double state_since = 0;
  double deadline_at = 0;  // 0 = no deadline in this state
  std::string destroy_reason;
  std::optional<CloseCause> close_cause;  // set with destroy_reason when the close is decided
  std::optional<double> destroyed_at;

  // Agent credentials: only hashes are stored.
  std::string secret_hash;  // one-time registration secret
  std::string token_hash;   // bearer token issued at registration
  double last_heartbeat_at = 0;

  // What the market last said (actual_status; "" = null/provisioning).
  std::string market_status;
  double market_status_since = 0;
  // Times the market stopped it (core::record_market_status): an interruptible rental's
  // preemptions, which core/rental_terms.h learns from.
  int market_stops = 0;
  // Seconds the market held it stopped since state_since, in stops that ended
  // (core::record_market_status; core::running_seconds_in_state adds a stop still going on).
  double market_stopped_s = 0;

  // Progress reported by the agent.
  double params_done_bytes = 0;
  double params_total_bytes = 0;
  double params_rate_bps = 0;
  int prover_crashes = 0;
  int ooms = 0;
  // The smallest plan (partitions) the prover was killed for memory at on this rental; 0: none.
  // The machine's real peak can exceed the planner's model, so a later rental of the machine
  // plans below it (core/oom_memory.h).
  int oom_partitions = 0;
  int proofs_benchmark = 0;
  int proofs_production = 0;
  double gpu_util = 0;
  double peak_memory_gib = 0;
  // Whether the GPU ever reported throttling: colours every run measured on it since.
  bool gpu_throttled = false;

  // Lifecycle progress the manager must still know after a restart (core/proof_flow.h,
  // core/production.h): when the benchmark's clock starts (agent clock: the last warm-up
  // completion, or the first measured proof without one; 0 = not yet), and how many complete
  // production windows were recorded as bench runs.
  double bench_since = 0;
  int production_windows = 0;

  // Money: accrued up to `billed_until` (core/billing.h). spend_usd is the total; the storage
  // and bandwidth parts are also kept apart (compute is the rest).
  double spend_usd = 0;
  double billed_until = 0;
  double storage_spend_usd = 0;
  double bandwidth_spend_usd = 0;
  // The disk rented at create, GB: storage is billed for it in every state but offline.
  // 0 on rows from before it was recorded (storage then priced as search priced it).
  double disk_gb = 0;
  // An interruptible rental's bid, $/hour of compute (vast bills compute at it while it runs);
  // nullopt: on-demand (core/rental_terms.h).
  std::optional<double> bid_price;

  std::optional<Verdict> verdict;
  std::string plan_json;          // the prover plan the agent reported (opaque here)
  std::string origin = "deploy";  // "deploy", "autopilot" or "adopted"

  // Every field (the dashboard reuses a row's JSON while its record reads back the same).
  bool operator==(const InstanceRecord&) const = default;
};

inline std::string market_label(const std::string& deployment_id) {
  return "proverfleet:" + deployment_id;
}

struct InstanceEvent {
  std::int64_t id = 0;  // store-assigned
  std::int64_t instance_id = 0;
  double at = 0;
  std::string kind;     // "state", "agent", "market", "spend", "operator", ...
  std::string message;  // human-readable
  std::string data_json = "{}";
};

enum class ProofPhase { Warmup, Benchmark, Production };
const char* to_string(ProofPhase p);
std::optional<ProofPhase> parse_proof_phase(std::string_view text);

struct ProofSample {
  std::int64_t instance_id = 0;
  std::int64_t seq = 0;  // agent's event sequence number: idempotency key
  double at = 0;
  double seconds = 0;  // wall time of the proof
  double gpu_ms = 0;
  double queue_ms = 0;
  ProofPhase phase = ProofPhase::Benchmark;
};

// One measured run on a host: a benchmark verdict or a production window.
struct BenchRun {
  std::int64_t id = 0;
  HostKey host;
  std::int64_t instance_id = 0;
  double at = 0;
  double rate = 0;  // proofs/hour
  double low = 0;
  double high = 0;
  int samples = 0;
  std::string kind = "benchmark";  // or "production"
  bool contended = false;          // another of our instances was alive on the same machine
  bool throttled = false;          // the GPU reported throttling during the run
  std::string plan_json;
};

// Robust summary of a host's runs. MAX is never the estimate.
struct HostSummary {
  HostKey host;
  int runs = 0;
  double median = 0;
  double p10 = 0;
  double latest = 0;
  double ewma = 0;
  double last_at = 0;
};

struct BadHost {
  std::int64_t machine_id = 0;
  std::string reason;
  std::string evidence_json = "{}";
  double added_at = 0;
  std::optional<double> expires_at;  // nullopt = until removed
  int strikes = 1;
  std::string source = "operator";  // "operator" or "auto"
};
inline bool is_active(const BadHost& b, double now) {
  return !b.expires_at || *b.expires_at > now;
}

}  // namespace pf::core
