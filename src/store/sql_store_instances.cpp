// SqlStore's instances (InstanceStore, store/instance_store.h): the `instances` rows, the agent
// reports applied to them (agent_seqs: each event once; proof_samples).
#include <string_view>
#include <utility>
#include <vector>

#include "store/offer_snapshot.h"
#include "store/sql_columns.h"
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {
namespace {

using sql::Statement;

std::optional<core::Verdict::Decision> parse_decision(std::string_view text) {
  for (auto d : {core::Verdict::Decision::Continue, core::Verdict::Decision::Accept,
                 core::Verdict::Decision::Reject}) {
    if (text == core::to_string(d)) return d;
  }
  return std::nullopt;
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
         s.bind_text(p, offer_vast_text(r.offer, s.doing()));
       },
       [](const Statement& s, const char*, InstanceRecord& r, InstanceRead& c) {
         r.offer = read_offer_snapshot(s, r.id, c.what, c.offers);
       },
       [](const InstanceRecord& from, InstanceRecord& to) { to.offer = from.offer; }},
      {"offer_extra_json",
       [](Statement& s, const char* p, const InstanceRecord& r) {
         s.bind_text(p, offer_extra_text(r.offer, s.doing()));
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
        I::real("market_stopped_s", &InstanceRecord::market_stopped_s),
        I::int32("market_stops", &InstanceRecord::market_stops),
        I::opt_real("bid_price", &InstanceRecord::bid_price),
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

// The proof_samples table (keyed by instance_id and seq; no id).
const sql::Columns<core::ProofSample, sql::RowRead>& proof_sample_columns() {
  using P = sql::ColumnsOf<core::ProofSample, sql::RowRead>;
  static const sql::Columns<core::ProofSample, sql::RowRead> columns{
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

std::vector<std::string> sql::instance_tables_columns(std::string_view table) {
  if (table == "instances") return instance_columns().names();
  if (table == "proof_samples") return proof_sample_columns().names();
  return {};
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
    sql::RowRead context{doing + ": sample " + std::to_string(s.integer("seq"))};
    proof_sample_columns().read(s, p, context);
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace pf::store
