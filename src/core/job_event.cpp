#include "core/job_event.h"

#include <array>
#include <utility>

namespace pf::core {
namespace {

constexpr std::array<std::pair<JobEventKind, const char*>, 14> kEventKinds{{
    {JobEventKind::Recorded, "recorded"},
    {JobEventKind::Resubmitted, "resubmitted"},
    {JobEventKind::Leased, "leased"},
    {JobEventKind::Hedged, "hedged"},
    {JobEventKind::InputFetched, "input_fetched"},
    {JobEventKind::Proving, "proving"},
    {JobEventKind::Proved, "proved"},
    {JobEventKind::ProofRejected, "proof_rejected"},
    {JobEventKind::ProverFailed, "prover_failed"},
    {JobEventKind::Requeued, "requeued"},
    {JobEventKind::Failed, "failed"},
    {JobEventKind::Cancelled, "cancelled"},
    {JobEventKind::Delivered, "delivered"},
    {JobEventKind::Undelivered, "undelivered"},
}};

}  // namespace

const char* to_string(JobEventKind kind) {
  for (const auto& [k, name] : kEventKinds) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<JobEventKind> parse_job_event_kind(std::string_view text) {
  for (const auto& [k, name] : kEventKinds) {
    if (text == name) return k;
  }
  return std::nullopt;
}

}  // namespace pf::core
