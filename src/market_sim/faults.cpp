#include "market_sim/faults.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/text.h"

namespace pf::market_sim {
namespace {

std::string error_for(std::string_view entry, const std::string& problem) {
  return "fault spec entry \"" + std::string(entry) + "\": " + problem;
}

}  // namespace

std::string FaultSpec::to_string() const {
  std::ostringstream out;
  auto add = [&](const char* name, auto value) {
    if (out.tellp() > 0) out << ",";
    out << name << "=" << value;
  };
  if (rate_limit_p > 0) add("429", rate_limit_p);
  if (server_error_p > 0) add("500", server_error_p);
  if (drop_create_reply_p > 0) add("drop_create_reply", drop_create_reply_p);
  if (slow_ms > 0) add("slow_ms", slow_ms);
  std::string text = out.str();
  return text.empty() ? "none" : text;
}

tl::expected<FaultSpec, std::string> parse_fault_spec(std::string_view text) {
  FaultSpec spec;
  std::vector<std::string> seen;
  if (core::trim_view(text).empty()) return spec;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view entry = core::trim_view(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (entry.empty()) return tl::unexpected(std::string("fault spec has an empty entry"));

    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) {
      return tl::unexpected(error_for(entry, "expected name=value"));
    }
    std::string name(core::trim_view(entry.substr(0, eq)));
    std::string_view value_text = core::trim_view(entry.substr(eq + 1));
    for (const auto& s : seen) {
      if (s == name) return tl::unexpected(error_for(entry, "\"" + name + "\" given twice"));
    }
    seen.push_back(name);

    if (name == "slow_ms") {
      int ms = 0;
      auto [end, ec] =
          std::from_chars(value_text.data(), value_text.data() + value_text.size(), ms);
      if (ec != std::errc() || end != value_text.data() + value_text.size() || ms < 0 ||
          ms > kMaxSlowMs) {
        return tl::unexpected(error_for(entry,
                                        "slow_ms must be an integer number of "
                                        "milliseconds in [0, 60000]"));
      }
      spec.slow_ms = ms;
      continue;
    }

    double* target = nullptr;
    if (name == "429") target = &spec.rate_limit_p;
    if (name == "500") target = &spec.server_error_p;
    if (name == "drop_create_reply") target = &spec.drop_create_reply_p;
    if (target == nullptr) {
      return tl::unexpected(error_for(
          entry, "unknown fault \"" + name + "\" (known: 429, 500, drop_create_reply, slow_ms)"));
    }
    double p = 0;
    auto [end, ec] = std::from_chars(value_text.data(), value_text.data() + value_text.size(), p);
    if (ec != std::errc() || end != value_text.data() + value_text.size() || !std::isfinite(p) ||
        p < 0 || p > 1) {
      return tl::unexpected(error_for(entry, "probability of \"" + name +
                                                 "\" must be a number "
                                                 "in [0, 1]"));
    }
    *target = p;
  }
  return spec;
}

FaultSpec FaultInjector::spec() const {
  std::lock_guard lock(mutex_);
  return spec_;
}

void FaultInjector::set_spec(const FaultSpec& spec) {
  std::lock_guard lock(mutex_);
  spec_ = spec;
}

int FaultInjector::slow_ms() const {
  std::lock_guard lock(mutex_);
  return spec_.slow_ms;
}

bool FaultInjector::draw(double FaultSpec::*chance_of) {
  std::lock_guard lock(mutex_);
  const double p = spec_.*chance_of;
  if (p <= 0) return false;
  if (p >= 1) return true;
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < p;
}

FaultAction FaultInjector::before_request() {
  if (draw(&FaultSpec::rate_limit_p)) return FaultAction::RateLimit;
  if (draw(&FaultSpec::server_error_p)) return FaultAction::ServerError;
  return FaultAction::None;
}

bool FaultInjector::drop_create_reply() {
  return draw(&FaultSpec::drop_create_reply_p);
}

}  // namespace pf::market_sim
