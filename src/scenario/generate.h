// `proverfleet scenario generate`: new /2 scenarios drawn from the families of the bundled ones,
// with a demand shape of the caller's choice, so that policies can be scored on markets they
// were never tuned on (issue 27).
//
// The families are the bundled /2 scenarios themselves (scenarios/demo-small-v2.json and
// market-72h-v2.json, compiled in: bundled_family_texts()). A generated scenario's machines are
// drawn from theirs with replacement, each with all its offers (slices), its truth (memory,
// partitions, failure, throttle) and its own draws around them: price and rate (lognormal, CV
// 0.15 and 0.10, one factor per machine), boot, warm-up and download times (CV 0.2), a listing
// window and maybe one price change. Demand is 2-hour blocks of Poisson arrivals whose mean is
// the families' share of listed capacity (their mean demand ÷ their listed proofs/hour) times
// the generated offers' listed capacity, shaped:
//   steady    the mean, ±15 % noise per block
//   diurnal   a 24 h cycle of ±60 % with a drawn phase, ±15 % noise
//   bursty    40 % of the mean between bursts of 2.5× lasting 2-6 h (one in five blocks starts
//             one), ±15 % noise
//   trending  from 50 % to 150 % of the mean over the horizon (or back down: drawn), ±15 %
// Same options, same bytes: every draw comes from one seeded Stream (scenario/draws.h).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::scenario {

enum class DemandShape { Steady, Diurnal, Bursty, Trending };
inline constexpr std::array<DemandShape, 4> kDemandShapes{
    DemandShape::Steady, DemandShape::Diurnal, DemandShape::Bursty, DemandShape::Trending};

const char* to_string(DemandShape shape);
std::optional<DemandShape> parse_demand_shape(std::string_view text);
// "steady, diurnal, bursty, trending", for help and errors.
std::string demand_shape_names();

struct GenerateOptions {
  std::uint64_t seed = 1;
  DemandShape shape = DemandShape::Steady;
  double hours = 72;  // (0, kMaxGeneratedHours]
  int machines = 60;  // [1, kMaxGeneratedMachines]
};
inline constexpr double kMaxGeneratedHours = 24 * 30;
inline constexpr int kMaxGeneratedMachines = 2000;

// The bundled /2 scenarios' text (generated at build time by scenarios/embed.cmake).
std::span<const std::string_view> bundled_family_texts();

// A new proverfleet-scenario/2 document drawn from `families` (each a /2 scenario's text; the
// bundled ones unless a caller has others). An error names the option or family at fault.
tl::expected<nlohmann::json, std::string> generate_scenario(
    const GenerateOptions& options, std::span<const std::string_view> families);

}  // namespace pf::scenario
