// Where each queued job goes (design §11, issue 12 item 4). Pure: the manager's job queue and
// the policy simulator call it with their own view of the queue and the fleet, and neither
// re-implements it.
//
// Rule: jobs are taken in order (priority, then deadline, then arrival); each goes to the
// instance where it is expected to finish first — that instance's measured seconds per proof
// times the work already queued on it (its held jobs plus those assigned in this call), over the
// proofs it keeps in flight. An instance that cannot finish the job before its deadline is not
// chosen while another can; an instance in the job's avoid list (it failed the job, or made a
// proof the client rejected) only when no other can take it. A job nobody can finish in time
// still goes to the earliest finisher (a late proof is better than none to the client, who
// decides); it is marked `late` so the shell can count it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/job.h"

namespace pf::core {

struct JobToPlace {
  std::int64_t job_id = 0;
  JobKind kind = JobKind::PorepC2;
  int priority = 0;
  double submitted_at = 0;
  double deadline_at = 0;  // epoch s; 0 = none
  std::vector<std::int64_t> avoid_instances;
};

struct WorkerView {
  std::int64_t instance_id = 0;
  double seconds_per_proof = 0;  // measured wall time of one proof at its plan (> 0)
  int slots = 1;                 // proofs it keeps in flight (its plan's concurrency)
  int held = 0;                  // jobs it holds now (assigned or proving)
  // Seconds until its held work is done, if the shell knows better than held × s/proof ÷ slots
  // (e.g. proofs already half way); < 0: estimate from held.
  double busy_s = -1;
};

struct JobPlacement {
  std::int64_t job_id = 0;
  std::int64_t instance_id = 0;
  double expected_finish_at = 0;  // epoch s
  bool late = false;              // expected after the job's deadline
  std::string reason;
};

// Places as many jobs as free slots allow: an instance takes at most `slots` jobs in total
// (held + placed) — work beyond its slots stays in the queue, where a faster instance that
// frees up may take it. Jobs that fit nowhere are not returned.
std::vector<JobPlacement> place_jobs(double now, const std::vector<JobToPlace>& queued,
                                     const std::vector<WorkerView>& workers);

}  // namespace pf::core
