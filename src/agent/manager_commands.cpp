#include "agent/manager_commands.h"

#include <exception>
#include <string>

#include "agent/json_setting.h"

namespace pf::agent {

std::vector<ManagerCommand> parse_manager_commands(const nlohmann::json& commands) {
  std::vector<ManagerCommand> out;
  for (const auto& c : commands) {
    std::string name;
    std::optional<int> value;
    if (c.is_string()) {
      name = c.get<std::string>();
      if (const auto colon = name.find(':'); colon != std::string::npos) {
        try {
          value = std::stoi(name.substr(colon + 1));
        } catch (const std::exception&) {
        }
        name = name.substr(0, colon);
      }
    } else if (c.is_object()) {
      name =
          setting<std::string>(c, "name").value_or(setting<std::string>(c, "command").value_or(""));
      value = setting<int>(c, "value");
    }
    ManagerCommand command;
    command.raw = c;
    if (name == "stop") {
      command.kind = ManagerCommand::Kind::Stop;
    } else if (name == "replan") {
      command.kind = ManagerCommand::Kind::Replan;
      if (value && *value >= 1 && *value <= kMaxReplanPartitions) command.value = value;
    } else if (name == "set_concurrency" && value && *value >= 1 && *value <= kMaxSetConcurrency) {
      command.kind = ManagerCommand::Kind::SetConcurrency;
      command.value = value;
    }
    out.push_back(std::move(command));
  }
  return out;
}

}  // namespace pf::agent
