#include "scenario/generate.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <utility>
#include <vector>

#include "scenario/draws.h"
#include "scenario/scenario.h"
#include "util/bounded_json.h"

namespace pf::scenario {
namespace {

using nlohmann::json;

constexpr double kBlockH = 2;  // demand blocks, as in the bundled files
constexpr double kNoiseCv = 0.15;

// Numbers written with a few decimals, as the bundled files have them (and so that a generated
// file reads like one).
double rounded(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

struct Family {
  json doc;
  // Offers grouped by machine_id: pointers into doc's offers array, which moving the Family
  // (and so doc) does not reallocate.
  std::vector<std::vector<const json*>> machines;
  double mean_demand = 0;      // proofs/hour over the horizon
  double listed_capacity = 0;  // Σ rate_full × listed share of the horizon
};

double listed_share(const json& offer, double hours) {
  const double from = offer.at("listed_from_h").get<double>();
  const double until = std::min(hours, offer.at("listed_until_h").get<double>());
  return hours > 0 ? std::max(0.0, until - from) / hours : 0;
}

tl::expected<Family, std::string> read_family(std::string_view text, std::size_t index) {
  const std::string where = "family " + std::to_string(index + 1);
  auto doc = util::parse_json(text);
  if (!doc) return tl::unexpected(where + ": " + doc.error());
  // Validated as any scenario is, so what is copied from it is a valid offer and truth.
  auto parsed = parse_scenario(*doc);
  if (!parsed) return tl::unexpected(where + ": " + parsed.error());
  if (!parsed->demand) return tl::unexpected(where + ": not a /2 scenario (no demand)");
  Family f;
  f.doc = std::move(*doc);
  const double hours = f.doc.at("hours").get<double>();
  std::map<std::int64_t, std::vector<const json*>> by_machine;
  for (const auto& offer : f.doc.at("offers")) {
    by_machine[offer.at("machine_id").get<std::int64_t>()].push_back(&offer);
    f.listed_capacity +=
        offer.at("truth").at("rate_full").get<double>() * listed_share(offer, hours);
  }
  for (auto& [id, offers] : by_machine) f.machines.push_back(std::move(offers));
  double proofs = 0;
  for (const auto& a : f.doc.at("demand").at("arrivals")) {
    proofs += (a.at("to_h").get<double>() - a.at("from_h").get<double>()) *
              a.at("proofs_per_hour").get<double>();
  }
  f.mean_demand = hours > 0 ? proofs / hours : 0;
  if (f.machines.empty() || !(f.listed_capacity > 0)) {
    return tl::unexpected(where + ": no offer with a listed capacity");
  }
  return f;
}

// The demand multiplier of block `b` (its middle at `mid_h`) before noise.
struct ShapeDraws {
  double phase_h = 0;         // diurnal
  bool rising = true;         // trending
  std::vector<double> burst;  // bursty: multiplier per block
};

double shape_at(DemandShape shape, const ShapeDraws& d, std::size_t block, double mid_h,
                double hours) {
  switch (shape) {
    case DemandShape::Steady:
      return 1;
    case DemandShape::Diurnal:
      return 1 + 0.6 * std::sin(2 * std::numbers::pi * (mid_h - d.phase_h) / 24);
    case DemandShape::Bursty:
      return d.burst[block];
    case DemandShape::Trending: {
      const double x = hours > 0 ? mid_h / hours : 0;
      return d.rising ? 0.5 + x : 1.5 - x;
    }
  }
  return 1;
}

}  // namespace

const char* to_string(DemandShape shape) {
  switch (shape) {
    case DemandShape::Steady:
      return "steady";
    case DemandShape::Diurnal:
      return "diurnal";
    case DemandShape::Bursty:
      return "bursty";
    case DemandShape::Trending:
      return "trending";
  }
  return "steady";
}

std::optional<DemandShape> parse_demand_shape(std::string_view text) {
  for (const auto s : kDemandShapes) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

std::string demand_shape_names() {
  std::string out;
  for (const auto s : kDemandShapes) out += std::string(out.empty() ? "" : ", ") + to_string(s);
  return out;
}

tl::expected<json, std::string> generate_scenario(const GenerateOptions& options,
                                                  std::span<const std::string_view> families) {
  if (!(options.hours > 0) || options.hours > kMaxGeneratedHours) {
    return tl::unexpected("hours must be in (0, " + std::to_string(int(kMaxGeneratedHours)) +
                          "], got " + std::to_string(options.hours));
  }
  if (options.machines < 1 || options.machines > kMaxGeneratedMachines) {
    return tl::unexpected("machines must be in [1, " + std::to_string(kMaxGeneratedMachines) +
                          "], got " + std::to_string(options.machines));
  }
  if (families.empty()) return tl::unexpected(std::string("no family scenario to draw from"));
  std::vector<Family> pool;
  double family_demand = 0, family_capacity = 0;
  for (std::size_t i = 0; i < families.size(); ++i) {
    auto f = read_family(families[i], i);
    if (!f) return tl::unexpected(f.error());
    family_demand += f->mean_demand;
    family_capacity += f->listed_capacity;
    pool.push_back(std::move(*f));
  }
  // Every machine of every family equally likely.
  std::vector<std::pair<std::size_t, std::size_t>> machines;
  for (std::size_t f = 0; f < pool.size(); ++f) {
    for (std::size_t m = 0; m < pool[f].machines.size(); ++m) machines.emplace_back(f, m);
  }

  Stream rng(options.seed ^ 0x67656e6572617465ULL);  // "generate"
  const double hours = options.hours;
  auto pick = [&](std::size_t n) {
    return std::min(n - 1, static_cast<std::size_t>(rng.uniform() * static_cast<double>(n)));
  };

  json offers = json::array();
  double capacity = 0;
  std::int64_t next_offer = 31'000'001;
  for (int m = 0; m < options.machines; ++m) {
    const auto [f, t] = machines[pick(machines.size())];
    const auto& template_offers = pool[f].machines[t];
    const double family_hours = pool[f].doc.at("hours").get<double>();
    const std::int64_t machine_id = 200'000 + m;
    const std::int64_t host_id = 20'000 + m;
    const double price = rng.unit_lognormal(0.15);
    const double rate = rng.unit_lognormal(0.10);
    const double boot = rng.unit_lognormal(0.2);
    const double warmup = rng.unit_lognormal(0.2);
    const double download = rng.unit_lognormal(0.2);
    // Listing: most machines for the whole horizon, the others for a window in it.
    double from_h = 0, until_h = hours;
    if (rng.uniform() < 0.4) {
      from_h = rounded(rng.uniform() * 0.7 * hours, 2);
      until_h = rounded(std::min(hours, from_h + (0.2 + 0.8 * rng.uniform()) * hours), 2);
    }
    const bool price_change = rng.uniform() < 0.25;
    const double change_at = rounded(from_h + rng.uniform() * (until_h - from_h), 2);
    const double change_factor = rng.unit_lognormal(0.15);
    for (const json* source : template_offers) {
      json o = *source;
      o["id"] = next_offer++;
      o["machine_id"] = machine_id;
      o["host_id"] = host_id;
      const double dph = rounded(o.at("dph_total").get<double>() * price, 4);
      o["dph_total"] = dph;
      o["listed_from_h"] = from_h;
      o["listed_until_h"] = until_h;
      o.erase("dph_changes");
      if (price_change && change_at > from_h) {
        o["dph_changes"] =
            json::array({{{"at_h", change_at}, {"dph_total", rounded(dph * change_factor, 4)}}});
      }
      json& truth = o["truth"];
      truth["rate_full"] = rounded(truth.at("rate_full").get<double>() * rate, 2);
      truth["boot_min"] = rounded(truth.at("boot_min").get<double>() * boot, 2);
      truth["warmup_min"] = rounded(truth.at("warmup_min").get<double>() * warmup, 2);
      truth["download_mbps"] = rounded(truth.at("download_mbps").get<double>() * download, 1);
      // The template's failure and throttle times, at the same share of this horizon as of
      // its family's (a machine that fails, fails here too).
      for (const char* key : {"failure", "throttle"}) {
        if (!truth.contains(key) || !truth[key].is_object()) continue;
        json& event = truth[key];
        if (event.contains("after_h")) {
          event["after_h"] = rounded(event["after_h"].get<double>() * hours / family_hours, 2);
        }
      }
      capacity += truth["rate_full"].get<double>() * listed_share(o, hours);
      offers.push_back(std::move(o));
    }
  }

  // Demand: the families' share of listed capacity, shaped.
  const double mean = family_capacity > 0 ? capacity * family_demand / family_capacity : 0;
  const auto blocks = static_cast<std::size_t>(std::ceil(hours / kBlockH));
  ShapeDraws draws;
  draws.phase_h = rng.uniform() * 24;
  draws.rising = rng.uniform() < 0.5;
  draws.burst.assign(blocks, 0.4);
  for (std::size_t b = 0; b < blocks; ++b) {
    if (rng.uniform() >= 0.2) continue;
    const auto length = static_cast<std::size_t>(1 + pick(3));  // 1-3 blocks: 2-6 h
    for (std::size_t k = b; k < std::min(blocks, b + length); ++k) draws.burst[k] = 2.5;
  }
  json arrivals = json::array();
  for (std::size_t b = 0; b < blocks; ++b) {
    const double from = static_cast<double>(b) * kBlockH;
    const double to = std::min(hours, from + kBlockH);
    const double level = mean * shape_at(options.shape, draws, b, (from + to) / 2, hours) *
                         rng.unit_lognormal(kNoiseCv);
    arrivals.push_back({{"from_h", rounded(from, 2)},
                        {"to_h", rounded(to, 2)},
                        {"proofs_per_hour", rounded(level, 1)}});
  }

  const json& first = pool.front().doc;
  json doc = json::object();
  doc["format"] = "proverfleet-scenario/2";
  doc["name"] =
      std::string("generated-") + to_string(options.shape) + "-" + std::to_string(options.seed);
  doc["seed"] = options.seed;
  doc["hours"] = hours;
  doc["economics"] = first.at("economics");
  doc["params"] = first.at("params");
  doc["offers"] = std::move(offers);
  doc["demand"] = {{"arrivals", std::move(arrivals)},
                   {"deadline_min", first.at("demand").at("deadline_min")}};
  // What is written must load: the same checks as any scenario file.
  if (auto check = parse_scenario(doc); !check) {
    return tl::unexpected("the generated scenario does not load (a bug): " + check.error());
  }
  return doc;
}

}  // namespace pf::scenario
