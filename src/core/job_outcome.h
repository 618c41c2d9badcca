// What happens to a job after a failed proof, and what a returning request_id means (design
// §11, issue 12 items 1 and 4). Pure: the job queue applies the outcome; tests and the policy
// simulator can ask the same questions without a queue.
#pragma once

#include <string>

#include "core/job.h"

namespace pf::core {

struct JobFailure {
  int failures_before = 0;         // the job's failed proofs so far
  int max_attempts = 3;            // failed proofs before the job fails (≥ 1)
  int host_failures_in_a_row = 0;  // failed proofs on the reporting instance in a row, before
  int strike_after_failures = 2;   // failures in a row on one host that earn it a strike (≥ 1)
  bool oom = false;                // the prover died for memory: the plan's fault, not the job's
};

struct JobFailureOutcome {
  bool fail_job = false;           // true: the job ends failed; false: it returns to the queue
  bool count_failure = false;      // the job's failures grows by one
  bool avoid_instance = false;     // do not lease it to the same instance while another can take it
  int host_failures_in_a_row = 0;  // the instance's streak after this report
  bool strike_host = false;        // the streak reached strike_after_failures (then it restarts)
  std::string reason;
};

// An OOM requeues the job as it is: the manager's OOM handling shrinks the plan, and the job may
// well succeed on the same instance. Any other failure counts against the job and the host: the
// job is retried elsewhere until it has failed max_attempts times; a host that fails
// strike_after_failures proofs in a row (any jobs) gets a strike.
JobFailureOutcome job_failure_outcome(const JobFailure& failure);

// A request_id the queue already knows came back (SubmitProof / Prove with the same id).
enum class Resubmission {
  Join,    // queued or running, or done but never delivered: the client waits for this job
  Redo,    // done and delivered: the client rejected the proof; prove again elsewhere, strike
  Reopen,  // failed, cancelled, or its proof is gone: a fresh run of the same job, no blame
  // The same request_id with another input while the job is open or its proof waits to be
  // delivered: two different requests claim one idempotency key. Refused; nothing changes.
  Conflict,
};
struct ResubmissionOutcome {
  Resubmission action = Resubmission::Join;
  std::string reason;
};
// proof_kept: a done job's proof bytes are still stored (retention removes them).
// same_input: the request carries the input the job was recorded with (its SHA-256). A
// different input for a job that is finished and delivered, failed or cancelled is a new
// request under an old id (Curio re-ran the step before it, e.g. a fresh C1): a fresh run
// without blame, since nobody rejected a proof of this input.
ResubmissionOutcome resubmission_outcome(const Job& existing, bool proof_kept,
                                         bool same_input = true);

}  // namespace pf::core
