// Stand-ins for the ~47 GB of proof parameters, served by market-sim so that its instances'
// agents go through the real fetch (manifest, ranged GETs, resume, digest check) in seconds.
//
// Timing: a real instance downloads `scenario.params.bytes` at its truth's download_mbps, which
// takes T = bytes · 8 / (download_mbps · 10^6) scenario seconds, i.e. T / time_scale wall
// seconds. The stand-ins (S bytes in all) are served at the rate that makes them take that same
// wall time:
//   rate = S · time_scale · download_mbps · 10^6 / (8 · bytes)   bytes per wall second,
// never below a floor (so that a slow host at a low time scale does not stall a test), per
// connection. Downloads are anonymous (the manager hands every agent the same manifest), so
// download_mbps is the median over the instances live when the request arrives.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>
#include <vector>

namespace pf::market_sim {

struct ParamStandIn {
  std::string name;
  std::string content;
  std::string digest;  // hex of the first 16 bytes of BLAKE2b-512 (what the agent checks)
};

struct ParamStandInOptions {
  double total_mib = 4;                // all stand-ins together; 0 serves an empty manifest
  double real_bytes = 47e9;            // what they stand in for (scenario params.bytes)
  double time_scale = 1;               // scenario seconds per wall second
  double min_bytes_per_s = 64 * 1024;  // floor of the per-connection rate
};

inline constexpr double kMaxStandInMib = 1024;

class ParamStandIns {
 public:
  // Two deterministic files (3/4 and 1/4 of the total). Errors name the bad option.
  static tl::expected<ParamStandIns, std::string> make(const ParamStandInOptions& options);

  const std::vector<ParamStandIn>& files() const { return files_; }
  const ParamStandIn* find(const std::string& name) const;
  std::uint64_t total_bytes() const;

  // The manifest agents fetch: [{"name", "url", "bytes", "digest"}], url = base_url + name.
  nlohmann::json manifest(const std::string& base_url) const;

  // Bytes per wall second one connection is served at when the downloading instance's link
  // does `download_mbps` (formula in the file comment); at least the floor.
  double bytes_per_s(double download_mbps) const;

 private:
  ParamStandInOptions options_;
  std::vector<ParamStandIn> files_;
};

// The median of `values`; nullopt when empty.
std::optional<double> median(std::vector<double> values);

}  // namespace pf::market_sim
