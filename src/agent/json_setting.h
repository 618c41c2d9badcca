// Optional values read from JSON the manager sent (its register reply, its prover settings,
// commands): a missing, null or mistyped value is "not set", never an error, so a newer or
// older manager's reply does not stop the agent.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace pf::agent {

template <typename T>
std::optional<T> setting(const nlohmann::json& settings, const char* key) {
  if (!settings.is_object()) return std::nullopt;
  auto it = settings.find(key);
  if (it == settings.end() || it->is_null()) return std::nullopt;
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

}  // namespace pf::agent
