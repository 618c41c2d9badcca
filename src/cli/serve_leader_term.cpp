#include "cli/serve_leader_term.h"

#include <spdlog/spdlog.h>

#include <iostream>

#include "core/leader_lease.h"
#include "gateway/listen_exposure.h"
#include "jobs/input_store.h"
#include "store/store.h"

namespace pf::cli {
namespace {

constexpr const char* kReplicaTokenSetting = "replica_relay_token";

}  // namespace

LeaderTerm::LeaderTerm(manager::Manager& fleet, store::Store& store,
                       jobs::JobQueueConfig jobs_config,
                       std::optional<gateway::GatewayConfig> gateway_config,
                       manager::Leadership& leadership, std::function<double()> clock,
                       std::optional<std::string> grpc_address)
    : fleet_(fleet),
      store_(store),
      jobs_config_(std::move(jobs_config)),
      gateway_config_(std::move(gateway_config)),
      leadership_(leadership),
      clock_(std::move(clock)),
      grpc_address_(std::move(grpc_address)) {
  std::lock_guard lock(mu_);
  start_gateway_locked();
}

LeaderTerm::~LeaderTerm() {
  shutdown();
}

tl::expected<std::string, std::string> LeaderTerm::leader_grpc() {
  const manager::LeaderView view = leadership_.view();
  const auto& row = view.lease;
  if (!core::has_live_leader(row, view.now)) {
    return tl::unexpected("no replica leads at the moment (a failover is in progress, at most " +
                          std::to_string(static_cast<int>(view.failover_bound_s)) + " s)");
  }
  if (row->holder == view.replica_id) {
    return tl::unexpected(
        std::string("this replica's term is starting (its job queue is loading)"));
  }
  if (row->holder_grpc.empty()) {
    return tl::unexpected("the leader " + row->holder + " serves no gRPC gateway");
  }
  return row->holder_grpc;
}

void LeaderTerm::begin(std::int64_t epoch) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  // Agents could not reach this replica's loops before: their silence counts from now, and the
  // worker roster reads the rows again.
  fleet_.listening_interrupted();
  fleet_.instances_written();
  jobs::JobQueueHooks hooks = fleet_.job_hooks();
  // Inside each job transaction: the lease is read so that no take commits before the job write
  // does (Leadership::fence_refusal_in_transaction).
  hooks.fence = [this] {
    if (auto why = leadership_.fence_refusal_in_transaction()) {
      throw store::StoreError("job queue write refused: " + *why);
    }
  };
  try {
    import_input_files(epoch);
    queues_.push_back(std::make_unique<jobs::JobQueue>(store_, jobs_config_, hooks, clock_));
    queue_ = queues_.back().get();
  } catch (const std::exception& e) {
    spdlog::error("term {}: cannot open the job queue: {}", epoch, e.what());
    return;
  }
  fleet_.attach_jobs(*queue_);
  spdlog::info("term {}: job queue loaded from the store", epoch);
  epoch_ = epoch;
  if (gateway_) {
    gateway_->serve_queue(*queue_);
    spdlog::info("term {}: the gateway on port {} answers from this replica's queue", epoch,
                 gateway_->port());
  }
}

void LeaderTerm::import_input_files(std::int64_t epoch) {
  // Schema 18 moved job inputs from files into the database: those a job still needs come along
  // the first time a term begins after the upgrade (a no-op once the directory is gone).
  jobs::InputStore inputs(store_, clock_);
  const auto imported = jobs::import_input_files(jobs_config_.data_dir, store_, inputs,
                                                 clock_() - jobs_config_.retention_s);
  if (imported.imported > 0 || imported.removed > 0) {
    spdlog::info(
        "term {}: {} job input file(s) ({} bytes) moved into the database, {} no job needed "
        "removed",
        epoch, imported.imported, imported.bytes, imported.removed);
  }
  for (const auto& error : imported.errors) {
    spdlog::warn("term {}: job input files: {}", epoch, error);
  }
}

void LeaderTerm::start_gateway_locked() {
  if (!gateway_config_ || gateway_ || closed_) return;
  gateway::ReplicaGatewayOptions replica;
  replica.replica_id = leadership_.config().replica_id;
  replica.leader = [this] { return leader_grpc(); };
  try {
    // The replicas' shared secret: whichever replica comes first stores it, every one reads the
    // same (gateway/relay_identity.h).
    replica.replica_token = store_.setting_or_put(kReplicaTokenSetting, manager::random_token());
  } catch (const std::exception& e) {
    if (!gateway_failed_logged_) {
      spdlog::error(
          "the gateway did not start (retried every lease renewal): reading the "
          "replicas' token: {}",
          e.what());
      gateway_failed_logged_ = true;
    }
    return;
  }
  auto started = gateway::start_replica_gateway(*gateway_config_, replica);
  if (!started) {
    if (!gateway_failed_logged_) {
      spdlog::error("the gateway did not start (retried every lease renewal): {}", started.error());
      gateway_failed_logged_ = true;
    }
    return;
  }
  gateway_ = std::move(*started);
  gateway_failed_logged_ = false;
  const std::string host = gateway::listen_host(gateway_config_->listen).value_or("127.0.0.1");
  const std::string shown_host = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const std::string advertised =
      grpc_address_.value_or(shown_host + ":" + std::to_string(gateway_->port()));
  leadership_.advertise_grpc(advertised);
  spdlog::info("gateway: listening on port {}; other replicas relay to {} while this one leads",
               gateway_->port(), advertised);
  // For whoever started serve (the demo, a supervisor's script): the gateway's own address, once
  // it really listens here (--grpc-listen with port 0 too; a port someone else held comes late).
  const std::string listening = "proverfleet gateway listening on " + shown_host + ":" +
                                std::to_string(gateway_->port()) + "\n";
  std::cout << listening << std::flush;
  if (queue_) gateway_->serve_queue(*queue_);
}

void LeaderTerm::start_gateway_if_missing() {
  std::lock_guard lock(mu_);
  start_gateway_locked();
}

void LeaderTerm::end(const std::string& reason) {
  std::lock_guard lock(mu_);
  if (gateway_) gateway_->stop_serving_queue();
  if (queue_) {
    fleet_.detach_jobs();
    queue_->shutdown();
    queue_ = nullptr;
    spdlog::info("job queue stopped: {}", reason);
  }
}

void LeaderTerm::shutdown() {
  {
    std::lock_guard lock(mu_);
    closed_ = true;
  }
  end("stopping");
  std::unique_ptr<gateway::GatewayServer> gateway;
  {
    std::lock_guard lock(mu_);
    gateway = std::move(gateway_);
  }
  if (gateway) gateway->shutdown();
}

std::optional<util::UniqueFd> LeaderTerm::duplicate_gateway_socket() {
  std::lock_guard lock(mu_);
  if (!gateway_) return std::nullopt;
  auto copy = gateway_->duplicate_listening_socket();
  if (!copy) return std::nullopt;
  return std::move(*copy);
}

void LeaderTerm::stop_accepting() {
  std::lock_guard lock(mu_);
  closed_ = true;  // no gateway is started here again
  if (gateway_) gateway_->stop_accepting();
}

void LeaderTerm::end_held_calls() {
  std::lock_guard lock(mu_);
  if (gateway_) gateway_->end_held_calls();
}

int LeaderTerm::open_calls() {
  std::lock_guard lock(mu_);
  return gateway_ ? gateway_->open_calls() : 0;
}

}  // namespace pf::cli
