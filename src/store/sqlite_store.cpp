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
#include "store/sqlite_migrations.h"
#include "store/sqlite_statement.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;
using sqlite_detail::dump_json;
using sqlite_detail::exec;
using sqlite_detail::fail;
using sqlite_detail::latest_version;
using sqlite_detail::migrate;
using sqlite_detail::read_user_version;
using sqlite_detail::rollback_quietly;
using sqlite_detail::Statement;

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

SqliteStore::SqliteStore(const std::string& path)
    : caches_(std::make_unique<Caches>()),
      statements_(std::make_unique<sqlite_detail::StatementCache>()) {
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

  Statement(*statements_, db, "BEGIN IMMEDIATE", "starting a transaction").run();
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
    Statement(*statements_, db, "COMMIT", "committing a transaction").run();
  } catch (...) {
    rollback_quietly(db);
    throw;
  }
}

// --- instances -----------------------------------------------------------------------------------

std::int64_t SqliteStore::insert_instance(const core::InstanceRecord& record) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(), "SELECT * FROM instances WHERE id = :id",
              "reading instance " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqliteStore::instance_by_deployment(const std::string& dep) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT * FROM instances WHERE deployment_id = :dep",
              "reading instance with deployment_id '" + dep + "'");
  s.bind_text(":dep", dep);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqliteStore::instance_by_market_id(std::int64_t market_id) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              "SELECT * FROM instances WHERE market_id = :market_id ORDER BY id DESC LIMIT 1",
              "reading instance with market id " + std::to_string(market_id));
  s.bind_int(":market_id", market_id);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::optional<core::InstanceRecord> SqliteStore::instance_by_token_hash(const std::string& hash) {
  if (hash.empty()) return std::nullopt;  // rows without a token have an empty hash
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT * FROM instances WHERE token_hash = :hash LIMIT 1",
              "reading instance by agent token");
  s.bind_text(":hash", hash);
  if (!s.next()) return std::nullopt;
  return read_instance(s, caches_->offers);
}

std::vector<core::InstanceRecord> SqliteStore::instances(bool include_destroyed) {
  std::lock_guard lock(mutex_);
  // The live rows through the partial index instances_live (migration 7), which only a literal
  // 'destroyed' lets the planner use: they are read every tick, beside the whole history.
  Statement s(*statements_, db_.get(),
              include_destroyed ? "SELECT * FROM instances ORDER BY id"
                                : "SELECT * FROM instances WHERE state <> 'destroyed' ORDER BY id",
              "listing instances");
  return read_instances(s);
}

std::vector<core::InstanceRecord> SqliteStore::read_instances(Statement& s) {
  std::vector<core::InstanceRecord> out;
  while (s.next()) out.push_back(read_instance(s, caches_->offers));
  return out;
}

std::vector<core::BenchRun> SqliteStore::read_bench_runs(Statement& s) {
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

// --- audit trail ---------------------------------------------------------------------------------

std::int64_t SqliteStore::append_event(const core::InstanceEvent& event) {
  std::lock_guard lock(mutex_);
  Statement s(
      *statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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

// --- agent logs ----------------------------------------------------------------------------------

void SqliteStore::append_agent_log(std::int64_t instance_id, double at, std::string_view text,
                                   std::size_t max_bytes) {
  std::lock_guard lock(mutex_);
  if (text.empty() || max_bytes == 0) return;
  // A chunk larger than the whole allowance keeps its newest bytes.
  if (text.size() > max_bytes) text = text.substr(text.size() - max_bytes);
  const std::string doing = "appending to the log of instance " + std::to_string(instance_id);
  transaction([&] {
    {
      Statement s(*statements_, db_.get(),
                  "INSERT INTO agent_logs (instance_id, at, bytes, text) "
                  "VALUES (:instance_id, :at, :bytes, :text)",
                  doing);
      s.bind_int(":instance_id", instance_id);
      s.bind_real(":at", at);
      s.bind_int(":bytes", static_cast<std::int64_t>(text.size()));
      s.bind_text(":text", text);
      s.run();
    }
    // Newest first: everything past the byte allowance or the chunk cap goes.
    Statement trim(*statements_, db_.get(),
                   "DELETE FROM agent_logs WHERE id IN (SELECT id FROM ("
                   "SELECT id, SUM(bytes) OVER (ORDER BY id DESC) AS kept, "
                   "ROW_NUMBER() OVER (ORDER BY id DESC) AS n "
                   "FROM agent_logs WHERE instance_id = :instance_id) "
                   "WHERE kept > :max_bytes OR n > :max_chunks)",
                   doing);
    trim.bind_int(":instance_id", instance_id);
    trim.bind_int(":max_bytes", static_cast<std::int64_t>(max_bytes));
    trim.bind_int(":max_chunks", static_cast<std::int64_t>(kMaxAgentLogChunks));
    trim.run();
  });
}

std::string SqliteStore::agent_log(std::int64_t instance_id) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              "SELECT text FROM agent_logs WHERE instance_id = :instance_id ORDER BY id",
              "reading the log of instance " + std::to_string(instance_id));
  s.bind_int(":instance_id", instance_id);
  std::string out;
  while (s.next()) out += s.text_view("text");
  return out;
}

// --- agent reports -------------------------------------------------------------------------------

bool SqliteStore::mark_agent_seq(std::int64_t instance_id, std::int64_t seq) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(), "SELECT * FROM bench_runs ORDER BY at, id",
              "reading bench runs");
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

// --- bad hosts -----------------------------------------------------------------------------------

void SqliteStore::put_bad_host(const core::BadHost& entry) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
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
  Statement s(*statements_, db_.get(),
              "DELETE FROM bad_hosts WHERE machine_id = :machine_id AND source = :source",
              "removing bad host " + std::to_string(machine_id) + " (" + source + ")");
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":source", source);
  s.run();
  return s.changes() > 0;
}

std::vector<core::BadHost> SqliteStore::bad_hosts() {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT * FROM bad_hosts ORDER BY machine_id, source",
              "reading bad hosts");
  std::vector<core::BadHost> out;
  while (s.next()) out.push_back(read_bad_host(s));
  return out;
}

// --- settings ------------------------------------------------------------------------------------

std::optional<std::string> SqliteStore::setting(const std::string& key) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT value FROM settings WHERE key = :key",
              "reading setting '" + key + "'");
  s.bind_text(":key", key);
  if (!s.next()) return std::nullopt;
  return s.text("value");
}

void SqliteStore::put_setting(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              "INSERT INTO settings (key, value) VALUES (:key, :value) "
              "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
              "writing setting '" + key + "'");
  s.bind_text(":key", key);
  s.bind_text(":value", value);
  s.run();
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