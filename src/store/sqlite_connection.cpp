#include "store/sqlite_connection.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

namespace pf::store {
namespace {

// How long a statement waits for another connection's lock before failing.
constexpr int kSqliteBusyTimeoutMs = 5000;

// --- RAII over the C API -----------------------------------------------------------------------

struct StmtFinalizer {
  void operator()(sqlite3_stmt* stmt) const { sqlite3_finalize(stmt); }
};
using StmtHandle = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

[[noreturn]] void fail(sqlite3* db, std::string_view doing) {
  throw StoreError(std::string(doing) + ": " + sqlite3_errmsg(db));
}

void exec_on(sqlite3* db, const std::string& sql, std::string_view doing) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, doing);
}

StmtHandle prepare_statement(sqlite3* db, std::string_view sql, const std::string& doing) {
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  StmtHandle stmt(raw);
  if (rc != SQLITE_OK) fail(db, doing + " (preparing)");
  return stmt;
}

// Switches a connection to WAL and returns the journal mode SQLite reports. Two processes
// opening a new database at once can each hold a shared lock while asking for the exclusive one
// the switch needs; SQLite then answers SQLITE_BUSY at once, without its busy handler, to break
// the deadlock (https://sqlite.org/c3ref/busy_handler.html: "the busy handler is not invoked"
// when that could deadlock). The switch is tried again, within the connection's busy timeout.
std::string switch_to_wal(sqlite3* db, const std::string& doing) {
  using Clock = std::chrono::steady_clock;
  const auto give_up = Clock::now() + std::chrono::milliseconds(kSqliteBusyTimeoutMs);
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    StmtHandle stmt = prepare_statement(db, "PRAGMA journal_mode=WAL", doing);
    const int rc = sqlite3_step(stmt.get());
    if (rc == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(stmt.get(), 0);
      return text != nullptr ? std::string(reinterpret_cast<const char*>(text)) : std::string();
    }
    if ((rc & 0xff) != SQLITE_BUSY || Clock::now() + pause > give_up) fail(db, doing);
    stmt.reset();
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
}

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// A prepared statement kept for reuse.
struct CachedStatement {
  StmtHandle stmt;
  // Column name → index, read once at prepare time: rows are read by name, and an `instances`
  // row has 40 columns.
  std::unordered_map<std::string, int, StringHash, std::equal_to<>> columns;
  bool in_use = false;  // a cursor holds it; a second user of the same SQL prepares its own
};

// One use of a statement: the cache's (reset and given back at the end) or one of its own.
class SqliteCursor final : public sql::Cursor {
 public:
  SqliteCursor(sqlite3* db, CachedStatement* cached, StmtHandle owned, std::string doing)
      : db_(db), doing_(std::move(doing)), owned_(std::move(owned)), cached_(cached) {
    stmt_ = cached_ != nullptr ? cached_->stmt.get() : owned_.get();
  }
  ~SqliteCursor() override {
    if (cached_ == nullptr) return;
    // Resetting ends the statement's read of the database (an unreset SELECT would pin an old
    // snapshot) and its result code repeats an error already thrown, so it is not checked.
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    cached_->in_use = false;
  }
  SqliteCursor(const SqliteCursor&) = delete;
  SqliteCursor& operator=(const SqliteCursor&) = delete;

  void bind_int(const char* name, std::int64_t value) override {
    check(sqlite3_bind_int64(stmt_, param(name), value));
  }
  void bind_real(const char* name, double value) override {
    check(sqlite3_bind_double(stmt_, param(name), value));
  }
  void bind_text(const char* name, std::string_view value) override {
    check(sqlite3_bind_text64(stmt_, param(name), value.data(), value.size(), SQLITE_TRANSIENT,
                              SQLITE_UTF8));
  }
  void bind_blob(const char* name, std::string_view value) override {
    check(sqlite3_bind_blob64(stmt_, param(name), value.data(), value.size(), SQLITE_TRANSIENT));
  }
  void bind_null(const char* name) override { check(sqlite3_bind_null(stmt_, param(name))); }

  bool next() override {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db_, doing_);
  }
  std::int64_t changes() const override { return sqlite3_changes64(db_); }
  // SQLite runs in process: holding a write back would save nothing.
  bool run_or_defer() override {
    while (next()) {
    }
    return true;
  }

  int column_count() const override { return sqlite3_column_count(stmt_); }
  std::string column_name(int index) const override {
    const char* name = sqlite3_column_name(stmt_, index);
    return name != nullptr ? name : "";
  }
  int column(const char* name) const override {
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
  bool is_null(int index) const override {
    return sqlite3_column_type(stmt_, index) == SQLITE_NULL;
  }
  sql::ValueKind kind(int index) const override {
    switch (sqlite3_column_type(stmt_, index)) {
      case SQLITE_INTEGER:
        return sql::ValueKind::Integer;
      case SQLITE_FLOAT:
        return sql::ValueKind::Real;
      case SQLITE_TEXT:
        return sql::ValueKind::Text;
      case SQLITE_BLOB:
        return sql::ValueKind::Blob;
      default:
        return sql::ValueKind::Null;
    }
  }
  std::int64_t integer(int index) const override { return sqlite3_column_int64(stmt_, index); }
  double real(int index) const override { return sqlite3_column_double(stmt_, index); }
  std::string_view text_view(int index) const override {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, index));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index))};
  }
  std::string blob(int index) const override {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, index));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, index))};
  }

 private:
  int param(const char* name) const {
    const int i = sqlite3_bind_parameter_index(stmt_, name);
    if (i == 0) throw StoreError(doing_ + ": internal error: no SQL parameter " + name);
    return i;
  }
  void check(int rc) const {
    if (rc != SQLITE_OK) fail(db_, doing_ + " (binding)");
  }

  sqlite3* db_;
  std::string doing_;
  StmtHandle owned_;                   // set when this use prepared its own statement
  CachedStatement* cached_ = nullptr;  // set when borrowed from the cache
  sqlite3_stmt* stmt_ = nullptr;
};

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

void SqliteConnection::DbCloser::operator()(sqlite3* db) const {
  sqlite3_close_v2(db);
}

// Parsing SQL costs more than running it (it dominated the agent heartbeat), so each connection
// prepares each distinct SQL text once.
class SqliteConnection::StatementCache {
 public:
  // The cached statement for sql, prepared on first use; nullptr when it is already in use.
  CachedStatement* borrow(sqlite3* db, std::string_view sql, const std::string& doing) {
    auto it = by_sql_.find(sql);
    if (it == by_sql_.end()) {
      auto entry = std::make_unique<CachedStatement>();
      entry->stmt = prepare_statement(db, sql, doing);
      const int n = sqlite3_column_count(entry->stmt.get());
      for (int i = 0; i < n; ++i)
        entry->columns.emplace(sqlite3_column_name(entry->stmt.get(), i), i);
      it = by_sql_.emplace(std::string(sql), std::move(entry)).first;
    }
    if (it->second->in_use) return nullptr;
    it->second->in_use = true;
    return it->second.get();
  }

 private:
  std::unordered_map<std::string, std::unique_ptr<CachedStatement>, StringHash, std::equal_to<>>
      by_sql_;
};

// Copies the WAL back into the database file from a thread and connection of its own. SQLite
// would otherwise do it inside the commit that crosses its threshold, fsyncs included, while
// that commit holds the store's mutex and every agent request waits behind it (in
// bench/heartbeat_bench this cost a third of the time the lock was held).
class SqliteConnection::Checkpointer {
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
    // Its first statement reads the schema, which waits like any other while a second process
    // opening the same new database holds the lock (PASSIVE checkpoints never wait).
    if (sqlite3_busy_timeout(db_.get(), kSqliteBusyTimeoutMs) != SQLITE_OK) {
      fail(db_.get(), doing + ": setting busy_timeout");
    }
    // NORMAL still syncs the WAL before copying it and the database after: what makes the
    // copy safe. The thread starts last, once everything it uses exists.
    exec_on(db_.get(), "PRAGMA synchronous=NORMAL", doing + ": setting synchronous");
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

SqliteConnection::SqliteConnection(const std::string& path)
    : statements_(std::make_unique<StatementCache>()) {
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
  // NOMUTEX: SqlStore's mutex already serialises every use of this connection, so SQLite's own
  // per-call locking would only be paid twice.
  const int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  db_.reset(raw);  // sqlite3_open_v2 may allocate a handle even when it fails
  if (rc != SQLITE_OK) {
    throw StoreError(doing + ": " + (raw != nullptr ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3* db = db_.get();
  sqlite3_extended_result_codes(db, 1);
  if (sqlite3_busy_timeout(db, kSqliteBusyTimeoutMs) != SQLITE_OK) {
    fail(db, doing + ": setting busy_timeout");
  }

  // Job inputs come and go by the hundreds of MiB (store/job_input_store.h): a database made
  // now frees their pages back to the file system when the sweep asks (PRAGMA
  // incremental_vacuum). SQLite takes this only before the first table exists; on an older
  // file it changes nothing, and freed pages are reused for the next inputs instead.
  exec_on(db, "PRAGMA auto_vacuum=INCREMENTAL", doing + ": setting auto_vacuum");
  // WAL lets CLI commands read while the manager writes; :memory: reports "memory".
  const std::string mode = switch_to_wal(db, doing + ": enabling WAL");
  if (mode != "wal" && !(path == ":memory:" && mode == "memory")) {
    throw StoreError(doing + ": cannot enable WAL journal mode (got '" + mode + "')");
  }
  exec_on(db, "PRAGMA foreign_keys=ON", doing + ": enabling foreign keys");
  // Durability trade-off: in WAL mode, NORMAL syncs at checkpoints, not at every commit. A
  // commit survives a crash of the process (what the manager must survive: it writes intent
  // before acting); a power loss or kernel crash may lose the last few commits, which the
  // reconciliation with the market's instance list recovers. FULL would add an fsync to every
  // agent heartbeat.
  exec_on(db, "PRAGMA synchronous=NORMAL", doing + ": setting synchronous");
  if (path != ":memory:") {
    checkpointer_ = std::make_unique<Checkpointer>(path);
    // Replaces SQLite's automatic checkpoint in the committing connection.
    sqlite3_wal_hook(db, &Checkpointer::on_commit, checkpointer_.get());
  }
}

SqliteConnection::~SqliteConnection() {
  if (checkpointer_) sqlite3_wal_hook(db_.get(), nullptr, nullptr);
}

std::unique_ptr<sql::Cursor> SqliteConnection::prepare(std::string_view sql,
                                                       const std::string& doing) {
  sqlite3* db = db_.get();
  if (CachedStatement* cached = statements_->borrow(db, sql, doing)) {
    return std::make_unique<SqliteCursor>(db, cached, nullptr, doing);
  }
  return std::make_unique<SqliteCursor>(db, nullptr, prepare_statement(db, sql, doing), doing);
}

void SqliteConnection::exec(const std::string& sql, std::string_view doing) {
  exec_on(db_.get(), sql, doing);
}

void SqliteConnection::begin() {
  // Cached: a transaction starts on most agent requests.
  auto s = prepare("BEGIN IMMEDIATE", "starting a transaction");
  while (s->next()) {
  }
}

void SqliteConnection::commit() {
  auto s = prepare("COMMIT", "committing a transaction");
  while (s->next()) {
  }
}

void SqliteConnection::rollback_quietly() noexcept {
  sqlite3* db = db_.get();
  if (sqlite3_get_autocommit(db) == 0) sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
}

int SqliteConnection::schema_version() {
  const std::string doing = "reading schema version";
  auto s = prepare("PRAGMA user_version", doing);
  if (!s->next()) throw StoreError(doing + ": PRAGMA user_version returned nothing");
  return static_cast<int>(s->integer(0));
}

void SqliteConnection::set_schema_version(int version) {
  exec("PRAGMA user_version = " + std::to_string(version), "setting schema version");
}

}  // namespace pf::store
