// A job lease across a manager restart (design §11, issue 12 item 2). Pure: the job queue
// applies it when it reopens its store.
#pragma once

#include <optional>

namespace pf::core {

// The expiry a leased job gets when the manager reopens its queue. `stored_expiry` is the
// expiry last written (the lease or its latest renewal from a heartbeat); `alive_at` the last
// time the stopped manager recorded itself running (nullopt: a store from before it did).
//
// The manager's downtime does not count against the holder: agents cannot renew while it is
// down, so each lease keeps what it had left when the manager stopped — a lease that had run
// out by then ends at once, one renewed a moment before keeps (nearly) all of lease_s. Never
// more than a fresh lease from now. Without `alive_at` every lease gets a fresh lease_s (what
// such a store's manager gave).
double restored_lease_expiry(double stored_expiry, std::optional<double> alive_at, double now,
                             double lease_s);

}  // namespace pf::core
