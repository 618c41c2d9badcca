#include "gateway/proving_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "gateway/reply_mapping.h"
#include "gateway/request_check.h"

namespace pf::gateway {
namespace {

// A client deadline further away than this is "no deadline" (gRPC's infinite future).
constexpr std::chrono::hours kNoDeadline{24 * 365};
constexpr std::size_t kMaxQueuedScanned = 10'000;

grpc::Status from_error(const RequestError& error) {
  return {error.code, error.message};
}

}  // namespace

ProvingService::ProvingService(jobs::JobQueue& queue, ServiceOptions options,
                               GatewayMetrics& metrics)
    : queue_(queue),
      options_(std::move(options)),
      started_(std::chrono::steady_clock::now()),
      metrics_(metrics) {}

void ProvingService::stop() {
  stopping_ = true;
}

std::uint64_t ProvingService::uptime_s() const {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count());
}

template <typename Body>
grpc::Status ProvingService::handle(Body&& body) {
  if (stopping_) {
    return {grpc::StatusCode::UNAVAILABLE,
            "this replica's job queue stopped (shutting down, or it no longer leads): retry"};
  }
  return body();
}

tl::expected<jobs::Submitted, grpc::Status> ProvingService::submit(
    grpc::ServerContext* ctx, const std::string& client, cuzk::v1::SubmitProofRequest& request,
    bool deadline_from_client) {
  std::string request_id = request.request_id();
  if (request_id.empty()) request_id = generate_request_id();
  auto checked = check_submit(std::move(request), options_.max_input_bytes);
  if (!checked) return tl::unexpected(from_error(checked.error()));
  jobs::SubmitRequest submit;
  submit.request_id = request_id;
  submit.kind = checked->kind;
  submit.priority = checked->priority;
  submit.input = std::move(checked->input);
  submit.client = client;
  if (deadline_from_client) {
    const auto left = ctx->deadline() - std::chrono::system_clock::now();
    if (left < kNoDeadline) {
      submit.deadline_s = std::max(0.0, std::chrono::duration<double>(left).count());
    }
  }
  auto submitted = queue_.submit(submit);
  if (!submitted) return tl::unexpected(to_status(submitted.error()));
  if (submitted->joined) metrics_.count_joined();
  if (submitted->redo) {
    spdlog::warn("gateway: {} from {} came back after its proof was delivered: proving it again",
                 request_id, client);
  }
  return std::move(*submitted);
}

ProvingService::WaitResult ProvingService::wait_for(
    grpc::ServerContext* ctx, std::int64_t job_id,
    std::optional<std::chrono::milliseconds> timeout) {
  const auto start = std::chrono::steady_clock::now();
  WaitResult result;
  while (true) {
    if (stopping_) {
      result.end = WaitEnd::Stopping;
      return result;
    }
    if (ctx->IsCancelled()) {
      result.end = ctx->deadline() <= std::chrono::system_clock::now() ? WaitEnd::DeadlineExceeded
                                                                       : WaitEnd::ClientGone;
      return result;
    }
    auto slice = options_.await_slice;
    if (timeout) {
      const auto left = *timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - start);
      if (left <= std::chrono::milliseconds::zero()) {
        result.end = WaitEnd::TimedOut;
        return result;
      }
      slice = std::min(slice, left);
    }
    auto waited = queue_.await(job_id, slice);
    if (!waited) {
      result.end = waited.error().code == jobs::JobError::Code::Unavailable && stopping_
                       ? WaitEnd::Stopping
                       : WaitEnd::Error;
      result.error = waited.error();
      return result;
    }
    if (*waited) {
      if (ctx->IsCancelled()) {
        // The client left while its proof arrived: what we answer now reaches nobody.
        if ((*waited)->job.state == core::JobState::Done) {
          if (auto undone = queue_.undeliver(job_id); !undone) {
            spdlog::warn("gateway: job {} stays delivered although its client left: {}", job_id,
                         undone.error().message);
          }
        }
        result.end = ctx->deadline() <= std::chrono::system_clock::now() ? WaitEnd::DeadlineExceeded
                                                                         : WaitEnd::ClientGone;
        return result;
      }
      result.end = WaitEnd::Finished;
      result.finished = std::move(**waited);
      return result;
    }
  }
}

int ProvingService::queue_position(const core::Job& job) {
  if (job.state != core::JobState::Queued) return 0;
  const auto queued =
      queue_.list(store::JobFilter::in_states({core::JobState::Queued}), kMaxQueuedScanned);
  return static_cast<int>(std::count_if(queued.begin(), queued.end(), [&job](const core::Job& j) {
    return j.priority > job.priority || (j.priority == job.priority && j.id <= job.id);
  }));
}

grpc::Status ProvingService::SubmitProof(grpc::ServerContext* ctx, const std::string& client,
                                         const cuzk::v1::SubmitProofRequest* request,
                                         cuzk::v1::SubmitProofResponse* reply) {
  return handle([&]() -> grpc::Status {
    // gRPC built the request for this call alone; taking its bulk keeps one copy of a large
    // input in memory instead of two.
    auto submitted =
        submit(ctx, client, const_cast<cuzk::v1::SubmitProofRequest&>(*request), false);
    if (!submitted) return submitted.error();
    reply->set_job_id(submitted->job.request_id);
    reply->set_queue_position(static_cast<std::uint32_t>(queue_position(submitted->job)));
    return grpc::Status::OK;
  });
}

grpc::Status ProvingService::Prove(grpc::ServerContext* ctx, const std::string& client,
                                   const cuzk::v1::ProveRequest* request,
                                   cuzk::v1::ProveResponse* reply, std::string* kept_job_id) {
  return handle([&]() -> grpc::Status {
    if (!request->has_submit()) {
      return {grpc::StatusCode::INVALID_ARGUMENT, "submit: missing"};
    }
    // The request is this call's own (see SubmitProof); the job keeps its input, so the call
    // holds none of it while it waits, possibly for half an hour.
    auto& own = const_cast<cuzk::v1::ProveRequest&>(*request);
    auto submitted = submit(ctx, client, *own.mutable_submit(), true);
    own.Clear();
    if (!submitted) return submitted.error();
    const std::string& job_id = submitted->job.request_id;
    auto waited = wait_for(ctx, submitted->job.id, std::nullopt);
    switch (waited.end) {
      case WaitEnd::Finished:
        fill_result(waited.finished, job_id, *reply->mutable_result());
        return grpc::Status::OK;
      case WaitEnd::ClientGone:
        return {grpc::StatusCode::CANCELLED,
                "the client went away; job " + job_id + " goes on (Prove it again to join it)"};
      case WaitEnd::DeadlineExceeded:
        return {grpc::StatusCode::DEADLINE_EXCEEDED,
                "deadline passed; job " + job_id + " goes on (Prove it again to join it)"};
      case WaitEnd::Stopping:
        if (kept_job_id != nullptr) *kept_job_id = job_id;
        return {grpc::StatusCode::UNAVAILABLE,
                "this replica's job queue stopped; job " + job_id + " is kept: Prove it again"};
      case WaitEnd::TimedOut:
      case WaitEnd::Error:
        break;
    }
    return waited.end == WaitEnd::Error
               ? to_status(waited.error)
               : grpc::Status(grpc::StatusCode::INTERNAL, "unexpected wait result");
  });
}

grpc::Status ProvingService::AwaitProof(grpc::ServerContext* ctx, const std::string& client,
                                        const cuzk::v1::AwaitProofRequest* request,
                                        cuzk::v1::AwaitProofResponse* reply,
                                        std::string* kept_job_id) {
  return handle([&]() -> grpc::Status {
    if (auto ok = check_request_id(request->job_id(), "job_id"); !ok) {
      return from_error(ok.error());
    }
    const auto job = queue_.client_job(client, request->job_id());
    if (!job) return {grpc::StatusCode::NOT_FOUND, "job_id: no job '" + request->job_id() + "'"};
    auto waited = wait_for(ctx, job->id, await_timeout(request->timeout_ms()));
    switch (waited.end) {
      case WaitEnd::Finished:
        fill_result(waited.finished, request->job_id(), *reply);
        return grpc::Status::OK;
      case WaitEnd::TimedOut:
        reply->set_job_id(request->job_id());
        reply->set_status(cuzk::v1::AwaitProofResponse::TIMEOUT);
        reply->set_error_message("not finished within timeout_ms; the job goes on");
        return grpc::Status::OK;
      case WaitEnd::ClientGone:
        return {grpc::StatusCode::CANCELLED, "the client went away; the job goes on"};
      case WaitEnd::DeadlineExceeded:
        return {grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed; the job goes on"};
      case WaitEnd::Stopping:
        if (kept_job_id != nullptr) *kept_job_id = request->job_id();
        return {grpc::StatusCode::UNAVAILABLE,
                "this replica's job queue stopped; the job is kept: retry"};
      case WaitEnd::Error:
        break;
    }
    return to_status(waited.error);
  });
}

grpc::Status ProvingService::CancelProof(grpc::ServerContext* /*ctx*/, const std::string& client,
                                         const cuzk::v1::CancelProofRequest* request,
                                         cuzk::v1::CancelProofResponse* reply) {
  return handle([&]() -> grpc::Status {
    if (auto ok = check_request_id(request->job_id(), "job_id"); !ok) {
      return from_error(ok.error());
    }
    const auto job = queue_.client_job(client, request->job_id());
    if (!job) {
      reply->set_was_running(false);  // the daemon answers an unknown id the same way
      return grpc::Status::OK;
    }
    auto cancelled = queue_.cancel(job->id);
    if (!cancelled) return to_status(cancelled.error());
    reply->set_was_running(*cancelled);
    spdlog::info("gateway: job {} cancelled by {}{}", request->job_id(), client,
                 *cancelled ? " while running" : "");
    return grpc::Status::OK;
  });
}

grpc::Status ProvingService::GetStatus(grpc::ServerContext* /*ctx*/, const std::string& /*client*/,
                                       const cuzk::v1::GetStatusRequest* /*request*/,
                                       cuzk::v1::GetStatusResponse* reply) {
  return handle([&]() -> grpc::Status {
    fill_status(queue_.status(), uptime_s(), *reply);
    return grpc::Status::OK;
  });
}

grpc::Status ProvingService::GetMetrics(grpc::ServerContext* /*ctx*/, const std::string& /*client*/,
                                        const cuzk::v1::GetMetricsRequest* /*request*/,
                                        cuzk::v1::GetMetricsResponse* reply) {
  return handle([&]() -> grpc::Status {
    reply->set_prometheus_text(metrics_.prometheus_text(queue_.status(), uptime_s()));
    return grpc::Status::OK;
  });
}

grpc::Status ProvingService::PreloadSRS(grpc::ServerContext* /*ctx*/, const std::string& /*client*/,
                                        const cuzk::v1::PreloadSrsRequest* /*request*/,
                                        cuzk::v1::PreloadSrsResponse* reply) {
  return handle([&]() -> grpc::Status {
    reply->set_already_loaded(true);  // each machine loads its SRS before it takes jobs
    return grpc::Status::OK;
  });
}

grpc::Status ProvingService::EvictSRS(grpc::ServerContext* /*ctx*/, const std::string& /*client*/,
                                      const cuzk::v1::EvictSrsRequest* /*request*/,
                                      cuzk::v1::EvictSrsResponse* reply) {
  return handle([&]() -> grpc::Status {
    reply->set_was_loaded(false);  // nothing is evicted from rented machines on a client's word
    return grpc::Status::OK;
  });
}

}  // namespace pf::gateway
