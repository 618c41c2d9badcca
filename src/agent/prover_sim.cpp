#include "agent/prover_sim.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/text.h"

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

tl::expected<SimTruth, std::string> parse_sim_truth(const json& t) {
  if (!t.is_object()) return tl::unexpected(std::string("sim truth must be a JSON object"));
  static const std::set<std::string> kKnown = {
      "rate_full",     "partitions_full", "ram_visible_gib", "cores_visible",
      "proof_time_cv", "boot_min",        "download_mbps",   "warmup_min",
      "contention",    "throttle",        "failure",         "rate_multiplier",
      "seed"};
  for (const auto& [key, value] : t.items()) {
    if (!kKnown.count(key)) return tl::unexpected("sim truth: unknown key '" + key + "'");
  }
  SimTruth s;
  auto rate = number(t, "rate_full", 1e-6, 1e6, std::nullopt);
  if (!rate) return tl::unexpected(rate.error());
  s.rate_full = *rate;
  auto parts = number(t, "partitions_full", 1, 10000, std::nullopt);
  if (!parts) return tl::unexpected(parts.error());
  s.partitions_full = static_cast<int>(*parts);
  auto ram = number(t, "ram_visible_gib", 1e-3, 1e7, std::nullopt);
  if (!ram) return tl::unexpected(ram.error());
  s.ram_visible_gib = *ram;
  auto cv = number(t, "proof_time_cv", 0, 10, 0.0);
  if (!cv) return tl::unexpected(cv.error());
  s.proof_time_cv = *cv;
  auto warm = number(t, "warmup_min", 0, 1e5, 0.0);
  if (!warm) return tl::unexpected(warm.error());
  s.warmup_min = *warm;
  auto mult = number(t, "rate_multiplier", 1e-6, 1e6, 1.0);
  if (!mult) return tl::unexpected(mult.error());
  s.rate_multiplier = *mult;
  if (auto it = t.find("seed"); it != t.end() && !it->is_null()) {
    if (!it->is_number_integer())
      return tl::unexpected(std::string("sim truth: 'seed' must be an integer"));
    s.seed = it->get<std::uint64_t>();
  }
  if (auto it = t.find("throttle"); it != t.end() && !it->is_null()) {
    if (!it->is_object())
      return tl::unexpected(std::string("sim truth: 'throttle' must be null or an object"));
    auto after = number(*it, "after_h", 0, 1e6, std::nullopt);
    if (!after) return tl::unexpected("throttle: " + after.error());
    auto factor = number(*it, "factor", 1e-6, 1, std::nullopt);
    if (!factor) return tl::unexpected("throttle: " + factor.error());
    s.throttle_after_h = *after;
    s.throttle_factor = *factor;
  }
  if (auto it = t.find("failure"); it != t.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("kind") || !(*it)["kind"].is_string()) {
      return tl::unexpected(std::string("sim truth: 'failure' must be {kind, after_h}"));
    }
    s.failure_kind = (*it)["kind"].get<std::string>();
    if (s.failure_kind != "none" && s.failure_kind != "crash" && s.failure_kind != "never_boots" &&
        s.failure_kind != "offline") {
      return tl::unexpected(
          "sim truth: failure.kind must be none, crash, never_boots or offline, got '" +
          s.failure_kind + "'");
    }
    auto after = number(*it, "after_h", 0, 1e6, 0.0);
    if (!after) return tl::unexpected("failure: " + after.error());
    s.failure_after_h = *after;
  }
  return s;
}

SimProver::SimProver(SimTruth truth, const AgentClock& clock, core::MemoryModel model)
    : truth_(std::move(truth)), clock_(clock), model_(model), rng_(truth_.seed) {}

SimProver::~SimProver() {
  stop();
}

bool SimProver::crashed_at(double now) const {
  return truth_.failure_kind == "crash" && first_start_ >= 0 &&
         now >= first_start_ + truth_.failure_after_h * 3600;
}

bool SimProver::throttled_at(double now) const {
  return truth_.throttle_after_h && first_start_ >= 0 &&
         now >= first_start_ + *truth_.throttle_after_h * 3600;
}

double SimProver::rate_now(int partitions) const {
  double rate = truth_.rate_full * core::rate_fraction(partitions, truth_.partitions_full) *
                truth_.rate_multiplier;
  if (throttled_at(clock_.now())) rate *= truth_.throttle_factor;
  return rate;
}

double SimProver::draw_gap_s(double mean_s) {
  if (truth_.proof_time_cv <= 0) return mean_s;
  const double sigma2 = std::log(1 + truth_.proof_time_cv * truth_.proof_time_cv);
  std::lognormal_distribution<double> dist(std::log(mean_s) - sigma2 / 2, std::sqrt(sigma2));
  return dist(rng_);
}

tl::expected<std::string, std::string> SimProver::start(const core::ProverPlan& plan, bool warmup) {
  std::lock_guard lock(mu_);
  ++generation_;
  cv_.notify_all();
  const double now = clock_.now();
  if (first_start_ < 0) first_start_ = now;
  if (crashed_at(now)) {
    crashed_ = true;
    running_ = false;
    return tl::unexpected(std::string("sim prover exited at start (simulated crash)"));
  }
  partitions_ = warmup ? plan.warmup_partitions : plan.partitions;
  gpus_ = std::max(1, plan.gpus);
  running_ = true;
  stopping_ = false;
  oom_ = false;
  crashed_ = false;
  first_pending_ = true;
  last_done_ = now;
  const double peak = core::peak_memory_gib(partitions_, model_);
  oom_at_.reset();
  if (peak > truth_.ram_visible_gib) {
    // The first proof's warm-up is where the peak is reached.
    oom_at_ = now + std::max(1.0, truth_.warmup_min * 60 * 0.5);
  }
  return "sim prover: " + std::to_string(partitions_) + " partitions, model peak " +
         core::fixed(peak, 0) + " GiB of " + core::fixed(truth_.ram_visible_gib, 0) +
         " GiB visible, " + core::fixed(rate_now(partitions_), 1) + " proofs/h";
}

ProofOutcome SimProver::prove(const ProofJob&) {
  std::unique_lock lock(mu_);
  if (!running_) {
    if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
    if (oom_) return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0, "sim prover killed for memory"};
    return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover is not running"};
  }
  const std::uint64_t gen = generation_;
  const double submit = clock_.now();
  const double begin = std::max(submit, last_done_);
  const double gap = draw_gap_s(3600.0 / std::max(1e-9, rate_now(partitions_)));
  double total = gap;
  if (first_pending_) {
    total += truth_.warmup_min * 60;
    first_pending_ = false;
  }
  const double done_at = begin + total;
  last_done_ = done_at;
  const double crash_at =
      truth_.failure_kind == "crash" ? first_start_ + truth_.failure_after_h * 3600 : kNever;
  const double oom_at = oom_at_.value_or(kNever);
  const double end = std::min({done_at, crash_at, oom_at});
  ++in_flight_;
  cv_.wait_until(lock, clock_.real_deadline(end), [&] { return generation_ != gen; });
  --in_flight_;
  if (generation_ != gen) {
    if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
    if (oom_) return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0, "sim prover killed for memory"};
    if (crashed_) return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover crashed"};
    return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover restarted"};
  }
  if (end == oom_at) {
    oom_ = true;
    running_ = false;
    ++generation_;
    cv_.notify_all();
    return {ProofOutcome::Kind::OutOfMemory, 0, 0, 0,
            "sim prover killed for memory: " + std::to_string(partitions_) +
                " partitions peak above " + core::fixed(truth_.ram_visible_gib, 0) + " GiB"};
  }
  if (end == crash_at) {
    crashed_ = true;
    running_ = false;
    ++generation_;
    cv_.notify_all();
    return {ProofOutcome::Kind::Transport, 0, 0, 0, "sim prover crashed (simulated)"};
  }
  ProofOutcome out;
  out.kind = ProofOutcome::Kind::Completed;
  out.seconds = done_at - submit;
  out.gpu_ms = gap * 1000 * 0.9;
  out.queue_ms = (begin - submit) * 1000;
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

void SimProver::stop() {
  std::lock_guard lock(mu_);
  stopping_ = true;
  running_ = false;
  ++generation_;
  cv_.notify_all();
}

std::optional<double> SimProver::peak_memory_gib() {
  std::lock_guard lock(mu_);
  if (partitions_ <= 0) return std::nullopt;
  const double peak = core::peak_memory_gib(partitions_, model_);
  return std::min(peak, truth_.ram_visible_gib);
}

std::optional<std::vector<GpuInfo>> SimProver::gpu_samples() {
  std::lock_guard lock(mu_);
  const bool throttled = throttled_at(clock_.now());
  std::vector<GpuInfo> out;
  for (int i = 0; i < gpus_; ++i) {
    GpuInfo g;
    g.index = i;
    const bool busy = running_ && in_flight_ > 0;
    g.util_pct = busy ? 97 : 0;
    g.memory_used_mib = busy ? 12288 : 0;
    g.temp_c = throttled ? 88 : (busy ? 74 : 35);
    g.sm_clock_mhz = (busy ? 2520 : 210) * (throttled ? truth_.throttle_factor : 1);
    if (throttled) g.throttle.push_back("sw_thermal_slowdown");
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace pf::agent
