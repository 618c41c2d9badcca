// Bench helper: the manager's HTTP API (operator, agent, dashboard, /metrics) on 127.0.0.1 at a
// free port, mounted as serve mounts it, over a Manager and its job queue. Header-only.
//
//   auto api = pf::bench::ServedApi::start(manager, &queue);
//   if (!api) { std::fprintf(stderr, "%s\n", api.error().c_str()); return 2; }
//   httplib::Client client("127.0.0.1", (*api)->port());  // operator token: kOperatorToken
//
// The server stops when the object goes (or at stop()): declare it after what it serves.
#pragma once

#include <memory>
#include <string>
#include <tl/expected.hpp>
#include <utility>

#include "jobs/job_queue.h"
#include "manager/http_api.h"
#include "manager/manager.h"
#include "net/http_server.h"

namespace pf::bench {

class ServedApi {
 public:
  // The bearer token operator routes accept.
  static constexpr const char* kOperatorToken = "bench-operator";

  // Mounts the API with `options` (its operator token replaced by kOperatorToken's hash, its
  // job queue by `queue` unless null), binds 127.0.0.1:0 and starts serving.
  static tl::expected<std::unique_ptr<ServedApi>, std::string> start(
      manager::Manager& manager, jobs::JobQueue* queue, manager::ApiOptions options = {}) {
    options.operator_token_hash = manager::hash_token(kOperatorToken);
    if (queue != nullptr) options.jobs = queue;
    std::unique_ptr<ServedApi> served(new ServedApi(manager, std::move(options)));
    auto bound = served->server_.bind("127.0.0.1", 0);
    if (!bound) return tl::unexpected("cannot listen on 127.0.0.1: " + bound.error());
    served->port_ = *bound;
    served->server_.start();
    return served;
  }

  ~ServedApi() { stop(); }
  ServedApi(const ServedApi&) = delete;
  ServedApi& operator=(const ServedApi&) = delete;

  int port() const { return port_; }
  const manager::ApiOptions& options() const { return api_.options(); }
  // Idempotent: closes connections and joins the server's threads.
  void stop() { server_.stop(); }

 private:
  ServedApi(manager::Manager& manager, manager::ApiOptions options)
      : api_(manager, std::move(options)) {
    api_.mount(server_);
  }

  // Declared first, destroyed last: the server stops before the API it calls goes.
  manager::HttpApi api_;
  net::HttpServer server_;
  int port_ = 0;
};

}  // namespace pf::bench
