// The automatic bad-host list: strikes with evidence, an expiry that grows with every strike
// (Envoy-style ejection), and a cap on how much of the candidate pool it may exclude, so a
// run of bad luck can never starve the fleet. Operator entries (source "operator") live beside
// the automatic ones (source "auto") and are never changed or capped here.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/close_cause.h"
#include "core/fleet.h"
#include "core/offer.h"

namespace pf::core {

struct BlocklistConfig {
  double base_ttl_s = 6 * 3600;  // first strike
  double escalation = 4;         // each further strike multiplies the expiry
  double max_ttl_s = 30 * 24 * 3600;
  // Automatic entries may exclude at most this share of the candidate pool's machines.
  double max_pool_share = 0.25;
};

enum class StrikeKind {
  SlowBenchmark,  // the acceptance test rejected it
  NeverBooted,    // stayed loading past its deadline
  Crashed,        // prover died / instance exited
  Offline,        // host disconnected / heartbeat lost
  SlowDownload,   // parameters arrived far slower than needed to pay
  FailedProofs,   // its prover failed real jobs several times in a row (issue 12)
  RejectedProof,  // a client rejected a proof it made (the request came back after delivery)
  InvalidProof,   // it returned a proof that failed the gateway's check (jobs/proof_check.h)
};
const char* to_string(StrikeKind kind);

struct Strike {
  std::int64_t machine_id = 0;
  StrikeKind kind = StrikeKind::SlowBenchmark;
  std::string reason;
  double at = 0;
  // Other instances of ours alive on the same machine while the evidence was gathered.
  int our_others_on_machine = 0;
  std::int64_t instance_id = 0;
  double measured_rate = 0;  // SlowBenchmark: what the test saw
  double break_even_rate = 0;
};

struct StrikeOutcome {
  std::optional<BadHost> entry;  // the auto entry to store (new or escalated); nullopt = none
  std::string reason;            // why the host was (or was not) blamed
};

// Applies a strike to the machine's automatic entry in `existing` (if any). A slow benchmark
// taken while another instance of ours shared the machine is not the host's fault: no entry.
StrikeOutcome apply_strike(const std::vector<BadHost>& existing, const Strike& strike,
                           const BlocklistConfig& config);

// Expiry of the n-th strike's entry, from `at`.
double strike_expiry(int strikes, double at, const BlocklistConfig& config);

struct Exclusion {
  std::set<std::int64_t> machines;   // machines not to rent now
  std::vector<std::string> reasons;  // one per excluded machine, plus cap notes
  int auto_entries_waived = 0;       // live auto entries not applied because of the cap
};

// Which of the candidates' machines to skip now: every active operator entry, and active
// automatic entries — most strikes first, then most recent — while they exclude at most
// max_pool_share of the distinct machines among `candidates` (but always at least one).
Exclusion excluded_machines(const std::vector<BadHost>& bad_hosts,
                            const std::vector<Offer>& candidates, double now,
                            const BlocklistConfig& config);

// The strike a close earns the machine, if any: rejections count as slow benchmarks,
// deadlines by the stage they hit (never booted, slow download, slow benchmark), market exits
// and other lifecycle closes as crashes, lost hosts as offline. Drops, operator requests, the
// horizon and the market's own bookkeeping (vanished, never rented, orphans) blame nobody.
std::optional<Strike> strike_for_close(const InstanceRecord& rec, InstanceState state_before,
                                       CloseCause cause, const std::string& reason, double at,
                                       int our_others_on_machine);

// Strikes recorded against a machine by its automatic entry, expired or not (0 if none).
int auto_strikes(const std::vector<BadHost>& bad_hosts, std::int64_t machine_id);

}  // namespace pf::core
