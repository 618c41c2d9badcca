// Replicas (issue 14): several `serve` processes on one database, exactly one of them leading.
// The leader holds a lease row (holder, epoch, expiry) that it renews; whoever finds the row
// lapsed may take it, and every take increments the epoch (the fencing counter), so an action
// stamped with an older epoch is known to come from a leader that is no longer one.
//
// Pure decisions over the row as read: what this replica does next (take, renew, follow, step
// down, each with a reason), whether an action under a held term may go ahead now (the fence),
// and which HTTP routes only the leader may serve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pf::core {

// The lease as stored. An empty holder: nobody has ever led (the first row).
struct LeaseRow {
  std::string name;
  std::string holder;      // the replica id of the holder
  std::string holder_url;  // where the holder serves its HTTP API (followers forward to it)
  // Where the holder's gRPC gateway listens (HOST:PORT; followers' gateways relay Curio's calls
  // to it). Empty: the holder serves no gRPC.
  std::string holder_grpc;
  // The holder's process as "BOOT_ID/PID_NAMESPACE/PID": a replica on the same kernel and PID
  // namespace can tell that the holder's process is gone (a crashed serve restarted on one host
  // need not wait out the lease).
  std::string holder_process;
  std::int64_t epoch = 0;  // the fencing counter: +1 on every take
  double expires_at = 0;   // epoch seconds (the writer's clock)
  double taken_at = 0;     // when the current term began
  double renewed_at = 0;   // the holder's last renewal
};

// Lease timing. A follower tries every renew_every_s, so a dead leader is replaced within
// ttl_s + renew_every_s (plus one store round trip): failover_bound_s().
struct LeaseTiming {
  double ttl_s = 15;
  // An action under the lease goes ahead only while at least this much of it is left, so a
  // pause of less than this between the check and the act cannot overlap the next leader.
  double guard_s = 2;
  double renew_every_s() const { return ttl_s / 3; }
  double failover_bound_s() const { return ttl_s + renew_every_s(); }
};

// Bounds of [replicas] lease_ttl_s: above 20 s the failover bound would pass 26.7 s (the issue
// asks for at most 30 s); below 2 s a busy store could cost a healthy leader its lease.
inline constexpr double kMinLeaseTtlS = 2;
inline constexpr double kMaxLeaseTtlS = 20;

enum class LeaseAction {
  Take,      // write `row` (a new term, epoch + 1), conditional on the epoch read
  Renew,     // write `row` (same term, later expiry), conditional on the epoch read
  Follow,    // someone else holds an unexpired lease: serve as a follower
  StepDown,  // we held a term that is no longer ours (taken, or lapsed): stop leading now
};
const char* to_string(LeaseAction action);

struct LeaseDecision {
  LeaseAction action = LeaseAction::Follow;
  LeaseRow row;  // Take/Renew: the row to write; Follow/StepDown: the row as read
  std::string reason;
};

// What replica `me` (serving at `my_url`) does with the lease `name`, given the row as read
// (nullopt: no row yet; the caller inserts an empty one first), the epoch it believes it holds
// (nullopt: it does not lead) and `now`.
// - held and the row is ours, same epoch, not expired: Renew.
// - held but the row has another holder or epoch, or our term lapsed: StepDown (a lapsed term
//   is never renewed: actions of the old term may have been refused meanwhile, and a new term
//   reloads state from the store; the next call takes it if nobody else did).
// - not held and the row is empty or expired: Take with epoch + 1.
// - not held and `holder_gone` (the shell saw the holder's process gone: same machine and PID
//   namespace, no such pid): Take with epoch + 1, as if it had expired.
// - otherwise: Follow.
// The row written carries `my_process` as holder_process.
LeaseDecision decide_lease(const std::optional<LeaseRow>& row, const std::string& me,
                           const std::string& my_url, std::optional<std::int64_t> held_epoch,
                           double now, const LeaseTiming& timing,
                           const std::string& my_process = {}, bool holder_gone = false);

// Whether an action under term `epoch` of replica `me` may go ahead now, given the row as read
// just before it: nullopt when it may, else why not (another holder, a newer epoch, the lease
// expired or within guard_s of expiring).
std::optional<std::string> fence_refusal(const std::optional<LeaseRow>& row, const std::string& me,
                                         std::int64_t epoch, double now, const LeaseTiming& timing);

// Whether `row` names a leader now (an unexpired lease with a holder).
bool has_live_leader(const std::optional<LeaseRow>& row, double now);

// Requests a follower forwards to the leader rather than serving itself: everything an agent
// sends (heartbeats, events, registration, job leases and results act on state the leader holds
// in memory: the job queue's plan and leases, the worker roster, live reports, queued commands),
// every operator request that changes something (method other than GET/HEAD), and the job
// routes (the leader's queue answers them). `route` is the route's pattern
// ("/api/v1/instances/{id}"). Reads of the fleet, instances, hosts, offers, alerts, metrics and
// the dashboard are served from the store by any replica.
bool served_by_leader(std::string_view method, std::string_view route);

}  // namespace pf::core
