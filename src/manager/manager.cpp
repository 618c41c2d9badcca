#include "manager/manager.h"

#include <algorithm>
#include <set>

#include "core/bench_run.h"
#include "core/benchmark_step.h"
#include "core/billing.h"
#include "core/break_even.h"
#include "core/close.h"
#include "core/job_worker.h"
#include "core/market_stop.h"
#include "core/oom_memory.h"
#include "core/production.h"
#include "core/proof_flow.h"
#include "core/reconcile.h"
#include "core/text.h"
#include "manager/instance_webhooks.h"
#include "manager/memory_observations.h"
#include "store/store.h"
#include "util/bounded_json.h"

namespace pf::manager {
namespace {

// The proofs an agent's plan keeps in flight (defined with the proof jobs below).
int plan_slots(const std::string& plan_json);
core::KindSet plan_kinds(const std::string& plan_json);

using core::InstanceRecord;
using core::InstanceState;
using S = core::InstanceState;
using nlohmann::json;

// What an agent of a destroyed instance is told: nothing it sends is taken any more.
ApiError closed_instance(const InstanceRecord& rec) {
  return ApiError{410, "instance " + std::to_string(rec.id) + " is destroyed (" +
                           rec.destroy_reason + "): nothing more is accepted for it"};
}

// The parameter files as the registration reply lists them for the agent to fetch.
json params_json(const std::vector<ParamFile>& params) {
  json out = json::array();
  for (const auto& p : params) {
    json e = {{"name", p.name}, {"url", p.url}, {"bytes", p.bytes}, {"digest", p.digest}};
    if (!p.cid.empty()) e["cid"] = p.cid;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

Manager::Manager(store::Store& store, market::Market& market, ManagerConfig config, Clock clock)
    : store_(store),
      market_(market),
      config_(std::move(config)),
      clock_(std::move(clock)),
      // The sequential test the simulator runs (core::SprtAcceptance), with the operator's
      // [acceptance] caps; its error rates and margins keep core::SprtConfig's defaults, which
      // the simulator uses too.
      acceptance_(core::with_caps(config_.sprt, config_.acceptance)),
      agent_tokens_(store_),
      listening_(clock_()),
      job_worker_roster_([this] { return store_.instances(false); },
                         [](const InstanceRecord& rec) { return plan_slots(rec.plan_json); },
                         config_.heartbeat_s,
                         [](const InstanceRecord& rec) { return plan_kinds(rec.plan_json); }) {
  // The operator's tune commands acknowledged before a restart are still to be sent.
  load_pending_commands();
}

void Manager::store_pending_commands() {
  store_.put_setting(kPendingCommandsSetting, hands_on_.pending_json().dump());
}

void Manager::load_pending_commands() {
  // None stored, or a setting that does not parse: nothing is pending (restore() also skips
  // entries it cannot read).
  const auto text = store_.setting(kPendingCommandsSetting);
  hands_on_.restore(text ? util::parse_json(*text).value_or(json::object()) : json::object());
}

void Manager::set_serving(bool serving) {
  listening_.set_serving(serving, clock_());
}

void Manager::listening_interrupted() {
  listening_.interrupted(clock_());
}

bool Manager::still_leading() const {
  return !config_.still_leading || config_.still_leading();
}

core::Hearing Manager::hearing() {
  return hearing_of(store_.instances(false), clock_());
}

core::Hearing Manager::hearing_of(const std::vector<core::InstanceRecord>& rows, double now) {
  return core::judge_hearing(rows, now, listening_.state(), config_.lifecycle.heartbeat_timeout_s,
                             config_.hearing);
}

double Manager::break_even(const InstanceRecord& rec) const {
  // What the rental pays: an interruptible one's bid, not the listed on-demand price.
  return core::instance_break_even_rate(
      core::rental_usd_per_hour(rec),
      core::transfer_per_proof_usd(rec.offer, config_.rank.economics), config_.rank.economics,
      config_.profit_objective);
}

void Manager::event(std::int64_t id, const std::string& kind, const std::string& message,
                    json data) {
  core::InstanceEvent e;
  e.instance_id = id;
  e.at = clock_();
  e.kind = kind;
  e.message = message;
  e.data_json = data.dump();
  store_.append_event(e);
}

void Manager::transition(InstanceRecord& rec, S to, const std::string& reason) {
  auto msg = core::apply_transition(rec, to, clock_(), reason, break_even(rec), config_.lifecycle);
  if (!msg) return;
  store_.transaction([&] {
    store_.update_instance(rec);
    event(rec.id, "state", *msg, {{"state", core::to_string(to)}, {"reason", reason}});
  });
  if (auto notice = transition_notice(rec, to, reason)) {
    notify(notice->event, std::move(notice->data));
  }
  if (to == S::Destroyed && hands_on_.forget(rec.id)) store_pending_commands();
  job_worker_roster_.changed();
}

int Manager::others_on_machine(const InstanceRecord& rec) {
  int others = 0;
  for (const auto& other : store_.instances(false)) {
    if (other.id != rec.id && other.offer.machine_id == rec.offer.machine_id) ++others;
  }
  return others;
}

bool Manager::close(InstanceRecord& rec, const core::Closing& closing,
                    const std::optional<core::Strike>& asked) {
  const int others = others_on_machine(rec);
  auto step = core::close_instance(rec, closing, clock_(), others, asked, config_.lifecycle);
  if (!step) return false;
  store_.transaction([&] {
    store_.update_instance(rec);
    event(rec.id, "state", step->message,
          {{"state", core::to_string(rec.state)},
           {"reason", closing.reason},
           {"cause", core::to_string(closing.cause)}});
  });
  job_worker_roster_.changed();
  if (step->strike) record_strike(rec.id, *step->strike);
  if (auto notice = close_notice(rec, closing)) notify(notice->event, std::move(notice->data));
  // Its jobs go back to the queue now rather than when their leases run out.
  if (auto* queue = jobs_.load())
    queue->return_jobs_of(rec.id, "the instance closed: " + closing.reason);
  return true;
}

void Manager::record_strike(std::int64_t instance_id, const core::Strike& strike) {
  std::lock_guard lock(mu_);
  store_.transaction([&] {
    auto outcome = core::apply_strike(store_.bad_hosts(), strike, config_.blocklist);
    if (outcome.entry) {
      store_.put_bad_host(*outcome.entry);
      event(instance_id, "blame", outcome.reason, {{"machine_id", strike.machine_id}});
    } else if (!outcome.reason.empty()) {
      event(instance_id, "blame", outcome.reason);
    }
  });
}

void Manager::machine_event(std::int64_t machine_id, const std::string& message, json data) {
  for (const auto& rec : store_.instances_on_machine(machine_id)) {
    event(rec.id, "bad_host", message, data);
  }
}

void Manager::put_bad_host(const core::BadHost& entry, const std::string& who) {
  std::lock_guard lock(mu_);
  store_.transaction([&] {
    store_.put_bad_host(entry);
    machine_event(entry.machine_id,
                  "machine " + std::to_string(entry.machine_id) + " put on the bad-host list by " +
                      who + ": " + entry.reason,
                  {{"machine_id", entry.machine_id}, {"source", entry.source}});
  });
}

int Manager::remove_bad_host(std::int64_t machine_id, const std::string& who) {
  std::lock_guard lock(mu_);
  int removed = 0;
  store_.transaction([&] {
    for (const char* source : {"operator", "auto"}) {
      if (store_.remove_bad_host(machine_id, source)) ++removed;
    }
    if (removed > 0) {
      machine_event(
          machine_id,
          "machine " + std::to_string(machine_id) + " taken off the bad-host list by " + who,
          {{"machine_id", machine_id}, {"removed", removed}});
    }
  });
  return removed;
}

void Manager::record_production_windows(InstanceRecord& rec) {
  auto& checked = production_checked_[rec.id];
  if (rec.proofs_production == checked) return;  // nothing new since the last look
  checked = rec.proofs_production;
  const auto runs = core::new_production_windows(
      rec, store_.proof_samples(rec.id), config_.production_window_s, acceptance_.interval_z());
  if (runs.empty()) return;
  const core::RunContext context{others_on_machine(rec) > 0, rec.gpu_throttled};
  store_.transaction([&] {
    for (const auto& run : runs) {
      store_.insert_bench_run(
          core::make_bench_run(rec, "production", clock_(), run.estimate, context));
    }
    rec.production_windows += static_cast<int>(runs.size());
    store_.update_instance(rec);
  });
}

// --- operator ------------------------------------------------------------------------------

ApiResult<InstanceRecord> Manager::request_destroy(std::int64_t id, const std::string& reason,
                                                   core::CloseCause cause,
                                                   const std::optional<core::Strike>& strike) {
  {
    std::lock_guard lock(mu_);
    auto rec = store_.instance(id);
    if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
    if (rec->state == S::Destroyed || rec->state == S::Destroying) return *rec;
    close(*rec, {cause, reason}, strike);
  }
  tick();  // sends the destroy now rather than at the next cycle
  auto rec = store_.instance(id);
  if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
  return *rec;
}

FleetSummary Manager::summary() {
  return summary(store_.instances(false));
}

FleetSummary Manager::summary(const std::vector<core::InstanceRecord>& live_rows) {
  FleetSummary s;
  // All-time figures from the database's totals, the rest from the live rows: the summary's
  // cost does not grow with the destroyed rows a fleet keeps (issue 14).
  for (const auto& [state, totals] : store_.instance_totals()) {
    s.by_state[core::to_string(state)] = static_cast<int>(totals.instances);
    s.spend_usd += totals.spend_usd;
    s.proofs += static_cast<int>(totals.proofs_production);
  }
  for (const auto& r : live_rows) {
    if (r.state == S::Destroyed) continue;
    s.dollars_per_hour += core::fleet_usd_per_hour(r);
    if (r.state == S::Proving && r.verdict) s.proofs_per_hour += r.verdict->rate;
    ++(r.bid_price ? s.bid_instances : s.on_demand_instances);
    if (r.market_status == "stopped") ++s.market_stopped;
    s.market_stops += r.market_stops;
    if (core::storage_billed(r.market_status)) {
      s.storage_usd_per_hour += core::storage_usd_per_hour(r.offer, r.disk_gb);
    }
  }
  if (s.proofs_per_hour > 0) s.cost_per_proof = s.dollars_per_hour / s.proofs_per_hour;
  s.profit_per_hour =
      s.proofs_per_hour * config_.rank.economics.revenue_per_proof_usd - s.dollars_per_hour;
  s.hearing = hearing_of(live_rows, clock_());
  return s;
}

// --- agents --------------------------------------------------------------------------------

ApiResult<RegisterReply> Manager::agent_register(const RegisterRequest& req) {
  if (req.deployment.empty() || req.secret.empty()) {
    return tl::unexpected(ApiError{400, "deployment and secret are required"});
  }
  if (!req.token.empty() && !is_agent_token(req.token)) {
    return tl::unexpected(ApiError{400, "token must be " + std::to_string(kAgentTokenHexChars) +
                                            " lowercase hex digits from a random source"});
  }
  std::lock_guard lock(mu_);
  auto rec = store_.instance_by_deployment(req.deployment);
  // One message for both cases so a caller cannot probe which deployments exist.
  if (!rec || !tokens_equal(rec->secret_hash, hash_token(req.secret))) {
    return tl::unexpected(ApiError{401, "unknown deployment or wrong secret"});
  }
  if (rec->state == S::Destroying || rec->state == S::Destroyed) {
    return tl::unexpected(ApiError{410, "instance " + std::to_string(rec->id) +
                                            " is being destroyed: " + rec->destroy_reason});
  }
  // The secret travels in the create's env, which the market shows in its instance list: once
  // it has bound a token it is spent. Only the holder of that token may register again (the
  // same agent retrying after a lost reply, or restarted with its state dir).
  const bool again = !rec->token_hash.empty();
  std::string token = req.token;
  if (again && (token.empty() || !tokens_equal(rec->token_hash, hash_token(token)))) {
    event(rec->id, "agent", "registration refused: secret already used",
          {{"agent_version", req.agent_version}, {"with_token", !token.empty()}});
    return tl::unexpected(ApiError{
        409, "the deployment secret of instance " + std::to_string(rec->id) +
                 " was already used; only the agent holding its token may register again"});
  }
  if (token.empty()) token = random_token();
  rec->token_hash = hash_token(token);
  rec->last_heartbeat_at = clock_();
  store_.transaction([&] {
    store_.update_instance(*rec);
    job_worker_roster_.heard(rec->id, rec->last_heartbeat_at);
    event(rec->id, "agent",
          std::string(again ? "agent registered again with its token" : "agent registered") +
              " (version " + (req.agent_version.empty() ? "?" : req.agent_version) + ")",
          {{"hardware", req.hardware}});
  });
  if (rec->state < S::Registered) transition(*rec, S::Registered, "agent registered");

  RegisterReply out;
  out.instance_id = rec->id;
  out.token = token;
  out.body = {
      {"instance_id", rec->id},
      {"token", token},
      {"heartbeat_s", config_.heartbeat_s},
      {"params", params_json(config_.params)},
      {"benchmark_input",
       config_.benchmark_input ? to_json(*config_.benchmark_input) : json(nullptr)},
      {"prover", config_.prover_settings},
      {"benchmark",
       {{"min_samples", config_.acceptance.min_samples},
        {"max_samples", config_.acceptance.max_samples},
        {"max_seconds", config_.acceptance.max_seconds},
        {"break_even_rate", break_even(*rec)}}},
      {"offer",
       {{"id", rec->offer.id},
        {"gpu_name", rec->offer.gpu_name},
        {"num_gpus", rec->offer.num_gpus},
        {"usable_ram_gib", rec->offer.usable_ram_gib},
        {"usable_cores", rec->offer.usable_cores}}},
      // What earlier rentals of this machine taught: the agent's first plan starts below the
      // smallest plan one of them was killed for memory at (0: none), as the simulator plans.
      // and the memory model learned from the peaks seen on it (or on its GPU model).
      {"machine",
       {{"oom_partitions", machine_oom_partitions(rec->offer.machine_id)},
        {"memory_model", memory_model_json(learned_memory(rec->offer))}}},
  };
  return out;
}

core::LearnedMemory Manager::learned_memory(const core::Offer& offer) {
  const auto seen = store_.memory_observations(offer.machine_id, offer.gpu_name);
  return core::learned_memory_model(config_.rank.predictor.memory, seen, offer.machine_id,
                                    offer.gpu_name);
}

int Manager::machine_oom_partitions(std::int64_t machine_id) {
  // The machine's own rentals (indexed by machine_id), not the whole history.
  const auto known = core::oom_partitions_by_machine(store_.instances_on_machine(machine_id));
  const auto it = known.find(machine_id);
  return it == known.end() ? 0 : it->second;
}

std::optional<std::int64_t> Manager::authenticate_agent(const std::string& token) {
  return agent_tokens_.instance_of(token);
}

void Manager::instances_written() {
  store_.forget_written_copies();
  job_worker_roster_.changed();
  // Another replica's term may have queued or sent tune commands meanwhile.
  load_pending_commands();
}

ApiResult<HeartbeatReply> Manager::agent_heartbeat(std::int64_t id, const Heartbeat& hb) {
  return agent_heartbeat_sent(id, hb).get();
}

ApiResult<EventsReply> Manager::agent_events(std::int64_t id, const std::vector<AgentEvent>& evs) {
  return agent_events_sent(id, evs).get();
}

Committing<HeartbeatReply> Manager::agent_heartbeat_sent(std::int64_t id, const Heartbeat& hb) {
  std::lock_guard lock(mu_);
  ApiResult<HeartbeatReply> reply = HeartbeatReply{};
  Transfer billed;
  // One transaction for the writes: one commit (each costs file-locking system calls, and every
  // agent heartbeats). The row is the one this leader last wrote (Store::instance_as_written):
  // on PostgreSQL the heartbeat is then one round trip, its writes and the commit together, and
  // the lock is not held while it travels (Store::transaction_sent); the reply waits for it.
  store::Confirm committed = store_.transaction_sent([&] {
    auto rec = store_.instance_as_written(id);
    if (!rec) {
      reply = tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
      return;
    }
    if (rec->state == S::Destroyed) {
      reply = tl::unexpected(closed_instance(*rec));
      return;
    }
    if (rec->state == S::Destroying) {
      reply = HeartbeatReply{{"stop"}, false};
      return;
    }
    rec->last_heartbeat_at = clock_();
    if (hb.params_total > 0) rec->params_total_bytes = hb.params_total;
    core::accrue_bandwidth_spend(*rec, hb.params_done);
    billed = transfers_.take(id);  // job inputs, proofs and logs since the last heartbeat
    core::accrue_transfer_spend(*rec, billed.bytes_down, billed.bytes_up);
    rec->params_rate_bps = hb.params_rate_bps;
    rec->peak_memory_gib = std::max(rec->peak_memory_gib, hb.peak_memory_gib);
    rec->gpu_util = hb.gpu_util;
    if (hb.gpu_throttled) rec->gpu_throttled = true;
    store_.update_agent_progress(*rec);
    hands_on_.heard(id, live_status_from_heartbeat(hb.raw, rec->last_heartbeat_at));
    job_worker_roster_.heard(id, rec->last_heartbeat_at);
    if (rec->state == S::Benchmarking) {
      // The test's time rules (the cap, a host gone silent) must fire without a new proof.
      evaluate_benchmark(*rec);
      if (rec->state == S::Destroying) {
        reply = HeartbeatReply{{"stop"}, false};
        return;
      }
    }
    // The agent drives the early phases; benchmarking and proving are the manager's verdicts.
    if (hb.phase == "fetching_params" && rec->state < S::FetchingParams) {
      transition(*rec, S::FetchingParams, "agent fetching parameters");
    } else if (hb.phase == "warming_up" && rec->state < S::WarmingUp) {
      transition(*rec, S::WarmingUp, "agent warming up the prover");
    }
    reply->work = rec->state == S::Proving;
    // The operator's tuning (Manager::tune) rides on this reply, once.
    if (auto queued = hands_on_.take_commands(id); !queued.empty()) {
      reply->commands = std::move(queued);
      // Written with the heartbeat's other writes: should they not commit, the store still
      // holds the commands and the next term or restart sends them.
      store_pending_commands();
      std::string sent;
      for (const auto& c : reply->commands) sent += (sent.empty() ? "" : ", ") + c;
      event(id, "operator", "sent to the agent: " + sent);
    }
  });
  if (billed.bytes_down > 0 || billed.bytes_up > 0) {
    // Not written after all: the next heartbeat bills them.
    committed.then([this, id, billed](const std::string& error) {
      if (!error.empty()) transfers_.give_back(id, billed);
    });
  }
  return {std::move(reply), std::move(committed)};
}

void Manager::agent_transferred(std::int64_t id, double bytes_down, double bytes_up) {
  transfers_.add(id, bytes_down, bytes_up);
}

Committing<EventsReply> Manager::agent_events_sent(std::int64_t id,
                                                   const std::vector<AgentEvent>& evs) {
  std::lock_guard lock(mu_);
  EventsReply reply;
  std::vector<AgentEvent> sorted = evs;
  std::sort(sorted.begin(), sorted.end(),
            [](const AgentEvent& a, const AgentEvent& b) { return a.seq < b.seq; });
  const double now = clock_();
  bool found = false;
  std::optional<ApiError> closed;
  // One transaction per batch, the read included: one commit instead of one per event, and a
  // batch that fails leaves nothing applied, so the agent's retry of it is counted whole. Its
  // commit travels with the lock released, as a heartbeat's does; the reply waits for it.
  store::Confirm committed = store_.transaction_sent([&] {
    auto row = store_.instance_as_written(id);
    if (!row) return;
    found = true;
    if (row->state == S::Destroyed) {
      closed = closed_instance(*row);  // nothing of it may change any more
      return;
    }
    InstanceRecord rec = std::move(*row);
    const std::string plan_before = rec.plan_json;
    // Set when the row changed beyond the agent progress columns (a state).
    bool row_changed = false;
    for (const auto& ev : sorted) {
      if (!store_.mark_agent_seq(id, ev.seq)) {
        reply.duplicates++;
        continue;
      }
      reply.accepted++;
      const double at = ev.at > 0 ? ev.at : now;
      if (ev.type == "proof_done") {
        core::ProofInput in;
        in.marked_warmup = ev.phase == "warmup";
        in.at = at;
        in.now = now;
        in.break_even_rate = break_even(rec);
        const S before = rec.state;
        const core::ProofStep step = core::record_proof(rec, in, config_.lifecycle);
        core::ProofSample s;
        s.instance_id = id;
        s.seq = ev.seq;
        s.at = at;
        s.seconds = ev.seconds;
        s.gpu_ms = ev.gpu_ms;
        s.queue_ms = ev.queue_ms;
        s.phase = step.phase;
        store_.insert_proof_sample(s);
        if (step.entered_benchmark) {
          row_changed = true;
          event(id, "state", *step.entered_benchmark, {{"state", "benchmarking"}});
        }
        // Sequential: the test decides after every measured proof, also within one batch, so
        // a clear case stops at the proof that settled it.
        if (step.evaluate) evaluate_benchmark(rec);
        if (rec.state != before) row_changed = true;
      } else if (ev.type == "prover_started") {
        // The agent's plan (partitions, memory budget) is kept so benchmark runs record it.
        if (ev.data.contains("plan")) rec.plan_json = ev.data["plan"].dump();
        event(id, "agent", "prover started" + (ev.message.empty() ? "" : ": " + ev.message),
              ev.data);
        auto msg = core::apply_transition(rec, S::WarmingUp, now, "prover started", break_even(rec),
                                          config_.lifecycle);
        if (msg) {
          row_changed = true;
          event(id, "state", *msg, {{"state", "warming_up"}});
        }
      } else if (ev.type == "oom") {
        rec.ooms++;
        // The plan it was killed at: the machine's next rental starts below it.
        const auto ran = ev.data.find("partitions");
        if (ran != ev.data.end() && ran->is_number_integer() &&
            core::record_oom(rec, ran->get<std::int64_t>())) {
          row_changed = true;
        }
        if (auto seen = memory_observation(rec, ev.type, ev.data, at)) {
          store_.insert_memory_observation(*seen);
        }
        event(id, "agent",
              "prover killed for memory (OOM)" + (ev.message.empty() ? "" : ": " + ev.message),
              ev.data);
      } else if (ev.type == "memory_check") {
        // The peak seen at a plan: the machine's (and its GPU model's) next plan learns from it.
        if (auto seen = memory_observation(rec, ev.type, ev.data, at)) {
          store_.insert_memory_observation(*seen);
        }
        event(id, "agent", "memory_check" + (ev.message.empty() ? "" : ": " + ev.message), ev.data);
      } else if (ev.type == "prover_crashed") {
        rec.prover_crashes++;
        event(id, "agent", "prover crashed" + (ev.message.empty() ? "" : ": " + ev.message),
              ev.data);
        auto notice = prover_crashed_notice(rec, ev.message);
        notify(notice.event, std::move(notice.data));
      } else if (ev.type == "params_done") {
        rec.params_done_bytes = std::max(rec.params_done_bytes, rec.params_total_bytes);
        event(id, "agent", "parameters fetched and verified", ev.data);
      } else {
        // error, exiting and anything newer than this manager: kept in the audit trail.
        event(id, "agent", ev.type + (ev.message.empty() ? "" : ": " + ev.message), ev.data);
      }
    }
    if (row_changed) {
      store_.update_instance(rec);
    } else if (reply.accepted > 0) {
      store_.update_agent_progress(rec);
    }
    if (row_changed || rec.plan_json != plan_before) job_worker_roster_.changed();
  });
  if (!found) return {tl::unexpected(ApiError{404, "no instance " + std::to_string(id)}), {}};
  if (closed) return {tl::unexpected(*closed), {}};
  return {std::move(reply), std::move(committed)};
}

void Manager::evaluate_benchmark(InstanceRecord& rec) {
  auto step = core::evaluate_benchmark(rec, store_.proof_samples(rec.id), clock_(), break_even(rec),
                                       acceptance_);
  if (!step) return;
  core::Verdict& v = step->verdict;
  if (!step->decided) {
    // Heartbeats re-evaluate for the time rules; a verdict that says the same is not rewritten.
    const bool same = rec.verdict && rec.verdict->decision == v.decision &&
                      rec.verdict->samples == v.samples && rec.verdict->reason == v.reason;
    rec.verdict = std::move(v);
    if (!same) {
      store_.update_instance(rec);
      job_worker_roster_.changed();
    }
    return;
  }
  rec.verdict = v;
  store_.insert_bench_run(core::make_bench_run(rec, "benchmark", clock_(), core::estimate_of(v),
                                               {others_on_machine(rec) > 0, rec.gpu_throttled}));
  if (step->accept) {
    transition(rec, S::Proving, v.reason);
  } else if (step->reject) {
    close(rec, *step->reject);
  }
}

ApiResult<void> Manager::agent_logs(std::int64_t id, const std::string& text) {
  std::lock_guard lock(mu_);
  const auto rec = store_.instance(id);
  if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
  if (rec->state == S::Destroyed) return tl::unexpected(closed_instance(*rec));
  // Kept in the store, bounded per instance, so a restart loses nothing the agent said.
  store_.append_agent_log(id, clock_(), text, config_.log_ring_bytes);
  return {};
}

std::string Manager::logs(std::int64_t id) {
  return store_.agent_log(id);
}

// --- loops ---------------------------------------------------------------------------------

void Manager::reconcile() {
  auto listed = market_.list_instances(std::nullopt);
  if (!listed) {
    market_calls_.reconcile_listed(listed.error().message, clock_());
    return;  // an incomplete list must not close anything
  }
  const double now = clock_();
  std::vector<std::int64_t> to_destroy;  // market ids of instances no live row owns
  {
    std::lock_guard lock(mu_);
    // The list may have taken long; a term that ended meanwhile leaves it to the new leader.
    if (!still_leading()) return;
    market_calls_.reconcile_listed("", now);
    // The plan's rows: the live ones and those of listed deployments (closed ones included).
    std::vector<InstanceRecord> rows = store_.instances(false);
    std::set<std::int64_t> have;
    for (const auto& r : rows) have.insert(r.id);
    std::vector<core::ListedInstance> market_list;
    for (const auto& inst : *listed) {
      market_list.push_back({inst.id, inst.machine_id, inst.label, inst.actual_status,
                             inst.status_msg, inst.gpu_name, inst.num_gpus, inst.dph_total,
                             inst.intended_status, inst.cur_state, inst.next_state, inst.end_date,
                             inst.is_bid});
      const auto dep = core::deployment_of_label(inst.label);
      if (!dep) continue;
      auto row = store_.instance_by_deployment(*dep);
      if (row && row->state != S::Destroyed) {
        hands_on_.listed(row->id,
                         {inst.ssh_host, inst.ssh_port, inst.public_ip, inst.direct_ssh_port});
      }
      if (row && have.insert(row->id).second) rows.push_back(std::move(*row));
    }
    const auto plan =
        core::plan_reconcile(rows, market_list, now, market_calls_.creates_in_flight(),
                             {config_.vanish_grace_s, config_.lifecycle.renting_max_s});
    for (const auto& a : plan) execute(a, now, to_destroy);
  }
  for (auto mid : to_destroy)
    (void)market_.destroy_instance(mid);  // retried next cycle if it fails
}

void Manager::execute(const core::ReconcileAction& a, double now,
                      std::vector<std::int64_t>& to_destroy) {
  using K = core::ReconcileAction::Kind;
  if (a.kind == K::RecordOrphan) {
    // Ours by label, unknown to the store (lost database, foreign manager): record it, then
    // destroy it.
    const auto& inst = *a.listed;
    InstanceRecord orphan;
    orphan.deployment_id = a.deployment_id;
    orphan.market_id = inst.id;
    orphan.offer.id = 0;
    orphan.offer.machine_id = inst.machine_id;
    orphan.offer.gpu_name = inst.gpu_name;
    orphan.offer.num_gpus = inst.num_gpus;
    orphan.offer.dph_total = inst.dph_total;
    orphan.created_at = now;
    orphan.state = S::Renting;
    orphan.state_since = now;
    orphan.billed_until = now;
    orphan.market_status = inst.actual_status;
    orphan.market_status_since = now;
    orphan.origin = "orphan";
    store_.transaction([&] {
      orphan.id = store_.insert_instance(orphan);
      event(orphan.id, "market", a.reason);
    });
    close(orphan, *a.close);
    return;
  }
  auto row = store_.instance(a.instance_id);
  if (!row) return;
  InstanceRecord rec = std::move(*row);
  switch (a.kind) {
    case K::DestroyListed:
      to_destroy.push_back(a.listed->id);
      event(rec.id, "market", a.reason);
      return;
    case K::Adopt:
      rec.market_id = a.listed->id;
      store_.transaction([&] {
        store_.update_instance(rec);
        event(rec.id, "market", a.reason);
      });
      return;
    case K::RecordStatus:
      // Bill the old status up to now before switching.
      core::accrue_rental_spend(rec, now);
      core::record_market_status(rec, a.listed->actual_status, now);
      store_.transaction([&] {
        store_.update_instance(rec);
        event(rec.id, "market", a.reason,
              {{"status", a.listed->actual_status}, {"status_msg", a.listed->status_msg}});
      });
      job_worker_roster_.changed();  // a stopped instance takes no jobs (core::job_worker)
      // Stopped, its agent proves nothing: its jobs go back to the queue now, not when the
      // lifecycle gives up on it.
      if (rec.market_status == "stopped") {
        if (auto* queue = jobs_.load()) queue->return_jobs_of(rec.id, a.reason);
      }
      return;
    case K::ConfirmCreate:
      transition(rec, S::Booting, a.reason);
      return;
    case K::Close:
      core::accrue_rental_spend(rec, now);
      // Gone from the market: closed for good. Still listed (the market stopped it for good, as
      // at its contract's end): left destroying, so the tick destroys it at the market and
      // confirms — a stopped instance bills storage until it is destroyed.
      if (close(rec, *a.close) && !a.listed) transition(rec, S::Destroyed, a.reason);
      return;
    case K::RecordOrphan:
      return;  // handled above
  }
}

void Manager::tick() {
  const double now = clock_();
  struct Pending {
    std::int64_t id;
    std::optional<std::int64_t> market_id;
    std::string label;
  };
  std::vector<Pending> destroys;
  std::vector<BidChangeToSend> bid_changes;
  {
    std::lock_guard lock(mu_);
    if (!still_leading()) return;
    const auto live = store_.instances(false);
    const core::Hearing hearing = hearing_of(live, now);
    if (listening_.note_cause(hearing.cause)) {
      for (const auto& rec : live) {
        if (core::agent_expected(rec)) {
          event(rec.id, "hearing",
                hearing.reason.empty() ? "the manager hears its agents again; silence is judged"
                                       : "silence not judged: " + hearing.reason);
        }
      }
    }
    for (auto rec : live) {
      double before = rec.spend_usd;
      core::accrue_rental_spend(rec, now);
      if (rec.spend_usd != before) store_.update_instance(rec);
      if (rec.state == S::Proving) record_production_windows(rec);
      if (auto closing = core::destroy_reason(rec, now, config_.lifecycle, hearing)) {
        close(rec, *closing);
      }
      if (auto change = decide_bid_change(rec, now)) bid_changes.push_back(*change);
      if (rec.state != S::Destroying) continue;
      if (!market_calls_.destroy_due(rec.id, now, config_.lifecycle.destroy_retry_s)) continue;
      destroys.push_back({rec.id, rec.market_id, core::market_label(rec.deployment_id)});
    }
  }
  send_bid_changes(bid_changes);
  for (const auto& d : destroys) {
    std::optional<std::int64_t> mid = d.market_id;
    std::string outcome;
    bool confirmed = false;
    if (!mid) {
      // Never confirmed by the market: make sure nothing carries our label before closing.
      auto found = market_.list_instances(d.label);
      if (!found) {
        outcome = "could not check the market for label: " + found.error().message;
      } else if (found->empty()) {
        confirmed = true;
        outcome = "nothing was rented";
      } else {
        mid = found->front().id;
      }
    }
    if (mid) {
      auto r = market_.destroy_instance(*mid);
      if (r) {
        confirmed = true;
        outcome = "market confirmed destroy of " + std::to_string(*mid);
      } else {
        outcome =
            "destroy of " + std::to_string(*mid) + " failed, will retry: " + r.error().message;
      }
    }
    std::lock_guard lock(mu_);
    if (!still_leading()) break;  // the market's answer is the new leader's to record
    auto rec = store_.instance(d.id);
    if (!rec || rec->state != S::Destroying) continue;
    if (mid && !rec->market_id) rec->market_id = mid;
    if (confirmed) {
      core::accrue_rental_spend(*rec, clock_());
      transition(*rec, S::Destroyed, outcome);
      market_calls_.destroyed(d.id);
      production_checked_.erase(d.id);
    } else {
      event(d.id, "market", outcome);
    }
  }
  sweep_old_records(now);
  // Lost leases back to the queue, retention (outside mu_: the queue calls back into us).
  if (auto* queue = jobs_.load()) queue->tick();
}

void Manager::sweep_old_records(double now) {
  // Due once an hour (and at once after the clock went back); one caller sweeps (tick also
  // runs on an operator's destroy).
  double due = next_record_sweep_at_.load();
  if (now < due && now >= due - kRecordSweepEveryS) return;
  if (!next_record_sweep_at_.compare_exchange_strong(due, now + kRecordSweepEveryS)) return;
  // Outside mu_ (the store has its own lock): a large first sweep holds up no agent.
  if (config_.log_retention_s > 0) store_.drop_agent_logs(now - config_.log_retention_s);
  if (config_.event_retention_s > 0) store_.drop_events(now - config_.event_retention_s);
}

// --- proof jobs ----------------------------------------------------------------------------------

namespace {
// The proofs the agent's prover plan keeps in flight (agent/plan_json.cpp "proofs_in_flight");
// 1 when the plan is missing or says nothing usable.
int plan_slots(const std::string& plan_json) {
  constexpr int kMaxSlots = 64;  // the heartbeat names at most 64 held jobs
  if (plan_json.empty()) return 1;
  const auto plan = util::parse_json(plan_json);
  if (!plan || !plan->is_object()) return 1;
  const auto it = plan->find("proofs_in_flight");
  if (it == plan->end() || !it->is_number_integer()) return 1;
  return static_cast<int>(std::clamp<std::int64_t>(it->get<std::int64_t>(), 1, kMaxSlots));
}

// The kinds the agent's prover has the parameters for (agent/prover_supervisor.cpp
// "proof_kinds", core/proof_params.h). A plan without the key is from an agent that predates it,
// when every manifest was PoRep's alone: PoRep C2.
core::KindSet plan_kinds(const std::string& plan_json) {
  constexpr core::KindSet kBefore = core::kind_bit(core::JobKind::PorepC2);
  if (plan_json.empty()) return kBefore;
  const auto plan = util::parse_json(plan_json);
  if (!plan || !plan->is_object()) return kBefore;
  const auto it = plan->find("proof_kinds");
  if (it == plan->end() || !it->is_array()) return kBefore;
  core::KindSet kinds = 0;
  for (const auto& name : *it) {
    if (!name.is_string()) continue;
    if (const auto kind = core::parse_job_kind(name.get<std::string>())) {
      kinds |= core::kind_bit(*kind);
    }
  }
  return kinds;
}

}  // namespace

void Manager::attach_jobs(jobs::JobQueue& queue) {
  jobs_.store(&queue);
}

std::vector<core::WorkerView> Manager::job_workers() {
  // Agents heartbeat every heartbeat_s; three missed ones and it takes no new work (its held
  // jobs stay leased until the lease or the silence rule ends them).
  return job_worker_roster_.workers(clock_(), 3 * config_.heartbeat_s);
}

jobs::JobQueueHooks Manager::job_hooks() {
  jobs::JobQueueHooks hooks;
  hooks.workers = [this] { return job_workers(); };
  hooks.strike = [this](std::int64_t instance_id, const core::Strike& asked) {
    std::lock_guard lock(mu_);
    const auto rec = store_.instance(instance_id);
    if (!rec) return;
    core::Strike strike = asked;
    strike.instance_id = instance_id;
    strike.machine_id = rec->offer.machine_id;
    strike.our_others_on_machine = others_on_machine(*rec);
    record_strike(instance_id, strike);
  };
  hooks.event = [this](std::int64_t instance_id, const std::string& message) {
    event(instance_id, "job", message);
  };
  return hooks;
}

}  // namespace pf::manager
