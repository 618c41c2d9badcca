// How the job queue's answers become cuzk replies, as a client of a real daemon reads them
// (/work/shared/reference/cuzk.md §1 and the daemon's service.rs):
//  - a finished job is an AwaitProofResponse: done → COMPLETED with the proof and timings;
//    failed → FAILED with the reason in error_message; cancelled → CANCELLED. The RPC itself
//    succeeds: the daemon reports a failed proof in the reply, and Curio reads it there
//    ("cuzk proof failed: <message>"). Failed and cancelled carry no timings, as the daemon's.
//  - the queue's own errors are gRPC statuses (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, NOT_FOUND,
//    FAILED_PRECONDITION, UNAVAILABLE).
//  - GetStatus lists every proof kind under the daemon's names ("porep-c2", "snap-update",
//    "window-post", "winning-post") with the queue's (censored) pending and in-progress counts.
#pragma once

#include <grpcpp/support/status.h>

#include <cstdint>
#include <string>

#include "cuzk/v1/proving.pb.h"
#include "jobs/job_queue.h"

namespace pf::gateway {

// Timings of a done job, in the daemon's terms: queue_wait_ms = fleet queue (submitted →
// proof started, or → leased when the agent did not say) + the agent's local queue;
// gpu_compute_ms = the agent's GPU time; total_ms = submitted → finished. synthesis_ms and
// srs_load_ms stay 0 (agents do not report them).
void fill_result(const jobs::Finished& finished, const std::string& job_id,
                 cuzk::v1::AwaitProofResponse& out);

grpc::Status to_status(const jobs::JobError& error);

void fill_status(const jobs::QueueStatus& status, std::uint64_t uptime_s,
                 cuzk::v1::GetStatusResponse& out);

}  // namespace pf::gateway
