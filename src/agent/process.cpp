#include "agent/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/unique_fd.h"

extern char** environ;

namespace pf::agent {
namespace {

std::string signal_name(int sig) {
  switch (sig) {
    case SIGKILL:
      return "SIGKILL";
    case SIGTERM:
      return "SIGTERM";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGABRT:
      return "SIGABRT";
    case SIGINT:
      return "SIGINT";
    case SIGBUS:
      return "SIGBUS";
    default:
      return "signal";
  }
}

ExitStatus from_wait_status(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) {
    s.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  }
  return s;
}

using Fd = util::UniqueFd;

bool make_pipe(Fd& read_end, Fd& write_end) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end = Fd(fds[0]);
  write_end = Fd(fds[1]);
  return true;
}

// A byte the watchdog reads as "the group was reaped: exit, kill nothing".
constexpr char kStandDown = 'x';

// Forks the watchdog of process group `group`: its pid, with our end of the socket through
// `our_end`, or the errno of what failed. Runs in a multithreaded process: after fork,
// async-signal-safe calls only (open, dup2, close, sigaction, read, kill, _exit, syscall).
tl::expected<pid_t, int> fork_group_watchdog(pid_t group, Fd& our_end) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return tl::unexpected(errno);
  Fd ours(pair[0]), theirs(pair[1]);
  const pid_t pid = fork();
  if (pid < 0) return tl::unexpected(errno);
  if (pid == 0) {
    // Its own group: signals for our group (a terminal's Ctrl-C, a parent's terminate() of
    // our group) must not take it down with us, since then nobody would end the child's group.
    setpgid(0, 0);
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE}) sigaction(sig, &ignore, nullptr);
    // Keep only its end of the socket, as fd 3: holding anything else of ours (listening
    // sockets, our end of other watchdogs' sockets, output pipes) would outlive us.
    const int null_fd = open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      dup2(null_fd, 0);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
    }
    if (dup2(theirs.get(), 3) < 0) _exit(1);
    if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0) {
      for (int fd = 4; fd < 65536; ++fd) close(fd);
    }
    char byte = 0;
    ssize_t n;
    do {
      n = read(3, &byte, 1);
    } while (n < 0 && errno == EINTR);
    // End of file (or an error): the process that spawned the group is gone.
    if (n != 1 || byte != kStandDown) kill(-group, SIGKILL);
    _exit(0);
  }
  our_end = std::move(ours);
  return pid;
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal != 0) {
    return "killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  }
  return "exit code " + std::to_string(code);
}

tl::expected<std::unique_ptr<ChildProcess>, std::string> ChildProcess::spawn(ChildOptions options) {
  if (options.argv.empty())
    return tl::unexpected(std::string("cannot start a process: empty argv"));
  const std::string program = options.argv[0];
  // Everything the child needs is prepared before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = options.inherit_env ? environ : nullptr; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    // The registration secret stays with the agent: a prover command is anybody's program.
    if (name == "PROVERFLEET_SECRET") continue;
    if (options.env.count(name) == 0) env_strings.push_back(entry);
  }
  for (const auto& [name, value] : options.env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  std::vector<char*> argp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);

  Fd out_r, out_w, err_r, err_w, exec_r, exec_w, go_r, go_w;
  if (!make_pipe(out_r, out_w) || !make_pipe(err_r, err_w) || !make_pipe(exec_r, exec_w) ||
      !make_pipe(go_r, go_w)) {
    return tl::unexpected("cannot start " + program + ": pipe: " + std::strerror(errno));
  }
  Fd null_fd(open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (null_fd.get() < 0) {
    return tl::unexpected("cannot start " + program + ": /dev/null: " + std::strerror(errno));
  }
  const pid_t parent = getpid();
  const char* dir = options.working_dir.empty() ? nullptr : options.working_dir.c_str();
  sigset_t empty_mask;
  sigemptyset(&empty_mask);

  const pid_t pid = fork();
  if (pid < 0) return tl::unexpected("cannot start " + program + ": fork: " + std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    // With a watchdog, wait for it before exec: a command started earlier could fork
    // processes that outlive a SIGKILLed parent with nobody left to end their group (seen:
    // an agent left running when market-sim died between the shell's exec and the watchdog's
    // fork). End of file instead of the byte means the parent is gone.
    if (options.group_watchdog) {
      close(go_w.get());  // so the parent's end closing reads as end of file
      char go = 0;
      ssize_t got;
      do {
        got = read(go_r.get(), &go, 1);
      } while (got < 0 && errno == EINTR);
      if (got != 1) _exit(127);
    }
    // The agent blocks its stop signals for sigwait; the child must get them normally.
    sigprocmask(SIG_SETMASK, &empty_mask, nullptr);
    signal(SIGPIPE, SIG_DFL);
    dup2(null_fd.get(), 0);
    dup2(out_w.get(), 1);
    dup2(err_w.get(), 2);
    int err = 0;
    if (dir != nullptr && chdir(dir) != 0) {
      err = errno;
    } else {
      execvpe(argp[0], argp.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = write(exec_w.get(), &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so terminate() can signal the group at once
  out_w.reset();
  err_w.reset();
  exec_w.reset();
  go_r.reset();
  pid_t watchdog_pid = -1;
  Fd watchdog_end;
  if (options.group_watchdog) {
    const auto watchdog = fork_group_watchdog(pid, watchdog_end);
    if (!watchdog) {
      const std::string why = std::strerror(watchdog.error());
      kill(-pid, SIGKILL);
      int status = 0;
      waitpid(pid, &status, 0);
      return tl::unexpected("cannot start " + program + ": no watchdog for its group: " + why);
    }
    watchdog_pid = *watchdog;
    const char go = 1;
    ssize_t sent;
    do {
      sent = write(go_w.get(), &go, 1);
    } while (sent < 0 && errno == EINTR);
    go_w.reset();
  }
  int child_errno = 0;
  ssize_t n;
  do {
    n = read(exec_r.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->watchdog_pid_ = watchdog_pid;
  child->watchdog_fd_ = watchdog_end.release();
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    child->stand_down_watchdog();  // before the leader is reaped: its group id stays ours
    int status = 0;
    waitpid(pid, &status, 0);
    return tl::unexpected("cannot start " + program + ": " + std::strerror(child_errno));
  }
  child->pid_ = pid;
  child->on_line_ = std::move(options.on_line);
  const int out_fd = out_r.release();
  const int err_fd = err_r.release();
  child->reader_ =
      std::thread([raw = child.get(), out_fd, err_fd] { raw->read_loop(out_fd, err_fd); });
  return child;
}

void ChildProcess::read_loop(int out_fd, int err_fd) {
  std::string partial[2];
  int fds[2] = {out_fd, err_fd};
  char buf[4096];
  auto emit = [this](const std::string& line, bool is_err) {
    if (on_line_) on_line_(line, is_err);
  };
  int idle_after_exit = 0;
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd p[2];
    nfds_t count = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0) {
        which[count] = i;
        p[count++] = pollfd{fds[i], POLLIN, 0};
      }
    }
    const int ready = ::poll(p, count, 200);
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) {
      // A grandchild may hold the pipes open after the child exited; give up after ~2 s.
      std::lock_guard lock(mutex_);
      if (status_ && ++idle_after_exit > 10) break;
      continue;
    }
    for (nfds_t k = 0; k < count; ++k) {
      if (p[k].revents == 0) continue;
      const int i = which[k];
      const ssize_t got = read(fds[i], buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        close(fds[i]);
        fds[i] = -1;
        if (!partial[i].empty()) emit(partial[i], i == 1);
        partial[i].clear();
        continue;
      }
      partial[i].append(buf, static_cast<std::size_t>(got));
      std::size_t nl;
      while ((nl = partial[i].find('\n')) != std::string::npos) {
        emit(partial[i].substr(0, nl), i == 1);
        partial[i].erase(0, nl + 1);
      }
      // Bound a line that never ends (a progress bar with '\r').
      if (partial[i].size() > 64 * 1024) {
        emit(partial[i], i == 1);
        partial[i].clear();
      }
    }
  }
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) close(fds[i]);
    if (!partial[i].empty()) emit(partial[i], i == 1);
  }
  {
    std::lock_guard lock(mutex_);
    reader_done_ = true;
  }
  reader_cv_.notify_all();
}

std::optional<ExitStatus> ChildProcess::poll() {
  std::lock_guard lock(mutex_);
  if (status_ || pid_ <= 0) return status_;
  // Look without reaping first: while the exited leader is a zombie its pid (the group id)
  // cannot be reused, so signalling the group reaches only what it left behind.
  siginfo_t info{};
  int r;
  do {
    r = waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    status_ = ExitStatus{};  // reaped elsewhere; nothing more to learn
    stand_down_watchdog();
    return status_;
  }
  if (info.si_pid != pid_) return std::nullopt;
  kill(-pid_, SIGKILL);
  stand_down_watchdog();
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  status_ = reaped == pid_ ? from_wait_status(status) : ExitStatus{};
  return status_;
}

std::optional<ExitStatus> ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (auto s = poll()) {
      // What it wrote before it exited may still be in the pipes: let the reader hand it to
      // on_line first. Bounded (a grandchild may hold the pipes open; a caller may hold what
      // on_line needs): 200 ms at least, 500 ms at most.
      const auto now = std::chrono::steady_clock::now();
      const auto until = std::clamp(deadline, now + std::chrono::milliseconds(200),
                                    now + std::chrono::milliseconds(500));
      std::unique_lock lock(mutex_);
      reader_cv_.wait_until(lock, until, [this] { return reader_done_; });
      return s;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ExitStatus ChildProcess::terminate(std::chrono::milliseconds grace, int first_signal) {
  if (auto s = poll()) return *s;
  kill(-pid_, first_signal);
  if (auto s = wait(grace)) return *s;
  if (first_signal != SIGTERM) {
    kill(-pid_, SIGTERM);
    if (auto s = wait(grace)) return *s;
  }
  kill(-pid_, SIGKILL);
  // SIGKILL cannot be ignored; the wait only covers the kernel tearing the process down.
  if (auto s = wait(std::chrono::seconds(30))) return *s;
  return ExitStatus{};
}

bool ChildProcess::signal_group(int sig) {
  std::lock_guard lock(mutex_);
  if (status_ || pid_ <= 0) return false;
  return kill(-pid_, sig) == 0;
}

void ChildProcess::stand_down_watchdog() {
  if (watchdog_fd_ < 0) return;
  // The send's outcome changes nothing that follows: when it fails the watchdog is gone
  // already (someone killed it) and needs reaping all the same. MSG_NOSIGNAL keeps its closed
  // end from raising SIGPIPE here.
  (void)send(watchdog_fd_, &kStandDown, 1, MSG_NOSIGNAL);
  close(watchdog_fd_);
  watchdog_fd_ = -1;
  int status = 0;
  pid_t reaped;
  do {
    reaped = waitpid(watchdog_pid_, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  watchdog_pid_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0) terminate(std::chrono::seconds(5));
  {
    std::lock_guard lock(mutex_);
    stand_down_watchdog();  // when the child was never polled to its end
  }
  if (reader_.joinable()) reader_.join();
}

bool group_has_live_members(pid_t pgid) {
  if (pgid <= 0) return false;
  if (kill(-pgid, 0) != 0) return errno == EPERM;
  // kill() also reaches zombies; /proc tells them apart (field 3 is the state, field 5 the
  // process group, both after the command name in parentheses, which may itself hold ')').
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return true;
  bool alive = false;
  while (!alive) {
    const dirent* entry = readdir(proc);
    if (entry == nullptr) break;
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    const std::string path = std::string("/proc/") + entry->d_name + "/stat";
    char buf[512];
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    const ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* close_paren = std::strrchr(buf, ')');
    if (close_paren == nullptr) continue;
    char state = 0;
    long ppid = 0, group = 0;
    if (std::sscanf(close_paren + 1, " %c %ld %ld", &state, &ppid, &group) != 3) continue;
    if (group == pgid && state != 'Z' && state != 'X') alive = true;
  }
  closedir(proc);
  return alive;
}

tl::expected<Captured, std::string> run_capture(const std::vector<std::string>& argv,
                                                std::chrono::milliseconds timeout,
                                                const std::map<std::string, std::string>& env) {
  auto captured = std::make_shared<Captured>();
  auto mu = std::make_shared<std::mutex>();
  ChildOptions options;
  options.argv = argv;
  options.env = env;
  options.on_line = [captured, mu](const std::string& line, bool from_stderr) {
    std::lock_guard lock(*mu);
    (from_stderr ? captured->err : captured->out) += line + "\n";
  };
  auto child = ChildProcess::spawn(std::move(options));
  if (!child) return tl::unexpected(child.error());
  auto status = (*child)->wait(timeout);
  if (!status) {
    (*child)->terminate(std::chrono::milliseconds(500));
    return tl::unexpected(argv[0] + " did not finish within " + std::to_string(timeout.count()) +
                          " ms");
  }
  child->reset();  // joins the reader, so every line is in
  std::lock_guard lock(*mu);
  Captured out = *captured;
  out.status = *status;
  return out;
}

}  // namespace pf::agent
