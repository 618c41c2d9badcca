#include "manager/metrics.h"

#include <charconv>
#include <cmath>
#include <sstream>

#include "manager/views.h"

namespace pf::manager {
namespace {

// Prometheus floats: plain decimal, with the format's spellings for non-finite values.
std::string number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest text that reads back as the same double: 0.4, not 0.40000000000000002.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

void header(std::ostringstream& out, const char* name, const char* type, const char* help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

void gauge(std::ostringstream& out, const char* name, const char* help, double value) {
  header(out, name, "gauge", help);
  out << name << " " << number(value) << "\n";
}

}  // namespace

void Metrics::count_request(const std::string& method, const std::string& route, int code) {
  std::lock_guard lock(mutex_);
  ++requests_[RequestKey{route, code, method}];
}

std::map<RequestKey, std::uint64_t> Metrics::requests() const {
  std::lock_guard lock(mutex_);
  return requests_;
}

std::string escape_label_value(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Metrics::count_front_event(const std::string& event) {
  std::lock_guard lock(mutex_);
  ++front_events_[event];
}

std::map<std::string, std::uint64_t> Metrics::front_events() const {
  std::lock_guard lock(mutex_);
  return front_events_;
}

std::string render_prometheus(const FleetSummary& fleet,
                              const std::map<RequestKey, std::uint64_t>& requests,
                              const std::map<std::string, std::uint64_t>& front_events) {
  std::ostringstream out;

  header(out, "proverfleet_instances", "gauge", "Instances by lifecycle state.");
  for (auto state : kAllInstanceStates) {
    const std::string name = core::to_string(state);
    auto it = fleet.by_state.find(name);
    const int count = it == fleet.by_state.end() ? 0 : it->second;
    out << "proverfleet_instances{state=\"" << escape_label_value(name) << "\"} " << count << "\n";
  }

  header(out, "proverfleet_spend_usd_total", "counter",
         "Money spent on rentals since the store was created, USD.");
  out << "proverfleet_spend_usd_total " << number(fleet.spend_usd) << "\n";
  header(out, "proverfleet_proofs_total", "counter", "Production proofs completed, all time.");
  out << "proverfleet_proofs_total " << fleet.proofs << "\n";
  gauge(out, "proverfleet_proofs_per_hour", "Measured proofs/hour of accepted instances.",
        fleet.proofs_per_hour);
  gauge(out, "proverfleet_dollars_per_hour", "Rental cost of live instances, USD/hour.",
        fleet.dollars_per_hour);
  gauge(out, "proverfleet_profit_per_hour", "Expected profit of the fleet, USD/hour.",
        fleet.profit_per_hour);
  // An alert's input: while 0, no agent is destroyed or blamed for silence (core/hearing.h), so
  // a long stretch of 0 (a fleet-wide silence, a failing front) needs a person.
  gauge(out, "proverfleet_silence_judged",
        "1 while agents' silence is judged; 0 while the manager could not hear them.",
        fleet.hearing.may_judge_silence ? 1 : 0);
  gauge(out, "proverfleet_agents_silent", "Agents silent for a whole heartbeat timeout.",
        fleet.hearing.agents_silent);
  // Absent (rather than 0 or +Inf) while nothing proves: a dashboard should show "no data".
  if (fleet.cost_per_proof) {
    gauge(out, "proverfleet_cost_per_proof_usd", "Fleet cost per proof, USD.",
          *fleet.cost_per_proof);
  }

  header(out, "proverfleet_api_requests_total", "counter",
         "API requests served, by route pattern, status code and method.");
  for (const auto& [key, count] : requests) {
    out << "proverfleet_api_requests_total{route=\"" << escape_label_value(key.route)
        << "\",code=\"" << key.code << "\",method=\"" << escape_label_value(key.method) << "\"} "
        << count << "\n";
  }
  header(out, "proverfleet_http_front_events_total", "counter",
         "What the HTTP front did on its own: connections refused for a cap, deadlines missed, "
         "requests refused because a lane was full.");
  for (const auto& [event, count] : front_events) {
    out << "proverfleet_http_front_events_total{event=\"" << escape_label_value(event) << "\"} "
        << count << "\n";
  }
  return out.str();
}

}  // namespace pf::manager
