// A job's timeline (issue 36): one row per step of a proof job's life — recorded, each try
// (leased to an instance, input fetched, proving, proof accepted or rejected with the evidence,
// returned to the queue and why), delivered — so that an operator can say where a late or
// failed job went. Written by jobs::JobQueue in the same transaction as the job's row, so the
// row and its timeline never disagree; read by the operator API (GET /api/v1/jobs/{id}), the
// dashboard's job page and `proverfleet jobs ID`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pf::core {

enum class JobEventKind {
  Recorded,       // the request was stored and acknowledged
  Resubmitted,    // the client sent the request_id again after a proof (a rejection): new run
  Leased,         // an instance took the job (attempt n)
  Hedged,         // a second instance started a copy: its proof was at risk (core/job_hedge.h)
  InputFetched,   // the instance finished downloading the input
  Proving,        // the agent started proving it
  Proved,         // a proof was reported and passed the check: the job is done
  ProofRejected,  // a proof was reported and failed the check (detail: why, proof digest)
  ProverFailed,   // the prover reported a failure (detail: its message and what follows)
  Requeued,       // back to the queue without a proof (lease not renewed, instance closed)
  Failed,         // gave up: the client gets an error
  Cancelled,      // the client cancelled it
  Delivered,      // the proof reached the client
  Undelivered,    // the client left before the proof reached it: the next call is a retry
};

// "recorded", "resubmitted", "leased", "hedged", "input_fetched", "proving", "proved",
// "proof_rejected", "prover_failed", "requeued", "failed", "cancelled", "delivered", "undelivered".
const char* to_string(JobEventKind kind);
std::optional<JobEventKind> parse_job_event_kind(std::string_view text);

struct JobEvent {
  std::int64_t job_id = 0;
  double at = 0;  // epoch s
  JobEventKind kind = JobEventKind::Recorded;
  int attempt = 0;                          // the job's attempt it belongs to (0: before any)
  std::optional<std::int64_t> instance_id;  // the instance involved, if any
  std::string detail;                       // why, in words (bounded by the writer)
};

// The detail's bound: a prover's message may be long; the timeline keeps its start.
inline constexpr std::size_t kMaxJobEventDetailBytes = 2000;

}  // namespace pf::core
