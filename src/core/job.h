// A proof job: one SNARK a client (Curio) asked the fleet for through the cuzk-compatible
// gateway (design §11). The row is the job's whole durable truth; its input (the client's
// serialized SubmitProofRequest, request_id cleared) lives content-addressed on disk beside it.
//
// States: queued → assigned (leased to an instance, not yet started) → proving → done | failed |
// cancelled. A lost lease returns the job to queued (attempts counts every lease handed out);
// `attempt` fences results: only the holder of the current attempt may finish the job, so a
// late duplicate from an instance that lost its lease changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pf::core {

// The proof kinds of cuzk.v1.ProofKind (proto/cuzk/v1/proving.proto), by name: PoRep C2 (also
// what Curio's Snark Market PSProve sends), SnapDeals UpdateProve, and the PoSt kinds the proto
// knows (never proved on a rented machine: the gateway keeps them on the operator's own cuzk,
// gateway/local_cuzk.h; they are priced like any other kind).
enum class JobKind { PorepC2, SnapUpdate, WindowPost, WinningPost };

// A set of kinds, one bit each: what a prover can prove (core/proof_params.h).
using KindSet = std::uint8_t;
constexpr KindSet kind_bit(JobKind kind) {
  return static_cast<KindSet>(1u << static_cast<unsigned>(kind));
}
constexpr bool has_kind(KindSet set, JobKind kind) {
  return (set & kind_bit(kind)) != 0;
}
// The kinds that go to rented machines.
inline constexpr KindSet kFleetKinds = kind_bit(JobKind::PorepC2) | kind_bit(JobKind::SnapUpdate);

enum class JobState { Queued, Assigned, Proving, Done, Failed, Cancelled };

// "porep-c2" | "snap-update" | "window-post" | "winning-post" (config keys, JSON, CLI).
const char* to_string(JobKind kind);
std::optional<JobKind> parse_job_kind(std::string_view text);
const char* to_string(JobState state);
std::optional<JobState> parse_job_state(std::string_view text);

// Done, failed and cancelled never change again (except a client's re-submission after a
// rejected proof, which opens a new attempt of the same job: see jobs::JobQueue::submit).
bool is_terminal(JobState state);
// Assigned or proving: an instance holds the job's lease.
bool is_leased(JobState state);

struct Job {
  std::int64_t id = 0;
  // Who asked (the gateway's client: its IP address, docs/gateway.md) and its idempotency key:
  // request ids are unique per client, so two clients' equal ids are two jobs. "" on jobs
  // recorded before schema 12, which did not record the client.
  std::string client;
  std::string request_id;
  JobKind kind = JobKind::PorepC2;
  int priority = 0;  // cuzk.v1.Priority as sent (0 = unspecified)
  JobState state = JobState::Queued;
  std::string input_digest;  // SHA-256 hex of the input bytes (content address)
  std::int64_t input_bytes = 0;

  int attempts = 0;  // leases handed out so far (the current one included)
  int failures = 0;  // failed proofs reported (not lost leases, not OOMs): max_attempts bounds it
  std::optional<std::int64_t> instance_id;  // holder of the current lease, or the last one
  double lease_expires_at = 0;              // epoch s; meaningful while is_leased(state)
  // Hedged proving (core/job_hedge.h): a second instance running a copy of the current attempt
  // (the same attempt number, told apart by instance) while the holder's proof is at risk. Its
  // own lease, renewed by its own heartbeats. The first valid proof finishes the job; a copy
  // that fails, is closed or goes silent leaves the other holding it.
  std::optional<std::int64_t> hedge_instance_id;
  double hedge_assigned_at = 0;
  double hedge_lease_expires_at = 0;

  double submitted_at = 0;  // epoch s, when the request was recorded
  double deadline_at = 0;   // epoch s: a proof after this earns nothing (client's ProveTimeout)
  double assigned_at = 0;   // current attempt's lease
  double started_at = 0;    // current attempt's proof start (agent reported)
  double finished_at = 0;   // reached a terminal state
  double delivered_at = 0;  // a client received the result (0: not yet)

  std::string proof_digest;  // SHA-256 hex of the proof (done)
  std::string error;         // failed/cancelled: why, for the client and the operator
  // Instances that failed this job or made a proof the client rejected: not leased it again
  // while another instance can take it.
  std::vector<std::int64_t> avoid_instances;
  int rejections = 0;  // proofs of this job the client rejected (came back after delivery)

  // Timings of the proof that finished it, from the agent (milliseconds).
  double prove_ms = 0, gpu_ms = 0, queue_ms = 0;
};

}  // namespace pf::core
