#include "gateway/reply_mapping.h"

#include <algorithm>
#include <cmath>

namespace pf::gateway {
namespace {

std::uint64_t millis(double ms) {
  if (!std::isfinite(ms) || ms <= 0) return 0;
  return static_cast<std::uint64_t>(std::llround(ms));
}

// Seconds between two epoch stamps as milliseconds; 0 when either is unknown.
std::uint64_t span_ms(double from_s, double to_s) {
  if (from_s <= 0 || to_s <= 0) return 0;
  return millis((to_s - from_s) * 1000);
}

std::uint32_t count(int n) {
  return static_cast<std::uint32_t>(std::max(n, 0));
}

}  // namespace

void fill_result(const jobs::Finished& finished, const std::string& job_id,
                 cuzk::v1::AwaitProofResponse& out) {
  const core::Job& job = finished.job;
  out.set_job_id(job_id);
  switch (job.state) {
    case core::JobState::Done: {
      out.set_status(cuzk::v1::AwaitProofResponse::COMPLETED);
      out.set_proof(finished.proof);
      const double started = job.started_at > 0 ? job.started_at : job.assigned_at;
      out.set_queue_wait_ms(span_ms(job.submitted_at, started) + millis(job.queue_ms));
      out.set_gpu_compute_ms(millis(job.gpu_ms));
      out.set_total_ms(span_ms(job.submitted_at, job.finished_at));
      return;
    }
    case core::JobState::Failed:
      out.set_status(cuzk::v1::AwaitProofResponse::FAILED);
      out.set_error_message(job.error.empty() ? "the proof failed" : job.error);
      return;
    case core::JobState::Cancelled:
      out.set_status(cuzk::v1::AwaitProofResponse::CANCELLED);
      out.set_error_message(job.error);
      return;
    case core::JobState::Queued:
    case core::JobState::Assigned:
    case core::JobState::Proving:
      break;
  }
  // The queue hands back finished jobs only; anything else is not a result.
  out.set_status(cuzk::v1::AwaitProofResponse::UNKNOWN);
}

grpc::Status to_status(const jobs::JobError& error) {
  using Code = jobs::JobError::Code;
  switch (error.code) {
    case Code::InvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, error.message};
    case Code::ResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, error.message};
    case Code::NotFound:
      return {grpc::StatusCode::NOT_FOUND, error.message};
    case Code::FailedPrecondition:
      return {grpc::StatusCode::FAILED_PRECONDITION, error.message};
    case Code::AlreadyExists:
      return {grpc::StatusCode::ALREADY_EXISTS, error.message};
    case Code::Unavailable:
      return {grpc::StatusCode::UNAVAILABLE, error.message};
  }
  return {grpc::StatusCode::INTERNAL, error.message};
}

void fill_status(const jobs::QueueStatus& status, std::uint64_t uptime_s,
                 cuzk::v1::GetStatusResponse& out) {
  for (const auto kind : {core::JobKind::PorepC2, core::JobKind::SnapUpdate,
                          core::JobKind::WindowPost, core::JobKind::WinningPost}) {
    jobs::KindCounts counts;
    if (const auto it = status.by_kind.find(kind); it != status.by_kind.end()) counts = it->second;
    auto* queue = out.add_queues();
    queue->set_proof_kind(core::to_string(kind));
    queue->set_pending(count(counts.pending));
    queue->set_in_progress(count(counts.in_progress));
  }
  out.set_total_proofs_completed(
      static_cast<std::uint64_t>(std::max<std::int64_t>(status.completed, 0)));
  out.set_total_proofs_failed(static_cast<std::uint64_t>(std::max<std::int64_t>(status.failed, 0)));
  out.set_uptime_seconds(uptime_s);
}

}  // namespace pf::gateway
