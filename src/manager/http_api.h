// The manager's HTTP surface, served by the event-driven front in net/http_server.h: the agent
// protocol (design §7), the operator API (§8), /metrics and /healthz. Every reply is JSON
// ({"error": "..."} with a 4xx/5xx status on failure) except /metrics (Prometheus text). Bodies are
// validated completely before the Manager is called, so bad input never changes anything.
//
// Requests are handled on lanes (worker threads with bounded queues): agents on one, their job
// leases (long-polls) on another, operators, the dashboard and /metrics on a third; /healthz on
// the IO thread itself. Callers that just want
// to serve use ApiServer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "core/http_limits.h"
#include "manager/jobs_report.h"
#include "manager/leader_forward.h"
#include "manager/leadership.h"
#include "manager/manager.h"
#include "manager/metrics.h"
#include "net/http_server.h"

namespace pf::jobs {
class JobQueue;
}

namespace pf::manager {

// GET /api/v1/jobs pages newest first: a full page carries this header, the id of its last job,
// which ?cursor= takes to list the older jobs.
inline constexpr const char* kNextCursorHeader = "X-Next-Cursor";

class Autopilot;

struct ApiOptions {
  // hash_token(operator token). Empty: every operator route answers 401.
  std::string operator_token_hash;
  std::size_t max_body_bytes = 1u << 20;        // larger request bodies: 413
  std::size_t max_log_push_bytes = 256u << 10;  // one POST /agent/logs: 413 above this
  std::size_t max_events_per_batch = 1000;
  std::size_t max_gpus_per_heartbeat = 64;
  std::size_t instance_events_shown = 200;  // GET /instances/{id}: most recent events
  std::size_t instance_logs_tail_bytes = 64u << 10;
  int offers_default_limit = 50;
  int offers_max_limit = 1000;
  // The HTTP front's deadlines, caps and head limits (its max_body_bytes is replaced by the
  // one above). A slow client holds only its own connection, and only until a deadline.
  core::HttpLimits http;
  std::size_t io_threads = 1;
  // Worker lanes, each a few threads and a bounded queue (503 + Retry-After when full): agent
  // calls on one, operator calls, the dashboard and /metrics on the other.
  std::size_t agent_lane_threads = 4;
  std::size_t agent_lane_queue = 512;
  std::size_t operator_lane_threads = 4;
  std::size_t operator_lane_queue = 64;
  // Job leases (POST /api/v1/agent/jobs/lease) are long-polls: each holds a worker for up to
  // max_lease_wait_ms, so they have a lane of their own and never hold up heartbeats,
  // registrations or /healthz. Long-polls beyond its threads wait in its queue; beyond that 503.
  std::size_t lease_lane_threads = 32;
  std::size_t lease_lane_queue = 1024;
  // --- jobs (issue 12) ---------------------------------------------------------------------
  // The job queue agents lease from; not owned. Null: the Manager's attached queue
  // (Manager::attach_jobs), if any; with neither, job routes answer 503 and heartbeats never say
  // "work".
  jobs::JobQueue* jobs = nullptr;
  std::int64_t max_lease_wait_ms = 25'000;
  int max_jobs_per_lease = 64;
  std::size_t max_jobs_per_heartbeat = 64;       // the "jobs" list of a heartbeat
  std::size_t max_input_chunk_bytes = 4u << 20;  // one input reply (206 beyond it)
  std::size_t max_proof_bytes = 256u << 10;      // a decoded proof_b64
  // Streaming replies (dashboard event streams) open at once, one thread each.
  std::size_t stream_threads = 16;
  // Epoch seconds for bad-host times; empty = the system clock.
  std::function<double()> clock;
  // One line per request, "METHOD /path -> status" (no query string, no headers, no body, so no
  // secret reaches it). May be empty.
  std::function<void(const std::string& line, int status)> log;
  // The autopilot shown in /api/v1/fleet and paused by POST /api/v1/autopilot; not owned.
  // Null: the manager runs without one (those routes say so).
  Autopilot* autopilot = nullptr;
  // Operator side of the job queue (`jobs` above, else the Manager's): without one GET
  // /api/v1/jobs answers 409, the fleet's "jobs" is null and its profit stays the measured-proofs
  // estimate.
  // [prices] and the window of the jobs figures (fleet "jobs", dashboard, /metrics).
  JobsReportOptions jobs_report;
  int jobs_default_limit = 50;  // GET /api/v1/jobs without ?limit
  int jobs_max_limit = 1000;    // one page at most; older jobs by ?cursor (kNextCursorHeader)
  // --- replicas (issue 14) ------------------------------------------------------------------
  // Called before a route runs; a reply it returns is sent instead (a follower forwards what
  // only the leader serves: manager/leader_forward.h). Empty: every request is served here.
  std::function<std::optional<ForwardedReply>(const net::HttpRequest&, const std::string& route)>
      forward;
  // This replica's leadership, shown in /metrics, GET /api/v1/fleet ("replica") and answered by
  // GET /healthz/leader (200 on the leader, 503 on a follower: a load balancer's check for the
  // gRPC port). Empty: a lone manager, always leading.
  std::function<LeaderView()> leader;
};

class HttpApi {
 public:
  HttpApi(Manager& manager, ApiOptions options);
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Installs the routes, their lanes, the error and exception handlers, request counting and
  // the front's limits (options().http) on `server`. This object must outlive the server's
  // serving.
  void mount(net::HttpServer& server);

  Metrics& metrics();
  const ApiOptions& options() const;

  // The route pattern a request belongs to ("/api/v1/instances/{id}"), or "unmatched": the
  // label of the request counters.
  std::string route_of(const std::string& method, const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

using TlsFiles = net::TlsFiles;

// A listening server for an HttpApi: plain HTTP, or HTTPS when TLS files are given. Binding
// comes before mounting so a caller can learn a picked port (for the URL agents are given)
// before it builds the Manager.
class ApiServer {
 public:
  // Fails with a message naming the file when a TLS file is unreadable or invalid.
  static tl::expected<std::unique_ptr<ApiServer>, std::string> create(
      const std::optional<TlsFiles>& tls);
  ~ApiServer();
  ApiServer(const ApiServer&) = delete;
  ApiServer& operator=(const ApiServer&) = delete;

  // Binds host:port; port 0 picks a free one. Returns the bound port.
  tl::expected<int, std::string> bind(const std::string& host, int port);
  // Instead of bind(): serves a socket already listening (net/listen_fds.h). Returns its port.
  tl::expected<int, std::string> adopt(int listening_fd);
  // Installs `api` (see HttpApi::mount); before serve().
  void mount(HttpApi& api);
  // Serves until stop(); bind() and mount() first. Returns false if serving failed.
  bool serve();
  // Thread-safe; makes serve() return.
  void stop();
  // For a successor (net/socket_handover.h): a second descriptor of the listening socket, and
  // stopping accepting on ours while the open connections are served on.
  tl::expected<util::UniqueFd, std::string> duplicate_listening_socket();
  void stop_accepting();

 private:
  ApiServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::manager
