// The chaos run's judgements as pure functions of what the manager and the market said, so
// they can be tested on made-up data (tests/unit/reliability_checks_test.cpp).
//   rows:   GET /api/v1/instances?all=true (the manager's rows, destroyed ones included)
//   listed: market-sim's GET /api/v1/instances/ records (all pages)
// Each finding carries a key: the run counts a key once however often it is observed.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "reliability/figures.h"

namespace pf::reliability {

struct Finding {
  Figure figure;
  std::string key;   // identity for de-duplication across observations
  std::string what;  // for the table
};

inline std::string label_of(const nlohmann::json& market_instance) {
  const nlohmann::json l = market_instance.value("label", nlohmann::json());
  return l.is_string() ? l.get<std::string>() : "";
}

inline bool ours(const nlohmann::json& market_instance) {
  return label_of(market_instance).rfind("proverfleet:", 0) == 0;
}

// Duplicate rentals (two market instances with one label; two live rows, not being destroyed,
// on one offer) and
// destroyed-but-billing (a destroyed row whose instance, by id or label, the market lists as
// running). Read the rows before the market: a destroy confirmed before the rows were read
// cannot be listed afterwards, so no race can produce a finding.
inline std::vector<Finding> check_observation(const nlohmann::json& rows,
                                              const std::vector<nlohmann::json>& listed) {
  using nlohmann::json;
  std::vector<Finding> out;
  std::map<std::string, std::vector<std::int64_t>> by_label;
  std::map<std::int64_t, const json*> by_id;
  for (const auto& i : listed) {
    if (!ours(i)) continue;
    const auto id = i.value("id", std::int64_t{0});
    by_label[label_of(i)].push_back(id);
    by_id[id] = &i;
  }
  for (const auto& [label, ids] : by_label) {
    if (ids.size() > 1) {
      out.push_back({Figure::DuplicateRentals, "label " + label,
                     std::to_string(ids.size()) + " market instances carry " + label});
    }
  }
  std::map<std::int64_t, int> live_per_offer;
  for (const auto& row : rows.is_array() ? rows : json::array()) {
    const std::string state = row.value("state", "");
    if (state != "destroyed") {
      // A row being destroyed may overlap its offer's next rental for a moment (the market
      // confirms the destroy after it frees the offer): only rows meant to keep running count.
      if (state != "destroying") {
        live_per_offer[row.value("offer", json::object()).value("id", std::int64_t{0})]++;
      }
      continue;
    }
    const json mid = row.value("market_id", json());
    const std::string label = "proverfleet:" + row.value("deployment_id", std::string());
    const json* inst = nullptr;
    if (mid.is_number_integer()) {
      auto it = by_id.find(mid.get<std::int64_t>());
      if (it != by_id.end()) inst = it->second;
    }
    if (!inst && by_label.count(label)) inst = by_id[by_label[label].front()];
    if (inst && inst->value("actual_status", "") == "running") {
      const auto id = row.value("id", std::int64_t{0});
      out.push_back({Figure::DestroyedButBilling, "row " + std::to_string(id),
                     "instance " + std::to_string(id) +
                         " is destroyed in the manager but market instance " +
                         std::to_string(inst->value("id", std::int64_t{0})) + " is running"});
    }
  }
  for (const auto& [offer, n] : live_per_offer) {
    if (n > 1) {
      out.push_back(
          {Figure::DuplicateRentals, "offer " + std::to_string(offer),
           std::to_string(n) + " live instances of ours on offer " + std::to_string(offer)});
    }
  }
  return out;
}

// After the operator destroyed everything: every our-labelled instance still listed, and
// every row not destroyed whose instance is not among those.
inline std::vector<Finding> leaked_instances(const nlohmann::json& rows,
                                             const std::vector<nlohmann::json>& listed) {
  using nlohmann::json;
  std::vector<Finding> out;
  std::set<std::int64_t> counted;
  for (const auto& i : listed) {
    if (!ours(i)) continue;
    const auto id = i.value("id", std::int64_t{0});
    if (counted.insert(id).second) {
      out.push_back({Figure::LeakedInstances, "market " + std::to_string(id),
                     "market instance " + std::to_string(id) + " (" + label_of(i) + ", " +
                         i.value("actual_status", "?") +
                         ") still listed after destroying everything"});
    }
  }
  for (const auto& row : rows.is_array() ? rows : json::array()) {
    if (row.value("state", "") == "destroyed") continue;
    const json mid = row.value("market_id", json());
    if (mid.is_number_integer() && counted.count(mid.get<std::int64_t>())) continue;
    const auto id = row.value("id", std::int64_t{0});
    out.push_back({Figure::LeakedInstances, "row " + std::to_string(id),
                   "row " + std::to_string(id) + " still " + row.value("state", "") +
                       " after destroying everything"});
  }
  return out;
}

// Destroy causes that mean "it went silent or ran out of time": on a host the scenario says is
// healthy, each is a false destroy.
inline bool silence_or_deadline(const std::string& reason) {
  for (const char* cause :
       {"heartbeat lost", "never registered", "deadline passed", "status unknown"}) {
    if (reason.find(cause) != std::string::npos) return true;
  }
  return false;
}

// Every destroy for a silence or deadline cause and every automatic bad-host entry, in a run
// where every host is healthy.
inline std::vector<Finding> false_destroys(const nlohmann::json& rows,
                                           const nlohmann::json& bad_hosts) {
  using nlohmann::json;
  std::vector<Finding> out;
  for (const auto& row : rows.is_array() ? rows : json::array()) {
    const std::string reason = row.value("destroy_reason", "");
    if (!silence_or_deadline(reason)) continue;
    const auto id = row.value("id", std::int64_t{0});
    out.push_back(
        {Figure::FalseDestroys, "row " + std::to_string(id),
         "instance " + std::to_string(id) + " on healthy machine " +
             std::to_string(
                 row.value("offer", json::object()).value("machine_id", std::int64_t{0})) +
             ": " + reason});
  }
  const json& entries =
      bad_hosts.is_array() ? bad_hosts : bad_hosts.value("bad_hosts", json::array());
  for (const auto& b : entries) {
    const std::string source = b.value("source", "");
    if (source != "auto" && source != "automatic") continue;
    const auto machine = b.value("machine_id", std::int64_t{0});
    out.push_back({Figure::FalseDestroys, "machine " + std::to_string(machine),
                   "healthy machine " + std::to_string(machine) +
                       " put on the bad-host list: " + b.value("reason", "")});
  }
  return out;
}

}  // namespace pf::reliability
