#include "agent/prover_command.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <optional>
#include <utility>

#include "agent/private_file.h"
#include "core/text.h"
#include "util/bounded_json.h"

namespace pf::agent {
namespace {

std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  const std::size_t begin = text.rfind('\n', end);
  return text.substr(begin == std::string::npos ? 0 : begin + 1,
                     end - (begin == std::string::npos ? 0 : begin + 1) + 1);
}

// A job's input and proof files for one proof; both removed when it goes.
class JobFiles {
 public:
  static tl::expected<JobFiles, std::string> create(const std::string& work_dir,
                                                    const ProofJob& job) {
    namespace fs = std::filesystem;
    static std::atomic<std::uint64_t> counter{0};
    std::error_code ec;
    const fs::path dir = work_dir.empty() ? fs::temp_directory_path(ec) : fs::path(work_dir);
    if (ec) return tl::unexpected("no temporary directory: " + ec.message());
    fs::create_directories(dir, ec);
    if (ec) return tl::unexpected("cannot create " + dir.string() + ": " + ec.message());
    const std::string stem =
        (dir / ("pf-job-" + std::to_string(::getpid()) + "-" + std::to_string(job.job_id) + "-" +
                std::to_string(counter.fetch_add(1))))
            .string();
    JobFiles files;
    files.input_ = stem + ".input";
    files.proof_ = stem + ".proof";
    fs::remove(files.proof_, ec);  // a leftover of an earlier run with the same pid
    if (auto w = write_private_file(files.input_, *job.input); !w) {
      files.input_.clear();
      return tl::unexpected(w.error());
    }
    return files;
  }
  JobFiles() = default;
  JobFiles(JobFiles&& other) noexcept
      : input_(std::exchange(other.input_, {})), proof_(std::exchange(other.proof_, {})) {}
  JobFiles& operator=(JobFiles&&) = delete;
  JobFiles(const JobFiles&) = delete;
  JobFiles& operator=(const JobFiles&) = delete;
  ~JobFiles() {
    std::error_code ec;
    if (!input_.empty()) std::filesystem::remove(input_, ec);
    if (!proof_.empty()) std::filesystem::remove(proof_, ec);
  }
  const std::string& input() const { return input_; }
  const std::string& proof() const { return proof_; }

 private:
  std::string input_, proof_;
};

}  // namespace

CommandProver::CommandProver(CommandProverOptions options, const AgentClock& clock)
    : options_(std::move(options)), clock_(clock) {}

CommandProver::~CommandProver() {
  stop();
}

tl::expected<std::string, std::string> CommandProver::start(const core::ProverPlan& plan,
                                                            bool warmup) {
  if (options_.command.empty()) {
    return tl::unexpected(std::string("the command prover needs a command (--prover-command)"));
  }
  std::lock_guard lock(mu_);
  partitions_ = warmup ? plan.warmup_partitions : plan.partitions;
  gpus_ = std::max(1, plan.gpus);
  budget_gib_ = warmup ? plan.warmup_budget_gib : plan.total_budget_gib;
  stopping_ = false;
  running_ = true;
  oom_ = false;
  return "command prover: " + options_.command + " (" + std::to_string(partitions_) +
         " partitions)";
}

ProofOutcome CommandProver::prove(const ProofJob& job) {
  std::map<std::string, std::string> env = options_.env;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !running_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
    env["PF_PROOF_INDEX"] = std::to_string(job.index);
    env["PF_PROOF_WARMUP"] = job.warmup ? "1" : "0";
    env["PF_PARTITIONS"] = std::to_string(partitions_);
    env["PF_GPUS"] = std::to_string(gpus_);
    env["PF_TOTAL_BUDGET_GIB"] = core::fixed(budget_gib_, 0);
  }
  std::optional<JobFiles> files;
  if (job.input) {
    auto made = JobFiles::create(options_.work_dir, job);
    if (!made) return {ProofOutcome::Kind::Failed, 0, 0, 0, "job input: " + made.error()};
    files.emplace(std::move(*made));
    env["PF_JOB_INPUT"] = files->input();
    env["PF_JOB_PROOF"] = files->proof();
    env["PF_JOB_ID"] = std::to_string(job.job_id);
    env["PF_JOB_KIND"] = core::to_string(job.kind);
  }
  const auto oom_before = read_oom_kills(options_.probe_root);
  auto output = std::make_shared<std::pair<std::string, std::string>>();
  auto out_mu = std::make_shared<std::mutex>();
  ChildOptions co;
  co.argv = {"/bin/sh", "-c", options_.command};
  co.env = env;
  co.on_line = [output, out_mu](const std::string& line, bool err) {
    std::lock_guard lock(*out_mu);
    std::string& s = err ? output->second : output->first;
    if (s.size() < (64u << 10)) s += line + "\n";
  };
  const double started = clock_.now();
  auto child = ChildProcess::spawn(std::move(co));
  if (!child) return {ProofOutcome::Kind::Failed, 0, 0, 0, child.error()};
  const bool cancellable = job.input != nullptr;
  if (cancellable) {
    std::lock_guard lock(mu_);
    jobs_in_flight_[job.job_id] = false;
  }
  bool cancelled = false;
  ChildProcess* raw = child->get();
  // Waits in short slices so a stop() is noticed; the child is only ever touched by the
  // thread that owns it.
  const auto deadline = std::chrono::steady_clock::now() + clock_.real(options_.proof_timeout_s);
  std::optional<ExitStatus> status;
  bool timed_out = false;
  while (!status) {
    status = raw->wait(std::chrono::milliseconds(200));
    if (status) break;
    bool stop_now = false;
    {
      std::lock_guard lock(mu_);
      stop_now = stopping_;
      cancelled = cancellable && jobs_in_flight_[job.job_id];
    }
    if (stop_now || cancelled || std::chrono::steady_clock::now() >= deadline) {
      timed_out = !stop_now && !cancelled;
      status = raw->terminate(std::chrono::seconds(5));
    }
  }
  child->reset();  // joins the output reader
  const double seconds = clock_.now() - started;
  std::lock_guard lock(mu_);
  if (cancellable) jobs_in_flight_.erase(job.job_id);
  if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
  if (cancelled) return {ProofOutcome::Kind::Cancelled, 0, 0, 0, "cancelled"};
  if (timed_out) {
    return {ProofOutcome::Kind::Failed, 0, 0, 0,
            "proof command timed out after " + core::fixed(options_.proof_timeout_s, 0) + " s"};
  }
  if (killed_for_memory(*status, oom_before, read_oom_kills(options_.probe_root))) {
    oom_ = true;
    running_ = false;
    last_message_ = "proof command " + status->describe() + " (out of memory)";
    return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0, last_message_};
  }
  if (status->code != 0) {
    std::lock_guard out_lock(*out_mu);
    const std::string why = last_line(output->second.empty() ? output->first : output->second);
    return {ProofOutcome::Kind::Failed, 0, 0, 0,
            "proof command " + status->describe() + (why.empty() ? "" : ": " + why)};
  }
  ProofOutcome out;
  out.kind = ProofOutcome::Kind::Completed;
  out.seconds = std::max(seconds, 1e-3);
  if (files) {
    auto proof = util::read_bounded_file(files->proof(), options_.max_proof_bytes);
    if (!proof) {
      return {ProofOutcome::Kind::Failed, 0, 0, 0,
              "proof command exited 0 without a proof in PF_JOB_PROOF: " + proof.error()};
    }
    out.proof = std::move(*proof);
  }
  std::lock_guard out_lock(*out_mu);
  // The report line is the command's to write, so it is parsed with limits like any input.
  const auto parsed = util::parse_json(last_line(output->first));
  if (parsed && parsed->is_object()) {
    const nlohmann::json& report = *parsed;
    auto num = [&](const char* key, double& field) {
      if (report.contains(key) && report[key].is_number()) {
        const double v = report[key].get<double>();
        if (std::isfinite(v) && v >= 0) field = v;
      }
    };
    num("seconds", out.seconds);
    num("gpu_ms", out.gpu_ms);
    num("queue_ms", out.queue_ms);
    if (out.seconds <= 0) out.seconds = std::max(seconds, 1e-3);
  }
  return out;
}

ProverHealth CommandProver::health() {
  std::lock_guard lock(mu_);
  return ProverHealth{running_, oom_, oom_ ? last_message_ : (running_ ? "running" : "stopped")};
}

void CommandProver::cancel(std::int64_t job_id) {
  std::lock_guard lock(mu_);
  auto it = jobs_in_flight_.find(job_id);
  if (it != jobs_in_flight_.end()) it->second = true;  // its prove() ends the process
}

void CommandProver::stop() {
  // Running proofs notice within their next wait slice and end their own child.
  std::lock_guard lock(mu_);
  stopping_ = true;
  running_ = false;
}

std::optional<double> CommandProver::peak_memory_gib() {
  return read_cgroup_peak_gib(options_.probe_root);
}

}  // namespace pf::agent
