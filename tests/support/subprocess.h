// Test helper: runs a program (usually the built `proverfleet`) as a child process, captures
// its stdout and stderr line by line on a background thread (so a chatty child never blocks
// on a full pipe), and ends it — SIGTERM, then SIGKILL after a grace period — when the handle
// goes away. Header-only; POSIX (Linux).
//
//   auto sim = pf::test::Subprocess::spawn({PF_BINARY, "market-sim", "--scenario", path});
//   auto ready = sim.wait_for_line(std::regex(R"(listening on (http://\S+))"), 20s);
//   ASSERT_TRUE(ready) << sim.stderr_text();
//   std::string url = ready->groups[1];
//
// The child runs in its own process group (terminate() signals the whole group, so helpers it
// starts go too) and gets SIGKILL if the thread that spawned it dies (PR_SET_PDEATHSIG), so a
// crashed test binary leaves nothing running. Its stdin is /dev/null.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace pf::test {

struct SpawnOptions {
  // Changes to the parent's environment: a value sets the variable, nullopt removes it.
  std::map<std::string, std::optional<std::string>> env;
  // Working directory of the child; empty: the parent's.
  std::string working_dir;
};

struct LineMatch {
  std::string line;                 // the whole stdout line (without the newline)
  std::vector<std::string> groups;  // [0] the matched text, then the regex's capture groups
};

class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  // Starts argv[0] (searched in PATH when it has no '/'). Throws std::runtime_error when the
  // program cannot be started (the message names it and the reason).
  static Subprocess spawn(const std::vector<std::string>& argv, const SpawnOptions& options = {}) {
    if (argv.empty()) throw std::runtime_error("Subprocess::spawn: empty argv");
    Subprocess p;
    p.state_->start(argv, options);
    return p;
  }

  // A moved-from Subprocess may only be destroyed or assigned to.
  Subprocess(Subprocess&&) noexcept = default;
  Subprocess& operator=(Subprocess&& other) noexcept {
    if (this != &other) {
      if (state_) state_->shutdown();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess() {
    if (state_) state_->shutdown();
  }

  pid_t pid() const { return state_->pid; }

  // Waits for a stdout line containing `substring`. Lines are consumed: each call looks only
  // at lines after the previous match. nullopt on timeout or when stdout closed first.
  std::optional<LineMatch> wait_for_line(const std::string& substring,
                                         std::chrono::milliseconds timeout) {
    return state_->wait_for(
        [&](const std::string& line) -> std::optional<LineMatch> {
          if (line.find(substring) == std::string::npos) return std::nullopt;
          return LineMatch{line, {substring}};
        },
        timeout);
  }

  // Same with a regex searched in each line (std::regex_search).
  std::optional<LineMatch> wait_for_line(const std::regex& pattern,
                                         std::chrono::milliseconds timeout) {
    return state_->wait_for(
        [&](const std::string& line) -> std::optional<LineMatch> {
          std::smatch m;
          if (!std::regex_search(line, m, pattern)) return std::nullopt;
          LineMatch match{line, {}};
          for (const auto& group : m) match.groups.push_back(group.str());
          return match;
        },
        timeout);
  }

  // Everything captured so far.
  std::vector<std::string> stdout_lines() const {
    std::lock_guard lock(state_->mutex);
    return state_->out_lines;
  }
  std::string stderr_text() const {
    std::lock_guard lock(state_->mutex);
    return state_->err_text;
  }

  bool running() { return !state_->reap(false).has_value(); }

  // Waits for the child to exit on its own and for its output to be fully read. Returns the
  // exit code (128 + N when killed by signal N), or nullopt on timeout (the child keeps
  // running).
  std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      if (auto status = state_->reap(false)) {
        state_->wait_output_closed(deadline);
        return status;
      }
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // SIGTERM to the child's process group, SIGKILL after `grace`; returns the exit status as
  // wait_exit does. Idempotent.
  int terminate(std::chrono::milliseconds grace = std::chrono::seconds(5)) {
    return state_->terminate(grace);
  }

 private:
  struct State {
    pid_t pid = -1;
    std::optional<int> exit_status;
    int out_fd = -1;
    int err_fd = -1;
    mutable std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::string> out_lines;
    std::size_t next_line = 0;  // first line wait_for_line has not consumed
    std::string out_partial;
    std::string err_text;
    bool out_closed = false;
    bool err_closed = false;
    bool stop_reading = false;
    std::thread reader;

    void start(const std::vector<std::string>& argv, const SpawnOptions& options) {
      // Everything the child needs is prepared before fork: after it, only async-signal-safe
      // calls are allowed.
      std::vector<std::string> env_strings;
      for (char** e = environ; *e != nullptr; ++e) {
        std::string entry(*e);
        std::string name = entry.substr(0, entry.find('='));
        if (options.env.count(name) == 0) env_strings.push_back(entry);
      }
      for (const auto& [name, value] : options.env) {
        if (value) env_strings.push_back(name + "=" + *value);
      }
      std::vector<char*> envp;
      for (auto& s : env_strings) envp.push_back(s.data());
      envp.push_back(nullptr);
      std::vector<std::string> args = argv;
      std::vector<char*> argp;
      for (auto& s : args) argp.push_back(s.data());
      argp.push_back(nullptr);

      int out_pipe[2], err_pipe[2], exec_pipe[2];
      if (pipe2(out_pipe, O_CLOEXEC) != 0) throw_errno("pipe");
      if (pipe2(err_pipe, O_CLOEXEC) != 0) throw_errno("pipe");
      if (pipe2(exec_pipe, O_CLOEXEC) != 0) throw_errno("pipe");
      int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (null_fd < 0) throw_errno("open /dev/null");
      const pid_t parent = getpid();
      const char* dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();

      pid = fork();
      if (pid < 0) throw_errno("fork");
      if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        dup2(null_fd, 0);
        dup2(out_pipe[1], 1);
        dup2(err_pipe[1], 2);
        int err = 0;
        if (dir != nullptr && chdir(dir) != 0) {
          err = errno;
        } else {
          execvpe(argp[0], argp.data(), envp.data());
          err = errno;
        }
        ssize_t ignored = write(exec_pipe[1], &err, sizeof err);
        (void)ignored;
        _exit(127);
      }
      // Also from the parent, so that terminate() can signal the group even if it runs before
      // the child got to setpgid.
      setpgid(pid, pid);
      close(null_fd);
      close(out_pipe[1]);
      close(err_pipe[1]);
      close(exec_pipe[1]);
      out_fd = out_pipe[0];
      err_fd = err_pipe[0];

      int child_errno = 0;
      ssize_t n;
      do {
        n = read(exec_pipe[0], &child_errno, sizeof child_errno);
      } while (n < 0 && errno == EINTR);
      close(exec_pipe[0]);
      if (n == static_cast<ssize_t>(sizeof child_errno)) {
        int status = 0;
        waitpid(pid, &status, 0);
        close(out_fd);
        close(err_fd);
        out_fd = err_fd = -1;
        pid = -1;
        throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(child_errno));
      }
      reader = std::thread([this] { read_loop(); });
    }

    [[noreturn]] static void throw_errno(const std::string& what) {
      throw std::runtime_error("Subprocess: " + what + ": " + std::strerror(errno));
    }

    void read_loop() {
      char buf[4096];
      while (true) {
        pollfd fds[2];
        nfds_t count = 0;
        {
          std::lock_guard lock(mutex);
          if (stop_reading) break;
        }
        if (out_fd >= 0) fds[count++] = pollfd{out_fd, POLLIN, 0};
        if (err_fd >= 0) fds[count++] = pollfd{err_fd, POLLIN, 0};
        if (count == 0) break;
        int ready = poll(fds, count, 100);
        if (ready < 0 && errno != EINTR) break;
        for (nfds_t i = 0; i < count && ready > 0; ++i) {
          if (fds[i].revents == 0) continue;
          ssize_t n = read(fds[i].fd, buf, sizeof buf);
          if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
          std::lock_guard lock(mutex);
          const bool is_out = fds[i].fd == out_fd;
          if (n <= 0) {
            close(fds[i].fd);
            if (is_out) {
              if (!out_partial.empty()) out_lines.push_back(std::move(out_partial));
              out_partial.clear();
              out_fd = -1;
              out_closed = true;
            } else {
              err_fd = -1;
              err_closed = true;
            }
          } else if (is_out) {
            out_partial.append(buf, static_cast<std::size_t>(n));
            std::size_t newline;
            while ((newline = out_partial.find('\n')) != std::string::npos) {
              out_lines.push_back(out_partial.substr(0, newline));
              out_partial.erase(0, newline + 1);
            }
          } else {
            err_text.append(buf, static_cast<std::size_t>(n));
          }
          changed.notify_all();
        }
      }
      std::lock_guard lock(mutex);
      if (out_fd >= 0) close(out_fd);
      if (err_fd >= 0) close(err_fd);
      out_fd = err_fd = -1;
      out_closed = err_closed = true;
      changed.notify_all();
    }

    template <typename Match>
    std::optional<LineMatch> wait_for(Match match, std::chrono::milliseconds timeout) {
      const auto deadline = Clock::now() + timeout;
      std::unique_lock lock(mutex);
      while (true) {
        for (; next_line < out_lines.size(); ++next_line) {
          if (auto m = match(out_lines[next_line])) {
            ++next_line;
            return m;
          }
        }
        if (out_closed) return std::nullopt;
        if (changed.wait_until(lock, deadline) == std::cv_status::timeout) {
          // One last look at lines that arrived with the timeout.
          for (; next_line < out_lines.size(); ++next_line) {
            if (auto m = match(out_lines[next_line])) {
              ++next_line;
              return m;
            }
          }
          return std::nullopt;
        }
      }
    }

    void wait_output_closed(Clock::time_point deadline) {
      std::unique_lock lock(mutex);
      changed.wait_until(lock, deadline, [this] { return out_closed && err_closed; });
    }

    // The exit status once the child has exited (reaping it), else nullopt.
    std::optional<int> reap(bool block) {
      if (exit_status || pid <= 0) return exit_status;
      int status = 0;
      pid_t r;
      do {
        r = waitpid(pid, &status, block ? 0 : WNOHANG);
      } while (r < 0 && errno == EINTR);
      if (r == pid) {
        exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else if (r < 0) {
        exit_status = -1;  // not our child any more (already reaped elsewhere)
      }
      return exit_status;
    }

    int terminate(std::chrono::milliseconds grace) {
      if (auto status = reap(false)) return *status;
      kill(-pid, SIGTERM);
      const auto deadline = Clock::now() + grace;
      while (Clock::now() < deadline) {
        if (auto status = reap(false)) return *status;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      kill(-pid, SIGKILL);
      return reap(true).value_or(-1);
    }

    void shutdown() {
      if (pid > 0) terminate(std::chrono::seconds(5));
      if (reader.joinable()) {
        wait_output_closed(Clock::now() + std::chrono::seconds(2));
        {
          std::lock_guard lock(mutex);
          stop_reading = true;
        }
        reader.join();
      }
    }
  };

  Subprocess() : state_(std::make_unique<State>()) {}

  std::unique_ptr<State> state_;
};

}  // namespace pf::test
