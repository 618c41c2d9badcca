#include "core/job_lease.h"

#include <algorithm>

namespace pf::core {

double restored_lease_expiry(double stored_expiry, std::optional<double> alive_at, double now,
                             double lease_s) {
  const double fresh = now + lease_s;
  if (!alive_at) return std::max(stored_expiry, fresh);
  // A clock that went backwards across the restart gives no downtime, not a negative one.
  const double downtime = std::max(0.0, now - *alive_at);
  return std::min(stored_expiry + downtime, fresh);
}

}  // namespace pf::core
