// The autopilot's view of the gateway's job queue (core/scale_to_demand.h's observation): what
// arrived lately, what waits and by when, what instances hold, and whether the admission window
// the client was told is full (design §11: then demand is at least what is seen).
#pragma once

#include "jobs/job_queue.h"
#include "manager/autopilot.h"
#include "manager/manager.h"

namespace pf::manager {

// Reads `queue` on every call. `admit_window`: the gateway's max_pending_window (0: none).
// The queue must outlive the returned signal.
JobSignal job_signal(jobs::JobQueue& queue, int admit_window);
// Replicas: reads the queue the Manager has attached at each call (the leader's current term's);
// none attached reads as no job seen.
JobSignal job_signal(Manager& manager, int admit_window);

}  // namespace pf::manager
