#include "manager/hands_on.h"

#include <algorithm>
#include <charconv>

namespace pf::manager {
namespace {

using nlohmann::json;

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

void HandsOn::queue_commands(std::int64_t id, const std::vector<std::string>& commands) {
  std::lock_guard lock(mu_);
  auto& queued = commands_[id];
  for (const auto& c : commands) {
    const std::string name = c.substr(0, c.find(':'));
    std::erase_if(queued, [&](const std::string& q) { return q.substr(0, q.find(':')) == name; });
    queued.push_back(c);
  }
}

std::vector<std::string> HandsOn::take_commands(std::int64_t id) {
  std::lock_guard lock(mu_);
  const auto it = commands_.find(id);
  if (it == commands_.end()) return {};
  std::vector<std::string> taken = std::move(it->second);
  commands_.erase(it);
  return taken;
}

std::vector<std::string> HandsOn::pending_commands(std::int64_t id) const {
  std::lock_guard lock(mu_);
  const auto it = commands_.find(id);
  return it == commands_.end() ? std::vector<std::string>{} : it->second;
}

void HandsOn::set_commands(std::int64_t id, std::vector<std::string> commands) {
  std::lock_guard lock(mu_);
  if (commands.empty()) {
    commands_.erase(id);
  } else {
    commands_[id] = std::move(commands);
  }
}

json HandsOn::pending_json() const {
  std::lock_guard lock(mu_);
  json out = json::object();
  for (const auto& [id, commands] : commands_) {
    if (!commands.empty()) out[std::to_string(id)] = commands;
  }
  return out;
}

void HandsOn::restore(const json& pending) {
  std::map<std::int64_t, std::vector<std::string>> restored;
  if (pending.is_object()) {
    for (const auto& [key, list] : pending.items()) {
      std::int64_t id = 0;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id <= 0 || !list.is_array() ||
          list.size() > kMaxPendingCommands) {
        continue;
      }
      std::vector<std::string> commands;
      for (const auto& c : list) {
        if (c.is_string() && !c.get_ref<const std::string&>().empty() &&
            c.get_ref<const std::string&>().size() <= kMaxCommandBytes) {
          commands.push_back(c.get<std::string>());
        }
      }
      if (!commands.empty()) restored[id] = std::move(commands);
    }
  }
  std::lock_guard lock(mu_);
  commands_ = std::move(restored);
}

void HandsOn::heard(std::int64_t id, LiveStatus status) {
  std::lock_guard lock(mu_);
  live_[id] = std::move(status);
}

std::optional<LiveStatus> HandsOn::live_status(std::int64_t id) const {
  std::lock_guard lock(mu_);
  const auto it = live_.find(id);
  if (it == live_.end()) return std::nullopt;
  return it->second;
}

void HandsOn::listed(std::int64_t id, core::SshEndpoints endpoints) {
  std::lock_guard lock(mu_);
  ssh_[id] = std::move(endpoints);
}

std::optional<core::SshEndpoints> HandsOn::ssh_endpoints(std::int64_t id) const {
  std::lock_guard lock(mu_);
  const auto it = ssh_.find(id);
  if (it == ssh_.end()) return std::nullopt;
  return it->second;
}

bool HandsOn::forget(std::int64_t id) {
  std::lock_guard lock(mu_);
  const bool had_commands = commands_.erase(id) > 0;
  live_.erase(id);
  ssh_.erase(id);
  return had_commands;
}

}  // namespace pf::manager
