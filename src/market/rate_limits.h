// vast.ai's per-endpoint rate limits, as one table both sides of the API read: VastMarket paces
// its own calls to stay inside them (a 429 costs a whole backoff, and a client that learns the
// limits from 429s storms), and market-sim refuses calls that break them, as vast does.
//
// What vast documents (docs.vast.ai API reference: the `x-rate-limit` of each endpoint's OpenAPI
// file, "per IP"; its rate-limit page): limits apply per endpoint and per identity (API key,
// session and client IP), enforced as a minimum interval between calls; a call that breaks one
// is answered HTTP 429 with a plain-text body such as "API requests too frequent endpoint
// threshold=4.5", and no Retry-After or rate-limit headers. Offer search: 10 requests a minute;
// create 4.5, list instances (v1) 1.0, show one instance 2.0, destroy 3.0, manage (label, start,
// stop) 1.0, change bid 5.5. The unit of those thresholds is not documented (vast says they are
// not disclosed); they are read here as seconds between calls, the reading that paces a client
// most.
#pragma once

#include <array>
#include <cstddef>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::market {

enum class VastEndpoint : std::size_t { Search, Create, List, Show, Destroy, Manage, ChangeBid };
inline constexpr std::size_t kVastEndpointCount = 7;
const char* to_string(VastEndpoint endpoint);

// Which limited endpoint a request is ("POST", "/api/v0/bundles/"); nullopt: one vast does not
// document a limit for (the account, a path it does not serve).
std::optional<VastEndpoint> vast_endpoint_of(std::string_view method, std::string_view path);

// At most `calls` calls in any `window_s` seconds; calls == 0: unlimited. A minimum interval of
// T seconds is {1, T}.
struct RateRule {
  int calls = 0;
  double window_s = 0;
  bool limits() const { return calls > 0 && window_s > 0; }
};

struct RateLimits {
  std::array<RateRule, kVastEndpointCount> rules{};
  const RateRule& operator[](VastEndpoint e) const { return rules[static_cast<std::size_t>(e)]; }
  RateRule& operator[](VastEndpoint e) { return rules[static_cast<std::size_t>(e)]; }
  bool any() const;
  // "search=10/60s,create=4.5s,..." (the limited endpoints only); "off" when none is.
  std::string describe() const;
};

// The table above.
RateLimits vast_documented_rate_limits();

// "vast" (the documented table), "off" (none), or a comma-separated list of ENDPOINT=SECONDS (a
// minimum interval) or ENDPOINT=CALLS/SECONDS, endpoints search, create, list, show, destroy,
// manage, bid; endpoints not named are unlimited. Errors name the entry and what is wrong.
tl::expected<RateLimits, std::string> parse_rate_limits(std::string_view text);

// One caller's calls to one endpoint, kept to what its rule looks at. Times in seconds on any
// clock that does not go back; calls are recorded in order.
class RateWindow {
 public:
  RateWindow() = default;
  explicit RateWindow(RateRule rule) : rule_(rule) {}
  // When the next call may go: `now` or later.
  double earliest(double now) const;
  void record(double at);

 private:
  RateRule rule_;
  std::deque<double> sent_;  // the last rule_.calls send times
};

}  // namespace pf::market
