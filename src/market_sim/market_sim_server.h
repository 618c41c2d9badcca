// The HTTP shell of market-sim, a TEST DOUBLE of the vast.ai REST API: routes vast's paths
// onto a MarketSim, adds bearer-key auth and fault injection. All state lives in MarketSim,
// behind one mutex (the server answers from a thread pool).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "market/rate_limits.h"
#include "market_sim/faults.h"
#include "market_sim/market_sim.h"
#include "market_sim/param_stand_ins.h"

namespace pf::market_sim {

struct MarketSimServerOptions {
  // When set, every endpoint but offer search and /healthz needs "Authorization: Bearer KEY".
  std::optional<std::string> api_key;
  FaultSpec faults;
  std::uint64_t fault_seed = 0;
  // vast's per-endpoint limits (market/rate_limits.h), per caller (its Authorization header and
  // address): a call that breaks one is answered 429 in plain text, with no Retry-After, before
  // anything changes. None by default; `proverfleet market-sim` enforces vast's table.
  market::RateLimits rate_limits;
  // Current scenario time in hours. Required.
  std::function<double()> clock_h;
  // Called once per request with "METHOD /path -> status" (no query string, no headers, so
  // no secret ever reaches it). May be empty.
  std::function<void(const std::string&)> log;
  // Told of every instance created and destroyed, in order, under the state lock: must return
  // quickly and must not call the server. May be empty.
  std::function<void(const InstanceLaunch&, const ScenarioOffer&)> on_created;
  std::function<void(std::int64_t id)> on_destroyed;
  // When set, GET /proverfleet-sim/params.json (the manifest) and
  // GET /proverfleet-sim/params/NAME (ranged, throttled; see param_stand_ins.h) are served,
  // open like offer search.
  std::shared_ptr<const ParamStandIns> params;
};

class MarketSimServer {
 public:
  MarketSimServer(MarketSim sim, MarketSimServerOptions options);
  ~MarketSimServer();
  MarketSimServer(const MarketSimServer&) = delete;
  MarketSimServer& operator=(const MarketSimServer&) = delete;

  // Binds host:port; port 0 picks a free one. Returns the bound port.
  tl::expected<int, std::string> bind(const std::string& host, int port);
  // Serves until stop(); bind() first. Returns false if serving failed.
  bool serve();
  // Thread-safe; makes serve() return.
  void stop();

  // A snapshot of the market, taken under the server's lock (for summaries).
  struct Status {
    double now_h = 0;
    std::size_t listed_offers = 0;
    std::size_t instances_created = 0;
    std::size_t live_instances = 0;
    double spent_usd = 0;
    double balance_usd = 0;
  };
  Status status() const;
  // MarketSim::container_stopped now, under the server's lock (the agent spawner asks).
  bool container_stopped(std::int64_t id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pf::market_sim
