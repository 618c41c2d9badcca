#include "store/sqlite_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "market/offer_json.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;

// --- migrations ------------------------------------------------------------------------------
// Append-only: a released step is never edited, a change is a new step. Each step runs in its
// own transaction together with the user_version bump, so a crash leaves either all of it or
// none. Tables are created without IF NOT EXISTS so that applying a step twice fails loudly.
struct Migration {
  int version;
  const char* description;
  const char* sql;
};

constexpr std::array kMigrations{
    Migration{1, "initial schema", R"sql(
CREATE TABLE instances (
  id INTEGER PRIMARY KEY,
  deployment_id TEXT NOT NULL UNIQUE,
  market_id INTEGER,
  -- The offer in vast's own form (market::offer_to_vast_json) plus what that form cannot
  -- carry exactly: derived fields and data flags.
  offer_json TEXT NOT NULL,
  offer_extra_json TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at REAL NOT NULL,
  state_since REAL NOT NULL,
  deadline_at REAL NOT NULL,
  destroy_reason TEXT NOT NULL,
  destroyed_at REAL,
  secret_hash TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  last_heartbeat_at REAL NOT NULL,
  market_status TEXT NOT NULL,
  market_status_since REAL NOT NULL,
  params_done_bytes REAL NOT NULL,
  params_total_bytes REAL NOT NULL,
  params_rate_bps REAL NOT NULL,
  prover_crashes INTEGER NOT NULL,
  ooms INTEGER NOT NULL,
  proofs_benchmark INTEGER NOT NULL,
  proofs_production INTEGER NOT NULL,
  gpu_util REAL NOT NULL,
  peak_memory_gib REAL NOT NULL,
  spend_usd REAL NOT NULL,
  billed_until REAL NOT NULL,
  verdict_decision TEXT,  -- NULL: no verdict yet; the other verdict_* columns are then NULL
  verdict_rate REAL,
  verdict_low REAL,
  verdict_high REAL,
  verdict_samples INTEGER,
  verdict_break_even_rate REAL,
  verdict_reason TEXT,
  plan_json TEXT NOT NULL,
  origin TEXT NOT NULL
) STRICT;
CREATE INDEX instances_market_id ON instances(market_id);
CREATE INDEX instances_state ON instances(state);
CREATE INDEX instances_token_hash ON instances(token_hash);

CREATE TABLE instance_events (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  at REAL NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL,
  data_json TEXT NOT NULL
) STRICT;
CREATE INDEX instance_events_instance ON instance_events(instance_id, at, id);

CREATE TABLE agent_seqs (
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  seq INTEGER NOT NULL,
  PRIMARY KEY (instance_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE proof_samples (
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  seq INTEGER NOT NULL,
  at REAL NOT NULL,
  seconds REAL NOT NULL,
  gpu_ms REAL NOT NULL,
  queue_ms REAL NOT NULL,
  phase TEXT NOT NULL,
  PRIMARY KEY (instance_id, seq)
) STRICT, WITHOUT ROWID;

-- Host history outlives instances and may be imported, so instance_id is informational.
CREATE TABLE bench_runs (
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL,
  gpu_name TEXT NOT NULL,
  num_gpus INTEGER NOT NULL,
  instance_id INTEGER NOT NULL,
  at REAL NOT NULL,
  rate REAL NOT NULL,
  low REAL NOT NULL,
  high REAL NOT NULL,
  samples INTEGER NOT NULL,
  kind TEXT NOT NULL,
  contended INTEGER NOT NULL CHECK (contended IN (0, 1)),
  throttled INTEGER NOT NULL CHECK (throttled IN (0, 1)),
  plan_json TEXT NOT NULL
) STRICT;
CREATE INDEX bench_runs_host ON bench_runs(machine_id, gpu_name, num_gpus, at);

CREATE TABLE bad_hosts (
  machine_id INTEGER NOT NULL,
  source TEXT NOT NULL,
  reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL,
  added_at REAL NOT NULL,
  expires_at REAL,  -- NULL: until removed
  strikes INTEGER NOT NULL,
  PRIMARY KEY (machine_id, source)
) STRICT;

CREATE TABLE settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
)sql"},
    // One lifecycle (issue 11): the close cause is typed and stored, and what the manager
    // needs after a restart (the benchmark clock, a reported throttle, the production windows
    // recorded) lives on the row. Rows closed before keep an empty cause, except the
    // operator's destroys, whose reason was always exactly "operator request": their
    // cooldown keeps working across the upgrade.
    Migration{2, "typed close cause and restart state on instances", R"sql(
ALTER TABLE instances ADD COLUMN close_cause TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN bench_since REAL NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN gpu_throttled INTEGER NOT NULL DEFAULT 0
  CHECK (gpu_throttled IN (0, 1));
ALTER TABLE instances ADD COLUMN production_windows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN oom_partitions INTEGER NOT NULL DEFAULT 0
  CHECK (oom_partitions >= 0);
UPDATE instances SET close_cause = 'operator'
  WHERE destroy_reason = 'operator request' AND state IN ('destroying', 'destroyed');
UPDATE instances SET production_windows =
  (SELECT COUNT(*) FROM bench_runs
   WHERE bench_runs.instance_id = instances.id AND bench_runs.kind = 'production');
UPDATE instances SET bench_since =
  (SELECT COALESCE(MAX(at), 0) FROM proof_samples
   WHERE proof_samples.instance_id = instances.id AND proof_samples.phase = 'warmup');
)sql"},
    // Real work (issue 12): the gateway's proof jobs. The proof bytes live in the row (a few
    // KiB: a PoRep C2 proof is 1,920 bytes), so "done" and its proof commit together; inputs
    // (up to hundreds of MiB) live content-addressed in the data directory (jobs/input_store.h).
    // instance_id names the holder without a foreign key: a job outlives any one instance row.
    Migration{3, "proof jobs", R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  request_id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  priority INTEGER NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'assigned', 'proving', 'done', 'failed', 'cancelled')),
  input_digest TEXT NOT NULL,
  input_bytes INTEGER NOT NULL CHECK (input_bytes >= 0),
  attempts INTEGER NOT NULL CHECK (attempts >= 0),
  failures INTEGER NOT NULL CHECK (failures >= 0),
  instance_id INTEGER,
  lease_expires_at REAL NOT NULL,
  submitted_at REAL NOT NULL,
  deadline_at REAL NOT NULL,
  assigned_at REAL NOT NULL,
  started_at REAL NOT NULL,
  finished_at REAL NOT NULL,
  delivered_at REAL NOT NULL,
  proof_digest TEXT NOT NULL,
  proof BLOB,
  error TEXT NOT NULL,
  avoid_instances TEXT NOT NULL,
  rejections INTEGER NOT NULL CHECK (rejections >= 0),
  prove_ms REAL NOT NULL,
  gpu_ms REAL NOT NULL,
  queue_ms REAL NOT NULL
) STRICT;
CREATE INDEX jobs_state ON jobs(state, id);
CREATE INDEX jobs_submitted_at ON jobs(submitted_at);
CREATE INDEX jobs_finished_at ON jobs(finished_at);
)sql"},
    // What agents saw of the prover's memory (issue 13): the plan and the peak after warm-up
    // (memory_check) or an OOM kill at a plan. core::learned_memory_model reads them back per
    // machine and GPU model, so a restart keeps what was learned.
    Migration{4, "memory observations", R"sql(
CREATE TABLE memory_observations (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL,
  machine_id INTEGER NOT NULL,
  gpu_name TEXT NOT NULL,
  num_gpus INTEGER NOT NULL,
  at REAL NOT NULL,
  partitions INTEGER NOT NULL CHECK (partitions > 0),
  observed_peak_gib REAL NOT NULL CHECK (observed_peak_gib >= 0),
  model_peak_gib REAL NOT NULL CHECK (model_peak_gib >= 0),
  usable_ram_gib REAL NOT NULL CHECK (usable_ram_gib >= 0),
  oom INTEGER NOT NULL CHECK (oom IN (0, 1))
) STRICT;
CREATE INDEX memory_observations_machine ON memory_observations(machine_id, at);
CREATE INDEX memory_observations_gpu ON memory_observations(gpu_name COLLATE NOCASE, at);
)sql"},
};

consteval bool versions_are_consecutive() {
  int expected = 1;
  for (const auto& m : kMigrations)
    if (m.version != expected++) return false;
  return true;
}
static_assert(versions_are_consecutive(), "migration versions must be 1, 2, 3, ... in order");

// --- RAII over the C API -----------------------------------------------------------------------

struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

[[noreturn]] void fail(sqlite3* db, std::string_view doing) {
  throw StoreError(std::string(doing) + ": " + sqlite3_errmsg(db));
}

// Runs SQL that carries no values (DDL, pragmas, transaction control).
void exec(sqlite3* db, const std::string& sql, std::string_view doing) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, doing);
}

// Used while an exception is already propagating: a failure here must not replace it.
void rollback_quietly(sqlite3* db) {
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

// A prepared statement kept for reuse. Parsing SQL costs more than running it (it dominated the
// agent heartbeat), so each SqliteStore prepares each distinct SQL text once.
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct CachedStatement {
  StmtHandle stmt;
  // Column name → index, read once at prepare time: rows are read by name, and an `instances`
  // row has 36 columns.
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> columns;
  bool in_use = false;  // a Statement holds it; a second user of the same SQL prepares its own
};

class StatementCache {
 public:
  // The cached statement for sql, prepared on first use; nullptr when it is already in use.
  CachedStatement* borrow(sqlite3* db, std::string_view sql, const std::string& doing) {
    auto it = by_sql_.find(sql);
    if (it == by_sql_.end()) {
      auto entry = std::make_unique<CachedStatement>();
      entry->stmt = prepare(db, sql, doing);
      const int n = sqlite3_column_count(entry->stmt.get());
      for (int i = 0; i < n; ++i)
        entry->columns.emplace(sqlite3_column_name(entry->stmt.get(), i), i);
      it = by_sql_.emplace(std::string(sql), std::move(entry)).first;
    }
    if (it->second->in_use) return nullptr;
    it->second->in_use = true;
    return it->second.get();
  }

  static StmtHandle prepare(sqlite3* db, std::string_view sql, const std::string& doing) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
    StmtHandle stmt(raw);
    if (rc != SQLITE_OK) fail(db, doing + " (preparing)");
    return stmt;
  }

 private:
  std::unordered_map<std::string, std::unique_ptr<CachedStatement>, StringHash, std::equal_to<>>
      by_sql_;
};

// One use of a prepared statement. Parameters are named (":name") and columns are read by name,
// so the long instance rows cannot silently shift when a column is added.
class Statement {
 public:
  // Prepares sql for this use only (migrations, pragmas: SQL that runs once).
  Statement(sqlite3* db, std::string_view sql, std::string doing)
      : db_(db), doing_(std::move(doing)) {
    owned_ = StatementCache::prepare(db, sql, doing_);
    stmt_ = owned_.get();
  }
  // Uses the cache's statement for sql; resets it for the next user when done.
  Statement(StatementCache& cache, sqlite3* db, std::string_view sql, std::string doing)
      : db_(db), doing_(std::move(doing)) {
    cached_ = cache.borrow(db, sql, doing_);
    if (cached_ != nullptr) {
      stmt_ = cached_->stmt.get();
    } else {
      owned_ = StatementCache::prepare(db, sql, doing_);
      stmt_ = owned_.get();
    }
  }
  ~Statement() {
    if (cached_ == nullptr) return;
    // Resetting ends the statement's read of the database (an unreset SELECT would pin an old
    // snapshot) and its result code repeats an error already thrown, so it is not checked.
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    cached_->in_use = false;
  }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  void bind_int(const char* name, std::int64_t value) {
    check(sqlite3_bind_int64(stmt_, param(name), value));
  }
  void bind_bool(const char* name, bool value) { bind_int(name, value ? 1 : 0); }
  void bind_real(const char* name, double value) {
    // SQLite would turn NaN into NULL, which comes back as 0: refuse rather than lose it.
    if (std::isnan(value)) throw StoreError(doing_ + ": " + (name + 1) + " is NaN");
    check(sqlite3_bind_double(stmt_, param(name), value));
  }
  void bind_text(const char* name, std::string_view value) {
    check(sqlite3_bind_text64(stmt_, param(name), value.data(), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }
  void bind_blob(const char* name, std::string_view value) {
    check(sqlite3_bind_blob64(stmt_, param(name), value.data(), value.size(), SQLITE_TRANSIENT));
  }
  void bind_null(const char* name) { check(sqlite3_bind_null(stmt_, param(name))); }
  void bind_opt_real(const char* name, const std::optional<double>& value) {
    if (value)
      bind_real(name, *value);
    else
      bind_null(name);
  }
  void bind_opt_int(const char* name, const std::optional<std::int64_t>& value) {
    if (value)
      bind_int(name, *value);
    else
      bind_null(name);
  }

  // True while a row is available.
  bool next() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, doing_);
  }
  void run() {
    while (next()) {
    }
  }
  // Rows changed by the last run() (meaningful for INSERT/UPDATE/DELETE).
  int changes() const { return sqlite3_changes(db_); }

  bool is_null(const char* col) const {
    return sqlite3_column_type(stmt_, column(col)) == SQLITE_NULL;
  }
  std::int64_t integer(const char* col) const { return sqlite3_column_int64(stmt_, column(col)); }
  int int32(const char* col) const {
    const std::int64_t v = integer(col);
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      throw StoreError(doing_ + ": column " + col + " is out of range: " + std::to_string(v));
    }
    return static_cast<int>(v);
  }
  bool boolean(const char* col) const { return integer(col) != 0; }
  double real(const char* col) const { return sqlite3_column_double(stmt_, column(col)); }
  std::string text(const char* col) const { return std::string(text_view(col)); }
  // Valid until the next step or the end of this Statement.
  std::string_view text_view(const char* col) const {
    const int i = column(col);
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i))};
  }
  std::string blob(const char* col) const {
    const int i = column(col);
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, i))};
  }
  std::optional<double> opt_real(const char* col) const {
    if (is_null(col)) return std::nullopt;
    return real(col);
  }
  std::optional<std::int64_t> opt_integer(const char* col) const {
    if (is_null(col)) return std::nullopt;
    return integer(col);
  }

  const std::string& doing() const { return doing_; }

 private:
  int param(const char* name) const {
    const int i = sqlite3_bind_parameter_index(stmt_, name);
    if (i == 0) throw StoreError(doing_ + ": internal error: no SQL parameter " + name);
    return i;
  }
  int column(const char* name) const {
    if (cached_ != nullptr) {
      // SQLite re-prepares a statement after a schema change, which may move a column of
      // SELECT *: a remembered index is used only while the statement still names it so.
      auto it = cached_->columns.find(std::string_view(name));
      if (it != cached_->columns.end() && it->second < sqlite3_column_count(stmt_) &&
          std::strcmp(sqlite3_column_name(stmt_, it->second), name) == 0) {
        return it->second;
      }
    }
    const int n = sqlite3_column_count(stmt_);
    for (int i = 0; i < n; ++i) {
      if (std::strcmp(sqlite3_column_name(stmt_, i), name) == 0) return i;
    }
    throw StoreError(doing_ + ": internal error: no column " + name + " in the result");
  }
  void check(int rc) const {
    if (rc != SQLITE_OK) fail(db_, doing_ + " (binding)");
  }

  sqlite3* db_;
  std::string doing_;
  StmtHandle owned_;                   // set when this use prepared its own statement
  CachedStatement* cached_ = nullptr;  // set when borrowed from a StatementCache
  sqlite3_stmt* stmt_ = nullptr;
};

int read_user_version(sqlite3* db, std::string_view doing) {
  Statement s(db, "PRAGMA user_version", std::string(doing));
  if (!s.next()) throw StoreError(std::string(doing) + ": PRAGMA user_version returned nothing");
  return s.int32("user_version");
}

int latest_version() {
  return kMigrations.back().version;
}

[[noreturn]] void refuse_newer(const std::string& path, int found) {
  throw StoreError("opening store '" + path + "': database schema version " +
                   std::to_string(found) + " is newer than this proverfleet (" +
                   std::to_string(latest_version()) + "); upgrade proverfleet");
}

void migrate(sqlite3* db, const std::string& path) {
  const std::string doing = "opening store '" + path + "'";
  const int found = read_user_version(db, doing + ": reading schema version");
  if (found > latest_version()) refuse_newer(path, found);
  for (const auto& step : kMigrations) {
    if (step.version <= found) continue;
    const std::string applying = doing + ": applying migration " + std::to_string(step.version) +
                                 " (" + step.description + ")";
    exec(db, "BEGIN IMMEDIATE", applying);
    try {
      // Another process may have migrated between our first read and BEGIN.
      const int now = read_user_version(db, applying);
      if (now > latest_version()) refuse_newer(path, now);
      if (now < step.version) {
        exec(db, step.sql, applying);
        exec(db, "PRAGMA user_version = " + std::to_string(step.version), applying);
      }
      exec(db, "COMMIT", applying);
    } catch (...) {
      rollback_quietly(db);
      throw;
    }
  }
}

// --- row mapping -------------------------------------------------------------------------------

std::optional<core::Verdict::Decision> parse_decision(std::string_view text) {
  for (auto d : {core::Verdict::Decision::Continue, core::Verdict::Decision::Accept,
                 core::Verdict::Decision::Reject}) {
    if (text == core::to_string(d)) return d;
  }
  return std::nullopt;
}

std::string dump_json(const json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const json::exception& e) {
    throw StoreError(std::string(what) + ": " + e.what());
  }
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
    "close_cause, bench_since, gpu_throttled, production_windows, oom_partitions";

void bind_instance(Statement& s, const core::InstanceRecord& r) {
  s.bind_text(":deployment_id", r.deployment_id);
  s.bind_opt_int(":market_id", r.market_id);
  bind_offer(s, r.offer);
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

constexpr const char* kJobColumns =
    "request_id, kind, priority, state, input_digest, input_bytes, attempts, failures, "
    "instance_id, lease_expires_at, submitted_at, deadline_at, assigned_at, started_at, "
    "finished_at, delivered_at, proof_digest, error, avoid_instances, rejections, prove_ms, "
    "gpu_ms, queue_ms";

void bind_job(Statement& s, const core::Job& j) {
  s.bind_text(":request_id", j.request_id);
  s.bind_text(":kind", core::to_string(j.kind));
  s.bind_int(":priority", j.priority);
  s.bind_text(":state", core::to_string(j.state));
  s.bind_text(":input_digest", j.input_digest);
  s.bind_int(":input_bytes", j.input_bytes);
  s.bind_int(":attempts", j.attempts);
  s.bind_int(":failures", j.failures);
  s.bind_opt_int(":instance_id", j.instance_id);
  s.bind_real(":lease_expires_at", j.lease_expires_at);
  s.bind_real(":submitted_at", j.submitted_at);
  s.bind_real(":deadline_at", j.deadline_at);
  s.bind_real(":assigned_at", j.assigned_at);
  s.bind_real(":started_at", j.started_at);
  s.bind_real(":finished_at", j.finished_at);
  s.bind_real(":delivered_at", j.delivered_at);
  s.bind_text(":proof_digest", j.proof_digest);
  s.bind_text(":error", j.error);
  s.bind_text(":avoid_instances",
              dump_json(json(j.avoid_instances), s.doing() + ": encoding avoid_instances"));
  s.bind_int(":rejections", j.rejections);
  s.bind_real(":prove_ms", j.prove_ms);
  s.bind_real(":gpu_ms", j.gpu_ms);
  s.bind_real(":queue_ms", j.queue_ms);
}

core::Job read_job(const Statement& s) {
  core::Job j;
  j.id = s.integer("id");
  const std::string what = "job " + std::to_string(j.id);
  j.request_id = s.text("request_id");
  const std::string kind = s.text("kind");
  auto parsed_kind = core::parse_job_kind(kind);
  if (!parsed_kind) throw StoreError(what + " has unknown kind '" + kind + "'");
  j.kind = *parsed_kind;
  j.priority = s.int32("priority");
  const std::string state = s.text("state");
  auto parsed_state = core::parse_job_state(state);
  if (!parsed_state) throw StoreError(what + " has unknown state '" + state + "'");
  j.state = *parsed_state;
  j.input_digest = s.text("input_digest");
  j.input_bytes = s.integer("input_bytes");
  j.attempts = s.int32("attempts");
  j.failures = s.int32("failures");
  j.instance_id = s.opt_integer("instance_id");
  j.lease_expires_at = s.real("lease_expires_at");
  j.submitted_at = s.real("submitted_at");
  j.deadline_at = s.real("deadline_at");
  j.assigned_at = s.real("assigned_at");
  j.started_at = s.real("started_at");
  j.finished_at = s.real("finished_at");
  j.delivered_at = s.real("delivered_at");
  j.proof_digest = s.text("proof_digest");
  j.error = s.text("error");
  auto avoid = util::parse_json(s.text_view("avoid_instances"));
  if (!avoid || !avoid->is_array()) throw StoreError(what + " has a corrupt avoid_instances list");
  for (const auto& id : *avoid) {
    if (!id.is_number_integer()) throw StoreError(what + " has a corrupt avoid_instances list");
    j.avoid_instances.push_back(id.get<std::int64_t>());
  }
  j.rejections = s.int32("rejections");
  j.prove_ms = s.real("prove_ms");
  j.gpu_ms = s.real("gpu_ms");
  j.queue_ms = s.real("queue_ms");
  return j;
}

std::string job_select(std::string_view where) {
  return std::string("SELECT id, ") + kJobColumns + " FROM jobs " + std::string(where);
}

}  // namespace

namespace {

// The database holds agent token hashes, logs and the event trail: it and its -wal/-shm (which
// SQLite creates with the database file's mode) are the owner's alone. Created 0600 before
// SQLite opens it; group and other bits are removed from files an older build left 0644. A
// directory every user may write is refused: anyone could swap the database or plant a -wal
// file for it.
void secure_database_files(const std::string& path, const std::string& doing) {
  const std::filesystem::path file(path);
  const std::filesystem::path dir = file.has_parent_path() ? file.parent_path() : ".";
  struct stat dir_stat {};
  if (::stat(dir.c_str(), &dir_stat) != 0) {
    throw StoreError(doing + ": cannot inspect directory '" + dir.string() +
                     "': " + std::strerror(errno));
  }
  if ((dir_stat.st_mode & S_IWOTH) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(dir_stat.st_mode & 07777));
    throw StoreError(doing + ": directory '" + dir.string() + "' is writable by every user (mode " +
                     mode +
                     "), so anyone could replace the database or its -wal/-shm files; keep it "
                     "in a directory only this user can write (e.g. mkdir -m 700 DIR)");
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw StoreError(doing + ": cannot open: " + std::strerror(errno));
  struct stat file_stat {};
  const bool ok = ::fstat(fd, &file_stat) == 0 &&
                  ((file_stat.st_mode & 077) == 0 || ::fchmod(fd, file_stat.st_mode & 0700) == 0);
  const int saved = errno;
  ::close(fd);
  if (!ok) {
    throw StoreError(doing +
                     ": cannot make the database private (chmod 600): " + std::strerror(saved));
  }
  for (const char* suffix : {"-wal", "-shm", "-journal"}) {
    const std::string side = path + suffix;
    struct stat side_stat {};
    if (::lstat(side.c_str(), &side_stat) != 0) continue;  // not there yet: created from the db's
    if (S_ISREG(side_stat.st_mode) && (side_stat.st_mode & 077) != 0 &&
        ::chmod(side.c_str(), side_stat.st_mode & 0700) != 0) {
      throw StoreError(doing + ": cannot make '" + side +
                       "' private (chmod 600): " + std::strerror(errno));
    }
  }
}

}  // namespace

int latest_schema_version() {
  return latest_version();
}

void SqliteStore::DbCloser::operator()(sqlite3* db) const {
  sqlite3_close_v2(db);
}

struct SqliteStore::Caches {
  StatementCache statements;
  OfferCache offers;
};

// Copies the WAL back into the database file from a thread and connection of its own. SQLite
// would otherwise do it inside the commit that crosses its threshold, fsyncs included, while
// that commit holds mutex_ and every agent request waits behind it (in bench/heartbeat_bench
// this cost a third of the time the lock was held).
class SqliteStore::Checkpointer {
 public:
  explicit Checkpointer(const std::string& path) {
    const std::string doing = "opening store '" + path + "' for checkpoints";
    sqlite3* raw = nullptr;
    const int rc =
        sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
    db_.reset(raw);
    if (rc != SQLITE_OK) {
      throw StoreError(doing + ": " + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
    }
    // NORMAL still syncs the WAL before copying it and the database after: what makes the
    // copy safe. The thread starts last, once everything it uses exists.
    exec(db_.get(), "PRAGMA synchronous=NORMAL", doing + ": setting synchronous");
    thread_ = std::thread([this] { run(); });
  }
  ~Checkpointer() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // SQLite's WAL hook: runs after every commit of the store's connection (under its mutex).
  static int on_commit(void* self, sqlite3* db, const char*, int wal_pages) {
    static_cast<Checkpointer*>(self)->committed(db, wal_pages);
    return SQLITE_OK;
  }

 private:
  // SQLite's own threshold (wal_autocheckpoint), so the WAL stays the size it always was.
  static constexpr int kRequestPages = 1000;
  // Should the thread fall far behind, the committing connection copies inline, as SQLite
  // would, rather than let the WAL grow without bound.
  static constexpr int kInlinePages = 20 * kRequestPages;

  void committed(sqlite3* db, int wal_pages) {
    if (wal_pages >= kInlinePages) {
      // PASSIVE never waits; what it cannot copy now is copied after a later commit.
      sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      return;
    }
    if (wal_pages < kRequestPages) return;
    {
      std::lock_guard lock(mu_);
      if (requested_) return;
      requested_ = true;
    }
    wake_.notify_one();
  }

  void run() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return requested_ || stopping_; });
      if (stopping_) return;
      requested_ = false;
      lock.unlock();
      // PASSIVE copies what no reader still needs, without blocking the writer. A run that
      // could not copy everything (busy, or the writer went on) is repeated at the next
      // commit over the threshold, and the writer restarts the WAL once it is all copied.
      sqlite3_wal_checkpoint_v2(db_.get(), nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
      lock.lock();
    }
  }

  std::unique_ptr<sqlite3, DbCloser> db_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool requested_ = false;
  bool stopping_ = false;
  std::thread thread_;  // last: started after, and joined before, everything above
};

SqliteStore::SqliteStore(const std::string& path) : caches_(std::make_unique<Caches>()) {
  if (path.empty()) throw StoreError("opening store: the database path is empty");
  const std::string doing = "opening store '" + path + "'";
  if (path != ":memory:") {
    // SQLite's own message ("unable to open database file") does not say why.
    const auto dir = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
      throw StoreError(doing + ": directory '" + dir.string() + "' does not exist");
    }
    secure_database_files(path, doing);
  }
  sqlite3* raw = nullptr;
  // NOMUTEX: mutex_ already serialises every use of this connection, so SQLite's own per-call
  // locking would only be paid twice.
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  db_.reset(raw);  // sqlite3_open_v2 may allocate a handle even when it fails
  if (rc != SQLITE_OK) {
    throw StoreError(doing + ": " + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3* db = db_.get();
  sqlite3_extended_result_codes(db, 1);
  if (sqlite3_busy_timeout(db, 5000) != SQLITE_OK) fail(db, doing + ": setting busy_timeout");

  // WAL lets CLI commands read while the manager writes; :memory: reports "memory".
  {
    Statement s(db, "PRAGMA journal_mode=WAL", doing + ": enabling WAL");
    const std::string mode = s.next() ? s.text("journal_mode") : std::string();
    if (mode != "wal" && !(path == ":memory:" && mode == "memory")) {
      throw StoreError(doing + ": cannot enable WAL journal mode (got '" + mode + "')");
    }
  }
  exec(db, "PRAGMA foreign_keys=ON", doing + ": enabling foreign keys");
  // Durability trade-off: in WAL mode, NORMAL syncs at checkpoints, not at every commit. A
  // commit survives a crash of the process (what the manager must survive: it writes intent
  // before acting); a power loss or kernel crash may lose the last few commits, which the
  // reconciliation with the market's instance list recovers. FULL would add an fsync to every
  // agent heartbeat.
  exec(db, "PRAGMA synchronous=NORMAL", doing + ": setting synchronous");
  migrate(db, path);
  if (path != ":memory:") {
    checkpointer_ = std::make_unique<Checkpointer>(path);
    // Replaces SQLite's automatic checkpoint in the committing connection.
    sqlite3_wal_hook(db, &Checkpointer::on_commit, checkpointer_.get());
  }
}

SqliteStore::~SqliteStore() {
  if (checkpointer_) sqlite3_wal_hook(db_.get(), nullptr, nullptr);
}

int SqliteStore::schema_version() {
  std::lock_guard lock(mutex_);
  return read_user_version(db_.get(), "reading schema version");
}

void SqliteStore::transaction(const std::function<void()>& fn) {
  std::lock_guard lock(mutex_);
  sqlite3* db = db_.get();
  if (depth_ > 0) {
    // Joins the outer transaction; the savepoint lets an inner failure that the caller
    // catches undo only the inner writes instead of committing half of them.
    const std::string name = "pf_nested_" + std::to_string(depth_);
    exec(db, "SAVEPOINT " + name, "starting a nested transaction");
    ++depth_;
    try {
      fn();
    } catch (...) {
      --depth_;
      sqlite3_exec(db, ("ROLLBACK TO " + name).c_str(), nullptr, nullptr, nullptr);
      sqlite3_exec(db, ("RELEASE " + name).c_str(), nullptr, nullptr, nullptr);
      throw;
    }
    --depth_;
    exec(db, "RELEASE " + name, "finishing a nested transaction");
    return;
  }

  Statement(caches_->statements, db, "BEGIN IMMEDIATE", "starting a transaction").run();
  depth_ = 1;
  try {
    fn();
  } catch (...) {
    depth_ = 0;
    rollback_quietly(db);
    throw;
  }
  depth_ = 0;
  try {
    Statement(caches_->statements, db, "COMMIT", "committing a transaction").run();
  } catch (...) {
    rollback_quietly(db);
    throw;
  }
}

// --- instances -----------------------------------------------------------------------------------

std::int64_t SqliteStore::insert_instance(const core::InstanceRecord& record) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
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
                  ":oom_partitions)",
              "inserting instance with deployment_id '" + record.deployment_id + "'");
  bind_instance(s, record);
  s.run();
  return sqlite3_last_insert_rowid(db_.get());
}

void SqliteStore::update_instance(const core::InstanceRecord& record) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating instance " + std::to_string(record.id);
  Statement s(caches_->statements, db_.get(),
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
              "oom_partitions = :oom_partitions WHERE id = :id",
              doing);
  bind_instance(s, record);
  s.bind_int(":id", record.id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such instance");
}

void SqliteStore::update_agent_progress(const core::InstanceRecord& r) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating agent progress of instance " + std::to_string(r.id);
  Statement s(caches_->statements, db_.get(),
              "UPDATE instances SET last_heartbeat_at = :last_heartbeat_at, "
              "params_done_bytes = :params_done_bytes, params_total_bytes = :params_total_bytes, "
              "params_rate_bps = :params_rate_bps, prover_crashes = :prover_crashes, "
              "ooms = :ooms, proofs_benchmark = :proofs_benchmark, "
              "proofs_production = :proofs_production, gpu_util = :gpu_util, "
              "peak_memory_gib = :peak_memory_gib, plan_json = :plan_json, "
              "spend_usd = :spend_usd, billed_until = :billed_until, "
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
  s.bind_real(":billed_until", r.billed_until);
  s.bind_int(":gpu_throttled", r.gpu_throttled ? 1 : 0);
  s.bind_real(":bench_since", r.bench_since);
  s.bind_int(":id", r.id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such instance");
}

std::optional<core::InstanceRecord> SqliteStore::instance(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), "SELECT * FROM instances WHERE id = :id",
              "reading instance " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqliteStore::instance_by_deployment(const std::string& dep) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), "SELECT * FROM instances WHERE deployment_id = :dep",
              "reading instance with deployment_id '" + dep + "'");
  s.bind_text(":dep", dep);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqliteStore::instance_by_market_id(std::int64_t market_id) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT * FROM instances WHERE market_id = :market_id ORDER BY id DESC LIMIT 1",
              "reading instance with market id " + std::to_string(market_id));
  s.bind_int(":market_id", market_id);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqliteStore::instance_by_token_hash(const std::string& hash) {
  if (hash.empty()) return std::nullopt;  // rows without a token have an empty hash
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT * FROM instances WHERE token_hash = :hash LIMIT 1",
              "reading instance by agent token");
  s.bind_text(":hash", hash);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::vector<core::InstanceRecord> SqliteStore::instances(bool include_destroyed) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT * FROM instances WHERE :all OR state != :destroyed ORDER BY id",
              "listing instances");
  s.bind_bool(":all", include_destroyed);
  s.bind_text(":destroyed", core::to_string(core::InstanceState::Destroyed));
  std::vector<core::InstanceRecord> out;
  while (s.next()) out.push_back(read_instance(s, caches_->offers));
  return out;
}

// --- audit trail ---------------------------------------------------------------------------------

std::int64_t SqliteStore::append_event(const core::InstanceEvent& event) {
  std::lock_guard lock(mutex_);
  Statement s(
      caches_->statements, db_.get(),
      "INSERT INTO instance_events (instance_id, at, kind, message, data_json) "
      "VALUES (:instance_id, :at, :kind, :message, :data_json)",
      "appending '" + event.kind + "' event for instance " + std::to_string(event.instance_id));
  s.bind_int(":instance_id", event.instance_id);
  s.bind_real(":at", event.at);
  s.bind_text(":kind", event.kind);
  s.bind_text(":message", event.message);
  s.bind_text(":data_json", event.data_json);
  s.run();
  return sqlite3_last_insert_rowid(db_.get());
}

std::vector<core::InstanceEvent> SqliteStore::events(std::int64_t instance_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT * FROM (SELECT * FROM instance_events WHERE instance_id = :instance_id "
              "ORDER BY at DESC, id DESC LIMIT :limit) ORDER BY at, id",
              "reading events of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  // SQLite reads a negative LIMIT as "no limit".
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  s.bind_int(":limit", limit == 0 ? -1 : static_cast<std::int64_t>(std::min(limit, kMax)));
  std::vector<core::InstanceEvent> out;
  while (s.next()) out.push_back(read_event(s));
  return out;
}

// --- agent reports -------------------------------------------------------------------------------

bool SqliteStore::mark_agent_seq(std::int64_t instance_id, std::int64_t seq) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "INSERT INTO agent_seqs (instance_id, seq) VALUES (:instance_id, :seq) "
              "ON CONFLICT (instance_id, seq) DO NOTHING",
              "recording agent event " + std::to_string(seq) + " of instance " +
                  std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  s.bind_int(":seq", seq);
  s.run();
  return s.changes() == 1;
}

bool SqliteStore::insert_proof_sample(const core::ProofSample& sample) {
  std::lock_guard lock(mutex_);
  // ON CONFLICT on the key only: any other constraint failure still raises an error.
  Statement s(caches_->statements, db_.get(),
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
  s.run();
  return s.changes() == 1;
}

std::vector<core::ProofSample> SqliteStore::proof_samples(std::int64_t instance_id) {
  std::lock_guard lock(mutex_);
  const std::string doing = "reading proof samples of instance " + std::to_string(instance_id);
  Statement s(caches_->statements, db_.get(),
              "SELECT * FROM proof_samples WHERE instance_id = :id ORDER BY seq", doing);
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

std::int64_t SqliteStore::insert_bench_run(const core::BenchRun& run) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "INSERT INTO bench_runs (machine_id, gpu_name, num_gpus, instance_id, at, rate, "
              "low, high, samples, kind, contended, throttled, plan_json) VALUES (:machine_id, "
              ":gpu_name, :num_gpus, :instance_id, :at, :rate, :low, :high, :samples, :kind, "
              ":contended, :throttled, :plan_json)",
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
  s.run();
  return sqlite3_last_insert_rowid(db_.get());
}

std::vector<core::BenchRun> SqliteStore::bench_runs(const core::HostKey& host) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
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

std::vector<core::BenchRun> SqliteStore::all_bench_runs() {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), "SELECT * FROM bench_runs ORDER BY at, id",
              "reading bench runs");
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

// --- memory observations -------------------------------------------------------------------

void SqliteStore::insert_memory_observation(const core::MemoryObservation& o) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "INSERT INTO memory_observations (instance_id, machine_id, gpu_name, num_gpus, at, "
              "partitions, observed_peak_gib, model_peak_gib, usable_ram_gib, oom) VALUES "
              "(:instance_id, :machine_id, :gpu_name, :num_gpus, :at, :partitions, "
              ":observed_peak_gib, :model_peak_gib, :usable_ram_gib, :oom)",
              "inserting memory observation of instance " + std::to_string(o.instance_id));
  s.bind_int(":instance_id", o.instance_id);
  s.bind_int(":machine_id", o.machine_id);
  s.bind_text(":gpu_name", o.gpu_name);
  s.bind_int(":num_gpus", o.num_gpus);
  s.bind_real(":at", o.at);
  s.bind_int(":partitions", o.partitions);
  s.bind_real(":observed_peak_gib", o.observed_peak_gib);
  s.bind_real(":model_peak_gib", o.model_peak_gib);
  s.bind_real(":usable_ram_gib", o.usable_ram_gib);
  s.bind_bool(":oom", o.oom);
  s.run();
}

std::vector<core::MemoryObservation> SqliteStore::memory_observations(std::int64_t machine_id,
                                                                      const std::string& gpu_name,
                                                                      std::size_t limit) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT * FROM memory_observations WHERE machine_id = :machine_id OR gpu_name = "
              ":gpu_name COLLATE NOCASE ORDER BY at DESC, id DESC LIMIT :limit",
              "reading memory observations of machine " + std::to_string(machine_id));
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":gpu_name", gpu_name);
  s.bind_int(":limit", static_cast<std::int64_t>(
                           std::min<std::size_t>(limit, std::numeric_limits<std::int32_t>::max())));
  std::vector<core::MemoryObservation> out;
  while (s.next()) {
    core::MemoryObservation o;
    o.instance_id = s.integer("instance_id");
    o.machine_id = s.integer("machine_id");
    o.gpu_name = s.text("gpu_name");
    o.num_gpus = s.int32("num_gpus");
    o.at = s.real("at");
    o.partitions = s.int32("partitions");
    o.observed_peak_gib = s.real("observed_peak_gib");
    o.model_peak_gib = s.real("model_peak_gib");
    o.usable_ram_gib = s.real("usable_ram_gib");
    o.oom = s.integer("oom") != 0;
    out.push_back(std::move(o));
  }
  return out;
}

// --- bad hosts -----------------------------------------------------------------------------------

void SqliteStore::put_bad_host(const core::BadHost& entry) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
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

bool SqliteStore::remove_bad_host(std::int64_t machine_id, const std::string& source) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "DELETE FROM bad_hosts WHERE machine_id = :machine_id AND source = :source",
              "removing bad host " + std::to_string(machine_id) + " (" + source + ")");
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":source", source);
  s.run();
  return s.changes() > 0;
}

std::vector<core::BadHost> SqliteStore::bad_hosts() {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), "SELECT * FROM bad_hosts ORDER BY machine_id, source",
              "reading bad hosts");
  std::vector<core::BadHost> out;
  while (s.next()) out.push_back(read_bad_host(s));
  return out;
}

// --- settings ------------------------------------------------------------------------------------

std::optional<std::string> SqliteStore::setting(const std::string& key) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), "SELECT value FROM settings WHERE key = :key",
              "reading setting '" + key + "'");
  s.bind_text(":key", key);
  if (!s.next()) return std::nullopt;
  return s.text("value");
}

void SqliteStore::put_setting(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "INSERT INTO settings (key, value) VALUES (:key, :value) "
              "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
              "writing setting '" + key + "'");
  s.bind_text(":key", key);
  s.bind_text(":value", value);
  s.run();
}

// --- proof jobs ----------------------------------------------------------------------------------

std::int64_t SqliteStore::insert_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              std::string("INSERT INTO jobs (") + kJobColumns +
                  ") VALUES (:request_id, :kind, :priority, :state, :input_digest, "
                  ":input_bytes, :attempts, :failures, :instance_id, :lease_expires_at, "
                  ":submitted_at, :deadline_at, :assigned_at, :started_at, :finished_at, "
                  ":delivered_at, :proof_digest, :error, :avoid_instances, :rejections, "
                  ":prove_ms, :gpu_ms, :queue_ms)",
              "inserting job with request_id '" + job.request_id + "'");
  bind_job(s, job);
  s.run();
  return sqlite3_last_insert_rowid(db_.get());
}

void SqliteStore::update_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating job " + std::to_string(job.id);
  Statement s(caches_->statements, db_.get(),
              "UPDATE jobs SET request_id = :request_id, kind = :kind, priority = :priority, "
              "state = :state, input_digest = :input_digest, input_bytes = :input_bytes, "
              "attempts = :attempts, failures = :failures, instance_id = :instance_id, "
              "lease_expires_at = :lease_expires_at, submitted_at = :submitted_at, "
              "deadline_at = :deadline_at, assigned_at = :assigned_at, "
              "started_at = :started_at, finished_at = :finished_at, "
              "delivered_at = :delivered_at, proof_digest = :proof_digest, error = :error, "
              "avoid_instances = :avoid_instances, rejections = :rejections, "
              "prove_ms = :prove_ms, gpu_ms = :gpu_ms, queue_ms = :queue_ms WHERE id = :id",
              doing);
  bind_job(s, job);
  s.bind_int(":id", job.id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such job");
}

std::optional<core::Job> SqliteStore::job(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), job_select("WHERE id = :id"),
              "reading job " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::optional<core::Job> SqliteStore::job_by_request(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), job_select("WHERE request_id = :request_id"),
              "reading job with request_id '" + request_id + "'");
  s.bind_text(":request_id", request_id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::vector<core::Job> SqliteStore::open_jobs() {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              job_select("WHERE state IN ('queued', 'assigned', 'proving') ORDER BY id"),
              "reading open jobs");
  std::vector<core::Job> out;
  while (s.next()) out.push_back(read_job(s));
  return out;
}

std::vector<core::Job> SqliteStore::jobs(const std::vector<core::JobState>& states,
                                         std::size_t limit) {
  std::lock_guard lock(mutex_);
  // One statement for every filter: the states travel as a JSON list.
  json names = json::array();
  for (auto st : states) names.push_back(core::to_string(st));
  Statement s(caches_->statements, db_.get(),
              job_select("WHERE :all OR state IN (SELECT value FROM json_each(:states)) "
                         "ORDER BY id DESC LIMIT :limit"),
              "listing jobs");
  s.bind_bool(":all", states.empty());
  s.bind_text(":states", names.dump());
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  s.bind_int(":limit", limit == 0 ? -1 : static_cast<std::int64_t>(std::min(limit, kMax)));
  std::vector<core::Job> out;
  while (s.next()) out.push_back(read_job(s));
  return out;
}

std::vector<double> SqliteStore::job_arrivals_since(double since) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT submitted_at FROM jobs WHERE submitted_at >= :since", "reading job arrivals");
  s.bind_real(":since", since);
  std::vector<double> out;
  while (s.next()) out.push_back(s.real("submitted_at"));
  return out;
}

std::map<core::JobState, std::int64_t> SqliteStore::job_counts() {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state", "counting jobs");
  std::map<core::JobState, std::int64_t> out;
  while (s.next()) {
    const std::string state = s.text("state");
    auto parsed = core::parse_job_state(state);
    if (!parsed) throw StoreError("counting jobs: unknown state '" + state + "'");
    out[*parsed] = s.integer("n");
  }
  return out;
}

void SqliteStore::put_job_proof(std::int64_t id, const std::string& proof) {
  std::lock_guard lock(mutex_);
  const std::string doing = "storing the proof of job " + std::to_string(id);
  Statement s(caches_->statements, db_.get(), "UPDATE jobs SET proof = :proof WHERE id = :id",
              doing);
  s.bind_blob(":proof", proof);
  s.bind_int(":id", id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such job");
}

std::optional<std::string> SqliteStore::job_proof(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(), "SELECT proof FROM jobs WHERE id = :id",
              "reading the proof of job " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next() || s.is_null("proof")) return std::nullopt;
  return s.blob("proof");
}

int SqliteStore::drop_job_proofs(double before) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "UPDATE jobs SET proof = NULL WHERE proof IS NOT NULL AND finished_at > 0 AND "
              "finished_at < :before AND delivered_at < :before",
              "removing old proofs");
  s.bind_real(":before", before);
  s.run();
  return s.changes();
}

std::vector<std::string> SqliteStore::job_inputs_in_use(double since) {
  std::lock_guard lock(mutex_);
  Statement s(caches_->statements, db_.get(),
              "SELECT DISTINCT input_digest FROM jobs WHERE state IN ('queued', 'assigned', "
              "'proving') OR finished_at >= :since OR delivered_at >= :since",
              "reading the job inputs in use");
  s.bind_real(":since", since);
  std::vector<std::string> out;
  while (s.next()) out.push_back(s.text("input_digest"));
  return out;
}

// --- opening -------------------------------------------------------------------------------------

std::unique_ptr<Store> open_store(const std::string& url) {
  std::string_view path = url;
  constexpr std::string_view kScheme = "sqlite:";
  if (path.starts_with(kScheme)) {
    path.remove_prefix(kScheme.size());
    // "sqlite:///var/lib/pf.db" names the absolute path /var/lib/pf.db.
    if (path.starts_with("//")) path.remove_prefix(2);
  } else if (const auto colon = path.find("://"); colon != std::string_view::npos) {
    throw StoreError("unsupported store URL '" + url + "': only sqlite:PATH or a file path");
  }
  if (path.empty()) throw StoreError("store URL '" + url + "' names no database path");
  return std::make_unique<SqliteStore>(std::string(path));
}

}  // namespace pf::store
