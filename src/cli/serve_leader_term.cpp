#include "cli/serve_leader_term.h"

#include <spdlog/spdlog.h>

namespace pf::cli {

LeaderTerm::LeaderTerm(manager::Manager& fleet, store::Store& store,
                       jobs::JobQueueConfig jobs_config,
                       std::optional<gateway::GatewayConfig> gateway_config,
                       manager::Leadership& leadership, std::function<double()> clock)
    : fleet_(fleet),
      store_(store),
      jobs_config_(std::move(jobs_config)),
      gateway_config_(std::move(gateway_config)),
      leadership_(leadership),
      clock_(std::move(clock)) {}

LeaderTerm::~LeaderTerm() {
  shutdown();
}

void LeaderTerm::begin(std::int64_t epoch) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  // Agents could not reach this replica's loops before: their silence counts from now, and the
  // worker roster reads the rows again.
  fleet_.listening_interrupted();
  fleet_.instances_written();
  jobs::JobQueueHooks hooks = fleet_.job_hooks();
  hooks.fence = [this] {
    if (auto why = leadership_.fence_refusal()) {
      throw store::StoreError("job queue write refused: " + *why);
    }
  };
  try {
    queues_.push_back(std::make_unique<jobs::JobQueue>(store_, jobs_config_, hooks, clock_));
    queue_ = queues_.back().get();
  } catch (const std::exception& e) {
    spdlog::error("term {}: cannot open the job queue: {}", epoch, e.what());
    return;
  }
  fleet_.attach_jobs(*queue_);
  spdlog::info("term {}: job queue loaded from the store", epoch);
  epoch_ = epoch;
  gateway_failed_logged_ = false;
  start_gateway_locked();
}

void LeaderTerm::start_gateway_locked() {
  if (!gateway_config_ || gateway_ || !queue_) return;
  auto started = gateway::start_gateway(*queue_, *gateway_config_);
  if (!started) {
    if (!gateway_failed_logged_) {
      spdlog::error("term {}: the gateway did not start (retried every lease renewal): {}", epoch_,
                    started.error());
      gateway_failed_logged_ = true;
    }
    return;
  }
  gateway_ = std::move(*started);
  spdlog::info("term {}: gateway listening on port {}", epoch_, gateway_->port());
}

void LeaderTerm::start_gateway_if_missing() {
  std::lock_guard lock(mu_);
  start_gateway_locked();
}

void LeaderTerm::end(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (gateway_) {
    gateway_->shutdown();
    gateway_.reset();
  }
  if (queue_) {
    fleet_.detach_jobs();
    queue_->shutdown();
    queue_ = nullptr;
    spdlog::info("job queue and gateway stopped: {}", reason);
  }
}

void LeaderTerm::shutdown() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  end("stopping");
}

}  // namespace pf::cli
