#include "market_sim/param_stand_ins.h"

#include <algorithm>
#include <cmath>

#include "agent/params.h"
#include "core/text.h"

namespace pf::market_sim {
namespace {

// Incompressible, reproducible bytes: a transfer that compresses to nothing would hide a
// client that decompresses wrongly, and the same content every run keeps digests stable.
std::string stand_in_bytes(std::uint64_t size, std::uint64_t seed) {
  std::string out(size, '\0');
  std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
  for (std::uint64_t i = 0; i < size; i += 8) {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    for (std::uint64_t b = 0; b < 8 && i + b < size; ++b) {
      out[i + b] = static_cast<char>((z >> (8 * b)) & 0xFF);
    }
  }
  return out;
}

}  // namespace

tl::expected<ParamStandIns, std::string> ParamStandIns::make(const ParamStandInOptions& o) {
  if (!std::isfinite(o.total_mib) || o.total_mib < 0 || o.total_mib > kMaxStandInMib) {
    return tl::unexpected("stand-in size must be in [0, " + core::fixed(kMaxStandInMib, 0) +
                          "] MiB, got " + core::fixed(o.total_mib, 3));
  }
  if (!std::isfinite(o.real_bytes) || o.real_bytes <= 0) {
    return tl::unexpected("the real parameter size must be > 0 bytes, got " +
                          core::fixed(o.real_bytes, 0));
  }
  if (!std::isfinite(o.time_scale) || o.time_scale <= 0) {
    return tl::unexpected("the time scale must be > 0, got " + core::fixed(o.time_scale, 3));
  }
  if (!std::isfinite(o.min_bytes_per_s) || o.min_bytes_per_s <= 0) {
    return tl::unexpected("the minimum download rate must be > 0 bytes/s, got " +
                          core::fixed(o.min_bytes_per_s, 0));
  }
  ParamStandIns out;
  out.options_ = o;
  const auto total = static_cast<std::uint64_t>(std::llround(o.total_mib * 1024 * 1024));
  if (total == 0) return out;
  // Two files so that the agent's per-file bookkeeping (progress, verify, resume) is exercised
  // more than once; names look like the real ones' suffixes.
  const std::uint64_t first = std::max<std::uint64_t>(1, total * 3 / 4);
  const std::uint64_t sizes[2] = {first, total - first};
  const char* names[2] = {"proverfleet-sim-stand-in.params", "proverfleet-sim-stand-in.vk"};
  for (std::size_t i = 0; i < 2; ++i) {
    if (sizes[i] == 0) continue;
    ParamStandIn f;
    f.name = names[i];
    f.content = stand_in_bytes(sizes[i], i + 1);
    f.digest = agent::param_digest_of(f.content);
    out.files_.push_back(std::move(f));
  }
  return out;
}

const ParamStandIn* ParamStandIns::find(const std::string& name) const {
  for (const auto& f : files_) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::uint64_t ParamStandIns::total_bytes() const {
  std::uint64_t total = 0;
  for (const auto& f : files_) total += f.content.size();
  return total;
}

nlohmann::json ParamStandIns::manifest(const std::string& base_url) const {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& f : files_) {
    out.push_back({{"name", f.name},
                   {"url", base_url + f.name},
                   {"bytes", f.content.size()},
                   {"digest", f.digest}});
  }
  return out;
}

double ParamStandIns::bytes_per_s(double download_mbps) const {
  if (!std::isfinite(download_mbps) || download_mbps <= 0) return options_.min_bytes_per_s;
  const double rate = static_cast<double>(total_bytes()) * options_.time_scale * download_mbps *
                      1e6 / (8 * options_.real_bytes);
  return std::max(rate, options_.min_bytes_per_s);
}

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  if (values.size() % 2 == 1) return values[mid];
  return (values[mid - 1] + values[mid]) / 2;
}

}  // namespace pf::market_sim
