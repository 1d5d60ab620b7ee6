// JSON parsing that refuses duplicate object keys (nlohmann keeps the last
// one silently; a checkpoint header or index naming a tensor twice is
// ambiguous). Internal to the checkpoint readers.
#pragma once

#include "runtime/checkpoint/SafetensorsHeader.h"

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace shardc::runtime::checkpoint {

/// Throws CheckpointError(errorPrefix + what + " is not valid JSON: ...") or
/// (errorPrefix + what + " has duplicate key 'k'").
inline nlohmann::json parseStrictJson(std::string_view text, const std::string &errorPrefix,
                                      const std::string &what) {
  using nlohmann::json;
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start) open.emplace_back();
    else if (event == json::parse_event_t::object_end && !open.empty()) open.pop_back();
    else if (event == json::parse_event_t::key && !open.empty() &&
             !open.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json value;
  try {
    value = json::parse(text.begin(), text.end(), callback);
  } catch (const json::exception &e) {
    throw CheckpointError(errorPrefix + what + " is not valid JSON: " + e.what());
  }
  if (!duplicate.empty())
    throw CheckpointError(errorPrefix + what + " has duplicate key '" + duplicate + "'");
  return value;
}

}  // namespace shardc::runtime::checkpoint
