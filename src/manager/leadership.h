// Leadership of one `serve` replica (issue 14): takes, renews and gives up the store's lease row
// by core::decide_lease, says whether this replica leads now, and fences actions under the term
// it holds (core::fence_refusal against the row read just before the act). serve calls step()
// every renew interval (ttl/3) from a thread of its own; the leader-only loops ask leading().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/leader_lease.h"

namespace pf::store {
class LeaseStore;  // store/lease_store.h
}  // namespace pf::store

namespace pf::manager {

// The lease every replica of one fleet competes for.
inline constexpr const char* kManagerLeaseName = "manager";

// "HOST-PID-RANDOM": unique per process, readable in logs and on the dashboard.
std::string replica_id_for_this_process();
// "BOOT_ID/PID_NAMESPACE/PID" of this process (core::LeaseRow::holder_process).
std::string process_identity();
// Whether the lease holder's process is certainly gone: it ran under this kernel and PID
// namespace, is not us, and no process has its pid (or only a zombie, killed and not yet
// reaped). False whenever that cannot be told.
bool holder_process_gone(const core::LeaseRow& row);

struct LeadershipConfig {
  std::string replica_id;  // unique per process: replica_id_for_this_process()
  std::string url;         // where this replica serves its HTTP API (followers forward to it)
  core::LeaseTiming timing;
  std::string lease_name = kManagerLeaseName;
  std::string process = process_identity();
  // Where terms taken and ended are told (warning: an end or a store failure); the manager layer
  // does no logging of its own, serve passes spdlog. Empty: not told.
  std::function<void(bool warning, const std::string& line)> log = {};
};

// What /metrics, /api/v1/fleet, `status` and the dashboard show.
struct LeaderView {
  std::string replica_id;
  std::string grpc;  // where this replica's gateway listens (advertise_grpc); empty: none
  bool leading = false;
  std::optional<std::int64_t> epoch;    // the term this replica holds
  std::optional<core::LeaseRow> lease;  // the row as last read (the leader's id, url, epoch)
  double now = 0;
  double ttl_s = 0;
  double failover_bound_s = 0;
  std::string reason;  // the last decision's reason (or the store error)
  int terms_taken = 0;
};
// with_ages: also the lease's age, time since renewal and time to expiry (they change every
// second; the dashboard's stream leaves them out and reckons the age from taken_at).
nlohmann::json leader_json(const LeaderView& view, bool with_ages);
// proverfleet_leader (1/0), proverfleet_leader_epoch, proverfleet_leader_lease_age_seconds,
// proverfleet_leader_lease_expires_in_seconds, proverfleet_leader_terms_taken_total.
std::string leader_prometheus(const LeaderView& view);

class Leadership {
 public:
  using Clock = std::function<double()>;
  // Hooks, called on the thread that calls step(), never under the lock: elected(epoch) after a
  // term was taken (reload in-memory state from the store here), stepped_down(reason) when it
  // ended. A replica that leads is stepped down before a new term is taken.
  struct Hooks {
    std::function<void(std::int64_t epoch)> elected;
    std::function<void(const std::string& reason)> stepped_down;
  };
  Leadership(store::LeaseStore& store, LeadershipConfig config, Clock clock);
  void set_hooks(Hooks hooks);

  // One try: read the row, decide, write (compare-and-set), run the hooks. A store failure is
  // logged; the term it holds then ends on its own when its expiry passes (leading() says so
  // at once, and the next step() steps down).
  void step();
  // Ends our term now (expiry = now) so a follower takes over at its next try: a planned stop.
  void resign();
  // resign(), and take no term again until rejoin(): a successor process takes over (serve
  // --takeover). step() then only reads the row, so that relaying finds the new leader.
  void retire();
  // Competes for the lease again (the successor did not take over after all).
  void rejoin();

  // True while this replica holds a term whose expiry (as it wrote it) is still ahead.
  bool leading();
  std::optional<std::int64_t> term();
  // nullopt when an action under our term may go ahead now, else why not. Reads the row.
  std::optional<std::string> fence_refusal();
  // The same from inside a store transaction that then writes (the job queue's): the row is
  // read so that no take commits before that transaction ends (LeaseStore::lock_leader_lease), and
  // a session left idle in it for a whole ttl (a paused process) is ended by the database.
  std::optional<std::string> fence_refusal_in_transaction();
  // Where this replica's gRPC gateway listens (HOST:PORT), written into the lease with every take
  // and renewal so followers' gateways relay Curio's calls here. Empty: none.
  void advertise_grpc(std::string address);
  LeaderView view();
  // The lease row as stored now (a follower's forwarding reads the leader's URL from it).
  std::optional<core::LeaseRow> read_lease();
  const LeadershipConfig& config() const { return config_; }

 private:
  void end_term(const std::string& reason);

  store::LeaseStore& store_;
  const LeadershipConfig config_;
  const Clock clock_;
  std::mutex mu_;
  Hooks hooks_;
  std::optional<std::int64_t> epoch_;  // the term held
  double expires_at_ = 0;              // of the term held, as written
  std::optional<core::LeaseRow> last_row_;
  std::string grpc_address_;
  std::string reason_;
  int terms_taken_ = 0;
  std::atomic<bool> retired_{false};
};

}  // namespace pf::manager
