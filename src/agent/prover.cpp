#include "agent/prover.h"

#include <signal.h>

namespace pf::agent {

const char* to_string(ProofOutcome::Kind kind) {
  switch (kind) {
    case ProofOutcome::Kind::Completed:
      return "completed";
    case ProofOutcome::Kind::Failed:
      return "failed";
    case ProofOutcome::Kind::Transport:
      return "transport error";
    case ProofOutcome::Kind::OutOfMemory:
      return "out of memory";
    case ProofOutcome::Kind::Stopped:
      return "stopped";
    case ProofOutcome::Kind::Cancelled:
      return "cancelled";
  }
  return "failed";
}

bool killed_for_memory(const ExitStatus& status, std::optional<std::int64_t> before,
                       std::optional<std::int64_t> after) {
  if (!status.killed_by(SIGKILL)) return false;
  if (before && after) return *after > *before;
  // Without the counter, a SIGKILL the agent did not send is the OOM killer's in practice.
  return true;
}

}  // namespace pf::agent
