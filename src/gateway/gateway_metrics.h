// The gateway's own counters (calls by method and gRPC code, clients refused by the
// allow-list) and the Prometheus text GetMetrics answers with: these counters, plus the
// daemon's own metric names filled from the job queue, so a dashboard built for one cuzk
// daemon reads the fleet as one.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "jobs/job_queue.h"

namespace pf::gateway {

class GatewayMetrics {
 public:
  void count_call(const std::string& method, grpc::StatusCode code);
  void count_denied();
  // A request whose request_id named a job already queued or running (a client's retry).
  void count_joined();
  std::uint64_t calls(const std::string& method, grpc::StatusCode code) const;
  std::uint64_t denied() const;
  std::uint64_t joined() const;

  std::string prometheus_text(const jobs::QueueStatus& status, std::uint64_t uptime_s) const;

 private:
  mutable std::mutex mutex_;  // guards the counters below
  std::map<std::pair<std::string, int>, std::uint64_t> calls_;
  std::uint64_t denied_ = 0;
  std::uint64_t joined_ = 0;
};

// "OK", "INVALID_ARGUMENT", ... as gRPC spells its codes.
const char* code_name(grpc::StatusCode code);

}  // namespace pf::gateway
