#include "manager/manager.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <set>

#include "core/bench_run.h"
#include "core/policy.h"
#include "core/text.h"
#include "core/unconfirmed_create.h"

namespace pf::manager {
namespace {

using core::InstanceRecord;
using core::InstanceState;
using S = core::InstanceState;
using nlohmann::json;

const std::string kLabelPrefix = "proverfleet:";

std::string hex(const unsigned char* data, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[data[i] >> 4]);
    out.push_back(digits[data[i] & 15]);
  }
  return out;
}

ApiError market_failure(const std::string& what, const market::MarketError& e) {
  int status = e.kind == market::ErrorKind::OfferGone ? 409 : 502;
  return ApiError{status, what + ": " + e.message + " (" + market::to_string(e.kind) + ")"};
}

// What an agent of a destroyed instance is told: nothing it sends is taken any more.
ApiError closed_instance(const InstanceRecord& rec) {
  return ApiError{410, "instance " + std::to_string(rec.id) + " is destroyed (" +
                           rec.destroy_reason + "): nothing more is accepted for it"};
}

// The sequential test the simulator runs (core::SprtAcceptance), with the operator's
// [acceptance] caps; its error rates and margins keep core::SprtConfig's defaults, which the
// simulator uses too.
json params_json(const std::vector<ParamFile>& params) {
  json out = json::array();
  for (const auto& p : params) {
    out.push_back({{"name", p.name}, {"url", p.url}, {"bytes", p.bytes}, {"digest", p.digest}});
  }
  return out;
}

}  // namespace

std::string random_token() {
  unsigned char buf[32];
  if (RAND_bytes(buf, sizeof buf) != 1) throw std::runtime_error("no randomness for a token");
  return hex(buf, sizeof buf);
}

std::string hash_token(const std::string& token) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(token.data(), token.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("sha256 failed");
  }
  return hex(md, len);
}

bool is_agent_token(const std::string& token) {
  return token.size() == kAgentTokenHexChars && std::all_of(token.begin(), token.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool tokens_equal(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Manager::Manager(store::Store& store, market::Market& market, ManagerConfig config, Clock clock)
    : store_(store),
      market_(market),
      config_(std::move(config)),
      clock_(std::move(clock)),
      acceptance_(core::with_caps(config_.sprt, config_.acceptance)) {
  // A manager that just started heard nothing before now: its restart is not the agents' fault.
  listening_.listening_since = clock_();
}

void Manager::set_serving(bool serving) {
  std::lock_guard lock(mu_);
  if (serving && !listening_.serving) listening_.listening_since = clock_();
  listening_.serving = serving;
}

void Manager::listening_interrupted() {
  std::lock_guard lock(mu_);
  listening_.listening_since = clock_();
}

core::Hearing Manager::hearing() {
  return hearing_of(store_.instances(false), clock_());
}

core::Hearing Manager::hearing_of(const std::vector<core::InstanceRecord>& rows, double now) {
  std::lock_guard lock(mu_);
  return core::judge_hearing(rows, now, listening_, config_.lifecycle.heartbeat_timeout_s,
                             config_.hearing);
}

double Manager::break_even_price() const {
  return config_.profit_objective ? config_.rank.economics.revenue_per_proof_usd
                                  : config_.rank.economics.target_cost_per_proof_usd;
}

double Manager::break_even(const InstanceRecord& rec) const {
  return core::break_even_rate(rec.offer.dph_total, break_even_price());
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
  auto msg =
      core::apply_transition(rec, to, clock_(), reason, break_even_price(), config_.lifecycle);
  if (!msg) return;
  store_.transaction([&] {
    store_.update_instance(rec);
    event(rec.id, "state", *msg, {{"state", core::to_string(to)}, {"reason", reason}});
  });
}

int Manager::others_on_machine(const InstanceRecord& rec) {
  int others = 0;
  for (const auto& other : store_.instances(false)) {
    if (other.id != rec.id && other.offer.machine_id == rec.offer.machine_id) ++others;
  }
  return others;
}

void Manager::destroy_with_blame(InstanceRecord& rec, core::CloseCause cause,
                                 const std::string& reason) {
  const S before = rec.state;
  const int others = others_on_machine(rec);
  transition(rec, S::Destroying, reason);
  auto strike = core::strike_for_close(rec, before, cause, reason, clock_(), others);
  if (!strike) return;
  auto outcome = core::apply_strike(store_.bad_hosts(), *strike, config_.blocklist);
  if (outcome.entry) {
    store_.put_bad_host(*outcome.entry);
    event(rec.id, "blame", outcome.reason, {{"machine_id", rec.offer.machine_id}});
  } else if (!outcome.reason.empty()) {
    event(rec.id, "blame", outcome.reason);
  }
}

void Manager::record_production_windows(const InstanceRecord& rec) {
  auto& seen = production_seen_[rec.id];
  if (rec.proofs_production == seen) return;  // nothing new since the last look
  seen = rec.proofs_production;
  const auto windows =
      core::complete_production_windows(store_.proof_samples(rec.id), config_.production_window_s);
  const core::HostKey host{rec.offer.machine_id, rec.offer.gpu_name, rec.offer.num_gpus};
  std::size_t recorded = 0;
  for (const auto& run : store_.bench_runs(host)) {
    if (run.instance_id == rec.id && run.kind == "production") ++recorded;
  }
  const bool contended = others_on_machine(rec) > 0;
  for (std::size_t i = recorded; i < windows.size(); ++i) {
    const auto& w = windows[i];
    const core::RateEstimate e = core::estimate_rate(w.samples, w.start, config_.acceptance.z);
    store_.insert_bench_run(core::make_bench_run(rec, "production", clock_(), e,
                                                 {contended, throttled_seen_.count(rec.id) > 0}));
  }
}

// --- operator ------------------------------------------------------------------------------

ApiResult<std::vector<core::RankedOffer>> Manager::rank_offers(const json& filters, int limit,
                                                               core::RankOrder order) {
  market::SearchRequest req;
  req.query = filters;
  auto found = market_.search_offers(req);
  if (!found) return tl::unexpected(market_failure("offer search failed", found.error()));
  auto ranked = core::rank_offers(std::move(found->offers), config_.rank, order);
  if (limit > 0 && ranked.size() > static_cast<std::size_t>(limit)) {
    ranked.resize(static_cast<std::size_t>(limit));
  }
  return ranked;
}

ApiResult<InstanceRecord> Manager::deploy(std::int64_t offer_id, const std::string& origin,
                                          bool automatic_blocks_applied) {
  if (offer_id <= 0) return tl::unexpected(ApiError{400, "offer_id must be a positive integer"});
  const double now = clock_();
  {
    std::lock_guard lock(mu_);
    // Never rent the same offer twice: vast accepts both and the second never starts.
    for (const auto& r : store_.instances(false)) {
      if (r.offer.id == offer_id) {
        return tl::unexpected(
            ApiError{409, "offer " + std::to_string(offer_id) + " is already rented by instance " +
                              std::to_string(r.id) + " (" + core::to_string(r.state) + ")"});
      }
    }
  }
  // Re-check the offer right before renting: offers vanish and change between searches.
  market::SearchRequest check;
  check.query = json{{"id", {{"eq", offer_id}}}};
  check.limit = 1;
  auto found = market_.search_offers(check);
  if (!found) return tl::unexpected(market_failure("re-checking the offer failed", found.error()));
  auto it = std::find_if(found->offers.begin(), found->offers.end(),
                         [&](const core::Offer& o) { return o.id == offer_id; });
  if (it == found->offers.end()) {
    return tl::unexpected(
        ApiError{404, "offer " + std::to_string(offer_id) + " is not listed (taken or withdrawn)"});
  }
  for (const auto& b : store_.bad_hosts()) {
    if (automatic_blocks_applied && b.source != "operator") continue;
    if (b.machine_id == it->machine_id && core::is_active(b, now)) {
      return tl::unexpected(ApiError{409, "machine " + std::to_string(b.machine_id) +
                                              " is on the bad-host list: " + b.reason});
    }
  }

  // Record the intent before acting: a crash after the create leaves a row to reconcile with.
  const std::string secret = random_token();
  InstanceRecord rec;
  rec.deployment_id = random_token().substr(0, 16);
  rec.offer = *it;
  rec.created_at = now;
  rec.state = S::Renting;
  rec.state_since = now;
  rec.secret_hash = hash_token(secret);
  rec.origin = origin;
  rec.billed_until = now;
  for (const auto& p : config_.params) rec.params_total_bytes += static_cast<double>(p.bytes);
  rec.deadline_at =
      core::state_deadline(rec, S::Renting, now, break_even_price(), config_.lifecycle);
  {
    std::lock_guard lock(mu_);
    store_.transaction([&] {
      rec.id = store_.insert_instance(rec);
      event(rec.id, "operator",
            "renting offer " + std::to_string(offer_id) + " (" + rec.offer.gpu_name + " x" +
                std::to_string(rec.offer.num_gpus) + ", $" + core::fixed(rec.offer.dph_total, 3) +
                "/hr) for " + origin,
            {{"offer_id", offer_id}, {"origin", origin}});
    });
    creates_in_flight_.insert(rec.id);
  }
  // Until the create returns, reconcile must not take the row's absence from a list as proof
  // that nothing was rented.
  struct CreateDone {
    Manager& m;
    std::int64_t id;
    ~CreateDone() {
      std::lock_guard lock(m.mu_);
      m.creates_in_flight_.erase(id);
    }
  } create_done{*this, rec.id};

  market::CreateRequest create;
  create.offer_id = offer_id;
  create.image = config_.image;
  create.disk_gb = config_.disk_gb;
  create.label = core::market_label(rec.deployment_id);
  create.env = {{"PROVERFLEET_MANAGER", config_.public_url},
                {"PROVERFLEET_DEPLOYMENT", rec.deployment_id},
                {"PROVERFLEET_SECRET", secret}};
  create.onstart = config_.onstart;
  create.runtype = "ssh";
  auto created = market_.create_instance(create);

  std::lock_guard lock(mu_);
  auto fresh = store_.instance(rec.id);
  if (!fresh) return tl::unexpected(ApiError{500, "instance row vanished during deploy"});
  rec = *fresh;
  if (created) {
    // Reconciliation may already have adopted it while the create was in flight.
    if (rec.state == S::Renting) {
      rec.market_id = created->instance_id;
      transition(rec, S::Booting,
                 "market instance " + std::to_string(created->instance_id) +
                     (created->reconciled ? " (reply lost; found by label)" : ""));
    }
    return rec;
  }
  const auto& err = created.error();
  if (err.kind == market::ErrorKind::CreateUnknown) {
    event(rec.id, "market",
          "create outcome unknown: " + err.message + "; reconciliation will adopt or close it");
    return rec;
  }
  // A definite rejection: nothing was rented, so the row closes without a destroy.
  transition(rec, S::Destroying, "create failed: " + err.message);
  transition(rec, S::Destroyed, "nothing was rented");
  return tl::unexpected(market_failure("create failed", err));
}

ApiResult<InstanceRecord> Manager::request_destroy(std::int64_t id, const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    auto rec = store_.instance(id);
    if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
    if (rec->state == S::Destroyed || rec->state == S::Destroying) return *rec;
    transition(*rec, S::Destroying, reason);
  }
  tick();  // sends the destroy now rather than at the next cycle
  auto rec = store_.instance(id);
  if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
  return *rec;
}

FleetSummary Manager::summary() {
  FleetSummary s;
  const auto rows = store_.instances(true);
  for (const auto& r : rows) {
    s.by_state[core::to_string(r.state)]++;
    s.spend_usd += r.spend_usd;
    s.proofs += r.proofs_production;
    if (r.state == S::Destroyed) continue;
    s.dollars_per_hour += r.offer.dph_total;
    if (r.state == S::Proving && r.verdict) s.proofs_per_hour += r.verdict->rate;
  }
  if (s.proofs_per_hour > 0) s.cost_per_proof = s.dollars_per_hour / s.proofs_per_hour;
  s.profit_per_hour =
      s.proofs_per_hour * config_.rank.economics.revenue_per_proof_usd - s.dollars_per_hour;
  s.hearing = hearing_of(rows, clock_());  // judges only the live ones among them
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
  };
  return out;
}

std::optional<std::int64_t> Manager::authenticate_agent(const std::string& token) {
  if (token.empty()) return std::nullopt;
  // The lookup is by SHA-256 of a 256-bit random token, so an index lookup reveals nothing a
  // timing attack could use; the final comparison is constant-time anyway.
  const std::string h = hash_token(token);
  std::lock_guard lock(mu_);
  // Every agent call authenticates; remembering hash → id saves a row read per call. The cache
  // is only an index: register rotates tokens and drops the old entry under the same lock.
  if (auto it = token_ids_.find(h); it != token_ids_.end()) return it->second;
  auto rec = store_.instance_by_token_hash(h);
  if (rec && tokens_equal(rec->token_hash, h)) {
    token_ids_[h] = rec->id;
    return rec->id;
  }
  return std::nullopt;
}

ApiResult<std::vector<std::string>> Manager::agent_heartbeat(std::int64_t id, const Heartbeat& hb) {
  std::lock_guard lock(mu_);
  ApiResult<std::vector<std::string>> reply = std::vector<std::string>{};
  // One transaction for the read and the writes: one commit, and no read transaction of its
  // own for the row (each costs file-locking system calls, and every agent heartbeats).
  store_.transaction([&] {
    auto rec = store_.instance(id);
    if (!rec) {
      reply = tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
      return;
    }
    if (rec->state == S::Destroyed) {
      reply = tl::unexpected(closed_instance(*rec));
      return;
    }
    if (rec->state == S::Destroying) {
      reply = std::vector<std::string>{"stop"};
      return;
    }
    rec->last_heartbeat_at = clock_();
    if (hb.params_total > 0) rec->params_total_bytes = hb.params_total;
    core::accrue_bandwidth_spend(*rec, hb.params_done);
    rec->params_rate_bps = hb.params_rate_bps;
    rec->peak_memory_gib = std::max(rec->peak_memory_gib, hb.peak_memory_gib);
    rec->gpu_util = hb.gpu_util;
    if (hb.gpu_throttled) throttled_seen_.insert(id);
    store_.update_agent_progress(*rec);
    if (rec->state == S::Benchmarking) {
      // The test's time rules (the cap, a host gone silent) must fire without a new proof.
      evaluate_benchmark(*rec);
      if (rec->state == S::Destroying) {
        reply = std::vector<std::string>{"stop"};
        return;
      }
    }
    // The agent drives the early phases; benchmarking and proving are the manager's verdicts.
    if (hb.phase == "fetching_params" && rec->state < S::FetchingParams) {
      transition(*rec, S::FetchingParams, "agent fetching parameters");
    } else if (hb.phase == "warming_up" && rec->state < S::WarmingUp) {
      transition(*rec, S::WarmingUp, "agent warming up the prover");
    }
  });
  return reply;
}

ApiResult<EventsReply> Manager::agent_events(std::int64_t id, const std::vector<AgentEvent>& evs) {
  std::lock_guard lock(mu_);
  EventsReply reply;
  std::vector<AgentEvent> sorted = evs;
  std::sort(sorted.begin(), sorted.end(),
            [](const AgentEvent& a, const AgentEvent& b) { return a.seq < b.seq; });
  const double now = clock_();
  bool found = false;
  std::optional<ApiError> closed;
  // One transaction per batch, the read included: one commit instead of one per event, and a
  // batch that fails leaves nothing applied, so the agent's retry of it is counted whole.
  store_.transaction([&] {
    auto row = store_.instance(id);
    if (!row) return;
    found = true;
    if (row->state == S::Destroyed) {
      closed = closed_instance(*row);  // nothing of it may change any more
      return;
    }
    InstanceRecord rec = std::move(*row);
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
        core::ProofSample s;
        s.instance_id = id;
        s.seq = ev.seq;
        s.at = at;
        s.seconds = ev.seconds;
        s.gpu_ms = ev.gpu_ms;
        s.queue_ms = ev.queue_ms;
        if (ev.phase == "warmup") {
          s.phase = core::ProofPhase::Warmup;
        } else if (rec.state == S::Proving) {
          s.phase = core::ProofPhase::Production;
          rec.proofs_production++;
        } else {
          s.phase = core::ProofPhase::Benchmark;
          rec.proofs_benchmark++;
        }
        store_.insert_proof_sample(s);
        if (s.phase == core::ProofPhase::Benchmark && rec.state < S::Benchmarking) {
          // The benchmark clock starts where warm-up ended: at the last warm-up completion.
          double since = 0;
          for (const auto& p : store_.proof_samples(id)) {
            if (p.phase == core::ProofPhase::Warmup) since = std::max(since, p.at);
          }
          auto msg = core::apply_transition(rec, S::Benchmarking, now, "first measured proof",
                                            break_even_price(), config_.lifecycle);
          if (msg) {
            row_changed = true;
            bench_since_[id] = since > 0 ? since : at;
            event(id, "state", *msg, {{"state", "benchmarking"}});
          }
        }
        // Sequential: the test decides after every measured proof, also within one batch, so
        // a clear case stops at the proof that settled it.
        if (s.phase == core::ProofPhase::Benchmark && rec.state == S::Benchmarking) {
          evaluate_benchmark(rec);
        }
      } else if (ev.type == "prover_started") {
        // The agent's plan (partitions, memory budget) is kept so benchmark runs record it.
        if (ev.data.contains("plan")) rec.plan_json = ev.data["plan"].dump();
        event(id, "agent", "prover started" + (ev.message.empty() ? "" : ": " + ev.message),
              ev.data);
        auto msg = core::apply_transition(rec, S::WarmingUp, now, "prover started",
                                          break_even_price(), config_.lifecycle);
        if (msg) {
          row_changed = true;
          event(id, "state", *msg, {{"state", "warming_up"}});
        }
      } else if (ev.type == "oom") {
        rec.ooms++;
        event(id, "agent",
              "prover killed for memory (OOM)" + (ev.message.empty() ? "" : ": " + ev.message),
              ev.data);
      } else if (ev.type == "prover_crashed") {
        rec.prover_crashes++;
        event(id, "agent", "prover crashed" + (ev.message.empty() ? "" : ": " + ev.message),
              ev.data);
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
  });
  if (!found) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
  if (closed) return tl::unexpected(*closed);
  return reply;
}

void Manager::evaluate_benchmark(InstanceRecord& rec) {
  core::BenchmarkInput in;
  for (const auto& s : store_.proof_samples(rec.id)) {
    if (s.phase == core::ProofPhase::Benchmark) in.samples.push_back(s);
  }
  if (in.samples.empty()) return;
  auto since = bench_since_.find(rec.id);
  if (since != bench_since_.end()) {
    in.since = since->second;
  } else {
    // After a manager restart: the first benchmark completion starts the clock.
    in.since =
        std::min_element(in.samples.begin(), in.samples.end(), [](const auto& a, const auto& b) {
          return a.at < b.at;
        })->at;
  }
  // Agent timestamps measure intervals; elapsed time for the cap comes from our own clock.
  in.now = in.since + (clock_() - rec.state_since);
  in.break_even_rate = break_even(rec);
  core::Verdict v = acceptance_.evaluate(in);
  if (v.decision == core::Verdict::Decision::Continue) {
    // Heartbeats re-evaluate for the time rules; a verdict that says the same is not rewritten.
    const bool same = rec.verdict && rec.verdict->decision == v.decision &&
                      rec.verdict->samples == v.samples && rec.verdict->reason == v.reason;
    rec.verdict = std::move(v);
    if (!same) store_.update_instance(rec);
    return;
  }
  rec.verdict = v;
  store_.insert_bench_run(
      core::make_bench_run(rec, "benchmark", clock_(), core::estimate_of(v),
                           {others_on_machine(rec) > 0, throttled_seen_.count(rec.id) > 0}));
  if (v.decision == core::Verdict::Decision::Accept) {
    transition(rec, S::Proving, v.reason);
  } else {
    destroy_with_blame(rec, core::CloseCause::Rejected, "benchmark " + v.reason);
  }
}

ApiResult<void> Manager::agent_logs(std::int64_t id, const std::string& text) {
  std::lock_guard lock(mu_);
  const auto rec = store_.instance(id);
  if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
  if (rec->state == S::Destroyed) return tl::unexpected(closed_instance(*rec));
  auto& ring = logs_[id];
  auto& bytes = log_bytes_[id];
  std::string chunk = text.size() > config_.log_ring_bytes
                          ? text.substr(text.size() - config_.log_ring_bytes)
                          : text;
  bytes += chunk.size();
  ring.push_back(std::move(chunk));
  while (bytes > config_.log_ring_bytes && !ring.empty()) {
    bytes -= ring.front().size();
    ring.pop_front();
  }
  return {};
}

std::string Manager::logs(std::int64_t id) {
  std::lock_guard lock(mu_);
  std::string out;
  auto it = logs_.find(id);
  if (it == logs_.end()) return out;
  for (const auto& c : it->second) out += c;
  return out;
}

// --- loops ---------------------------------------------------------------------------------

void Manager::reconcile() {
  auto listed = market_.list_instances(std::nullopt);
  if (!listed) {
    std::lock_guard lock(mu_);
    last_reconcile_error_ = listed.error().message;
    return;  // an incomplete list must not close anything
  }
  const double now = clock_();
  std::vector<std::int64_t> to_destroy;  // market ids of instances no live row owns
  std::set<std::int64_t> seen;
  {
    std::lock_guard lock(mu_);
    last_reconcile_error_.clear();
    for (const auto& inst : *listed) {
      if (inst.label.rfind(kLabelPrefix, 0) != 0) continue;  // not ours
      seen.insert(inst.id);
      const std::string dep = inst.label.substr(kLabelPrefix.size());
      auto row = store_.instance_by_deployment(dep);
      if (!row) {
        // Ours by label, unknown to the store (lost database, foreign manager): without its
        // secret no agent can register, so it can only bill. Record it, then destroy it.
        InstanceRecord orphan;
        orphan.deployment_id = dep;
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
          event(orphan.id, "market",
                "found market instance " + std::to_string(inst.id) +
                    " with our label but no record: destroying it");
        });
        transition(orphan, S::Destroying, "orphan: our label, unknown to the store");
        continue;
      }
      InstanceRecord rec = *row;
      if (rec.state == S::Destroyed) {
        // Closed on our side but still listed: it may still be billing.
        to_destroy.push_back(inst.id);
        event(rec.id, "market",
              "destroyed instance " + std::to_string(inst.id) + " still listed: destroying again");
        continue;
      }
      if (rec.market_id && *rec.market_id != inst.id) {
        // Two market instances for one deployment: a duplicate create. Keep ours, drop it.
        to_destroy.push_back(inst.id);
        event(rec.id, "market",
              "duplicate market instance " + std::to_string(inst.id) + " for this deployment");
        continue;
      }
      bool changed = false;
      if (!rec.market_id) {
        rec.market_id = inst.id;
        changed = true;
        event(rec.id, "market",
              "adopted market instance " + std::to_string(inst.id) + " found by label");
      }
      if (inst.actual_status != rec.market_status || rec.market_status_since == 0) {
        // Bill the old status up to now before switching.
        core::accrue_compute_spend(rec, now);
        event(rec.id, "market",
              "market status " + (rec.market_status.empty() ? "(none)" : rec.market_status) +
                  " → " + (inst.actual_status.empty() ? "(none)" : inst.actual_status),
              {{"status", inst.actual_status}, {"status_msg", inst.status_msg}});
        rec.market_status = inst.actual_status;
        rec.market_status_since = now;
        changed = true;
      }
      if (changed) store_.update_instance(rec);
      if (rec.state == S::Renting) transition(rec, S::Booting, "market instance confirmed");
    }

    for (auto rec : store_.instances(false)) {
      if (rec.market_id && seen.count(*rec.market_id)) continue;
      if (rec.state == S::Destroying) continue;  // tick confirms it
      if (!rec.market_id) {
        // Its label is not in this complete list (a listed one was adopted above).
        const core::UnconfirmedCreate unconfirmed{creates_in_flight_.count(rec.id) > 0, false,
                                                  config_.vanish_grace_s,
                                                  config_.lifecycle.renting_max_s};
        if (auto why = core::unconfirmed_create_close_reason(rec, now, unconfirmed)) {
          transition(rec, S::Destroying, *why);
          transition(rec, S::Destroyed, "nothing was rented");
        }
        continue;
      }
      // Reads can lag a create: a young instance missing from the list is not yet gone.
      if (now - rec.created_at < config_.vanish_grace_s ||
          (rec.state == S::Booting && now - rec.state_since < config_.vanish_grace_s)) {
        continue;
      }
      core::accrue_compute_spend(rec, now);
      transition(rec, S::Destroying, "instance vanished from the market");
      transition(rec, S::Destroyed, "market no longer lists it");
    }
  }
  for (auto mid : to_destroy)
    (void)market_.destroy_instance(mid);  // retried next cycle if it fails
}

void Manager::tick() {
  const double now = clock_();
  struct Pending {
    std::int64_t id;
    std::optional<std::int64_t> market_id;
    std::string label;
  };
  std::vector<Pending> destroys;
  {
    std::lock_guard lock(mu_);
    const auto live = store_.instances(false);
    const core::Hearing hearing = hearing_of(live, now);
    if (hearing.cause != last_hearing_cause_) {
      for (const auto& rec : live) {
        if (core::agent_expected(rec)) {
          event(rec.id, "hearing",
                hearing.reason.empty() ? "the manager hears its agents again; silence is judged"
                                       : "silence not judged: " + hearing.reason);
        }
      }
      last_hearing_cause_ = hearing.cause;
    }
    for (auto rec : live) {
      double before = rec.spend_usd;
      core::accrue_compute_spend(rec, now);
      if (rec.spend_usd != before) store_.update_instance(rec);
      if (rec.state == S::Proving) record_production_windows(rec);
      if (auto why = core::destroy_reason(rec, now, config_.lifecycle, hearing)) {
        destroy_with_blame(rec, core::lifecycle_close_cause(rec, *why), *why);
      }
      if (rec.state != S::Destroying) continue;
      auto last = last_destroy_attempt_.find(rec.id);
      if (last != last_destroy_attempt_.end() &&
          now - last->second < config_.lifecycle.destroy_retry_s) {
        continue;
      }
      last_destroy_attempt_[rec.id] = now;
      destroys.push_back({rec.id, rec.market_id, core::market_label(rec.deployment_id)});
    }
  }
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
    auto rec = store_.instance(d.id);
    if (!rec || rec->state != S::Destroying) continue;
    if (mid && !rec->market_id) rec->market_id = mid;
    if (confirmed) {
      core::accrue_compute_spend(*rec, clock_());
      transition(*rec, S::Destroyed, outcome);
      last_destroy_attempt_.erase(d.id);
      bench_since_.erase(d.id);
      production_seen_.erase(d.id);
    } else {
      event(d.id, "market", outcome);
    }
  }
}

}  // namespace pf::manager
