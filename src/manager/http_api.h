// The manager's HTTP surface over cpp-httplib: the agent protocol (design §7), the operator
// API (§8), /metrics and /healthz. Every reply is JSON ({"error": "..."} with a 4xx/5xx status
// on failure) except /metrics (Prometheus text). Bodies are validated completely before the
// Manager is called, so bad input never changes anything.
//
// Only http_api.cpp and dashboard.cpp include httplib (it is slow to compile); callers that
// just want to serve use ApiServer and never see it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "manager/manager.h"
#include "manager/metrics.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace pf::manager {

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
  // Socket timeouts: a client that stalls mid-request cannot hold a worker thread for long.
  int read_timeout_s = 10;
  int write_timeout_s = 10;
  int keep_alive_timeout_s = 5;
  // Epoch seconds for bad-host times; empty = the system clock.
  std::function<double()> clock;
  // One line per request, "METHOD /path -> status" (no query string, no headers, no body, so no
  // secret reaches it). May be empty.
  std::function<void(const std::string& line, int status)> log;
  // The autopilot shown in /api/v1/fleet and paused by POST /api/v1/autopilot; not owned.
  // Null: the manager runs without one (those routes say so).
  Autopilot* autopilot = nullptr;
};

class HttpApi {
 public:
  HttpApi(Manager& manager, ApiOptions options);
  ~HttpApi();
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Installs the routes, error and exception handlers, request counting, the payload limit
  // and the timeouts on `server` (an httplib::Server or SSLServer). This object must outlive
  // the server's serving.
  void mount(httplib::Server& server);

  Metrics& metrics();
  const ApiOptions& options() const;

  // The route pattern a request belongs to ("/api/v1/instances/{id}"), or "unmatched": the
  // label of the request counters.
  std::string route_of(const std::string& method, const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct TlsFiles {
  std::string cert_path;  // PEM certificate (chain)
  std::string key_path;   // PEM private key
};

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
  // Installs `api` (see HttpApi::mount); before serve().
  void mount(HttpApi& api);
  // Serves until stop(); bind() and mount() first. Returns false if serving failed.
  bool serve();
  // Thread-safe; makes serve() return.
  void stop();

 private:
  ApiServer();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::manager
