#include "core/close_cause.h"

#include <array>
#include <utility>

namespace pf::core {
namespace {

constexpr std::array<std::pair<CloseCause, const char*>, 12> kNames{{
    {CloseCause::Rejected, "rejected"},
    {CloseCause::Deadline, "deadline"},
    {CloseCause::MarketExited, "market_exited"},
    {CloseCause::MarketStopped, "market_stopped"},
    {CloseCause::HostOffline, "host_offline"},
    {CloseCause::OtherLifecycle, "lifecycle"},
    {CloseCause::Dropped, "dropped"},
    {CloseCause::Operator, "operator"},
    {CloseCause::Horizon, "horizon"},
    {CloseCause::Vanished, "vanished"},
    {CloseCause::NotRented, "not_rented"},
    {CloseCause::Orphan, "orphan"},
}};

}  // namespace

const char* to_string(CloseCause cause) {
  for (const auto& [c, name] : kNames)
    if (c == cause) return name;
  return "unknown";
}

std::optional<CloseCause> parse_close_cause(std::string_view text) {
  for (const auto& [c, name] : kNames)
    if (text == name) return c;
  return std::nullopt;
}

}  // namespace pf::core
