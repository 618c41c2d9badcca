// What a replica of `serve` holds only while it leads (issue 14): the job queue, loaded from the
// store when the term begins (its leases restored as after a restart: core/job_lease.h), served
// by the replica's gRPC gateway. The gateway itself listens for the replica's whole life: while
// no term runs here it relays every call to the leader's gateway (the address the lease row
// carries: this replica advertises its own with Leadership::advertise_grpc), so Curio may point at
// any replica. A term's end stops the queue (jobs stay in the store for the next leader, and the
// calls waiting on them wait there: gateway_front.h); the Manager is told to hear agents afresh and
// re-read its rows when a term begins, so a follower that becomes leader needs nothing but the
// store.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gateway/gateway_server.h"
#include "jobs/job_queue.h"
#include "manager/leadership.h"
#include "manager/manager.h"

namespace pf::cli {

class LeaderTerm {
 public:
  // Starts the replica's gateway (when configured) and advertises its address: `grpc_address`
  // when given (--replica-grpc), else the listen host with the port bound.
  LeaderTerm(manager::Manager& fleet, store::Store& store, jobs::JobQueueConfig jobs_config,
             std::optional<gateway::GatewayConfig> gateway_config, manager::Leadership& leadership,
             std::function<double()> clock, std::optional<std::string> grpc_address = {});
  ~LeaderTerm();
  LeaderTerm(const LeaderTerm&) = delete;
  LeaderTerm& operator=(const LeaderTerm&) = delete;

  // Leadership hooks. begin() throws nothing: a queue that cannot open is logged (the term
  // still runs the loops; job calls answer 503 until the next term).
  void begin(std::int64_t epoch);
  void end(const std::string& reason);
  // While the gateway is not listening (its port was busy: another replica on this host, or an
  // ex-leader paused on it, still holds it), tries to start it again. Every lease renewal.
  void start_gateway_if_missing();
  // Ends the term (if any) for good: serve is stopping.
  void shutdown();
  // For a successor process (cli/serve_takeover.h): a second descriptor of the gateway's
  // listening socket (nullopt: no gateway runs), stopping accepting on ours, and the calls
  // this replica's gateway still holds.
  std::optional<util::UniqueFd> duplicate_gateway_socket();
  void stop_accepting();
  int open_calls();
  // Ends the calls the gateway still holds (GatewayServer::end_held_calls).
  void end_held_calls();

 private:
  manager::Manager& fleet_;
  store::Store& store_;
  const jobs::JobQueueConfig jobs_config_;
  const std::optional<gateway::GatewayConfig> gateway_config_;
  manager::Leadership& leadership_;
  const std::function<double()> clock_;
  const std::optional<std::string> grpc_address_;
  std::mutex mu_;
  std::unique_ptr<gateway::GatewayServer> gateway_;
  jobs::JobQueue* queue_ = nullptr;  // the current term's, in queues_
  std::int64_t epoch_ = 0;           // the current term's
  bool gateway_failed_logged_ = false;
  bool closed_ = false;  // shutdown(): no term begins any more
  // Starts the gateway (caller holds mu_), serving queue_ if a term runs, and advertises its
  // address; logs a failure once until it starts.
  void start_gateway_locked();
  // Job input files from before schema 18 into the store (jobs/input_store.h), logged.
  void import_input_files(std::int64_t epoch);
  // The leader's gateway address for relaying, or why there is none.
  tl::expected<std::string, std::string> leader_grpc();
  // Every term's queue, shut down after its term: request handlers may still hold a pointer
  // they read before the term ended, so a queue lives as long as the process.
  std::vector<std::unique_ptr<jobs::JobQueue>> queues_;
};

}  // namespace pf::cli
