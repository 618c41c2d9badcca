// Short renderings of JSON values for error messages ("expected a number, got string \"x\"").
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pf::scenario {

// The JSON type plus a short rendering of the value, e.g. `string "12"`, `null`, `an array`.
inline std::string describe_json(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::string:
      return "string " + text;
    case nlohmann::json::value_t::boolean:
      return "boolean " + text;
    case nlohmann::json::value_t::object:
      return "an object";
    case nlohmann::json::value_t::array:
      return "an array";
    default:
      return text;
  }
}

}  // namespace pf::scenario
