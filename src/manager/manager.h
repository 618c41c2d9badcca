// The manager: runs the fleet safely. It owns no clock and no sockets; the HTTP layer
// (http_api.h) and the loops call these methods. Every action is written to the Store before
// it is taken, and market calls are made without holding the state lock so agents keep being
// served while the market is slow.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "core/acceptance.h"
#include "core/alerts.h"
#include "core/billing.h"
#include "core/blocklist.h"
#include "core/close_cause.h"
#include "core/fleet.h"
#include "core/hearing.h"
#include "core/job_economics.h"
#include "core/lifecycle.h"
#include "core/ranking.h"
#include "core/reconcile.h"
#include "core/rental_terms.h"
#include "core/sprt_acceptance.h"
#include "core/ssh_access.h"
#include "jobs/job_queue.h"
#include "manager/agent_token_index.h"
#include "manager/benchmark_input.h"
#include "manager/deploy_defaults.h"
#include "manager/hands_on.h"
#include "manager/job_worker_roster.h"
#include "manager/listening.h"
#include "manager/market_calls.h"
#include "manager/tokens.h"
#include "manager/transfer_meter.h"
#include "market/market.h"
#include "store/confirm.h"

namespace pf::manager {

// The destroy reason of an operator's destroy request. Its close cause (Operator) is what
// core::decide reads to leave that machine alone for a while afterwards.
inline constexpr const char* kOperatorDestroyReason = "operator request";

// An API-level failure: the HTTP layer maps `status` to the reply and `message` to its JSON.
struct ApiError {
  int status = 400;
  std::string message;
};
template <typename T>
using ApiResult = tl::expected<T, ApiError>;

// A reply whose writes may still be on their way to the database (Store::transaction_sent):
// send it only once `committed` says they were applied, or wait here (get).
template <typename T>
struct Committing {
  ApiResult<T> reply;
  store::Confirm committed;

  // The reply once its writes are applied; throws StoreError when they failed.
  ApiResult<T> get() {
    committed.wait();
    return std::move(reply);
  }
};

struct ParamFile {
  std::string name;
  std::string url;
  std::int64_t bytes = 0;
  std::string digest;  // first 16 bytes of BLAKE2b-512, hex (cuzk parameters.json)
  std::string cid{};   // the IPFS content id, when it came from a gateway
};

struct ManagerConfig {
  core::RankConfig rank;  // predictor, economics (revenue, target), setup assumptions
  core::LifecycleConfig lifecycle;
  core::AcceptanceConfig acceptance;  // sample and time caps of the benchmark
  core::SprtConfig sprt;              // the sequential test's tuning (caps come from above)
  core::BlocklistConfig blocklist;    // strikes against hosts whose instances fail
  core::BidConfig bids;               // on-demand or a bid, per rental (core/rental_terms.h)
  // Benchmarks are judged against the revenue per proof (true: keep whatever earns more than
  // it costs, as the autopilot's policy scores) or against economics.target_cost_per_proof_usd.
  bool profit_objective = true;
  std::string public_url = "http://127.0.0.1:8470";  // what agents are told to call
  std::string image = kDefaultImage;
  double disk_gb = core::kDefaultDiskGb;
  // Shell run by the instance at start; the manager's URL etc. come from the env the create sets.
  std::string onstart = kDefaultOnstart;
  double heartbeat_s = 10;
  std::vector<ParamFile> params;
  std::optional<BenchmarkInput> benchmark_input;  // served to agents; none: not offered
  nlohmann::json prover_settings = nlohmann::json::object();
  // Agent log kept per instance in the store (oldest chunks dropped beyond it).
  std::size_t log_ring_bytes = 256 * 1024;
  // The agent logs, and the audit trails, of instances destroyed this long ago are removed by
  // an hourly sweep (the instance rows stay); 0 keeps them for ever.
  double log_retention_s = 30 * 86400.0;
  double event_retention_s = 365 * 86400.0;
  // Rows whose instance is missing from the market list are closed only after this long,
  // because reads can lag a create.
  double vanish_grace_s = 120;
  // Proving instances are measured in windows of this many seconds of proofs (agent clock);
  // each complete window is a "production" BenchRun, which the autopilot's production watch
  // and the host history read.
  double production_window_s = 3600;
  // When silence says nothing about a host (core/hearing.h).
  core::HearingConfig hearing;
  // May this process still act as the fleet's leader? Asked (cheap: the term's expiry on the
  // local clock) right before a reconcile or tick round writes what it decided, so a leader that
  // stood still past its term (SIGSTOP, a long GC-like stall, a suspended VM) and wakes mid-round
  // writes nothing from its stale view over the new leader's rows. Unset: always (one manager).
  std::function<bool()> still_leading;
};

// --- agent protocol (design §7) ------------------------------------------------------------
struct RegisterRequest {
  std::string deployment;
  std::string secret;
  nlohmann::json hardware = nlohmann::json::object();
  std::string agent_version;
  // The agent's own bearer token (kAgentTokenHexChars hex digits from its randomness, kept in
  // its state dir before it first registers), or empty for one chosen by the manager. With it
  // a registration is idempotent: a retry after a lost reply presents the same secret and token
  // and gets the same answer, while the secret alone no longer works once it was used.
  std::string token = {};
};

struct RegisterReply {
  std::int64_t instance_id = 0;
  std::string token;
  nlohmann::json body;  // the whole reply: instance_id, token, heartbeat_s, params, prover, ...
};

struct Heartbeat {
  std::string phase;  // fetching_params | warming_up | benchmarking | proving | idle | ...
  double params_done = 0, params_total = 0, params_rate_bps = 0;
  int prover_in_flight = 0, prover_completed = 0, prover_failed = 0;
  double peak_memory_gib = 0;
  double gpu_util = 0;  // mean over GPUs, 0..100
  bool gpu_throttled = false;
  nlohmann::json raw = nlohmann::json::object();
};

// The manager's answer to a heartbeat (design §7, issue 12).
struct HeartbeatReply {
  std::vector<std::string> commands;  // e.g. ["stop"] once the instance is being destroyed
  bool work = false;                  // accepted and proving: the agent may take jobs now
};

struct AgentEvent {
  std::int64_t seq = 0;
  std::string type;  // params_done | prover_started | oom | proof_done | error | exiting | ...
  double at = 0;     // agent's clock, epoch seconds (0 = use arrival time)
  // proof_done
  double seconds = 0, gpu_ms = 0, queue_ms = 0;
  std::string phase;  // proof_done: "warmup" or "measured"
  std::string message;
  nlohmann::json data = nlohmann::json::object();
};
struct EventsReply {
  int accepted = 0;    // newly applied
  int duplicates = 0;  // already seen (same seq)
};

struct FleetSummary {
  std::map<std::string, int> by_state;  // live and destroyed counts by state name
  double proofs_per_hour = 0;           // accepted instances' measured rates
  // What the live instances cost an hour (core::fleet_usd_per_hour: a bid at its bid, one the
  // market holds stopped its disk only).
  double dollars_per_hour = 0;
  std::optional<double> cost_per_proof;
  double profit_per_hour = 0;
  // What profit_per_hour counts (manager/jobs_report.h apply_profit_basis): the measured-proofs
  // estimate until the gateway has seen a job, delivered jobs' revenue after.
  core::ProfitBasis profit_basis = core::ProfitBasis::ProofsMeasured;
  double revenue_per_hour = 0;
  std::string profit_reason;
  double spend_usd = 0;  // all time
  int proofs = 0;        // production proofs all time
  // The live rentals by terms (core/rental_terms.h): interruptible ones, those the market holds
  // stopped now, the market's stops of them so far, and their disks' storage per hour.
  int bid_instances = 0;
  int on_demand_instances = 0;
  int market_stopped = 0;
  int market_stops = 0;
  double storage_usd_per_hour = 0;
  core::Hearing hearing;  // whether silence is judged now, and why not
};

// Remote tuning of one instance's prover (the agent's set_concurrency / replan commands).
struct TuneRequest {
  std::optional<int> concurrency;  // proofs in flight, 1..kMaxTuneConcurrency
  std::optional<int> partitions;   // partition cap for a re-plan, 1..kMaxTunePartitions
  std::string who = "operator";
};
inline constexpr int kMaxTuneConcurrency = 256;  // what the agent accepts for set_concurrency
inline constexpr int kMaxTunePartitions = 640;   // 64 GPUs (the planner's cap) × 10 partitions

class Manager {
 public:
  using Clock = std::function<double()>;  // epoch seconds
  Manager(store::Store& store, market::Market& market, ManagerConfig config, Clock clock);

  // --- operator ------------------------------------------------------------------------------
  // Ranked offers for a vast JSON filter (with deploy: manager_offers.cpp).
  ApiResult<std::vector<core::RankedOffer>> rank_offers(const nlohmann::json& filters, int limit,
                                                        core::RankOrder order);
  // Rents the offer: re-checks it, records the intent, creates with our label and env.
  // Refuses machines with an active bad-host entry; `automatic_blocks_applied` says the caller
  // (the autopilot's policy) already weighed the automatic entries, whose pool cap may
  // deliberately waive some — operator entries are always honoured. `searched`: the offer as
  // the caller's own search listed it moments ago (the autopilot's round), rented as listed
  // without searching again — vast allows about ten searches a minute, and an offer gone since
  // fails the create with no_such_ask.
  ApiResult<core::InstanceRecord> deploy(std::int64_t offer_id, const std::string& origin,
                                         bool automatic_blocks_applied = false,
                                         const core::Offer* searched = nullptr);
  // Moves the instance to destroying (the tick sends and retries the destroy), with `cause`
  // stored on the row; `strike` is blame the caller's policy asks for (recorded as a strike
  // with an event, under the lock).
  ApiResult<core::InstanceRecord> request_destroy(
      std::int64_t id, const std::string& reason,
      core::CloseCause cause = core::CloseCause::Operator,
      const std::optional<core::Strike>& strike = std::nullopt);

  // --- bad hosts: every change takes the lock and leaves an event on the machine's rows -----
  // Inserts or replaces the entry for (machine_id, source).
  void put_bad_host(const core::BadHost& entry, const std::string& who);
  // Removes the machine's entries of every source; returns how many there were.
  int remove_bad_host(std::int64_t machine_id, const std::string& who);
  // Applies a strike against the machine of `instance_id` (core::apply_strike with this
  // manager's blocklist config) and records the outcome as a "blame" event.
  void record_strike(std::int64_t instance_id, const core::Strike& strike);
  FleetSummary summary();
  // The same from live rows the caller already read (store().instances(false)): a request that
  // needs them for more than the summary reads them once.
  FleetSummary summary(const std::vector<core::InstanceRecord>& live_rows);

  // --- agents --------------------------------------------------------------------------------
  // The deployment secret is single-use: the first registration binds the instance to a token,
  // after which only that token (presented again with the secret, for a retry whose reply was
  // lost) registers; anything else is refused with 409 and an "agent" event.
  ApiResult<RegisterReply> agent_register(const RegisterRequest& request);
  // The instance a bearer token belongs to, if any (constant-time comparison of hashes).
  std::optional<std::int64_t> authenticate_agent(const std::string& token);
  // Returns the commands for the agent (e.g. ["stop"] once the instance is being destroyed)
  // and whether it may take jobs (work: the instance is proving).
  // A destroyed instance is closed: heartbeats, events and logs for it answer 410 and change
  // nothing. While it is being destroyed heartbeats answer ["stop"] and its last events and
  // logs (why the agent exits) are still taken.
  ApiResult<HeartbeatReply> agent_heartbeat(std::int64_t instance_id, const Heartbeat& heartbeat);
  ApiResult<EventsReply> agent_events(std::int64_t instance_id,
                                      const std::vector<AgentEvent>& events);
  // The same, returning before the writes are confirmed: the HTTP API replies from the
  // database's answer instead of holding a thread for it.
  Committing<HeartbeatReply> agent_heartbeat_sent(std::int64_t instance_id,
                                                  const Heartbeat& heartbeat);
  Committing<EventsReply> agent_events_sent(std::int64_t instance_id,
                                            const std::vector<AgentEvent>& events);
  ApiResult<void> agent_logs(std::int64_t instance_id, const std::string& text);
  std::string logs(std::int64_t instance_id);
  // Bytes the instance moved through this manager (job inputs down; proofs and logs up): vast
  // bills them as bandwidth; the instance's next heartbeat does (transfer_meter.h). Takes no
  // lock but the meter's own.
  void agent_transferred(std::int64_t instance_id, double bytes_down, double bytes_up);

  // --- loops ---------------------------------------------------------------------------------
  // Compares the store with the market's instance list: adopts/destroys our-labelled
  // instances the store does not track, closes rows whose instance is gone, records status.
  void reconcile();
  // Deadlines, heartbeats, spend accrual, (re)sending destroys until confirmed, and the hourly
  // retention sweep of destroyed instances' logs and audit trails.
  void tick();
  // The shell's self-check of its own HTTP front: while it fails, no agent is judged by
  // silence; when it recovers, silence is counted afresh from `now`.
  void set_serving(bool serving);
  // The shell saw the manager itself stand still (its loops ran far later than due: overload,
  // a pause, swapping): agents could not reach it meanwhile, so silence is counted afresh.
  void listening_interrupted();
  // Whether silence verdicts may fire now, and why not (core::judge_hearing on the live fleet).
  core::Hearing hearing();

  // --- proof jobs (issue 12) ----------------------------------------------------------------
  // The job queue the gateway and the agent API use. The Manager returns a closing instance's
  // jobs to it and ticks it; call once before serving (the queue outlives the Manager's use).
  void attach_jobs(jobs::JobQueue& queue);
  jobs::JobQueue* jobs() { return jobs_.load(); }
  // Replicas: the term that owned the queue ended; the queue stays alive (handlers may hold it).
  void detach_jobs() { jobs_.store(nullptr); }
  // What the queue needs from the fleet (jobs::JobQueueHooks): workers() = job_workers(),
  // strikes against the instance's machine, events on its row.
  jobs::JobQueueHooks job_hooks();
  // Instances that take jobs now (core::job_worker), with their plan's proofs in flight. The
  // rows are read once per change of what decides it (JobWorkerRoster), not per call.
  std::vector<core::WorkerView> job_workers();
  // Instance rows were written outside the Manager's methods (another replica's term, tests,
  // tools on the same database): the next job_workers() and agent calls read them again
  // (Store::forget_written_copies).
  void instances_written();

  // --- the operator's day by hand (manager_ops.cpp) -------------------------------------------
  // Queues set_concurrency / replan for the instance's agent (sent with its next heartbeat
  // reply) and records an "operator" event. 400 for values out of range or nothing asked,
  // 404 unknown, 409 when the instance has no agent to tell (not registered, or closing).
  // Returns the commands queued.
  ApiResult<std::vector<std::string>> tune(std::int64_t id, const TuneRequest& request);
  // Commands queued for the agent and not yet sent.
  std::vector<std::string> pending_commands(std::int64_t id);
  // The agent's last report of its prover and GPUs; nullopt before the first heartbeat since
  // the manager started.
  std::optional<LiveStatus> live_status(std::int64_t id);
  // How to reach the instance by SSH, from the market's last complete list.
  std::optional<core::SshEndpoints> ssh_endpoints(std::int64_t id);
  // Webhook sink (manager/webhooks.h): accepted, rejected, destroyed, crashed instances; the
  // autopilot and the fleet watch send theirs through notify() too. Must not block.
  using Notify = std::function<void(const std::string& event, nlohmann::json data)>;
  void set_notifier(Notify notify);
  void notify(const std::string& event, nlohmann::json data);
  // The fleet watch's findings (manager/fleet_watch.h).
  void set_alerts(core::AlertsView alerts);
  core::AlertsView alerts();

  store::Store& store() { return store_; }
  // Empty when the last reconcile saw a complete market list.
  std::string last_reconcile_error() const { return market_calls_.last_reconcile_error(); }
  std::optional<double> last_complete_market_list_at() const {
    return market_calls_.last_complete_list_at();
  }
  const ManagerConfig& config() const { return config_; }

 private:
  void transition(core::InstanceRecord& rec, core::InstanceState to, const std::string& reason);
  // core::judge_hearing over `rows` (live ones count) with this manager's listening state.
  core::Hearing hearing_of(const std::vector<core::InstanceRecord>& rows, double now);
  // config_.still_leading, or true without one.
  bool still_leading() const;
  // Every close: core::close_instance (destroying with the typed cause), then the strike its
  // host earns, if any (an automatic bad-host entry with the evidence; our own second instance
  // on the machine excuses a slow benchmark). Returns false when rec was already closing.
  bool close(core::InstanceRecord& rec, const core::Closing& closing,
             const std::optional<core::Strike>& asked = std::nullopt);
  // An event on every row of the machine (the bad-host list has no trail of its own).
  void machine_event(std::int64_t machine_id, const std::string& message, nlohmann::json data);
  // The smallest plan any rental of ours on the machine was killed for memory at (0: none).
  int machine_oom_partitions(std::int64_t machine_id);
  // The memory model for a plan on the offer's machine, learned from stored observations.
  core::LearnedMemory learned_memory(const core::Offer& offer);
  // Other live instances of ours on rec's machine: their contention colours its measurements.
  int others_on_machine(const core::InstanceRecord& rec);
  // Records the production windows of a proving instance completed since those on its row
  // (core::new_production_windows), and counts them on the row.
  void record_production_windows(core::InstanceRecord& rec);
  // Removes the agent logs and audit trails of instances destroyed longer ago than the config's
  // retention, once an hour; without mu_.
  void sweep_old_records(double now);
  // Carries out one step of a reconcile plan (core/reconcile.h); market destroys are
  // collected in `to_destroy` and sent after the lock is released.
  void execute(const core::ReconcileAction& action, double now,
               std::vector<std::int64_t>& to_destroy);
  void event(std::int64_t id, const std::string& kind, const std::string& message,
             nlohmann::json data = nlohmann::json::object());
  void evaluate_benchmark(core::InstanceRecord& rec);
  // The instance's break-even rate (core/break_even.h: economics and profit_objective).
  double break_even(const core::InstanceRecord& rec) const;
  // On-demand or a bid for the offer (core::choose_rental_terms on its predicted rate and our
  // interruptible rentals so far; manager_offers.cpp).
  core::RentalTerms rental_terms(const core::Offer& offer, double now);
  // A change of a bid rental's bid (core::change_of_bid), decided in the tick under the lock with
  // its event recorded, sent after it is released (manager_offers.cpp).
  struct BidChangeToSend {
    std::int64_t id = 0;
    std::int64_t market_id = 0;
    double bid_price = 0;
  };
  std::optional<BidChangeToSend> decide_bid_change(const core::InstanceRecord& rec, double now);
  void send_bid_changes(const std::vector<BidChangeToSend>& changes);

  store::Store& store_;
  market::Market& market_;
  ManagerConfig config_;
  Clock clock_;
  core::SprtAcceptance acceptance_;  // sample and time caps from config_.acceptance
  std::recursive_mutex mu_;          // guards store writes that must be read-modify-write atomic
  AgentTokenIndex agent_tokens_;     // which instance a bearer token belongs to
  // proofs_production at the last window check: only saves re-reading the samples when no
  // proof came (what was recorded is on the row, so a restart merely looks once more).
  std::map<std::int64_t, int> production_checked_;
  // The retention sweep of destroyed instances' logs and audit trails (sweep_old_records).
  static constexpr double kRecordSweepEveryS = 3600;
  std::atomic<double> next_record_sweep_at_{0};
  Listening listening_;  // whether the manager itself can hear its agents (its own lock)
  // Creates in flight, destroy pacing, the last reconcile's list error (its own lock).
  MarketCalls market_calls_;
  std::atomic<jobs::JobQueue*> jobs_{nullptr};  // attach_jobs; none: no gateway
  TransferMeter transfers_;                     // bandwidth not billed yet
  // Live reports, SSH endpoints and queued tune commands (manager/hands_on.h): its own lock.
  HandsOn hands_on_;
  // The tune commands not yet sent, written to / read from the store (hands_on.h).
  void store_pending_commands();
  void load_pending_commands();
  // The fleet watch's alerts and the webhook sink: their own lock, not mu_, so that a read of
  // them never waits behind a reconcile or a tick.
  std::mutex signals_mu_;
  core::AlertsView alerts_;
  Notify notify_;
  // job_workers()'s rows; told of every change of a state, verdict or plan, and of heartbeats.
  JobWorkerRoster job_worker_roster_;
};

}  // namespace pf::manager
