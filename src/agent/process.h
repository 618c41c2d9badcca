// Child processes for the agent: the prover daemon, per-proof commands and nvidia-smi. Each
// child runs in its own process group (terminate() signals the whole group, so helpers it
// starts go too) and is SIGKILLed if the agent dies (PR_SET_PDEATHSIG): a restarted agent must
// never find an orphaned daemon holding the GPU, the port and the memory.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tl/expected.hpp>
#include <vector>

namespace pf::agent {

struct ExitStatus {
  int code = -1;   // exit code when it exited normally, else -1
  int signal = 0;  // the signal that ended it, else 0
  bool killed_by(int sig) const { return signal == sig; }
  // "exit code 3", "killed by signal 9 (SIGKILL)"
  std::string describe() const;
};

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0] is searched in PATH when it has no '/'
  // Added to (or replacing in) the agent's environment, which children inherit without
  // PROVERFLEET_SECRET.
  std::map<std::string, std::string> env;
  // false: the child gets `env` only (market-sim's instances must not see its environment,
  // which may hold the market API key).
  bool inherit_env = true;
  std::string working_dir;  // empty: the agent's
  // PR_SET_PDEATHSIG reaches only the child itself: a shell's children outlive us. With this a
  // watchdog process (own process group, deaf to SIGTERM/SIGINT/SIGHUP) SIGKILLs the child's
  // whole group as soon as this process dies, however it dies (SIGKILL included). It waits on
  // a socket whose other end only this process holds (close-on-exec, so the child and what it
  // starts never inherit it); reaping the child tells it to stand down.
  bool group_watchdog = false;
  // Called on the reader thread for every complete output line (and a final partial line).
  std::function<void(const std::string& line, bool from_stderr)> on_line;
};

class ChildProcess {
 public:
  // Starts the child. The error names the program and the reason (e.g. not found).
  static tl::expected<std::unique_ptr<ChildProcess>, std::string> spawn(ChildOptions options);
  ~ChildProcess();  // terminates the group (SIGTERM, SIGKILL after 5 s) if still running
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The exit status once the child has exited, without blocking.
  std::optional<ExitStatus> poll();
  // Waits up to `timeout` for the child to exit (and its output to be read).
  std::optional<ExitStatus> wait(std::chrono::milliseconds timeout);
  // `first_signal` to the group; after `grace`, SIGTERM (when the first was another signal); after
  // another `grace`, SIGKILL. Idempotent.
  ExitStatus terminate(std::chrono::milliseconds grace, int first_signal = SIGTERM);
  // Sends `sig` to the whole group without waiting; false once the child has been reaped (its
  // group id may then belong to someone else). Reaping happens only in poll(), so a caller
  // that wants the group to outlive its leader for a while (a grace period after SIGTERM)
  // simply does not poll meanwhile.
  bool signal_group(int sig);

 private:
  ChildProcess() = default;
  void read_loop(int out_fd, int err_fd);

  // Tells the watchdog (if any) to exit without killing and reaps it. Before the leader is
  // reaped, so the group id it would signal cannot have been reused.
  void stand_down_watchdog();

  pid_t pid_ = -1;
  pid_t watchdog_pid_ = -1;
  int watchdog_fd_ = -1;  // our end of the watchdog's socket
  std::mutex mutex_;
  std::optional<ExitStatus> status_;
  // Set (under mutex_) once the reader has handed every line to on_line_: wait() returns the
  // exit status only with the output read, as it promises.
  bool reader_done_ = false;
  std::condition_variable reader_cv_;
  std::function<void(const std::string&, bool)> on_line_;
  std::thread reader_;
};

struct Captured {
  ExitStatus status;
  std::string out;
  std::string err;
};

// True while process group `pgid` has a member that is not a zombie: a group whose leader
// exited can still hold its children (a shell running the agent).
bool group_has_live_members(pid_t pgid);

// Runs a command to completion and returns its output; killed after `timeout`.
tl::expected<Captured, std::string> run_capture(const std::vector<std::string>& argv,
                                                std::chrono::milliseconds timeout,
                                                const std::map<std::string, std::string>& env = {});

}  // namespace pf::agent
