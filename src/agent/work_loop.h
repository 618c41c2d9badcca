// The agent's real work (issue 12): once the manager's heartbeat says `work` (the instance is
// accepted and proving), the agent stops re-proving the benchmark input and fills its plan's
// in-flight slots with jobs leased from the manager.
//
//  - A feeder thread long-polls for jobs while work is on and a slot is free: it holds at most
//    as many jobs (leased, fetching, proving) as the session's slots, and at most twice that
//    with the results waiting for upload counted (never more than 64).
//  - The agent's proof workers call prove_next(): it takes a leased job, fetches its input
//    (work_client.h), reports `started`, proves it with the agent's prover and queues the
//    result. An uploader thread delivers started/result reports in order, retrying until the
//    manager has them; a job stays held (named in heartbeats, so its lease is renewed) until
//    its result is delivered.
//  - Heartbeats name every held job (held_json) and read the reply: `work` switches leasing on
//    and off (held jobs are finished either way); `drop_jobs` forgets those jobs at once: a
//    queued one is discarded, a fetch is cancelled, a proof is cancelled in the prover (its
//    slot is free as soon as the prover lets go) and its result is never uploaded.
//  - A proof cut short because the prover stopped (a re-plan, a restart, the agent stopping)
//    goes back to the front of the local queue and runs again when the prover is back; its
//    lease is kept meanwhile. A proof that failed on its own, or was killed for memory
//    (oom=true), is reported; the agent's session then takes the usual re-plan/restart path.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/prover.h"
#include "agent/work_client.h"

namespace pf::agent {

// Jobs one agent holds at most (the contract's heartbeat bound).
inline constexpr int kMaxHeldJobs = 64;

struct WorkLoopOptions {
  double lease_retry_base_s = 0.5;
  double lease_retry_max_s = 15;  // core::kAgentRetryMaxS
  std::function<void(const std::string&)> log;
  // Cancels the prover's proof of a job the manager dropped (Prover::cancel); unset: the proof
  // runs to its end and its result is discarded.
  std::function<void(std::int64_t job_id)> cancel_proof;
};

class WorkLoop {
 public:
  // `client` must outlive this object.
  WorkLoop(WorkClient& client, WorkLoopOptions options);
  ~WorkLoop();
  WorkLoop(const WorkLoop&) = delete;
  WorkLoop& operator=(const WorkLoop&) = delete;

  // --- the heartbeat ---------------------------------------------------------------------------
  void on_heartbeat(bool work, const std::vector<std::int64_t>& drop_jobs);
  // [{"id", "attempt"}, ...] of every held job.
  nlohmann::json held_json() const;
  bool work_enabled() const;
  int held_count() const;
  // What the heartbeat's phase should say instead of `phase` while work is on: "idle" when no
  // job is held, "proving" otherwise; `phase` itself in the early phases or with work off.
  std::string phase_for(const std::string& phase) const;

  // --- the proof workers -----------------------------------------------------------------------
  // Proof slots of the running session (0 while the prover is down): the feeder leases up to
  // this many jobs.
  void set_slots(int slots);
  // Whether a worker should take jobs rather than prove the benchmark input: work is on, or
  // jobs are still held.
  bool wants_workers() const;
  // Takes the next job (waiting up to `wait` for one), fetches its input and proves it with
  // `prove`. nullopt: no job came, or it could not be proved (its fate is handled here). The
  // outcome otherwise, for the agent's own bookkeeping. `interrupted` says whether the session
  // is ending (a failure seen then is the session's, not the job's: the job runs again).
  std::optional<ProofOutcome> prove_next(std::chrono::milliseconds wait,
                                         const std::function<ProofOutcome(ProofJob)>& prove,
                                         const std::function<bool()>& interrupted);

  // Stops leasing, gives queued uploads up to `drain` to be delivered, then joins the threads.
  // Idempotent.
  void stop(std::chrono::milliseconds drain);

  // For tests.
  struct Counters {
    int leased = 0, proved = 0, reported = 0, dropped = 0, requeued = 0, lost = 0;
  };
  Counters counters() const;

 private:
  enum class Stage { Queued, Fetching, Proving, Uploading };
  struct Held {
    LeasedJob job;
    Stage stage = Stage::Queued;
    bool dropped = false;
  };
  struct Upload {
    std::int64_t job_id = 0;
    int attempt = 0;
    bool started = false;  // a `started` report; else the result
    JobReport result;
  };

  void feeder_loop();
  void uploader_loop();
  int busy_slots_locked() const;
  // Jobs the feeder may lease now: free slots, while no more than `slots` results wait.
  int lease_room_locked() const;
  bool dropped(std::int64_t id, int attempt) const;
  void forget_locked(std::int64_t id);
  bool wait_for(double seconds);

  WorkClient& client_;
  WorkLoopOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool work_ = false;
  bool stopping_ = false;
  bool uploads_closed_ = false;
  int slots_ = 0;
  std::map<std::int64_t, Held> held_;
  std::deque<std::int64_t> ready_;
  std::deque<Upload> uploads_;
  Counters counters_;
  std::thread feeder_, uploader_;
};

}  // namespace pf::agent
