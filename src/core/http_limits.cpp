#include "core/http_limits.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace pf::core {

const char* to_string(ConnectionRefusal refusal) {
  switch (refusal) {
    case ConnectionRefusal::TooManyConnections:
      return "too_many_connections";
    case ConnectionRefusal::TooManyFromAddress:
      return "too_many_from_address";
  }
  return "unknown";
}

std::optional<ConnectionRefusal> refuse_connection(const HttpLimits& limits, std::size_t open_total,
                                                   std::size_t open_from_address) {
  if (open_total >= limits.max_connections) return ConnectionRefusal::TooManyConnections;
  if (open_from_address >= limits.max_connections_per_address) {
    return ConnectionRefusal::TooManyFromAddress;
  }
  return std::nullopt;
}

std::chrono::milliseconds transfer_allowance(const HttpLimits& limits,
                                             std::chrono::milliseconds base, std::size_t bytes) {
  const std::size_t rate = std::max<std::size_t>(limits.min_transfer_bytes_per_s, 1);
  // Capped so a huge declared size cannot overflow the clock arithmetic.
  constexpr std::size_t kMaxExtraMs = std::size_t{24} * 3600 * 1000;
  const std::size_t extra_ms =
      bytes > kMaxExtraMs / 1000 * rate ? kMaxExtraMs : bytes * 1000 / rate;
  return base + std::chrono::milliseconds(static_cast<std::int64_t>(extra_ms));
}

}  // namespace pf::core
