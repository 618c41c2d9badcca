// The Manager's tools for an operator working by hand: remote tuning of an instance's prover
// (queued in HandsOn, manager/hands_on.h, with the agent's live report and the SSH endpoints),
// the webhook sink and the fleet watch's alerts. State here is kept in memory: it refills from
// the next heartbeat and reconcile after a restart, and what was decided is in the event trail.
#include "manager/manager.h"
#include "store/store.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using S = core::InstanceState;

}  // namespace

ApiResult<std::vector<std::string>> Manager::tune(std::int64_t id, const TuneRequest& request) {
  if (!request.concurrency && !request.partitions) {
    return tl::unexpected(ApiError{400, "nothing to tune: give concurrency and/or partitions"});
  }
  if (request.concurrency &&
      (*request.concurrency < 1 || *request.concurrency > kMaxTuneConcurrency)) {
    return tl::unexpected(ApiError{400, "concurrency must be 1.." +
                                            std::to_string(kMaxTuneConcurrency) + ", got " +
                                            std::to_string(*request.concurrency)});
  }
  if (request.partitions && (*request.partitions < 1 || *request.partitions > kMaxTunePartitions)) {
    return tl::unexpected(ApiError{400, "partitions must be 1.." +
                                            std::to_string(kMaxTunePartitions) + ", got " +
                                            std::to_string(*request.partitions)});
  }
  std::lock_guard lock(mu_);
  const auto rec = store_.instance(id);
  if (!rec) return tl::unexpected(ApiError{404, "no instance " + std::to_string(id)});
  if (rec->state == S::Destroyed || rec->state == S::Destroying) {
    return tl::unexpected(ApiError{409, "instance " + std::to_string(id) + " is " +
                                            core::to_string(rec->state) + ": nothing to tune"});
  }
  if (rec->state < S::Registered || rec->token_hash.empty()) {
    return tl::unexpected(
        ApiError{409, "instance " + std::to_string(id) + " has no registered agent yet to tell"});
  }
  std::vector<std::string> commands;
  // A re-plan restarts the prover with the new partition cap; the concurrency is set after it
  // (the agent keeps a set concurrency across re-plans).
  if (request.partitions) commands.push_back("replan:" + std::to_string(*request.partitions));
  if (request.concurrency) {
    commands.push_back("set_concurrency:" + std::to_string(*request.concurrency));
  }
  // Stored before it is acknowledged: a restart or a new leader still sends it.
  const auto before = hands_on_.pending_commands(id);
  hands_on_.queue_commands(id, commands);
  try {
    store_pending_commands();
  } catch (const store::StoreError&) {
    hands_on_.set_commands(id, before);
    throw;
  }
  json data = {{"who", request.who}, {"commands", commands}};
  if (request.concurrency) data["concurrency"] = *request.concurrency;
  if (request.partitions) data["partitions"] = *request.partitions;
  std::string what;
  if (request.concurrency) what = "proofs in flight " + std::to_string(*request.concurrency);
  if (request.partitions) {
    what += (what.empty() ? "" : ", ") + std::string("re-plan at most ") +
            std::to_string(*request.partitions) + " partitions";
  }
  event(id, "operator",
        "tuning by " + request.who + ": " + what + " (sent with the next heartbeat)",
        std::move(data));
  return commands;
}

std::vector<std::string> Manager::pending_commands(std::int64_t id) {
  return hands_on_.pending_commands(id);
}

std::optional<LiveStatus> Manager::live_status(std::int64_t id) {
  return hands_on_.live_status(id);
}

std::optional<core::SshEndpoints> Manager::ssh_endpoints(std::int64_t id) {
  return hands_on_.ssh_endpoints(id);
}

void Manager::set_notifier(Notify notify) {
  std::lock_guard lock(signals_mu_);
  notify_ = std::move(notify);
}

void Manager::notify(const std::string& event_name, json data) {
  std::lock_guard lock(signals_mu_);  // one event at a time, in order
  if (notify_) notify_(event_name, std::move(data));
}

void Manager::set_alerts(core::AlertsView alerts) {
  std::lock_guard lock(signals_mu_);
  alerts_ = std::move(alerts);
}

core::AlertsView Manager::alerts() {
  std::lock_guard lock(signals_mu_);
  return alerts_;
}

}  // namespace pf::manager
