#include "core/job.h"

#include <array>
#include <utility>

namespace pf::core {
namespace {

constexpr std::array<std::pair<JobKind, const char*>, 4> kKinds{{
    {JobKind::PorepC2, "porep-c2"},
    {JobKind::SnapUpdate, "snap-update"},
    {JobKind::WindowPost, "window-post"},
    {JobKind::WinningPost, "winning-post"},
}};

constexpr std::array<std::pair<JobState, const char*>, 6> kStates{{
    {JobState::Queued, "queued"},
    {JobState::Assigned, "assigned"},
    {JobState::Proving, "proving"},
    {JobState::Done, "done"},
    {JobState::Failed, "failed"},
    {JobState::Cancelled, "cancelled"},
}};

}  // namespace

const char* to_string(JobKind kind) {
  for (const auto& [k, name] : kKinds) {
    if (k == kind) return name;
  }
  return "unknown";
}

std::optional<JobKind> parse_job_kind(std::string_view text) {
  for (const auto& [k, name] : kKinds) {
    if (text == name) return k;
  }
  return std::nullopt;
}

const char* to_string(JobState state) {
  for (const auto& [s, name] : kStates) {
    if (s == state) return name;
  }
  return "unknown";
}

std::optional<JobState> parse_job_state(std::string_view text) {
  for (const auto& [s, name] : kStates) {
    if (text == name) return s;
  }
  return std::nullopt;
}

bool is_terminal(JobState state) {
  return state == JobState::Done || state == JobState::Failed || state == JobState::Cancelled;
}

bool is_leased(JobState state) {
  return state == JobState::Assigned || state == JobState::Proving;
}

}  // namespace pf::core
