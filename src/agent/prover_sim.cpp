#include "agent/prover_sim.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>

#include "core/text.h"
#include "scenario/truth_model.h"
#include "util/bounded_json.h"
#include "util/sha256.h"

namespace pf::agent {
namespace {

using nlohmann::json;
constexpr double kNever = std::numeric_limits<double>::infinity();

tl::expected<double, std::string> number(const json& t, const char* key, double min, double max,
                                         std::optional<double> fallback) {
  auto it = t.find(key);
  if (it == t.end() || it->is_null()) {
    if (fallback) return *fallback;
    return tl::unexpected(std::string("sim truth: missing '") + key + "'");
  }
  if (!it->is_number())
    return tl::unexpected(std::string("sim truth: '") + key + "' must be a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < min || v > max) {
    return tl::unexpected(std::string("sim truth: '") + key + "' must be in [" +
                          core::fixed(min, 2) + ", " + core::fixed(max, 2) + "], got " +
                          it->dump());
  }
  return v;
}

}  // namespace

std::string sim_proof_of(std::string_view input) {
  return util::sha256_hex("pf-sim-proof:", input);
}

tl::expected<SimTruth, std::string> parse_sim_truth(const json& t) {
  if (!t.is_object()) return tl::unexpected(std::string("sim truth must be a JSON object"));
  static const std::set<std::string> kKnown = {"rate_full",
                                               "partitions_full",
                                               "ram_visible_gib",
                                               "cores_visible",
                                               "proof_time_cv",
                                               "boot_min",
                                               "download_mbps",
                                               "warmup_min",
                                               "contention",
                                               "throttle",
                                               "failure",
                                               "mem_base_gib",
                                               "mem_per_partition_gib",
                                               "warmup_proofs",
                                               "rate_multiplier",
                                               "seed",
                                               "co_tenants",
                                               "co_tenants_file"};
  for (const auto& [key, value] : t.items()) {
    if (!kKnown.count(key)) return tl::unexpected("sim truth: unknown key '" + key + "'");
  }
  SimTruth s;
  scenario::Truth& truth = s.truth;
  // One reader per number: `into` is set, or the error returned.
  std::optional<std::string> error;
  const auto read = [&](const json& obj, const char* key, double min, double max,
                        std::optional<double> fallback, const char* where, double& into) {
    if (error) return;
    auto v = number(obj, key, min, max, fallback);
    if (v) {
      into = *v;
    } else {
      error = std::string(where) + v.error();
    }
  };
  double partitions_full = 1;
  double warmup_proofs = 1;
  double co_tenants = 0;
  read(t, "rate_full", 1e-6, 1e6, std::nullopt, "", truth.rate_full);
  read(t, "partitions_full", 1, 10000, std::nullopt, "", partitions_full);
  read(t, "ram_visible_gib", 1e-3, 1e7, std::nullopt, "", truth.ram_visible_gib);
  read(t, "proof_time_cv", 0, 10, 0.0, "", truth.proof_time_cv);
  read(t, "warmup_min", 0, 1e5, 0.0, "", truth.warmup_min);
  read(t, "contention", 1e-6, 1, 1.0, "", truth.contention);
  read(t, "mem_base_gib", 0, 1e5, truth.mem_base_gib, "", truth.mem_base_gib);
  read(t, "mem_per_partition_gib", 0, 1e5, truth.mem_per_partition_gib, "",
       truth.mem_per_partition_gib);
  read(t, "warmup_proofs", 0, 1000, 1.0, "", warmup_proofs);
  read(t, "rate_multiplier", 1e-6, 1e6, 1.0, "", s.rate_multiplier);
  read(t, "co_tenants", 0, 1e4, 0.0, "", co_tenants);
  if (error) return tl::unexpected(*error);
  truth.partitions_full = static_cast<int>(partitions_full);
  truth.warmup_proofs = static_cast<int>(warmup_proofs);
  s.co_tenants = static_cast<int>(co_tenants);
  if (auto it = t.find("co_tenants_file"); it != t.end() && !it->is_null()) {
    if (!it->is_string())
      return tl::unexpected(std::string("sim truth: 'co_tenants_file' must be a string"));
    s.co_tenants_file = it->get<std::string>();
  }
  if (auto it = t.find("seed"); it != t.end() && !it->is_null()) {
    if (!it->is_number_integer())
      return tl::unexpected(std::string("sim truth: 'seed' must be an integer"));
    s.seed = it->get<std::uint64_t>();
  }
  if (auto it = t.find("throttle"); it != t.end() && !it->is_null()) {
    if (!it->is_object())
      return tl::unexpected(std::string("sim truth: 'throttle' must be null or an object"));
    scenario::Throttle throttle;
    read(*it, "after_h", 0, 1e6, std::nullopt, "throttle: ", throttle.after_h);
    read(*it, "factor", 1e-6, 1, std::nullopt, "throttle: ", throttle.factor);
    if (error) return tl::unexpected(*error);
    if (auto r = it->find("reported"); r != it->end() && !r->is_null()) {
      if (!r->is_boolean())
        return tl::unexpected(std::string("sim truth: throttle.reported must be true or false"));
      throttle.reported = r->get<bool>();
    }
    truth.throttle = throttle;
  }
  if (auto it = t.find("failure"); it != t.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("kind") || !(*it)["kind"].is_string()) {
      return tl::unexpected(std::string("sim truth: 'failure' must be {kind, after_h}"));
    }
    const std::string kind = (*it)["kind"].get<std::string>();
    bool known = false;
    for (auto k : {scenario::FailureKind::None, scenario::FailureKind::Crash,
                   scenario::FailureKind::NeverBoots, scenario::FailureKind::Offline}) {
      if (kind == scenario::to_string(k)) {
        truth.failure.kind = k;
        known = true;
      }
    }
    if (!known) {
      return tl::unexpected(
          "sim truth: failure.kind must be none, crash, never_boots or offline, got '" + kind +
          "'");
    }
    read(*it, "after_h", 0, 1e6, 0.0, "failure: ", truth.failure.after_h);
    if (error) return tl::unexpected(*error);
  }
  return s;
}

SimProver::SimProver(SimTruth truth, const AgentClock& clock)
    : truth_(std::move(truth)), clock_(clock), rng_(truth_.seed) {}

SimProver::~SimProver() {
  stop();
}

double SimProver::proving_s(double now) const {
  return proved_s_ + (running_since_ >= 0 ? std::max(0.0, now - running_since_) : 0);
}

void SimProver::mark_down(double now) {
  proved_s_ = proving_s(now);
  running_since_ = -1;
}

bool SimProver::crashed_at(double now) const {
  const auto after = scenario::crash_after_proving_s(truth_.truth);
  return after && proving_s(now) >= *after;
}

bool SimProver::throttled_at(double now) const {
  const auto after = scenario::throttle_after_proving_s(truth_.truth);
  return after && proving_s(now) >= *after;
}

int SimProver::co_tenants_now() const {
  if (truth_.co_tenants_file.empty()) return truth_.co_tenants;
  // market-sim rewrites the file as instances on the machine come and go; a missing or odd
  // file keeps the count it started with.
  auto text = util::read_bounded_file(truth_.co_tenants_file, 64);
  if (!text) return truth_.co_tenants;
  int count = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), count);
  (void)end;
  return ec == std::errc() && count >= 0 ? count : truth_.co_tenants;
}

double SimProver::rate_at(int partitions, double now) const {
  return scenario::truth_rate(truth_.truth, partitions, co_tenants_now(), throttled_at(now)) *
         truth_.rate_multiplier;
}

double SimProver::rate_now(int partitions) const {
  return rate_at(partitions, clock_.now());
}

tl::expected<std::string, std::string> SimProver::start(const core::ProverPlan& plan, bool warmup) {
  std::lock_guard lock(mu_);
  ++generation_;
  cv_.notify_all();
  const double now = clock_.now();
  if (running_since_ >= 0) mark_down(now);
  if (crashed_at(now)) {
    crashed_ = true;
    running_ = false;
    return tl::unexpected(std::string("sim prover exited at start (simulated crash)"));
  }
  partitions_ = warmup ? plan.warmup_partitions : plan.partitions;
  gpus_ = std::max(1, plan.gpus);
  running_ = true;
  running_since_ = now;
  stopping_ = false;
  oom_ = false;
  crashed_ = false;
  proofs_begun_ = 0;
  last_done_ = now;
  const double peak = scenario::peak_memory_gib(truth_.truth, partitions_);
  oom_at_.reset();
  if (scenario::out_of_memory(truth_.truth, partitions_)) {
    oom_at_ = now + scenario::oom_after_start_s(truth_.truth);
  }
  return "sim prover: " + std::to_string(partitions_) + " partitions, peak " +
         core::fixed(peak, 0) + " GiB of " + core::fixed(truth_.truth.ram_visible_gib, 0) +
         " GiB visible, " + core::fixed(rate_at(partitions_, now), 1) + " proofs/h";
}

ProofOutcome SimProver::prove(const ProofJob& job) {
  std::unique_lock lock(mu_);
  if (!running_) {
    if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
    if (oom_) return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0, "sim prover killed for memory"};
    return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover is not running"};
  }
  const std::uint64_t gen = generation_;
  const double submit = clock_.now();
  const double begin = std::max(submit, last_done_);
  const double rate = std::max(1e-9, rate_at(partitions_, begin));
  const double gap = scenario::draw_proof_work(truth_.truth, rng_) * 3600.0 / rate;
  const double total = gap + scenario::warmup_extra_s(truth_.truth, ++proofs_begun_);
  const double done_at = begin + total;
  last_done_ = done_at;
  // Proving time runs while the prover is up, so the crash comes that much of it from now.
  const auto crash_after = scenario::crash_after_proving_s(truth_.truth);
  const double crash_at =
      crash_after ? submit + std::max(0.0, *crash_after - proving_s(submit)) : kNever;
  const double oom_at = oom_at_.value_or(kNever);
  const double end = std::min({done_at, crash_at, oom_at});
  ++in_flight_;
  const bool cancellable = job.input != nullptr;
  if (cancellable) jobs_in_flight_[job.job_id] = JobInFlight{begin, done_at, false};
  cv_.wait_until(lock, clock_.real_deadline(end), [&] {
    return generation_ != gen || (cancellable && jobs_in_flight_[job.job_id].cancelled);
  });
  --in_flight_;
  if (cancellable) {
    const bool cancelled = jobs_in_flight_[job.job_id].cancelled;
    jobs_in_flight_.erase(job.job_id);
    if (cancelled && generation_ == gen)
      return {ProofOutcome::Kind::Cancelled, 0, 0, 0, "cancelled"};
  }
  if (generation_ != gen) {
    if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
    if (oom_) return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0, "sim prover killed for memory"};
    if (crashed_) return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover crashed"};
    return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover restarted"};
  }
  if (end == oom_at) {
    oom_ = true;
    running_ = false;
    mark_down(end);
    ++generation_;
    cv_.notify_all();
    return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0,
            "sim prover killed for memory: " + std::to_string(partitions_) +
                " partitions peak above " + core::fixed(truth_.truth.ram_visible_gib, 0) + " GiB"};
  }
  if (end == crash_at) {
    crashed_ = true;
    running_ = false;
    mark_down(end);
    ++generation_;
    cv_.notify_all();
    return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover crashed (simulated)"};
  }
  ProofOutcome out;
  out.kind = ProofOutcome::Kind::Completed;
  out.seconds = done_at - submit;
  out.gpu_ms = gap * 1000 * 0.9;
  out.queue_ms = (begin - submit) * 1000;
  if (job.input) {
    lock.unlock();  // hashing a large input must not hold up the other proofs
    out.proof = sim_proof_of(*job.input);
  }
  return out;
}

ProverHealth SimProver::health() {
  std::lock_guard lock(mu_);
  ProverHealth h;
  h.running = running_;
  h.oom = oom_;
  h.message = oom_       ? "sim prover killed for memory"
              : crashed_ ? "sim prover crashed (simulated)"
              : running_ ? "running"
                         : "stopped";
  return h;
}

void SimProver::cancel(std::int64_t job_id) {
  std::lock_guard lock(mu_);
  auto it = jobs_in_flight_.find(job_id);
  if (it == jobs_in_flight_.end() || it->second.cancelled) return;
  it->second.cancelled = true;
  // The GPU is free from now: a proof begun after this one no longer waits for its end (one
  // already waiting keeps its time).
  if (last_done_ == it->second.done_at) last_done_ = std::max(it->second.begin, clock_.now());
  cv_.notify_all();
}

void SimProver::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  running_ = false;
  if (running_since_ >= 0) mark_down(clock_.now());
  ++generation_;
  cv_.notify_all();
}

std::optional<double> SimProver::peak_memory_gib() {
  std::lock_guard lock(mu_);
  if (partitions_ <= 0) return std::nullopt;
  return scenario::observed_peak_memory_gib(truth_.truth, partitions_);
}

std::optional<std::vector<GpuInfo>> SimProver::gpu_samples() {
  std::lock_guard lock(mu_);
  const bool throttled = throttled_at(clock_.now());
  // A silent throttle (/2 reported: false) slows the proofs and shows nothing here.
  const bool reported = throttled && scenario::throttle_reported(truth_.truth);
  const double factor = truth_.truth.throttle ? truth_.truth.throttle->factor : 1;
  std::vector<GpuInfo> out;
  for (int i = 0; i < gpus_; ++i) {
    GpuInfo g;
    g.index = i;
    const bool busy = running_ && in_flight_ > 0;
    g.util_pct = busy ? 97 : 0;
    g.memory_used_mib = busy ? 12288 : 0;
    g.temp_c = reported ? 88 : (busy ? 74 : 35);
    g.sm_clock_mhz = (busy ? 2520 : 210) * (throttled ? factor : 1);
    if (reported) g.throttle.push_back("sw_thermal_slowdown");
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace pf::agent
