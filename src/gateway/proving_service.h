// cuzk.v1.ProvingEngine over the fleet's job queue: what a Curio that believes it talks to one
// cuzk daemon sees (design §11).
//
//  - Prove submits and waits for the job. It waits in slices (ServiceOptions::await_slice) and
//    checks between them whether the client is still there: a client that goes away (deadline,
//    cancel, crash) ends only its own call, never the job, because Curio retries with the same
//    request_id and must join the job it already paid a wait for. The job's deadline is the
//    client's deadline when it set one.
//  - SubmitProof answers job_id = request_id (a generated "pf-..." id when it was empty) and the
//    job's place among queued jobs; AwaitProof honours timeout_ms (0 = forever) with TIMEOUT,
//    although the daemon ignores it.
//  - CancelProof cancels a queued or running job (was_running: it was leased); an unknown job_id
//    answers was_running = false, as the daemon does.
//  - GetStatus / GetMetrics answer from the queue; PreloadSRS / EvictSRS are acknowledged
//    (already_loaded / nothing evicted): each machine of the fleet manages its own SRS.
//  - Who may call and what is counted is the gateway's front's (gateway_front.h): it checks the
//    client allow-list, names the client each call is for (relay_identity.h: the client that
//    sent it, also when a follower relayed it) and hands a call here only while this replica's
//    term serves this queue. Request ids are that client's: AwaitProof and CancelProof find only
//    its own jobs.
//
// A Done result that the queue hands to a waiting call counts as delivered (JobQueue::await).
// The call checks its client before each slice, so a client that vanished is not sent a proof
// it will never read, except in the last slice before the proof arrived.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/gateway_metrics.h"
#include "jobs/job_queue.h"

namespace pf::gateway {

struct ServiceOptions {
  std::int64_t max_input_bytes = 256LL << 20;
  // How long one wait on the queue lasts before the call looks at its client again.
  std::chrono::milliseconds await_slice{1000};
};

class ProvingService final {
 public:
  // `metrics` (the gateway's, outliving this service) counts joined requests and is what
  // GetMetrics reports.
  ProvingService(jobs::JobQueue& queue, ServiceOptions options, GatewayMetrics& metrics);

  grpc::Status SubmitProof(grpc::ServerContext* ctx, const std::string& client,
                           const cuzk::v1::SubmitProofRequest* request,
                           cuzk::v1::SubmitProofResponse* reply);
  // Prove and AwaitProof: when this queue stops while the call waits (the term ended: a
  // takeover, a lost lease), the call ends UNAVAILABLE and `kept_job_id` (when given) names the
  // job the store keeps, so the front can wait for it at the next leader (gateway_front.h).
  grpc::Status AwaitProof(grpc::ServerContext* ctx, const std::string& client,
                          const cuzk::v1::AwaitProofRequest* request,
                          cuzk::v1::AwaitProofResponse* reply, std::string* kept_job_id = nullptr);
  grpc::Status Prove(grpc::ServerContext* ctx, const std::string& client,
                     const cuzk::v1::ProveRequest* request, cuzk::v1::ProveResponse* reply,
                     std::string* kept_job_id = nullptr);
  grpc::Status CancelProof(grpc::ServerContext* ctx, const std::string& client,
                           const cuzk::v1::CancelProofRequest* request,
                           cuzk::v1::CancelProofResponse* reply);
  grpc::Status GetStatus(grpc::ServerContext* ctx, const std::string& client,
                         const cuzk::v1::GetStatusRequest* request,
                         cuzk::v1::GetStatusResponse* reply);
  grpc::Status GetMetrics(grpc::ServerContext* ctx, const std::string& client,
                          const cuzk::v1::GetMetricsRequest* request,
                          cuzk::v1::GetMetricsResponse* reply);
  grpc::Status PreloadSRS(grpc::ServerContext* ctx, const std::string& client,
                          const cuzk::v1::PreloadSrsRequest* request,
                          cuzk::v1::PreloadSrsResponse* reply);
  grpc::Status EvictSRS(grpc::ServerContext* ctx, const std::string& client,
                        const cuzk::v1::EvictSrsRequest* request,
                        cuzk::v1::EvictSrsResponse* reply);

  // Calls waiting for a job end with UNAVAILABLE within one slice; new calls are refused the
  // same way. For shutdown, before the server stops.
  void stop();

 private:
  enum class WaitEnd { Finished, TimedOut, ClientGone, DeadlineExceeded, Stopping, Error };
  struct WaitResult {
    WaitEnd end = WaitEnd::Error;
    jobs::Finished finished;
    jobs::JobError error;
  };

  // Runs `body` unless the service is stopping (UNAVAILABLE).
  template <typename Body>
  grpc::Status handle(Body&& body);
  tl::expected<jobs::Submitted, grpc::Status> submit(grpc::ServerContext* ctx,
                                                     const std::string& client,
                                                     cuzk::v1::SubmitProofRequest& request,
                                                     bool deadline_from_client);
  WaitResult wait_for(grpc::ServerContext* ctx, std::int64_t job_id,
                      std::optional<std::chrono::milliseconds> timeout);
  int queue_position(const core::Job& job);
  std::uint64_t uptime_s() const;

  jobs::JobQueue& queue_;
  const ServiceOptions options_;
  const std::chrono::steady_clock::time_point started_;
  std::atomic<bool> stopping_{false};
  GatewayMetrics& metrics_;
};

}  // namespace pf::gateway
