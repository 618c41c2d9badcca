#include "market/rate_limits.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/text.h"

namespace pf::market {
namespace {

constexpr std::array<const char*, kVastEndpointCount> kNames = {"search",  "create", "list", "show",
                                                                "destroy", "manage", "bid"};

// A parsed limit must be one a client can keep: at most 1000 calls in at most a day.
constexpr int kMaxCalls = 1000;
constexpr double kMaxWindowS = 86400;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// "123" or "123/" (a numeric path segment, as vast's ids are), nothing else.
bool is_id_segment(std::string_view s) {
  if (!s.empty() && s.back() == '/') s.remove_suffix(1);
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_collection(std::string_view path, std::string_view base) {
  return path == base ||
         (path.size() == base.size() + 1 && starts_with(path, base) && path.back() == '/');
}

std::string format_seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

}  // namespace

const char* to_string(VastEndpoint endpoint) {
  return kNames[static_cast<std::size_t>(endpoint)];
}

std::optional<VastEndpoint> vast_endpoint_of(std::string_view method, std::string_view path) {
  if (is_collection(path, "/api/v0/bundles")) {
    if (method == "POST" || method == "GET") return VastEndpoint::Search;
    return std::nullopt;
  }
  if (starts_with(path, "/api/v0/asks/") && is_id_segment(path.substr(13)) && method == "PUT") {
    return VastEndpoint::Create;
  }
  if (is_collection(path, "/api/v1/instances") && method == "GET") return VastEndpoint::List;
  constexpr std::string_view kBid = "/api/v0/instances/bid_price/";
  if (starts_with(path, kBid) && is_id_segment(path.substr(kBid.size())) && method == "PUT") {
    return VastEndpoint::ChangeBid;
  }
  constexpr std::string_view kOne = "/api/v0/instances/";
  if (starts_with(path, kOne) && is_id_segment(path.substr(kOne.size()))) {
    if (method == "GET") return VastEndpoint::Show;
    if (method == "DELETE") return VastEndpoint::Destroy;
    if (method == "PUT") return VastEndpoint::Manage;
  }
  return std::nullopt;
}

bool RateLimits::any() const {
  return std::any_of(rules.begin(), rules.end(), [](const RateRule& r) { return r.limits(); });
}

std::string RateLimits::describe() const {
  std::string out;
  for (std::size_t i = 0; i < kVastEndpointCount; ++i) {
    const RateRule& r = rules[i];
    if (!r.limits()) continue;
    if (!out.empty()) out += ",";
    out += std::string(kNames[i]) + "=";
    if (r.calls == 1) {
      out += format_seconds(r.window_s) + "s";
    } else {
      out += std::to_string(r.calls) + "/" + format_seconds(r.window_s) + "s";
    }
  }
  return out.empty() ? "off" : out;
}

RateLimits vast_documented_rate_limits() {
  RateLimits l;
  l[VastEndpoint::Search] = {10, 60};
  l[VastEndpoint::Create] = {1, 4.5};
  l[VastEndpoint::List] = {1, 1.0};
  l[VastEndpoint::Show] = {1, 2.0};
  l[VastEndpoint::Destroy] = {1, 3.0};
  l[VastEndpoint::Manage] = {1, 1.0};
  l[VastEndpoint::ChangeBid] = {1, 5.5};
  return l;
}

tl::expected<RateLimits, std::string> parse_rate_limits(std::string_view text) {
  const std::string_view whole = core::trim_view(text);
  if (whole == "vast") return vast_documented_rate_limits();
  if (whole == "off") return RateLimits{};
  if (whole.empty()) {
    return tl::unexpected(std::string(
        "rate limits: empty (say \"vast\", \"off\" or ENDPOINT=SECONDS,... e.g. search=10/60)"));
  }
  RateLimits limits;
  std::array<bool, kVastEndpointCount> seen{};
  std::size_t pos = 0;
  while (pos <= whole.size()) {
    std::size_t comma = whole.find(',', pos);
    if (comma == std::string_view::npos) comma = whole.size();
    const std::string_view entry = core::trim_view(whole.substr(pos, comma - pos));
    pos = comma + 1;
    const auto bad = [&](const std::string& why) {
      return tl::unexpected("rate limits: \"" + std::string(entry.substr(0, 64)) + "\": " + why);
    };
    if (entry.empty()) return tl::unexpected(std::string("rate limits: an empty entry"));
    const std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos)
      return bad("expected ENDPOINT=SECONDS or ENDPOINT=CALLS/SECONDS");
    const std::string_view name = core::trim_view(entry.substr(0, eq));
    const auto known = std::find(kNames.begin(), kNames.end(), name);
    if (known == kNames.end()) {
      return bad("unknown endpoint (known: search, create, list, show, destroy, manage, bid)");
    }
    const auto index = static_cast<std::size_t>(known - kNames.begin());
    if (seen[index]) return bad("endpoint given twice");
    seen[index] = true;

    std::string_view value = core::trim_view(entry.substr(eq + 1));
    if (!value.empty() && value.back() == 's') value.remove_suffix(1);
    RateRule rule{1, 0};
    if (const std::size_t slash = value.find('/'); slash != std::string_view::npos) {
      const std::string_view calls = value.substr(0, slash);
      auto [end, ec] = std::from_chars(calls.data(), calls.data() + calls.size(), rule.calls);
      if (ec != std::errc() || end != calls.data() + calls.size() || rule.calls < 1 ||
          rule.calls > kMaxCalls) {
        return bad("the number of calls must be an integer from 1 to 1000");
      }
      value = value.substr(slash + 1);
      if (!value.empty() && value.back() == 's') value.remove_suffix(1);
    }
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), rule.window_s);
    if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(rule.window_s) ||
        rule.window_s < 0 || rule.window_s > kMaxWindowS) {
      return bad("the seconds must be a number from 0 to 86400");
    }
    limits.rules[index] = rule;
  }
  return limits;
}

double RateWindow::earliest(double now) const {
  if (!rule_.limits() || sent_.size() < static_cast<std::size_t>(rule_.calls)) return now;
  return std::max(now, sent_.front() + rule_.window_s);
}

void RateWindow::record(double at) {
  if (!rule_.limits()) return;
  sent_.push_back(at);
  while (sent_.size() > static_cast<std::size_t>(rule_.calls)) sent_.pop_front();
}

}  // namespace pf::market
