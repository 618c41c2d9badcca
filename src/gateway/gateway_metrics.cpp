#include "gateway/gateway_metrics.h"

#include <sstream>

#include "gateway/request_check.h"

namespace pf::gateway {

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

void GatewayMetrics::count_call(const std::string& method, grpc::StatusCode code) {
  std::lock_guard lock(mutex_);
  ++calls_[{method, static_cast<int>(code)}];
}

void GatewayMetrics::count_denied() {
  std::lock_guard lock(mutex_);
  ++denied_;
}

void GatewayMetrics::count_joined() {
  std::lock_guard lock(mutex_);
  ++joined_;
}

void GatewayMetrics::count_local(cuzk::v1::ProofKind kind, bool relayed) {
  std::lock_guard lock(mutex_);
  ++local_[{static_cast<int>(kind), relayed}];
}

std::uint64_t GatewayMetrics::local(cuzk::v1::ProofKind kind, bool relayed) const {
  std::lock_guard lock(mutex_);
  const auto it = local_.find({static_cast<int>(kind), relayed});
  return it == local_.end() ? 0 : it->second;
}

void GatewayMetrics::count_held() {
  std::lock_guard lock(mutex_);
  ++held_;
}

std::uint64_t GatewayMetrics::held() const {
  std::lock_guard lock(mutex_);
  return held_;
}

std::uint64_t GatewayMetrics::joined() const {
  std::lock_guard lock(mutex_);
  return joined_;
}

std::uint64_t GatewayMetrics::calls(const std::string& method, grpc::StatusCode code) const {
  std::lock_guard lock(mutex_);
  const auto it = calls_.find({method, static_cast<int>(code)});
  return it == calls_.end() ? 0 : it->second;
}

std::uint64_t GatewayMetrics::denied() const {
  std::lock_guard lock(mutex_);
  return denied_;
}

std::string GatewayMetrics::prometheus_text(const jobs::QueueStatus& status,
                                            std::uint64_t uptime_s) const {
  std::ostringstream out;
  {
    std::lock_guard lock(mutex_);
    out << "# HELP proverfleet_gateway_requests_total gRPC calls to the cuzk gateway by method "
           "and status code\n"
           "# TYPE proverfleet_gateway_requests_total counter\n";
    for (const auto& [key, n] : calls_) {
      out << "proverfleet_gateway_requests_total{method=\"" << key.first << "\",code=\""
          << code_name(static_cast<grpc::StatusCode>(key.second)) << "\"} " << n << "\n";
    }
    out << "# HELP proverfleet_gateway_denied_total calls refused by the client allow-list\n"
           "# TYPE proverfleet_gateway_denied_total counter\n"
           "proverfleet_gateway_denied_total "
        << denied_
        << "\n"
           "# HELP proverfleet_gateway_joined_total requests that joined a queued or running job "
           "with the same request_id\n"
           "# TYPE proverfleet_gateway_joined_total counter\n"
           "proverfleet_gateway_joined_total "
        << joined_ << "\n";
    out << "# HELP proverfleet_gateway_held_total calls a replica held through a failover "
           "(no leader, the leader unreachable) that then got their answer\n"
           "# TYPE proverfleet_gateway_held_total counter\n"
           "proverfleet_gateway_held_total "
        << held_ << "\n";
    out << "# HELP proverfleet_gateway_local_total calls for kinds proved only on the operator's "
           "own cuzk (PoSt, [gateway] keep_local): relayed to local_cuzk or refused without one\n"
           "# TYPE proverfleet_gateway_local_total counter\n";
    for (const auto& [key, n] : local_) {
      const auto kind = job_kind(static_cast<cuzk::v1::ProofKind>(key.first));
      out << "proverfleet_gateway_local_total{kind=\""
          << (kind ? core::to_string(*kind) : "unknown") << "\",outcome=\""
          << (key.second ? "relayed" : "refused") << "\"} " << n << "\n";
    }
  }
  int pending = 0;
  int in_progress = 0;
  for (const auto& [kind, counts] : status.by_kind) {
    pending += counts.pending;
    in_progress += counts.in_progress;
  }
  // The daemon's names (cuzk-server service.rs), for the whole fleet.
  out << "# HELP cuzk_proofs_completed_total Total proofs completed\n"
         "# TYPE cuzk_proofs_completed_total counter\n"
         "cuzk_proofs_completed_total "
      << status.completed
      << "\n"
         "# HELP cuzk_proofs_failed_total Total proofs failed\n"
         "# TYPE cuzk_proofs_failed_total counter\n"
         "cuzk_proofs_failed_total "
      << status.failed
      << "\n"
         "# HELP cuzk_uptime_seconds Daemon uptime\n"
         "# TYPE cuzk_uptime_seconds gauge\n"
         "cuzk_uptime_seconds "
      << uptime_s
      << "\n"
         "# HELP cuzk_queue_depth Current queue depth\n"
         "# TYPE cuzk_queue_depth gauge\n"
         "cuzk_queue_depth "
      << pending
      << "\n"
         "# HELP cuzk_running_jobs Currently running proofs\n"
         "# TYPE cuzk_running_jobs gauge\n"
         "cuzk_running_jobs "
      << in_progress << "\n";
  return out.str();
}

}  // namespace pf::gateway
