#include "store/sql_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "market/offer_json.h"
#include "store/sql_connection.h"
#include "store/sql_migrations.h"
#include "store/sql_store_detail.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;
using sql::dump_json;
using sql::Statement;

// --- row mapping -------------------------------------------------------------------------------

std::optional<core::Verdict::Decision> parse_decision(std::string_view text) {
  for (auto d : {core::Verdict::Decision::Continue, core::Verdict::Decision::Accept,
                 core::Verdict::Decision::Reject}) {
    if (text == core::to_string(d)) return d;
  }
  return std::nullopt;
}

void bind_offer(Statement& s, const core::Offer& offer) {
  s.bind_text(":offer_json",
              dump_json(market::offer_to_vast_json(offer), s.doing() + ": encoding offer"));
  const json extra{
      {"usable_ram_gib", offer.usable_ram_gib},
      {"usable_cores", offer.usable_cores},
      {"gpu_total_ram_gib", offer.gpu_total_ram_gib},
      {"data_flags", offer.data_flags},
  };
  s.bind_text(":offer_extra_json", dump_json(extra, s.doing() + ": encoding offer"));
}

// Parsed offer snapshots by instance id, each kept with the exact text it was parsed from. A
// snapshot is written once, at rent time, and read on every agent call; a row whose text still
// matches skips the JSON parse. Matching the text rather than trusting the id keeps this right
// when the row is rewritten, by this connection or another one.
class OfferCache {
 public:
  const core::Offer* find(std::int64_t id, std::string_view vast, std::string_view extra) const {
    auto it = by_id_.find(id);
    if (it == by_id_.end() || it->second.vast != vast || it->second.extra != extra) return nullptr;
    return &it->second.offer;
  }
  void put(std::int64_t id, std::string_view vast, std::string_view extra,
           const core::Offer& offer) {
    // Bounded: a fleet's live rows fit many times over; a full listing of old rows refills it.
    if (by_id_.size() >= kMaxEntries && !by_id_.count(id)) by_id_.clear();
    by_id_[id] = Entry{std::string(vast), std::string(extra), offer};
  }

 private:
  static constexpr std::size_t kMaxEntries = 4096;
  struct Entry {
    std::string vast;
    std::string extra;
    core::Offer offer;
  };
  std::unordered_map<std::int64_t, Entry> by_id_;
};

core::Offer parse_offer(std::string_view vast_text, std::string_view extra_text,
                        const std::string& what) {
  auto vast_parsed = util::parse_json(vast_text);
  if (!vast_parsed) throw StoreError(what + ": corrupt offer snapshot: " + vast_parsed.error());
  auto extra_parsed = util::parse_json(extra_text);
  if (!extra_parsed) throw StoreError(what + ": corrupt offer snapshot: " + extra_parsed.error());
  try {
    json vast = std::move(*vast_parsed);
    const json extra = std::move(*extra_parsed);
    // offer_from_vast_json rejects an offer without a positive id (a market boundary rule); a
    // snapshot may legitimately hold none (an adopted instance), so carry it around the check.
    const std::int64_t id = vast.value("id", std::int64_t{0});
    vast["id"] = 1;
    auto parsed = market::offer_from_vast_json(vast);
    if (!parsed) throw StoreError(what + ": offer snapshot: " + parsed.error());
    core::Offer offer = std::move(*parsed);
    offer.id = id;
    offer.usable_ram_gib = extra.at("usable_ram_gib").get<double>();
    offer.usable_cores = extra.at("usable_cores").get<double>();
    offer.gpu_total_ram_gib = extra.at("gpu_total_ram_gib").get<double>();
    offer.data_flags = extra.at("data_flags").get<std::vector<std::string>>();
    return offer;
  } catch (const json::exception& e) {
    throw StoreError(what + ": corrupt offer snapshot: " + e.what());
  }
}

core::Offer read_offer(const Statement& s, std::int64_t instance_id, const std::string& what,
                       OfferCache& cache) {
  const std::string_view vast = s.text_view("offer_json");
  const std::string_view extra = s.text_view("offer_extra_json");
  if (const core::Offer* known = cache.find(instance_id, vast, extra)) return *known;
  core::Offer offer = parse_offer(vast, extra, what);
  cache.put(instance_id, vast, extra, offer);
  return offer;
}

constexpr const char* kInstanceColumns =
    "deployment_id, market_id, offer_json, offer_extra_json, state, created_at, state_since, "
    "deadline_at, destroy_reason, destroyed_at, secret_hash, token_hash, last_heartbeat_at, "
    "market_status, market_status_since, params_done_bytes, params_total_bytes, "
    "params_rate_bps, prover_crashes, ooms, proofs_benchmark, proofs_production, gpu_util, "
    "peak_memory_gib, spend_usd, billed_until, verdict_decision, verdict_rate, verdict_low, "
    "verdict_high, verdict_samples, verdict_break_even_rate, verdict_reason, plan_json, origin, "
    "close_cause, bench_since, gpu_throttled, production_windows, oom_partitions, machine_id, "
    "storage_spend_usd, bandwidth_spend_usd, disk_gb";

void bind_instance(Statement& s, const core::InstanceRecord& r) {
  s.bind_text(":deployment_id", r.deployment_id);
  s.bind_opt_int(":market_id", r.market_id);
  bind_offer(s, r.offer);
  s.bind_int(":machine_id", r.offer.machine_id);  // the offer's, as a column (migration 12)
  s.bind_text(":state", core::to_string(r.state));
  s.bind_real(":created_at", r.created_at);
  s.bind_real(":state_since", r.state_since);
  s.bind_real(":deadline_at", r.deadline_at);
  s.bind_text(":destroy_reason", r.destroy_reason);
  s.bind_opt_real(":destroyed_at", r.destroyed_at);
  s.bind_text(":secret_hash", r.secret_hash);
  s.bind_text(":token_hash", r.token_hash);
  s.bind_real(":last_heartbeat_at", r.last_heartbeat_at);
  s.bind_text(":market_status", r.market_status);
  s.bind_real(":market_status_since", r.market_status_since);
  s.bind_real(":params_done_bytes", r.params_done_bytes);
  s.bind_real(":params_total_bytes", r.params_total_bytes);
  s.bind_real(":params_rate_bps", r.params_rate_bps);
  s.bind_int(":prover_crashes", r.prover_crashes);
  s.bind_int(":ooms", r.ooms);
  s.bind_int(":proofs_benchmark", r.proofs_benchmark);
  s.bind_int(":proofs_production", r.proofs_production);
  s.bind_real(":gpu_util", r.gpu_util);
  s.bind_real(":peak_memory_gib", r.peak_memory_gib);
  s.bind_real(":spend_usd", r.spend_usd);
  s.bind_real(":billed_until", r.billed_until);
  if (r.verdict) {
    const auto& v = *r.verdict;
    s.bind_text(":verdict_decision", core::to_string(v.decision));
    s.bind_real(":verdict_rate", v.rate);
    s.bind_real(":verdict_low", v.low);
    s.bind_real(":verdict_high", v.high);
    s.bind_int(":verdict_samples", v.samples);
    s.bind_real(":verdict_break_even_rate", v.break_even_rate);
    s.bind_text(":verdict_reason", v.reason);
  } else {
    for (const char* name : {":verdict_decision", ":verdict_rate", ":verdict_low", ":verdict_high",
                             ":verdict_samples", ":verdict_break_even_rate", ":verdict_reason"}) {
      s.bind_null(name);
    }
  }
  s.bind_text(":plan_json", r.plan_json);
  s.bind_text(":origin", r.origin);
  s.bind_text(":close_cause", r.close_cause ? core::to_string(*r.close_cause) : "");
  s.bind_real(":bench_since", r.bench_since);
  s.bind_int(":gpu_throttled", r.gpu_throttled ? 1 : 0);
  s.bind_int(":production_windows", r.production_windows);
  s.bind_int(":oom_partitions", r.oom_partitions);
  s.bind_real(":storage_spend_usd", r.storage_spend_usd);
  s.bind_real(":bandwidth_spend_usd", r.bandwidth_spend_usd);
  s.bind_real(":disk_gb", r.disk_gb);
}

core::InstanceRecord read_instance(const Statement& s, OfferCache& offers) {
  core::InstanceRecord r;
  r.id = s.integer("id");
  const std::string what = "instance " + std::to_string(r.id);
  r.deployment_id = s.text("deployment_id");
  r.market_id = s.opt_integer("market_id");
  r.offer = read_offer(s, r.id, what, offers);
  const std::string state = s.text("state");
  auto parsed_state = core::parse_instance_state(state);
  if (!parsed_state) throw StoreError(what + " has unknown state '" + state + "'");
  r.state = *parsed_state;
  r.created_at = s.real("created_at");
  r.state_since = s.real("state_since");
  r.deadline_at = s.real("deadline_at");
  r.destroy_reason = s.text("destroy_reason");
  r.destroyed_at = s.opt_real("destroyed_at");
  r.secret_hash = s.text("secret_hash");
  r.token_hash = s.text("token_hash");
  r.last_heartbeat_at = s.real("last_heartbeat_at");
  r.market_status = s.text("market_status");
  r.market_status_since = s.real("market_status_since");
  r.params_done_bytes = s.real("params_done_bytes");
  r.params_total_bytes = s.real("params_total_bytes");
  r.params_rate_bps = s.real("params_rate_bps");
  r.prover_crashes = s.int32("prover_crashes");
  r.ooms = s.int32("ooms");
  r.proofs_benchmark = s.int32("proofs_benchmark");
  r.proofs_production = s.int32("proofs_production");
  r.gpu_util = s.real("gpu_util");
  r.peak_memory_gib = s.real("peak_memory_gib");
  r.spend_usd = s.real("spend_usd");
  r.billed_until = s.real("billed_until");
  if (!s.is_null("verdict_decision")) {
    core::Verdict v;
    const std::string decision = s.text("verdict_decision");
    auto parsed_decision = parse_decision(decision);
    if (!parsed_decision) {
      throw StoreError(what + " has unknown verdict decision '" + decision + "'");
    }
    v.decision = *parsed_decision;
    v.rate = s.real("verdict_rate");
    v.low = s.real("verdict_low");
    v.high = s.real("verdict_high");
    v.samples = s.int32("verdict_samples");
    v.break_even_rate = s.real("verdict_break_even_rate");
    v.reason = s.text("verdict_reason");
    r.verdict = std::move(v);
  }
  r.plan_json = s.text("plan_json");
  r.origin = s.text("origin");
  const std::string cause = s.text("close_cause");
  if (!cause.empty()) {
    r.close_cause = core::parse_close_cause(cause);
    if (!r.close_cause) throw StoreError(what + " has unknown close cause '" + cause + "'");
  }
  r.bench_since = s.real("bench_since");
  r.gpu_throttled = s.int32("gpu_throttled") != 0;
  r.production_windows = s.int32("production_windows");
  r.oom_partitions = s.int32("oom_partitions");
  r.storage_spend_usd = s.real("storage_spend_usd");
  r.bandwidth_spend_usd = s.real("bandwidth_spend_usd");
  r.disk_gb = s.real("disk_gb");
  return r;
}

core::InstanceEvent read_event(const Statement& s) {
  core::InstanceEvent e;
  e.id = s.integer("id");
  e.instance_id = s.integer("instance_id");
  e.at = s.real("at");
  e.kind = s.text("kind");
  e.message = s.text("message");
  e.data_json = s.text("data_json");
  return e;
}

core::BenchRun read_bench_run(const Statement& s) {
  core::BenchRun b;
  b.id = s.integer("id");
  b.host.machine_id = s.integer("machine_id");
  b.host.gpu_name = s.text("gpu_name");
  b.host.num_gpus = s.int32("num_gpus");
  b.instance_id = s.integer("instance_id");
  b.at = s.real("at");
  b.rate = s.real("rate");
  b.low = s.real("low");
  b.high = s.real("high");
  b.samples = s.int32("samples");
  b.kind = s.text("kind");
  b.contended = s.boolean("contended");
  b.throttled = s.boolean("throttled");
  b.plan_json = s.text("plan_json");
  return b;
}

core::BadHost read_bad_host(const Statement& s) {
  core::BadHost b;
  b.machine_id = s.integer("machine_id");
  b.source = s.text("source");
  b.reason = s.text("reason");
  b.evidence_json = s.text("evidence_json");
  b.added_at = s.real("added_at");
  b.expires_at = s.opt_real("expires_at");
  b.strikes = s.int32("strikes");
  return b;
}

}  // namespace

int latest_schema_version() {
  return sql::kLatestSchemaVersion;
}

struct SqlStore::Caches {
  OfferCache offers;
};

SqlStore::SqlStore(std::unique_ptr<sql::Connection> connection, std::string where)
    : conn_(std::move(connection)), where_(std::move(where)), caches_(std::make_unique<Caches>()) {
  sql::migrate(*conn_, where_);
  conn_->on_sent_outcomes([this](bool failed) { on_sent_outcomes(failed); });
}

SqlStore::~SqlStore() {
  stop_commit_reader();  // before the connection it reads goes
}

int SqlStore::schema_version() {
  std::lock_guard lock(mutex_);
  return conn_->schema_version();
}

// --- instances -----------------------------------------------------------------------------------

std::int64_t SqlStore::insert_instance(const core::InstanceRecord& record) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              std::string("INSERT INTO instances (") + kInstanceColumns + ") VALUES (" +
                  ":deployment_id, :market_id, :offer_json, :offer_extra_json, :state, "
                  ":created_at, :state_since, :deadline_at, :destroy_reason, :destroyed_at, "
                  ":secret_hash, :token_hash, :last_heartbeat_at, :market_status, "
                  ":market_status_since, :params_done_bytes, :params_total_bytes, "
                  ":params_rate_bps, :prover_crashes, :ooms, :proofs_benchmark, "
                  ":proofs_production, :gpu_util, :peak_memory_gib, :spend_usd, :billed_until, "
                  ":verdict_decision, :verdict_rate, :verdict_low, :verdict_high, "
                  ":verdict_samples, :verdict_break_even_rate, :verdict_reason, :plan_json, "
                  ":origin, :close_cause, :bench_since, :gpu_throttled, :production_windows, "
                  ":oom_partitions, :machine_id, :storage_spend_usd, :bandwidth_spend_usd, "
                  ":disk_gb) RETURNING id",
              "inserting instance with deployment_id '" + record.deployment_id + "'");
  bind_instance(s, record);
  return sql::inserted_id(s);
}

void SqlStore::update_instance(const core::InstanceRecord& record) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating instance " + std::to_string(record.id);
  Statement s(
      *conn_,
      "UPDATE instances SET deployment_id = :deployment_id, market_id = :market_id, "
      "offer_json = :offer_json, offer_extra_json = :offer_extra_json, state = :state, "
      "created_at = :created_at, state_since = :state_since, "
      "deadline_at = :deadline_at, destroy_reason = :destroy_reason, "
      "destroyed_at = :destroyed_at, secret_hash = :secret_hash, "
      "token_hash = :token_hash, last_heartbeat_at = :last_heartbeat_at, "
      "market_status = :market_status, market_status_since = :market_status_since, "
      "params_done_bytes = :params_done_bytes, params_total_bytes = :params_total_bytes, "
      "params_rate_bps = :params_rate_bps, prover_crashes = :prover_crashes, "
      "ooms = :ooms, proofs_benchmark = :proofs_benchmark, "
      "proofs_production = :proofs_production, gpu_util = :gpu_util, "
      "peak_memory_gib = :peak_memory_gib, spend_usd = :spend_usd, "
      "billed_until = :billed_until, verdict_decision = :verdict_decision, "
      "verdict_rate = :verdict_rate, verdict_low = :verdict_low, "
      "verdict_high = :verdict_high, verdict_samples = :verdict_samples, "
      "verdict_break_even_rate = :verdict_break_even_rate, "
      "verdict_reason = :verdict_reason, plan_json = :plan_json, origin = :origin, "
      "close_cause = :close_cause, bench_since = :bench_since, "
      "gpu_throttled = :gpu_throttled, production_windows = :production_windows, "
      "oom_partitions = :oom_partitions, machine_id = :machine_id, "
      "storage_spend_usd = :storage_spend_usd, bandwidth_spend_usd = :bandwidth_spend_usd, "
      "disk_gb = :disk_gb WHERE id = :id" +
          // Destroyed is final: a copy read before another process closed the row (the
          // leader's tick accruing spend while a paused ex-leader closes a create its
          // fence refused) must not bring it back.
          std::string(record.state == core::InstanceState::Destroyed ? ""
                                                                     : " AND state <> 'destroyed'"),
      doing);
  bind_instance(s, record);
  s.bind_int(":id", record.id);
  s.run();
  if (s.changes() == 0) {
    written_.forget(record.id);
    const auto stored = instance(record.id);
    if (!stored) throw StoreError(doing + ": no such instance");
    return;  // destroyed meanwhile: the stale copy changes nothing
  }
  written_.keep_row(record);
}

namespace {

// The columns update_agent_progress writes, on the written copy (keep the two lists together).
void copy_agent_progress(const core::InstanceRecord& from, core::InstanceRecord& to) {
  to.last_heartbeat_at = from.last_heartbeat_at;
  to.params_done_bytes = from.params_done_bytes;
  to.params_total_bytes = from.params_total_bytes;
  to.params_rate_bps = from.params_rate_bps;
  to.prover_crashes = from.prover_crashes;
  to.ooms = from.ooms;
  to.proofs_benchmark = from.proofs_benchmark;
  to.proofs_production = from.proofs_production;
  to.gpu_util = from.gpu_util;
  to.peak_memory_gib = from.peak_memory_gib;
  to.plan_json = from.plan_json;
  to.spend_usd = from.spend_usd;
  to.storage_spend_usd = from.storage_spend_usd;
  to.bandwidth_spend_usd = from.bandwidth_spend_usd;
  to.billed_until = from.billed_until;
  to.gpu_throttled = from.gpu_throttled;
  to.bench_since = from.bench_since;
}

}  // namespace

void SqlStore::update_agent_progress(const core::InstanceRecord& r) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating agent progress of instance " + std::to_string(r.id);
  Statement s(*conn_,
              "UPDATE instances SET last_heartbeat_at = :last_heartbeat_at, "
              "params_done_bytes = :params_done_bytes, params_total_bytes = :params_total_bytes, "
              "params_rate_bps = :params_rate_bps, prover_crashes = :prover_crashes, "
              "ooms = :ooms, proofs_benchmark = :proofs_benchmark, "
              "proofs_production = :proofs_production, gpu_util = :gpu_util, "
              "peak_memory_gib = :peak_memory_gib, plan_json = :plan_json, "
              "spend_usd = :spend_usd, storage_spend_usd = :storage_spend_usd, "
              "bandwidth_spend_usd = :bandwidth_spend_usd, billed_until = :billed_until, "
              "gpu_throttled = :gpu_throttled, bench_since = :bench_since WHERE id = :id",
              doing);
  s.bind_real(":last_heartbeat_at", r.last_heartbeat_at);
  s.bind_real(":params_done_bytes", r.params_done_bytes);
  s.bind_real(":params_total_bytes", r.params_total_bytes);
  s.bind_real(":params_rate_bps", r.params_rate_bps);
  s.bind_int(":prover_crashes", r.prover_crashes);
  s.bind_int(":ooms", r.ooms);
  s.bind_int(":proofs_benchmark", r.proofs_benchmark);
  s.bind_int(":proofs_production", r.proofs_production);
  s.bind_real(":gpu_util", r.gpu_util);
  s.bind_real(":peak_memory_gib", r.peak_memory_gib);
  s.bind_text(":plan_json", r.plan_json);
  s.bind_real(":spend_usd", r.spend_usd);
  s.bind_real(":storage_spend_usd", r.storage_spend_usd);
  s.bind_real(":bandwidth_spend_usd", r.bandwidth_spend_usd);
  s.bind_real(":billed_until", r.billed_until);
  s.bind_int(":gpu_throttled", r.gpu_throttled ? 1 : 0);
  s.bind_real(":bench_since", r.bench_since);
  s.bind_int(":id", r.id);
  // Held back inside a transaction (every heartbeat writes this): instances are never deleted
  // and the callers read the row in the same transaction, so only a write run now can tell.
  if (s.run_or_defer() && s.changes() == 0) throw StoreError(doing + ": no such instance");
  if (core::InstanceRecord* kept = written_.mutable_row(r.id)) copy_agent_progress(r, *kept);
}

std::optional<core::InstanceRecord> SqlStore::instance(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM instances WHERE id = :id",
              "reading instance " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqlStore::instance_as_written(std::int64_t id) {
  std::lock_guard lock(mutex_);
  if (const core::InstanceRecord* kept = written_.row(id)) return *kept;
  auto row = instance(id);
  if (row) written_.keep_row(*row);
  return row;
}

void SqlStore::forget_written_copies() {
  std::lock_guard lock(mutex_);
  written_.clear();
}

std::optional<core::InstanceRecord> SqlStore::instance_by_deployment(const std::string& dep) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM instances WHERE deployment_id = :dep",
              "reading instance with deployment_id '" + dep + "'");
  s.bind_text(":dep", dep);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqlStore::instance_by_market_id(std::int64_t market_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT * FROM instances WHERE market_id = :market_id ORDER BY id DESC LIMIT 1",
              "reading instance with market id " + std::to_string(market_id));
  s.bind_int(":market_id", market_id);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqlStore::instance_by_token_hash(const std::string& hash) {
  if (hash.empty()) return std::nullopt;  // rows without a token have an empty hash
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM instances WHERE token_hash = :hash LIMIT 1",
              "reading instance by agent token");
  s.bind_text(":hash", hash);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::vector<core::InstanceRecord> SqlStore::instances(bool include_destroyed) {
  std::lock_guard lock(mutex_);
  // The live rows through the partial index instances_live (migration 8), which only a literal
  // 'destroyed' lets the planner use: they are read every tick, beside the whole history.
  Statement s(*conn_,
              include_destroyed ? "SELECT * FROM instances ORDER BY id"
                                : "SELECT * FROM instances WHERE state <> 'destroyed' ORDER BY id",
              "listing instances");
  return read_instances(s);
}

std::vector<core::InstanceRecord> SqlStore::instances_on_machine(std::int64_t machine_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM instances WHERE machine_id = :machine_id ORDER BY id",
              "listing the instances on machine " + std::to_string(machine_id));
  s.bind_int(":machine_id", machine_id);
  return read_instances(s);
}

std::vector<core::InstanceRecord> SqlStore::read_instances(Statement& s) {
  std::vector<core::InstanceRecord> out;
  while (s.next()) out.push_back(read_instance(s, caches_->offers));
  return out;
}

std::vector<core::BenchRun> SqlStore::read_bench_runs(Statement& s) {
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

// --- audit trail ---------------------------------------------------------------------------------

std::int64_t SqlStore::append_event(const core::InstanceEvent& event) {
  std::lock_guard lock(mutex_);
  Statement s(
      *conn_,
      "INSERT INTO instance_events (instance_id, at, kind, message, data_json) "
      "VALUES (:instance_id, :at, :kind, :message, :data_json) RETURNING id",
      "appending '" + event.kind + "' event for instance " + std::to_string(event.instance_id));
  s.bind_int(":instance_id", event.instance_id);
  s.bind_real(":at", event.at);
  s.bind_text(":kind", event.kind);
  s.bind_text(":message", event.message);
  s.bind_text(":data_json", event.data_json);
  return sql::inserted_id(s);
}

std::vector<core::InstanceEvent> SqlStore::events(std::int64_t instance_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT * FROM (SELECT * FROM instance_events WHERE instance_id = :instance_id "
              "ORDER BY at DESC, id DESC LIMIT :limit) AS recent ORDER BY at, id",
              "reading events of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  s.bind_int(":limit", sql::limit_or_all(limit));
  std::vector<core::InstanceEvent> out;
  while (s.next()) out.push_back(read_event(s));
  return out;
}

// --- agent logs ----------------------------------------------------------------------------------

void SqlStore::append_agent_log(std::int64_t instance_id, double at, std::string_view text,
                                std::size_t max_bytes) {
  std::lock_guard lock(mutex_);
  if (text.empty() || max_bytes == 0) return;
  // A chunk larger than the whole allowance keeps its newest bytes.
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  const std::string doing = "appending to the log of instance " + std::to_string(instance_id);
  transaction([&] {
    // Two replicas appending to one instance's log would each trim without seeing the other's
    // chunk and keep more than allowed: on PostgreSQL the instance row is locked first (NO KEY
    // UPDATE: the log rows' foreign key checks still pass). SQLite's BEGIN IMMEDIATE already
    // serialises every writer.
    if (conn_->dialect() == sql::Dialect::Postgres) {
      Statement lock_row(
          *conn_, "SELECT id FROM instances WHERE id = :instance_id FOR NO KEY UPDATE", doing);
      lock_row.bind_int(":instance_id", instance_id);
      lock_row.run();
    }
    {
      Statement s(*conn_,
                  "INSERT INTO agent_logs (instance_id, at, bytes, text) "
                  "VALUES (:instance_id, :at, :bytes, :text)",
                  doing);
      s.bind_int(":instance_id", instance_id);
      s.bind_real(":at", at);
      s.bind_int(":bytes", static_cast<std::int64_t>(text.size()));
      sql::bind_bytes(conn_->dialect(), s, ":text", text);
      s.run();
    }
    // Newest first: everything past the byte allowance or the chunk cap goes.
    Statement trim(*conn_,
                   "DELETE FROM agent_logs WHERE id IN (SELECT id FROM ("
                   "SELECT id, SUM(bytes) OVER (ORDER BY id DESC) AS kept, "
                   "ROW_NUMBER() OVER (ORDER BY id DESC) AS n "
                   "FROM agent_logs WHERE instance_id = :instance_id) AS ranked "
                   "WHERE kept > :max_bytes OR n > :max_chunks)",
                   doing);
    trim.bind_int(":instance_id", instance_id);
    trim.bind_int(":max_bytes", static_cast<std::int64_t>(max_bytes));
    trim.bind_int(":max_chunks", static_cast<std::int64_t>(kMaxAgentLogChunks));
    trim.run();
  });
}

std::string SqlStore::agent_log(std::int64_t instance_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT text FROM agent_logs WHERE instance_id = :instance_id ORDER BY id",
              "reading the log of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  std::string out;
  const bool bytea = conn_->dialect() == sql::Dialect::Postgres;
  while (s.next()) out += bytea ? s.blob("text") : s.text("text");
  return out;
}

// --- agent reports -------------------------------------------------------------------------------

bool SqlStore::mark_agent_seq(std::int64_t instance_id, std::int64_t seq) {
  std::lock_guard lock(mutex_);
  const bool in_transaction = depth_ > 0;
  if (in_transaction && !written_.has_seq(instance_id, seq)) {
    // Every events batch: the instance's seqs are read once, then answered from the copy.
    Statement read(*conn_, "SELECT seq FROM agent_seqs WHERE instance_id = :instance_id",
                   "reading the agent events recorded for instance " + std::to_string(instance_id));
    read.bind_int(":instance_id", instance_id);
    std::vector<std::int64_t> seqs;
    while (read.next()) seqs.push_back(read.integer("seq"));
    written_.keep_seqs(instance_id, seqs);
  }
  if (written_.has_seq(instance_id, seq).value_or(false)) return false;
  // In a transaction the insert waits for its next round trip, without ON CONFLICT: should
  // another process have recorded the seq after all, the transaction fails instead of applying
  // it twice. Alone, it runs now and its change count tells.
  Statement s(*conn_,
              in_transaction
                  ? "INSERT INTO agent_seqs (instance_id, seq) VALUES (:instance_id, :seq)"
                  : "INSERT INTO agent_seqs (instance_id, seq) VALUES (:instance_id, :seq) "
                    "ON CONFLICT (instance_id, seq) DO NOTHING",
              "recording agent event " + std::to_string(seq) + " of instance " +
                  std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  s.bind_int(":seq", seq);
  const bool ran = s.run_or_defer();
  written_.add_seq(instance_id, seq);
  return !ran || s.changes() == 1;
}

void SqlStore::insert_proof_sample(const core::ProofSample& sample) {
  std::lock_guard lock(mutex_);
  // ON CONFLICT on the key only: any other constraint failure still raises an error.
  Statement s(*conn_,
              "INSERT INTO proof_samples (instance_id, seq, at, seconds, gpu_ms, queue_ms, phase) "
              "VALUES (:instance_id, :seq, :at, :seconds, :gpu_ms, :queue_ms, :phase) "
              "ON CONFLICT (instance_id, seq) DO NOTHING",
              "inserting proof sample " + std::to_string(sample.seq) + " of instance " +
                  std::to_string(sample.instance_id));
  s.bind_int(":instance_id", sample.instance_id);
  s.bind_int(":seq", sample.seq);
  s.bind_real(":at", sample.at);
  s.bind_real(":seconds", sample.seconds);
  s.bind_real(":gpu_ms", sample.gpu_ms);
  s.bind_real(":queue_ms", sample.queue_ms);
  s.bind_text(":phase", core::to_string(sample.phase));
  s.run_or_defer();
}

std::vector<core::ProofSample> SqlStore::proof_samples(std::int64_t instance_id) {
  std::lock_guard lock(mutex_);
  const std::string doing = "reading proof samples of instance " + std::to_string(instance_id);
  Statement s(*conn_, "SELECT * FROM proof_samples WHERE instance_id = :id ORDER BY seq", doing);
  s.bind_int(":id", instance_id);
  std::vector<core::ProofSample> out;
  while (s.next()) {
    core::ProofSample p;
    p.instance_id = s.integer("instance_id");
    p.seq = s.integer("seq");
    p.at = s.real("at");
    p.seconds = s.real("seconds");
    p.gpu_ms = s.real("gpu_ms");
    p.queue_ms = s.real("queue_ms");
    const std::string phase = s.text("phase");
    auto parsed = core::parse_proof_phase(phase);
    if (!parsed) {
      throw StoreError(doing + ": sample " + std::to_string(p.seq) + " has unknown phase '" +
                       phase + "'");
    }
    p.phase = *parsed;
    out.push_back(std::move(p));
  }
  return out;
}

// --- host history --------------------------------------------------------------------------------

std::int64_t SqlStore::insert_bench_run(const core::BenchRun& run) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "INSERT INTO bench_runs (machine_id, gpu_name, num_gpus, instance_id, at, rate, "
              "low, high, samples, kind, contended, throttled, plan_json) VALUES (:machine_id, "
              ":gpu_name, :num_gpus, :instance_id, :at, :rate, :low, :high, :samples, :kind, "
              ":contended, :throttled, :plan_json) RETURNING id",
              "inserting bench run for machine " + std::to_string(run.host.machine_id));
  s.bind_int(":machine_id", run.host.machine_id);
  s.bind_text(":gpu_name", run.host.gpu_name);
  s.bind_int(":num_gpus", run.host.num_gpus);
  s.bind_int(":instance_id", run.instance_id);
  s.bind_real(":at", run.at);
  s.bind_real(":rate", run.rate);
  s.bind_real(":low", run.low);
  s.bind_real(":high", run.high);
  s.bind_int(":samples", run.samples);
  s.bind_text(":kind", run.kind);
  s.bind_bool(":contended", run.contended);
  s.bind_bool(":throttled", run.throttled);
  s.bind_text(":plan_json", run.plan_json);
  return sql::inserted_id(s);
}

std::vector<core::BenchRun> SqlStore::bench_runs(const core::HostKey& host) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT * FROM bench_runs WHERE machine_id = :machine_id AND gpu_name = :gpu_name "
              "AND num_gpus = :num_gpus ORDER BY at, id",
              "reading bench runs of machine " + std::to_string(host.machine_id));
  s.bind_int(":machine_id", host.machine_id);
  s.bind_text(":gpu_name", host.gpu_name);
  s.bind_int(":num_gpus", host.num_gpus);
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

std::vector<core::BenchRun> SqlStore::all_bench_runs() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM bench_runs ORDER BY at, id", "reading bench runs");
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

// --- bad hosts -----------------------------------------------------------------------------------

void SqlStore::put_bad_host(const core::BadHost& entry) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "INSERT INTO bad_hosts (machine_id, source, reason, evidence_json, added_at, "
              "expires_at, strikes) VALUES (:machine_id, :source, :reason, :evidence_json, "
              ":added_at, :expires_at, :strikes) ON CONFLICT (machine_id, source) DO UPDATE SET "
              "reason = excluded.reason, evidence_json = excluded.evidence_json, "
              "added_at = excluded.added_at, expires_at = excluded.expires_at, "
              "strikes = excluded.strikes",
              "putting bad host " + std::to_string(entry.machine_id) + " (" + entry.source + ")");
  s.bind_int(":machine_id", entry.machine_id);
  s.bind_text(":source", entry.source);
  s.bind_text(":reason", entry.reason);
  s.bind_text(":evidence_json", entry.evidence_json);
  s.bind_real(":added_at", entry.added_at);
  s.bind_opt_real(":expires_at", entry.expires_at);
  s.bind_int(":strikes", entry.strikes);
  s.run();
}

bool SqlStore::remove_bad_host(std::int64_t machine_id, const std::string& source) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "DELETE FROM bad_hosts WHERE machine_id = :machine_id AND source = :source",
              "removing bad host " + std::to_string(machine_id) + " (" + source + ")");
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":source", source);
  s.run();
  return s.changes() > 0;
}

std::vector<core::BadHost> SqlStore::bad_hosts() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM bad_hosts ORDER BY machine_id, source", "reading bad hosts");
  std::vector<core::BadHost> out;
  while (s.next()) out.push_back(read_bad_host(s));
  return out;
}

// --- settings ------------------------------------------------------------------------------------

std::optional<std::string> SqlStore::setting(const std::string& key) {
  std::lock_guard lock(mutex_);
  return read_setting(key);
}

std::optional<std::string> SqlStore::read_setting(const std::string& key) {
  Statement s(*conn_, "SELECT value FROM settings WHERE key = :key",
              "reading setting '" + key + "'");
  s.bind_text(":key", key);
  if (!s.next()) return std::nullopt;
  return sql::read_bytes(conn_->dialect(), s, "value");
}

void SqlStore::write_setting(const std::string& key, const std::string& value, bool replace) {
  Statement s(*conn_,
              replace ? "INSERT INTO settings (key, value) VALUES (:key, :value) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                      : "INSERT INTO settings (key, value) VALUES (:key, :value) "
                        "ON CONFLICT (key) DO NOTHING",
              "writing setting '" + key + "'" + (replace ? "" : " if absent"));
  s.bind_text(":key", key);
  sql::bind_bytes(conn_->dialect(), s, ":value", value);
  s.run();
}

std::string SqlStore::setting_or_put(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  // Two statements, each its own transaction: a racing insert of the same key waits for the
  // first to commit and then does nothing, and the read after it sees the row that won.
  write_setting(key, value, false);
  auto stored = read_setting(key);
  if (!stored) throw StoreError("setting '" + key + "' is missing right after it was written");
  return *stored;
}

void SqlStore::put_setting(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  write_setting(key, value, true);
}

}  // namespace pf::store
