// The ctest fixture that gives a whole test run one PostgreSQL server (tests/support/pg_server.h):
//
//   pf_test_pg_server start DIR [--until-parent-exits]
//       starts a server; writes DIR/url (its URL) and DIR/server-dir (where its data lives);
//       exits, server running. With --until-parent-exits a detached watcher stops the server
//       and removes its data once the process that ran this one (ctest) has exited.
//   pf_test_pg_server stop DIR
//       stops that server and removes its data (by hand, or a server started without the flag)
//
// CMakeLists.txt registers the start as pg_server_start (FIXTURES_SETUP pg) with the flag, and
// no cleanup test: ctest runs a fixture's cleanup after every test that requires the fixture,
// and so schedules those tests one dependency level ahead of every other test, whatever their
// COST (CMake's Source/CTest/cmCTestMultiProcessHandler.cxx, CreateParallelTestCostList; seen
// in the run order here): the unit shards that need no database then started after all 150
// that do and were the last 15 s of the run. Every test gets PF_TEST_PG_URL_FILE=DIR/url,
// which fresh_pg_database() reads. A start that finds a server left by an interrupted run
// stops that one first.
#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "support/pg_server.h"

namespace {

namespace fs = std::filesystem;

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    out.close();
    if (!out) throw std::runtime_error("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

// Runs `work` in a detached process (a session of its own, stdin and output on /dev/null) and
// returns once it is started. ctest waits for a test's process and reads its output until every
// holder of the pipe has closed it, so the work must hold neither. Throws when it cannot fork.
void run_detached(const std::function<void()>& work) {
  const pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // The child leaves a grandchild to do the work and exits, so nothing waits for the work.
    setsid();
    if (fork() == 0) {
      const int null_fd = open("/dev/null", O_RDWR);
      if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
      }
      try {
        work();
      } catch (const std::exception&) {
        // Nobody is left to tell: the next start stops a server this one left, and /tmp keeps
        // a directory it could not remove.
      }
    }
    _exit(0);
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
}

// Removes `dir` in a detached process, after renaming it out of the way. A full run leaves a
// few hundred databases (about 2 GB in some 100,000 files); removing them took the last 9 s of
// `make test`, after every test had finished. The rename is immediate, so nothing can find the
// half-removed directory under its old name.
void remove_detached(const fs::path& dir) {
  if (!fs::exists(dir)) return;
  const fs::path doomed = dir.string() + ".removing";
  std::error_code ec;
  fs::rename(dir, doomed, ec);
  if (ec) {
    fs::remove_all(dir);  // cannot rename: remove it here (throws saying why it cannot)
    return;
  }
  run_detached([doomed] { fs::remove_all(doomed); });
}

void stop(const fs::path& dir) {
  const fs::path server_dir_file = dir / "server-dir";
  if (fs::exists(server_dir_file)) {
    std::string server_dir = pf::test::pg_server_detail::read_text(server_dir_file);
    while (!server_dir.empty() && server_dir.back() == '\n') server_dir.pop_back();
    if (!server_dir.empty()) {
      pf::test::PgServer::stop_server_at(server_dir);
      remove_detached(server_dir);
      std::printf("pf_test_pg_server: stopped the server in %s (its files are being removed)\n",
                  server_dir.c_str());
    }
  }
  fs::remove(dir / "url");
  fs::remove(server_dir_file);
}

// Leaves a detached process that waits (without polling: a pidfd) for `parent` to exit, then
// stops the server and removes its files as `stop` does.
void stop_after_exit_of(pid_t parent, const fs::path& dir) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, parent, 0));
  if (pidfd < 0) {
    throw std::runtime_error("cannot watch process " + std::to_string(parent) + ": " +
                             std::strerror(errno));
  }
  run_detached([pidfd, dir] {
    pollfd wait_for{pidfd, POLLIN, 0};
    while (poll(&wait_for, 1, -1) < 0 && errno == EINTR) {
    }
    stop(dir);
  });
  close(pidfd);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc >= 2 ? argv[1] : "";
  const bool until_parent_exits = argc == 4 && std::string(argv[3]) == "--until-parent-exits";
  if (!((command == "start" && (argc == 3 || until_parent_exits)) ||
        (command == "stop" && argc == 3))) {
    std::fprintf(stderr, "usage: %s start DIR [--until-parent-exits] | stop DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[2];
  try {
    fs::create_directories(dir);
    stop(dir);  // a start after an interrupted run finds that run's server still going
    if (command == "stop") return 0;
    pf::test::PgServer server;
    write_atomically(dir / "server-dir", server.dir().string());
    write_atomically(dir / "url", server.url("postgres"));
    // The watcher before release(): when it cannot be left, the server goes with `server`.
    if (until_parent_exits) stop_after_exit_of(getppid(), dir);
    server.release();
    std::printf("pf_test_pg_server: PostgreSQL at %s (data in %s)\n", server.url().c_str(),
                server.dir().c_str());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "pf_test_pg_server %s: %s\n", command.c_str(), error.what());
    return 1;
  }
}
