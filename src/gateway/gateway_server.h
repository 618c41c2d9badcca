// The gRPC server that carries the gateway's ProvingEngine (proving_service.h): where it listens,
// who may reach it, and the limits that keep a crowd of clients from taking the manager down.
//
//  - Open calls: each Curio node holds at most its [Cuzk] MaxPending Prove calls open (one counter
//    per node, lib/cuzk/client.go:52 at the pinned curio commit; it never reads GetStatus), so
//    the calls the gateway must hold are curio_nodes × curio_max_pending (open_call_window). A
//    call is a job in the durable queue and waits there however many jobs wait; none is refused
//    for the number of jobs waiting below [jobs] max_open_jobs. Each waiting Prove holds a thread
//    (the service is synchronous): the threads are capped at twice the window plus headroom
//    (max_gateway_threads), so a node count off by up to 2× still waits instead of burning one of
//    Curio's few tries on RESOURCE_EXHAUSTED, while a runaway client cannot exhaust the process.
//  - Messages: the largest accepted is [jobs] max_input_mib plus a margin for the envelope, so an
//    oversize input is refused before it is read into memory.
//  - Exposure: the cuzk protocol has no credentials. A listen address other than loopback needs
//    an allow-list or TLS, or the operator saying so explicitly (allow_any).
//  - TLS files are read and checked (PEM, key belongs to the certificate) once at start.
//  - Replicas (issue 14): every replica's gateway listens for its whole life
//    (start_replica_gateway); it answers from the job queue of the term it holds
//    (serve_queue) and relays to the leader otherwise (gateway_front.h, leader_proxy.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "core/job.h"
#include "gateway/client_tokens.h"
#include "gateway/listen_exposure.h"
#include "jobs/job_queue.h"
#include "util/unique_fd.h"

namespace grpc {
class Server;
}

namespace pf::gateway {

class GatewayFront;
class GatewayMetrics;
class HandedSocketLoop;

struct GatewayConfig {
  std::string listen = "127.0.0.1:9820";  // HOST:PORT or [IPv6]:PORT; port 0 picks a free one
  // >= 0: a socket already listening, handed over by a supervisor (net/listen_fds.h) or a
  // predecessor (net/socket_handover.h): served instead of binding `listen`, which then names
  // its address (for the exposure checks). The gateway owns it from start_replica_gateway on.
  int listening_fd = -1;
  std::string tls_cert;  // PEM files; both or neither
  std::string tls_key;
  // Replicas: PEM certificates a follower trusts for the leader's gateway ("": the replica's own
  // tls_cert, for replicas that share one certificate). Only with tls_cert.
  std::string tls_ca;
  std::vector<std::string> allow;  // client IPs / CIDR blocks; empty = any that reaches it
  bool allow_any = false;          // serve a non-loopback address without allow-list or TLS
  // The Curio nodes that call this gateway and their [Cuzk] MaxPending (Curio's default 10,
  // deps/config/types.go:131-134): the window is their product unless max_pending_window is set.
  int curio_nodes = 1;
  int curio_max_pending = 10;
  int max_pending_window = 0;  // > 0: the open calls to size for, whatever the nodes
  std::int64_t max_input_bytes = 256LL << 20;
  // The operator's own cuzk for PoSt and keep_local kinds ("": those are refused at once).
  std::string local_cuzk;
  std::vector<core::JobKind> keep_local;
  ClientAuth client_auth;
  // Replicas: how long a call a failover would fail is held and tried again (gateway_front.h).
  double failover_hold_s = 120;
  // How long a client connection lives before it is told to reconnect (all_connections_told_to_go).
  double max_connection_age_s = 30;
};

// Every client connection is told to go (an HTTP/2 GOAWAY; gRPC's max connection age, gRFC A9)
// after about max_connection_age_s (gRPC adds ±10 %), and its client opens a new one for its next
// call while the calls on the old one run to their end (no grace limit). That is how a process
// that handed its socket to a successor sheds its clients without failing a call: a GOAWAY is
// race-free (RFC 9113 §6.8: a stream the server never processed is retried by the client),
// whereas stopping a gRPC server cancels a call that reaches it in that instant. This is how
// long after it stopped accepting every connection a process holds has been told to go.
std::chrono::milliseconds all_connections_told_to_go(const GatewayConfig& config);
inline constexpr int kThreadHeadroom = 32;  // status, metrics and retries beside the window
// The most Prove calls Curio holds open here: max_pending_window when set, else
// curio_nodes × curio_max_pending.
int open_call_window(const GatewayConfig& config);
// The gRPC server's thread cap: 2 × the window + kThreadHeadroom.
int max_gateway_threads(const GatewayConfig& config);
inline constexpr std::int64_t kMessageMargin = 4LL << 20;

// What a replica's gateway needs to relay to the leader while it does not lead itself.
struct ReplicaGatewayOptions {
  std::string replica_id;
  // The leader's gateway address (HOST:PORT), or why there is none now (leader_proxy.h). Empty
  // function: a lone gateway (no relaying; UNAVAILABLE while no queue is served).
  std::function<tl::expected<std::string, std::string>()> leader = {};
  // The replicas' shared secret (gateway/relay_identity.h): sent with relayed calls, and what a
  // relayed call must carry here. "": relayed calls are refused, and this replica's relays are
  // recorded as its own.
  std::string replica_token = {};
};

class GatewayServer {
 public:
  ~GatewayServer();
  GatewayServer(const GatewayServer&) = delete;
  GatewayServer& operator=(const GatewayServer&) = delete;

  int port() const { return port_; }
  const GatewayMetrics& metrics() const;
  // Answers from `queue` from now on (this replica's term began); calls a replica's gateway is
  // still relaying to the former leader end UNAVAILABLE (retry here).
  void serve_queue(jobs::JobQueue& queue);
  // Stops answering from the queue (the term ended): waiting calls wait for their jobs (kept in
  // the store) at the next leader, within failover_hold_s, or end UNAVAILABLE; new calls are
  // relayed to the leader (a replica's gateway) or refused UNAVAILABLE.
  void stop_serving_queue();
  // Calls relayed to the leader so far (a replica's gateway; 0 otherwise).
  std::uint64_t relayed() const;
  // Handlers running now (Prove calls waiting for their jobs included).
  int open_calls() const;
  // A second descriptor of the listening socket, for a successor (net/socket_handover.h).
  tl::expected<util::UniqueFd, std::string> duplicate_listening_socket();
  // Stops accepting connections and closes this process's descriptor of the listening socket;
  // the calls and connections it has go on (a successor accepts from now on).
  void stop_accepting();
  // Ends the calls this gateway holds now (UNAVAILABLE; their jobs are kept): relayed ones, and
  // ones waiting for a leader. A drain() in progress then returns. Thread-safe.
  void end_held_calls();
  // Ends waiting calls (they answer UNAVAILABLE; their jobs stay queued), stops accepting and
  // waits for every handler to return. Call before the JobQueue goes away. Idempotent.
  void shutdown();

 private:
  friend tl::expected<std::unique_ptr<GatewayServer>, std::string> start_replica_gateway(
      const GatewayConfig& config, ReplicaGatewayOptions replica);
  GatewayServer() = default;

  std::int64_t max_input_bytes_ = 0;
  std::unique_ptr<GatewayFront> front_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HandedSocketLoop> handed_;  // serving a socket handed over (listening_fd)
  int port_ = 0;
};

// Checks the config without binding: the listen address, exposure, allow-list, TLS files. The
// error says what to fix.
tl::expected<void, std::string> check_gateway_config(const GatewayConfig& config);

// check_gateway_config, then binds and starts serving from `queue` (a lone manager).
tl::expected<std::unique_ptr<GatewayServer>, std::string> start_gateway(
    jobs::JobQueue& queue, const GatewayConfig& config);
// check_gateway_config, then binds and starts a replica's gateway: it relays every call to the
// leader (replica.leader) until serve_queue().
tl::expected<std::unique_ptr<GatewayServer>, std::string> start_replica_gateway(
    const GatewayConfig& config, ReplicaGatewayOptions replica);

}  // namespace pf::gateway
