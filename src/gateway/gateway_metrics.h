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

#include "cuzk/v1/proving.pb.h"
#include "jobs/job_queue.h"

namespace pf::gateway {

class GatewayMetrics {
 public:
  void count_call(const std::string& method, grpc::StatusCode code);
  void count_denied();
  // A request whose request_id named a job already queued or running (a client's retry).
  void count_joined();
  // A call held through a failover that then got its answer (gateway_front.h).
  void count_held();
  std::uint64_t held() const;
  // A call for a kind proved only on the operator's own cuzk (local_cuzk.h): relayed there, or
  // refused because none is configured.
  void count_local(cuzk::v1::ProofKind kind, bool relayed);
  std::uint64_t local(cuzk::v1::ProofKind kind, bool relayed) const;
  std::uint64_t calls(const std::string& method, grpc::StatusCode code) const;
  std::uint64_t denied() const;
  std::uint64_t joined() const;

  std::string prometheus_text(const jobs::QueueStatus& status, std::uint64_t uptime_s) const;

 private:
  mutable std::mutex mutex_;  // guards the counters below
  std::map<std::pair<std::string, int>, std::uint64_t> calls_;
  std::uint64_t denied_ = 0;
  std::uint64_t joined_ = 0;
  std::uint64_t held_ = 0;
  std::map<std::pair<int, bool>, std::uint64_t> local_;  // (kind, relayed) → calls
};

// "OK", "INVALID_ARGUMENT", ... as gRPC spells its codes.
const char* code_name(grpc::StatusCode code);

}  // namespace pf::gateway
