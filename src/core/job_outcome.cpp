#include "core/job_outcome.h"

#include <algorithm>

namespace pf::core {

JobFailureOutcome job_failure_outcome(const JobFailure& f) {
  JobFailureOutcome out;
  if (f.oom) {
    out.host_failures_in_a_row = f.host_failures_in_a_row;
    out.reason = "out of memory: requeued without counting a failure (the plan's fault)";
    return out;
  }
  out.count_failure = true;
  out.avoid_instance = true;
  const int failures = f.failures_before + 1;
  const int max_attempts = std::max(1, f.max_attempts);
  out.fail_job = failures >= max_attempts;
  out.reason = out.fail_job ? "failed " + std::to_string(failures) + " time(s), the most allowed"
                            : "failure " + std::to_string(failures) + " of " +
                                  std::to_string(max_attempts) + ": retried on another instance";
  const int streak = f.host_failures_in_a_row + 1;
  if (streak >= std::max(1, f.strike_after_failures)) {
    out.strike_host = true;
    out.host_failures_in_a_row = 0;
    out.reason += "; host struck after " + std::to_string(streak) + " failed proofs in a row";
  } else {
    out.host_failures_in_a_row = streak;
  }
  return out;
}

ResubmissionOutcome resubmission_outcome(const Job& existing, bool proof_kept, bool same_input) {
  const std::string conflict =
      "request_id '" + existing.request_id + "' is job " + std::to_string(existing.id) +
      ", recorded with another input (sha256 " + existing.input_digest.substr(0, 16) +
      "...); a request_id names one request: nothing was changed";
  switch (existing.state) {
    case JobState::Queued:
    case JobState::Assigned:
    case JobState::Proving:
      if (!same_input) return {Resubmission::Conflict, conflict + " (the job is still open)"};
      return {Resubmission::Join, "the job is still open"};
    case JobState::Done:
      if (existing.delivered_at > 0) {
        if (!same_input) {
          return {Resubmission::Reopen,
                  "the request came back with another input after its proof was delivered: a "
                  "new request under the same id"};
        }
        return {Resubmission::Redo,
                "the proof was delivered and the request came back: the client rejected it"};
      }
      if (!proof_kept) {
        return {Resubmission::Reopen, "the proof was never delivered and is no longer kept"};
      }
      if (!same_input) {
        return {Resubmission::Conflict, conflict + " (its proof waits to be delivered)"};
      }
      return {Resubmission::Join, "the proof is ready and not yet delivered"};
    case JobState::Failed:
    case JobState::Cancelled:
      return {Resubmission::Reopen,
              std::string("the job was ") + to_string(existing.state) + ": the client asks again"};
  }
  return {Resubmission::Join, "unknown state"};
}

}  // namespace pf::core
