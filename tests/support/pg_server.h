// Test and bench helper: a real PostgreSQL server from Debian's `postgresql` package, started
// in a temporary directory and torn down after. Header-only; POSIX (Linux).
//
//   pf::test::PgServer server;                    // initdb + start, on 127.0.0.1:<random port>
//   auto store = open_store(server.url("postgres"));
//
//   std::string url = pf::test::fresh_pg_database();  // a new empty database, for one test
//   url = pf::test::fresh_pg_database(pf::test::PgSchema::Latest);  // with the schema in it
//
// The server runs as the unprivileged `postgres` system user when the caller is root
// (PostgreSQL refuses to run as root), as the caller otherwise; binaries come from
// `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin. It listens on 127.0.0.1 only,
// with trust authentication and its unix socket inside its directory. It runs with fsync off:
// a test server's data need not survive a power cut, and syncing would only slow the tests.
// Commits stay synchronous (written to the OS before they return), so a server killed by
// restart() keeps every committed row, as a real one does.
//
// fresh_pg_database() creates its databases on the server the whole ctest run shares (the
// pg_server_start fixture, tests/support/pg_test_server.cpp) when PF_TEST_PG_URL_FILE names the
// file holding that server's URL, else on a server this process starts on first use (and stops
// when it exits). Nothing is skipped: when PostgreSQL cannot start, these throw saying why and
// the test fails.
#pragma once

#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "store/pg_connection.h"
#include "store/sql_migrations.h"
#include "support/free_port.h"

extern char** environ;

namespace pf::test {

namespace pg_server_detail {

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The last lines of a log, for error messages.
inline std::string log_tail(const std::filesystem::path& path, std::size_t max_chars = 1500) {
  std::string text = read_text(path);
  if (text.size() > max_chars) text = "…" + text.substr(text.size() - max_chars);
  return text.empty() ? "(" + path.string() + " is empty)" : text;
}

// Runs argv to completion, its stdout and stderr appended to `log`, in `cwd`. Returns the exit
// status (128 + N when killed by signal N); throws when it cannot be started.
inline int run(const std::vector<std::string>& argv, const std::filesystem::path& log,
               const std::filesystem::path& cwd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  std::unique_ptr<posix_spawn_file_actions_t, void (*)(posix_spawn_file_actions_t*)> guard(
      &actions, [](posix_spawn_file_actions_t* a) { posix_spawn_file_actions_destroy(a); });
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<std::string> args = argv;
  std::vector<char*> argp;
  for (auto& a : args) argp.push_back(a.data());
  argp.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argp[0], &actions, nullptr, argp.data(), environ);
  if (rc != 0) {
    throw std::runtime_error("PostgreSQL test server: cannot start " + argv[0] + ": " +
                             std::strerror(rc));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error("PostgreSQL test server: waitpid failed");
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

// Where initdb and pg_ctl are: `pg_config --bindir` (libpq-dev), else the newest
// /usr/lib/postgresql/<version>/bin.
inline std::filesystem::path bin_dir() {
  if (FILE* pipe = popen("pg_config --bindir 2>/dev/null", "r")) {
    char buf[512] = {};
    const bool got = std::fgets(buf, sizeof buf, pipe) != nullptr;
    pclose(pipe);
    std::string dir = got ? buf : "";
    while (!dir.empty() && (dir.back() == '\n' || dir.back() == ' ')) dir.pop_back();
    if (!dir.empty() && std::filesystem::exists(std::filesystem::path(dir) / "initdb")) return dir;
  }
  std::vector<std::pair<int, std::filesystem::path>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
    const auto bin = entry.path() / "bin";
    if (!std::filesystem::exists(bin / "initdb")) continue;
    found.emplace_back(std::atoi(entry.path().filename().c_str()), bin);
  }
  if (found.empty()) {
    throw std::runtime_error(
        "PostgreSQL test server: no initdb (neither `pg_config --bindir` nor "
        "/usr/lib/postgresql/*/bin): run scripts/install-deps");
  }
  return std::max_element(found.begin(), found.end())->second;
}

// The user the server runs as: `postgres` when we are root (PostgreSQL refuses root).
struct ServerUser {
  bool switch_user = false;
  uid_t uid = 0;
  gid_t gid = 0;
};
inline ServerUser server_user() {
  ServerUser user;
  if (geteuid() != 0) return user;
  const passwd* pw = getpwnam("postgres");
  if (pw == nullptr) {
    throw std::runtime_error(
        "PostgreSQL test server: running as root and there is no `postgres` system user to run "
        "the server as (Debian's postgresql package creates it: run scripts/install-deps)");
  }
  user.switch_user = true;
  user.uid = pw->pw_uid;
  user.gid = pw->pw_gid;
  return user;
}

}  // namespace pg_server_detail

class PgServer {
 public:
  // A new data directory (initdb's, copied: copy_initdb_output) in a new temporary directory,
  // then starts the server and waits until it accepts connections. Throws std::runtime_error saying
  // why it could not (with the log's tail).
  // Synced: fsync and full-page writes on, as a production server runs (benches that compare
  // with a disk that syncs); the default runs without them.
  enum class Durability { FsyncOff, Synced };
  explicit PgServer(Durability durability = Durability::FsyncOff)
      : bin_(pg_server_detail::bin_dir()), user_(pg_server_detail::server_user()) {
    std::string pattern = (std::filesystem::temp_directory_path() / "pf_pg_XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("PostgreSQL test server: mkdtemp failed");
    }
    dir_ = pattern;
    try {
      if (user_.switch_user && chown(dir_.c_str(), user_.uid, user_.gid) != 0) {
        throw std::runtime_error("PostgreSQL test server: cannot give " + dir_.string() +
                                 " to the postgres user");
      }
      copy_initdb_output();
      std::ofstream conf(data() / "postgresql.conf", std::ios::app);
      conf << "\n# proverfleet test server\n"
           << "listen_addresses = '127.0.0.1'\n"
           << "unix_socket_directories = '" << dir_.string() << "'\n"
           << (durability == Durability::Synced ? "fsync = on\nfull_page_writes = on\n"
                                                : "fsync = off\nfull_page_writes = off\n")
           << "max_connections = 300\nshared_buffers = 32MB\n";
      conf.close();
      if (!conf) throw std::runtime_error("PostgreSQL test server: cannot write postgresql.conf");
      start_on_free_port();
    } catch (...) {
      remove_dir();
      throw;
    }
  }

  ~PgServer() {
    if (released_) return;
    if (running_) stop_quietly(dir_, bin_, user_);
    remove_dir();
  }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  const std::filesystem::path& dir() const { return dir_; }
  // A URL for `database` on this server (user postgres, no password: trust on 127.0.0.1).
  std::string url(const std::string& database = "postgres") const {
    return "postgres://postgres@127.0.0.1:" + std::to_string(port_) + "/" + database;
  }

  // Stops the server at once (SIGQUIT: no checkpoint, like a crash) and starts it again on
  // the same port with the same data: what a client sees of a database restart.
  void restart() {
    stop();
    start();
  }
  void stop() {
    const auto log = dir_ / "pg_ctl.log";
    const int rc = run_as_server(
        {(bin_ / "pg_ctl").string(), "-D", data().string(), "-m", "immediate", "-w", "stop"}, log);
    if (rc != 0) {
      throw std::runtime_error("PostgreSQL test server: pg_ctl stop failed: " +
                               pg_server_detail::log_tail(log));
    }
    running_ = false;
  }
  void start() {
    const auto log = dir_ / "pg_ctl.log";
    const int rc = run_as_server({(bin_ / "pg_ctl").string(), "-D", data().string(), "-l",
                                  (dir_ / "server.log").string(), "-w", "-t", "120", "start"},
                                 log);
    if (rc != 0) {
      throw std::runtime_error("PostgreSQL test server: pg_ctl start failed (exit " +
                               std::to_string(rc) + "): " + pg_server_detail::log_tail(log) +
                               "\nserver log: " + pg_server_detail::log_tail(dir_ / "server.log"));
    }
    running_ = true;
  }

  // Leaves the server running and its directory in place when this object goes (the ctest
  // fixture's start); stop_server_at(dir()) ends it later.
  void release() { released_ = true; }

  // Stops the server whose directory is `dir`; its files stay (the fixture removes them).
  static void stop_server_at(const std::filesystem::path& dir) {
    stop_quietly(dir, pg_server_detail::bin_dir(), pg_server_detail::server_user());
  }

 private:
  std::filesystem::path data() const { return dir_ / "data"; }

  int run_as_server(std::vector<std::string> argv, const std::filesystem::path& log) const {
    return run_as(user_, std::move(argv), log, dir_);
  }
  static int run_as(const pg_server_detail::ServerUser& user, std::vector<std::string> argv,
                    const std::filesystem::path& log, const std::filesystem::path& cwd) {
    if (user.switch_user) {
      // setpriv changes user without PAM or a login shell; the log is opened by us.
      argv.insert(argv.begin(), {"setpriv", "--reuid=" + std::to_string(user.uid),
                                 "--regid=" + std::to_string(user.gid), "--init-groups", "--"});
    }
    return pg_server_detail::run(argv, log, cwd);
  }

  static void stop_quietly(const std::filesystem::path& dir, const std::filesystem::path& bin,
                           const pg_server_detail::ServerUser& user) {
    if (!std::filesystem::exists(dir / "data" / "postmaster.pid")) return;
    const int rc = run_as(
        user,
        {(bin / "pg_ctl").string(), "-D", (dir / "data").string(), "-m", "immediate", "-w", "stop"},
        dir / "pg_ctl.log", dir);
    if (rc != 0) {
      std::fprintf(stderr, "PostgreSQL test server in %s: pg_ctl stop failed: %s\n", dir.c_str(),
                   pg_server_detail::log_tail(dir / "pg_ctl.log").c_str());
    }
  }

  // The data directory as initdb makes it, copied from one made once per machine, PostgreSQL
  // version and server user (in the temporary directory, under an exclusive lock, built under
  // a temporary name and renamed when complete). initdb costs about a CPU-second; a full test
  // run started seven servers (one shared, six that tests stop and restart) and copying 40 MB
  // costs a few milliseconds. The copy is made as the server's user, so ownership and modes are
  // what initdb gave (PostgreSQL refuses a data directory that is not its own, mode 0700).
  void copy_initdb_output() {
    namespace fs = std::filesystem;
    std::error_code ec;
    const auto postgres = bin_ / "postgres";
    const auto stamp = fs::last_write_time(postgres, ec).time_since_epoch().count();
    const auto key = std::hash<std::string>{}(postgres.string() + "@" + std::to_string(stamp) +
                                              "@" + std::to_string(fs::file_size(postgres, ec)));
    const fs::path cache =
        fs::temp_directory_path() /
        ("pf_pg_initdb_" + std::to_string(user_.switch_user ? user_.uid : geteuid()) + "_" +
         std::to_string(key));
    const std::string lock_path = cache.string() + ".lock";
    struct LockFile {  // closing it releases the lock
      int fd;
      ~LockFile() {
        if (fd >= 0) close(fd);
      }
    } lock{open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)};
    if (lock.fd < 0 || flock(lock.fd, LOCK_EX) != 0) {
      throw std::runtime_error("PostgreSQL test server: cannot lock " + lock_path + ": " +
                               std::strerror(errno));
    }
    const fs::path made = cache / "data";
    if (!fs::exists(made / "PG_VERSION", ec)) {
      const fs::path building = cache.string() + ".building";
      fs::remove_all(building, ec);  // a half-built one from a process that died building it
      fs::create_directories(building, ec);
      if (user_.switch_user && chown(building.c_str(), user_.uid, user_.gid) != 0) {
        throw std::runtime_error("PostgreSQL test server: cannot give " + building.string() +
                                 " to the postgres user");
      }
      const auto log = dir_ / "initdb.log";
      const int rc =
          run_as_server({(bin_ / "initdb").string(), "-D", (building / "data").string(), "-U",
                         "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"},
                        log);
      if (rc != 0) {
        throw std::runtime_error("PostgreSQL test server: initdb failed (exit " +
                                 std::to_string(rc) + "): " + pg_server_detail::log_tail(log));
      }
      fs::remove_all(cache, ec);
      fs::rename(building, cache, ec);
      if (ec) {
        throw std::runtime_error("PostgreSQL test server: cannot rename " + building.string() +
                                 " to " + cache.string() + ": " + ec.message());
      }
    }
    const auto log = dir_ / "copy.log";
    const int rc = run_as_server({"cp", "-a", made.string(), data().string()}, log);
    if (rc != 0) {
      throw std::runtime_error("PostgreSQL test server: copying " + made.string() +
                               " failed (exit " + std::to_string(rc) +
                               "): " + pg_server_detail::log_tail(log));
    }
  }

  // Another process may take the port between our probe and the server's bind: then the next
  // port is tried (a later `port =` line overrides the earlier one).
  void start_on_free_port() {
    std::string last_error;
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = free_port();
      {
        std::ofstream conf(data() / "postgresql.conf", std::ios::app);
        conf << "port = " << port_ << "\n";
      }
      try {
        start();
        return;
      } catch (const std::runtime_error& error) {
        last_error = error.what();
        if (last_error.find("could not bind") == std::string::npos &&
            last_error.find("already in use") == std::string::npos) {
          throw;
        }
      }
    }
    throw std::runtime_error(last_error);
  }

  void remove_dir() noexcept {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::filesystem::path bin_;
  pg_server_detail::ServerUser user_;
  std::filesystem::path dir_;
  int port_ = 0;
  bool running_ = false;
  bool released_ = false;
};

namespace pg_server_detail {

// The server fresh_pg_database() uses. Databases made on the run's shared server stay until the
// fixture removes the server (a few MB each); a process's own server goes when the process ends.
struct SharedServer {
  std::unique_ptr<PgServer> own;
  std::string admin_url;   // the `postgres` database of the server
  std::string url_prefix;  // admin_url without the database name

  SharedServer() {
    if (const char* file = std::getenv("PF_TEST_PG_URL_FILE"); file != nullptr && *file != 0) {
      std::string url = read_text(file);
      while (!url.empty() && (url.back() == '\n' || url.back() == ' ')) url.pop_back();
      if (url.empty()) {
        throw std::runtime_error(
            std::string("PF_TEST_PG_URL_FILE names ") + file +
            ", which holds no URL: the pg_server_start fixture did not start PostgreSQL (see "
            "its output: ctest -R pg_server_start -V)");
      }
      admin_url = url;
    } else {
      own = std::make_unique<PgServer>();
      admin_url = own->url("postgres");
    }
    url_prefix = admin_url.substr(0, admin_url.rfind('/') + 1);
  }
};

inline SharedServer& shared_server() {
  static SharedServer server;
  return server;
}

}  // namespace pg_server_detail

// What a new database holds: nothing, or this build's whole schema.
enum class PgSchema { Empty, Latest };

namespace pg_server_detail {

// The database fresh_pg_database(PgSchema::Latest) copies: an empty one migrated to this
// build's schema once per server and named by its version. The first process to need it builds
// it under an advisory lock (the others wait the few hundred milliseconds instead of building
// their own), under a temporary name renamed when complete, so none ever copies a half-migrated
// one. A test server is new every ctest run; one kept across builds by hand is stale only if a
// migration was edited in place without a new schema version.
inline std::string migrated_template(const SharedServer& server) {
  static std::mutex mu;
  static std::string name;
  std::lock_guard lock(mu);
  if (!name.empty()) return name;
  const std::string wanted = "pf_template_v" + std::to_string(store::sql::kLatestSchemaVersion);
  store::PgConnection admin(server.admin_url);
  auto query = [&](const std::string& sql, const std::string& doing) {
    auto cursor = admin.prepare(sql, doing);
    const bool row = cursor->next();
    cursor.reset();
    return row;
  };
  constexpr const char* kLockKey = "7240139";  // any constant; only test processes take it
  query(std::string("SELECT pg_advisory_lock(") + kLockKey + ")", "locking the test template");
  if (!query("SELECT 1 FROM pg_database WHERE datname = '" + wanted + "'",
             "looking for the test template")) {
    const std::string building = wanted + "_building_" + std::to_string(getpid());
    admin.exec("DROP DATABASE IF EXISTS " + building, "dropping a half-built test template");
    admin.exec("CREATE DATABASE " + building, "creating the test template");
    {
      store::PgConnection target(server.url_prefix + building);
      store::sql::migrate(target, "the test template " + building);
    }
    // Waits (up to 5 s, PostgreSQL's own limit) for the migrating session to end.
    admin.exec("ALTER DATABASE " + building + " RENAME TO " + wanted,
               "publishing the test template");
  }
  query(std::string("SELECT pg_advisory_unlock(") + kLockKey + ")", "unlocking the test template");
  name = wanted;
  return name;
}

}  // namespace pg_server_detail

// The URL of a new database, unique to this call, on the run's shared server (see above):
// empty, or a copy of this build's migrated schema (PgSchema::Latest: a test that only needs a
// store skips the store's migrations, and opening a store on it migrates nothing; the 93
// PostgreSQL cases of unit_server_tests took 20.0 busy CPU-s instead of 23.6). Throws
// std::runtime_error (or StoreError) saying why when there is no server.
inline std::string fresh_pg_database(PgSchema schema = PgSchema::Empty) {
  auto& server = pg_server_detail::shared_server();
  static std::atomic<int> counter{0};
  std::random_device random;
  const std::string name = "pf_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++) +
                           "_" + std::to_string(random() % 1000000);
  store::PgConnection admin(server.admin_url);
  // PostgreSQL 15 copies the template block by block through the WAL by default; copying its
  // files is about half the server's CPU for the small template, and tests make many databases.
  auto version = admin.prepare("SELECT current_setting('server_version_num')::int AS v",
                               "reading the test server's version");
  const bool file_copy = version->next() && version->integer(0) >= 150000;
  version.reset();
  const std::string from =
      schema == PgSchema::Latest ? " TEMPLATE " + pg_server_detail::migrated_template(server) : "";
  admin.exec("CREATE DATABASE " + name + from + (file_copy ? " STRATEGY FILE_COPY" : ""),
             "creating test database " + name);
  return server.url_prefix + name;
}

}  // namespace pf::test
