// The Manager's tools for an operator working by hand: remote tuning of an instance's prover,
// the agent's live prover and GPU report, SSH endpoints, the webhook sink and the fleet
// watch's alerts. State here is kept in memory: it refills from the next heartbeat and
// reconcile after a restart, and what was decided is in the event trail.
#include <algorithm>

#include "manager/manager.h"
#include "store/store.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using S = core::InstanceState;

constexpr std::size_t kMaxLiveKeys = 32;
constexpr std::size_t kMaxLiveString = 200;

// A scalar kept as it is (strings cut), or nullopt for anything else.
std::optional<json> bounded_scalar(const json& v) {
  if (v.is_number() || v.is_boolean()) return v;
  if (v.is_string()) return json(v.get_ref<const std::string&>().substr(0, kMaxLiveString));
  return std::nullopt;
}

// An object's scalar entries (and, `depth` levels down, its objects' and its arrays' sizes).
json bounded_object(const json& in, int depth) {
  json out = json::object();
  if (!in.is_object()) return out;
  for (const auto& [key, value] : in.items()) {
    if (out.size() >= kMaxLiveKeys) break;
    const std::string name = key.substr(0, 64);
    if (auto scalar = bounded_scalar(value)) {
      out[name] = std::move(*scalar);
    } else if (value.is_object() && depth > 0) {
      out[name] = bounded_object(value, depth - 1);
    } else if (value.is_array()) {
      out[name + "_count"] = value.size();  // e.g. cuzk's pipelines list: how many
    }
  }
  return out;
}

json bounded_gpu(const json& gpu) {
  json out = json::object();
  if (!gpu.is_object()) return out;
  for (const char* key :
       {"util", "memory_used_mib", "memory_total_mib", "temp_c", "sm_clock_mhz"}) {
    if (const auto it = gpu.find(key); it != gpu.end() && it->is_number()) out[key] = *it;
  }
  if (const auto it = gpu.find("name"); it != gpu.end() && it->is_string()) {
    out["name"] = it->get_ref<const std::string&>().substr(0, kMaxLiveString);
  }
  if (const auto it = gpu.find("throttle"); it != gpu.end()) {
    if (it->is_boolean()) {
      out["throttle"] = *it;
    } else if (it->is_array()) {
      json reasons = json::array();
      for (const auto& r : *it) {
        if (reasons.size() >= 8) break;
        if (r.is_string()) reasons.push_back(r.get_ref<const std::string&>().substr(0, 64));
      }
      out["throttle"] = std::move(reasons);
    }
  }
  return out;
}

}  // namespace

LiveStatus live_status_from_heartbeat(const json& body, double at) {
  LiveStatus live;
  live.at = at;
  if (!body.is_object()) return live;
  if (const auto p = body.find("prover"); p != body.end()) live.prover = bounded_object(*p, 1);
  if (const auto g = body.find("gpus"); g != body.end() && g->is_array()) {
    for (const auto& gpu : *g) {
      if (live.gpus.size() >= kMaxLiveGpus) break;
      live.gpus.push_back(bounded_gpu(gpu));
    }
  }
  return live;
}

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
  auto& queued = pending_commands_[id];
  // A newer setting replaces a queued one of the same command.
  for (const auto& c : commands) {
    const std::string name = c.substr(0, c.find(':'));
    std::erase_if(queued, [&](const std::string& q) { return q.substr(0, q.find(':')) == name; });
    queued.push_back(c);
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
  std::lock_guard lock(mu_);
  const auto it = pending_commands_.find(id);
  return it == pending_commands_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<LiveStatus> Manager::live_status(std::int64_t id) {
  std::lock_guard lock(mu_);
  const auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return it->second;
}

std::optional<core::SshEndpoints> Manager::ssh_endpoints(std::int64_t id) {
  std::lock_guard lock(mu_);
  const auto it = ssh_.find(id);
  if (it == ssh_.end()) return std::nullopt;
  return it->second;
}

void Manager::set_notifier(Notify notify) {
  std::lock_guard lock(mu_);
  notify_ = std::move(notify);
}

void Manager::notify(const std::string& event_name, json data) {
  std::lock_guard lock(mu_);
  if (notify_) notify_(event_name, std::move(data));
}

void Manager::set_alerts(core::AlertsView alerts) {
  std::lock_guard lock(mu_);
  alerts_ = std::move(alerts);
}

core::AlertsView Manager::alerts() {
  std::lock_guard lock(mu_);
  return alerts_;
}

void Manager::forget_hands_on(std::int64_t id) {
  pending_commands_.erase(id);
  live_.erase(id);
  ssh_.erase(id);
}

}  // namespace pf::manager
