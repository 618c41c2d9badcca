#include "store/sql_store.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "market/offer_json.h"
#include "store/sql_columns.h"
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

// What reading an instance row needs beyond the row: its name for errors and the parsed offers.
struct InstanceRead {
  std::string what;
  OfferCache& offers;
};

using InstanceColumns = sql::Columns<core::InstanceRecord, InstanceRead>;
using InstanceColumn = sql::Column<core::InstanceRecord, InstanceRead>;
using I = sql::ColumnsOf<core::InstanceRecord, InstanceRead>;
using core::InstanceRecord;

// The verdict's columns: all NULL without one. verdict_decision comes first in the description
// (it creates or clears the verdict the others fill in).
InstanceColumn verdict_decision_column() {
  return {"verdict_decision",
          [](Statement& s, const char* p, const InstanceRecord& r) {
            if (r.verdict) {
              s.bind_text(p, core::to_string(r.verdict->decision));
            } else {
              s.bind_null(p);
            }
          },
          [](const Statement& s, const char* n, InstanceRecord& r, InstanceRead& c) {
            if (s.is_null(n)) {
              r.verdict.reset();
              return;
            }
            const std::string decision = s.text(n);
            auto parsed = parse_decision(decision);
            if (!parsed)
              throw StoreError(c.what + " has unknown verdict decision '" + decision + "'");
            r.verdict.emplace().decision = *parsed;
          },
          [](const InstanceRecord& from, InstanceRecord& to) { to.verdict = from.verdict; }};
}

template <class T, class Bind, class Read>
InstanceColumn verdict_column(std::string name, T core::Verdict::*m, Bind bind, Read read) {
  return {std::move(name),
          [m, bind](Statement& s, const char* p, const InstanceRecord& r) {
            if (r.verdict) {
              bind(s, p, (*r.verdict).*m);
            } else {
              s.bind_null(p);
            }
          },
          [m, read](const Statement& s, const char* n, InstanceRecord& r, InstanceRead&) {
            if (r.verdict) (*r.verdict).*m = read(s, n);
          },
          [](const InstanceRecord&, InstanceRecord&) {}};  // copied whole by verdict_decision
}

InstanceColumn verdict_real(std::string name, double core::Verdict::*m) {
  return verdict_column(
      std::move(name), m, [](Statement& s, const char* p, double v) { s.bind_real(p, v); },
      [](const Statement& s, const char* n) { return s.real(n); });
}

// The offer snapshot: vast's JSON of it, what vast's JSON does not carry, and its machine id as
// a column of its own (migration 12: bad-host and per-machine queries), read back from the
// snapshot.
std::vector<InstanceColumn> offer_columns() {
  return {
      {"offer_json",
       [](Statement& s, const char* p, const InstanceRecord& r) {
         s.bind_text(
             p, dump_json(market::offer_to_vast_json(r.offer), s.doing() + ": encoding offer"));
       },
       [](const Statement& s, const char*, InstanceRecord& r, InstanceRead& c) {
         r.offer = read_offer(s, r.id, c.what, c.offers);
       },
       [](const InstanceRecord& from, InstanceRecord& to) { to.offer = from.offer; }},
      {"offer_extra_json",
       [](Statement& s, const char* p, const InstanceRecord& r) {
         const json extra{
             {"usable_ram_gib", r.offer.usable_ram_gib},
             {"usable_cores", r.offer.usable_cores},
             {"gpu_total_ram_gib", r.offer.gpu_total_ram_gib},
             {"data_flags", r.offer.data_flags},
         };
         s.bind_text(p, dump_json(extra, s.doing() + ": encoding offer"));
       },
       [](const Statement&, const char*, InstanceRecord&, InstanceRead&) {},  // with offer_json
       [](const InstanceRecord&, InstanceRecord&) {}},
      {"machine_id",
       [](Statement& s, const char* p, const InstanceRecord& r) {
         s.bind_int(p, r.offer.machine_id);
       },
       [](const Statement&, const char*, InstanceRecord&, InstanceRead&) {},  // the snapshot's
       [](const InstanceRecord&, InstanceRecord&) {}},
  };
}

// The instances table (every column but id), in the order the migrations added them.
const InstanceColumns& instance_columns() {
  static const InstanceColumns columns = [] {
    auto offer = offer_columns();
    return InstanceColumns{
        I::text("deployment_id", &InstanceRecord::deployment_id),
        I::opt_int64("market_id", &InstanceRecord::market_id),
        offer[0],
        offer[1],
        I::named("state", &InstanceRecord::state, core::parse_instance_state),
        I::real("created_at", &InstanceRecord::created_at),
        I::real("state_since", &InstanceRecord::state_since),
        I::real("deadline_at", &InstanceRecord::deadline_at),
        I::text("destroy_reason", &InstanceRecord::destroy_reason),
        I::opt_real("destroyed_at", &InstanceRecord::destroyed_at),
        I::text("secret_hash", &InstanceRecord::secret_hash),
        I::text("token_hash", &InstanceRecord::token_hash),
        I::real("last_heartbeat_at", &InstanceRecord::last_heartbeat_at),
        I::text("market_status", &InstanceRecord::market_status),
        I::real("market_status_since", &InstanceRecord::market_status_since),
        I::real("params_done_bytes", &InstanceRecord::params_done_bytes),
        I::real("params_total_bytes", &InstanceRecord::params_total_bytes),
        I::real("params_rate_bps", &InstanceRecord::params_rate_bps),
        I::int32("prover_crashes", &InstanceRecord::prover_crashes),
        I::int32("ooms", &InstanceRecord::ooms),
        I::int32("proofs_benchmark", &InstanceRecord::proofs_benchmark),
        I::int32("proofs_production", &InstanceRecord::proofs_production),
        I::real("gpu_util", &InstanceRecord::gpu_util),
        I::real("peak_memory_gib", &InstanceRecord::peak_memory_gib),
        I::real("spend_usd", &InstanceRecord::spend_usd),
        I::real("billed_until", &InstanceRecord::billed_until),
        verdict_decision_column(),
        verdict_real("verdict_rate", &core::Verdict::rate),
        verdict_real("verdict_low", &core::Verdict::low),
        verdict_real("verdict_high", &core::Verdict::high),
        verdict_column(
            "verdict_samples", &core::Verdict::samples,
            [](Statement& s, const char* p, int v) { s.bind_int(p, v); },
            [](const Statement& s, const char* n) { return s.int32(n); }),
        verdict_real("verdict_break_even_rate", &core::Verdict::break_even_rate),
        verdict_column(
            "verdict_reason", &core::Verdict::reason,
            [](Statement& s, const char* p, const std::string& v) { s.bind_text(p, v); },
            [](const Statement& s, const char* n) { return s.text(n); }),
        I::text("plan_json", &InstanceRecord::plan_json),
        I::text("origin", &InstanceRecord::origin),
        // Empty while open.
        InstanceColumn{"close_cause",
                       [](Statement& s, const char* p, const InstanceRecord& r) {
                         s.bind_text(p, r.close_cause ? core::to_string(*r.close_cause) : "");
                       },
                       [](const Statement& s, const char* n, InstanceRecord& r, InstanceRead& c) {
                         const std::string cause = s.text(n);
                         r.close_cause.reset();
                         if (cause.empty()) return;
                         r.close_cause = core::parse_close_cause(cause);
                         if (!r.close_cause)
                           throw StoreError(c.what + " has unknown close cause '" + cause + "'");
                       },
                       [](const InstanceRecord& from, InstanceRecord& to) {
                         to.close_cause = from.close_cause;
                       }},
        I::real("bench_since", &InstanceRecord::bench_since),
        I::flag("gpu_throttled", &InstanceRecord::gpu_throttled),
        I::int32("production_windows", &InstanceRecord::production_windows),
        I::int32("oom_partitions", &InstanceRecord::oom_partitions),
        offer[2],
        I::real("storage_spend_usd", &InstanceRecord::storage_spend_usd),
        I::real("bandwidth_spend_usd", &InstanceRecord::bandwidth_spend_usd),
        I::real("disk_gb", &InstanceRecord::disk_gb),
    };
  }();
  return columns;
}

// What an agent's report changes (update_agent_progress writes these and nothing else, and
// keeps the written copy the same way).
const InstanceColumns& agent_progress_columns() {
  static const InstanceColumns columns = instance_columns().only(
      {"last_heartbeat_at", "params_done_bytes", "params_total_bytes", "params_rate_bps",
       "prover_crashes", "ooms", "proofs_benchmark", "proofs_production", "gpu_util",
       "peak_memory_gib", "plan_json", "spend_usd", "storage_spend_usd", "bandwidth_spend_usd",
       "billed_until", "gpu_throttled", "bench_since"});
  return columns;
}

core::InstanceRecord read_instance(const Statement& s, OfferCache& offers) {
  core::InstanceRecord r;
  r.id = s.integer("id");
  InstanceRead context{"instance " + std::to_string(r.id), offers};
  instance_columns().read(s, r, context);
  return r;
}

// What reading a row of the smaller tables needs beyond the row: its name for errors.
struct RowRead {
  std::string what;
};

const sql::Columns<core::InstanceEvent, RowRead>& event_columns() {
  using E = sql::ColumnsOf<core::InstanceEvent, RowRead>;
  static const sql::Columns<core::InstanceEvent, RowRead> columns{
      E::int64("instance_id", &core::InstanceEvent::instance_id),
      E::real("at", &core::InstanceEvent::at),
      E::text("kind", &core::InstanceEvent::kind),
      E::text("message", &core::InstanceEvent::message),
      E::text("data_json", &core::InstanceEvent::data_json),
  };
  return columns;
}

core::InstanceEvent read_event(const Statement& s) {
  core::InstanceEvent e;
  e.id = s.integer("id");
  RowRead context{"event " + std::to_string(e.id)};
  event_columns().read(s, e, context);
  return e;
}

// The host a bench run measured, as three columns of the run.
template <class T, class Bind, class Read>
sql::Column<core::BenchRun, RowRead> host_column(std::string name, T core::HostKey::*m, Bind bind,
                                                 Read read) {
  return {
      std::move(name),
      [m, bind](Statement& s, const char* p, const core::BenchRun& r) { bind(s, p, r.host.*m); },
      [m, read](const Statement& s, const char* n, core::BenchRun& r, RowRead&) {
        r.host.*m = read(s, n);
      },
      [m](const core::BenchRun& from, core::BenchRun& to) { to.host.*m = from.host.*m; }};
}

const sql::Columns<core::BenchRun, RowRead>& bench_run_columns() {
  using B = sql::ColumnsOf<core::BenchRun, RowRead>;
  static const sql::Columns<core::BenchRun, RowRead> columns{
      host_column(
          "machine_id", &core::HostKey::machine_id,
          [](Statement& s, const char* p, std::int64_t v) { s.bind_int(p, v); },
          [](const Statement& s, const char* n) { return s.integer(n); }),
      host_column(
          "gpu_name", &core::HostKey::gpu_name,
          [](Statement& s, const char* p, const std::string& v) { s.bind_text(p, v); },
          [](const Statement& s, const char* n) { return s.text(n); }),
      host_column(
          "num_gpus", &core::HostKey::num_gpus,
          [](Statement& s, const char* p, int v) { s.bind_int(p, v); },
          [](const Statement& s, const char* n) { return s.int32(n); }),
      B::int64("instance_id", &core::BenchRun::instance_id),
      B::real("at", &core::BenchRun::at),
      B::real("rate", &core::BenchRun::rate),
      B::real("low", &core::BenchRun::low),
      B::real("high", &core::BenchRun::high),
      B::int32("samples", &core::BenchRun::samples),
      B::text("kind", &core::BenchRun::kind),
      B::flag("contended", &core::BenchRun::contended),
      B::flag("throttled", &core::BenchRun::throttled),
      B::text("plan_json", &core::BenchRun::plan_json),
  };
  return columns;
}

core::BenchRun read_bench_run(const Statement& s) {
  core::BenchRun b;
  b.id = s.integer("id");
  RowRead context{"bench run " + std::to_string(b.id)};
  bench_run_columns().read(s, b, context);
  return b;
}

// The bad_hosts table (keyed by machine_id and source; no id).
const sql::Columns<core::BadHost, RowRead>& bad_host_columns() {
  using H = sql::ColumnsOf<core::BadHost, RowRead>;
  static const sql::Columns<core::BadHost, RowRead> columns{
      H::int64("machine_id", &core::BadHost::machine_id),
      H::text("source", &core::BadHost::source),
      H::text("reason", &core::BadHost::reason),
      H::text("evidence_json", &core::BadHost::evidence_json),
      H::real("added_at", &core::BadHost::added_at),
      H::opt_real("expires_at", &core::BadHost::expires_at),
      H::int32("strikes", &core::BadHost::strikes),
  };
  return columns;
}

core::BadHost read_bad_host(const Statement& s) {
  core::BadHost b;
  RowRead context{"bad host " + std::to_string(s.integer("machine_id"))};
  bad_host_columns().read(s, b, context);
  return b;
}

// The proof_samples table (keyed by instance_id and seq; no id).
const sql::Columns<core::ProofSample, RowRead>& proof_sample_columns() {
  using P = sql::ColumnsOf<core::ProofSample, RowRead>;
  static const sql::Columns<core::ProofSample, RowRead> columns{
      P::int64("instance_id", &core::ProofSample::instance_id),
      P::int64("seq", &core::ProofSample::seq),
      P::real("at", &core::ProofSample::at),
      P::real("seconds", &core::ProofSample::seconds),
      P::real("gpu_ms", &core::ProofSample::gpu_ms),
      P::real("queue_ms", &core::ProofSample::queue_ms),
      P::named("phase", &core::ProofSample::phase, core::parse_proof_phase),
  };
  return columns;
}

}  // namespace

std::vector<std::string> sql::described_columns(std::string_view table) {
  if (table == "instances") return instance_columns().names();
  if (table == "jobs") return described_job_columns();
  if (table == "instance_events") return event_columns().names();
  if (table == "bench_runs") return bench_run_columns().names();
  if (table == "bad_hosts") return bad_host_columns().names();
  if (table == "proof_samples") return proof_sample_columns().names();
  return {};
}

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
  static const std::string sql = "INSERT INTO instances (" + instance_columns().list() +
                                 ") VALUES (" + instance_columns().placeholders() +
                                 ") RETURNING id";
  Statement s(*conn_, sql, "inserting instance with deployment_id '" + record.deployment_id + "'");
  instance_columns().bind(s, record);
  return sql::inserted_id(s);
}

void SqlStore::update_instance(const core::InstanceRecord& record) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating instance " + std::to_string(record.id);
  static const std::string update =
      "UPDATE instances SET " + instance_columns().assignments() + " WHERE id = :id";
  // Destroyed is final: a copy read before another process closed the row (the leader's tick
  // accruing spend while a paused ex-leader closes a create its fence refused) must not bring it
  // back.
  static const std::string update_open = update + " AND state <> 'destroyed'";
  Statement s(*conn_, record.state == core::InstanceState::Destroyed ? update : update_open, doing);
  instance_columns().bind(s, record);
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

void SqlStore::update_agent_progress(const core::InstanceRecord& r) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating agent progress of instance " + std::to_string(r.id);
  static const std::string sql =
      "UPDATE instances SET " + agent_progress_columns().assignments() + " WHERE id = :id";
  Statement s(*conn_, sql, doing);
  agent_progress_columns().bind(s, r);
  s.bind_int(":id", r.id);
  // Held back inside a transaction (every heartbeat writes this): instances are never deleted
  // and the callers read the row in the same transaction, so only a write run now can tell.
  if (s.run_or_defer() && s.changes() == 0) throw StoreError(doing + ": no such instance");
  if (core::InstanceRecord* kept = written_.mutable_row(r.id))
    agent_progress_columns().copy(r, *kept);
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
  static const std::string sql = "INSERT INTO instance_events (" + event_columns().list() +
                                 ") VALUES (" + event_columns().placeholders() + ") RETURNING id";
  Statement s(
      *conn_, sql,
      "appending '" + event.kind + "' event for instance " + std::to_string(event.instance_id));
  event_columns().bind(s, event);
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
  static const std::string sql = "INSERT INTO proof_samples (" + proof_sample_columns().list() +
                                 ") VALUES (" + proof_sample_columns().placeholders() +
                                 ") ON CONFLICT (instance_id, seq) DO NOTHING";
  Statement s(*conn_, sql,
              "inserting proof sample " + std::to_string(sample.seq) + " of instance " +
                  std::to_string(sample.instance_id));
  proof_sample_columns().bind(s, sample);
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
    RowRead context{doing + ": sample " + std::to_string(s.integer("seq"))};
    proof_sample_columns().read(s, p, context);
    out.push_back(std::move(p));
  }
  return out;
}

// --- host history --------------------------------------------------------------------------------

std::int64_t SqlStore::insert_bench_run(const core::BenchRun& run) {
  std::lock_guard lock(mutex_);
  static const std::string sql = "INSERT INTO bench_runs (" + bench_run_columns().list() +
                                 ") VALUES (" + bench_run_columns().placeholders() +
                                 ") RETURNING id";
  Statement s(*conn_, sql,
              "inserting bench run for machine " + std::to_string(run.host.machine_id));
  bench_run_columns().bind(s, run);
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
  // The key's columns come first: every other one is replaced on conflict.
  static const std::string sql = [] {
    const auto& columns = bad_host_columns();
    std::string update;
    for (const auto& name : columns.names()) {
      if (name == "machine_id" || name == "source") continue;
      update += (update.empty() ? "" : ", ") + name + " = excluded." + name;
    }
    return "INSERT INTO bad_hosts (" + columns.list() + ") VALUES (" + columns.placeholders() +
           ") ON CONFLICT (machine_id, source) DO UPDATE SET " + update;
  }();
  Statement s(*conn_, sql,
              "putting bad host " + std::to_string(entry.machine_id) + " (" + entry.source + ")");
  bad_host_columns().bind(s, entry);
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
