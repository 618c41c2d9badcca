// Market scenarios (`proverfleet-scenario/1`, `/2` and `/3`, docs/scenario-format.md): a GPU
// market over a time horizon plus the hidden truth of how each rented machine behaves. /2 is a
// superset: job arrivals with deadlines, price changes, machine-level memory and warm-up truth,
// silent throttling, machine-level failures. /3 adds what vast's market itself does to a
// rental: the host's contract ending, and interruptible bids outbid by others. How the truth plays
// out is truth_model.h's. Parsing is strict so that a typo in a hand-written scenario fails loudly
// instead of silently simulating a different market.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "core/offer.h"
#include "util/bounded_json.h"

namespace pf::scenario {

inline constexpr const char* kScenarioFormat = "proverfleet-scenario/1";
inline constexpr const char* kScenarioFormatV2 = "proverfleet-scenario/2";
inline constexpr const char* kScenarioFormatV3 = "proverfleet-scenario/3";

// Bounds on a scenario, so that the simulators' work is bounded too: their events scale with
// the horizon and the offers.
inline constexpr double kMaxScenarioHours = 24.0 * 365;
inline constexpr std::size_t kMaxScenarioOffers = 100'000;
// Expected jobs of a /2 demand over the horizon: the simulator holds every arrival in memory.
inline constexpr double kMaxScenarioJobs = 20'000'000;
inline constexpr std::size_t kMaxDemandSegments = 100'000;
inline constexpr std::size_t kMaxPriceChanges = 1'000;
inline constexpr std::size_t kMaxRivalBids = 10'000;
inline constexpr util::JsonLimits kScenarioLimits{.max_bytes = 256u << 20,
                                                  .max_depth = 16,
                                                  .max_values = 20'000'000,
                                                  .max_string_bytes = 64u << 10};

enum class FailureKind { None, NeverBoots, Crash, Offline };

// The spelling used in scenario files ("none", "never_boots", "crash", "offline").
const char* to_string(FailureKind kind);

struct Throttle {
  double after_h = 0;    // proving hours before the throttle starts
  double factor = 1;     // rate multiplier from then on, in (0, 1]
  bool reported = true;  // /2: false = silent, the GPU reports no throttle reason
};

struct Failure {
  FailureKind kind = FailureKind::None;
  double after_h = 0;
};

// Hidden ground truth of one offer; only the simulators, clairvoyant and the bound may read it.
struct Truth {
  double rate_full = 0;
  int partitions_full = 1;
  double ram_visible_gib = 0;
  double cores_visible = 0;
  double proof_time_cv = 0;
  double boot_min = 0;
  double download_mbps = 0;
  double warmup_min = 0;
  double contention = 1;
  std::optional<Throttle> throttle;
  Failure failure;
  // /2 (defaults are /1's behaviour): the real prover peak is mem_base_gib +
  // mem_per_partition_gib · p; the first warmup_proofs proofs after each start are slow.
  double mem_base_gib = 70;
  double mem_per_partition_gib = 14;
  int warmup_proofs = 1;
};

// /2: the host changes the listed price at at_h; rentals created from then on pay it.
struct PriceChange {
  double at_h = 0;
  double dph_total = 0;
};

// /3: another renter's bid for this machine, standing in [from_h, to_h).
struct RivalBid {
  double from_h = 0;
  double to_h = 0;
  double price = 0;  // $/hour
};

// /3: the offer's interruptible market. A bid rental runs while its bid is at least min_bid and
// above every rival bid standing; otherwise vast stops it (outbid) until it is top again.
struct BidMarket {
  double min_bid = 0;            // $/hour, shown as the offer's min_bid
  std::vector<RivalBid> rivals;  // ascending from_h; they may overlap
};

struct ScenarioOffer {
  core::Offer offer;         // visible fields, normalised through market::offer_from_vast_json
  nlohmann::json vast_json;  // visible fields exactly as written (vast names and units)
  double listed_from_h = 0;  // rentable inside [listed_from_h, listed_until_h)
  double listed_until_h = 0;
  std::vector<PriceChange> dph_changes;  // ascending at_h; empty in /1
  // /3: the host's contract for the machine ends at this hour (vast's end_date): listed only
  // before it, and every rental stops then for good.
  std::optional<double> contract_end_h;
  std::optional<BidMarket> bid_market;  // /3; absent: bids never outbid, no min_bid shown
  Truth truth;
};

struct ScenarioEconomics {
  double revenue_per_proof_usd = 0;
  double target_cost_per_proof_usd = 0;
  std::optional<double> demand_proofs_per_hour;  // nullopt: unlimited demand
};

// /2: jobs (one proof each) arrive as a Poisson process at a piecewise-constant rate.
struct ArrivalSegment {
  double from_h = 0;
  double to_h = 0;
  double proofs_per_hour = 0;
};

struct Demand {
  std::vector<ArrivalSegment> arrivals;  // ascending from_h, not overlapping
  double deadline_min = 0;               // a job pays only if delivered this soon after arrival
};

struct Scenario {
  int format_version = 1;  // 1, 2 or 3
  std::string name;
  std::uint64_t seed = 0;
  double hours = 0;
  ScenarioEconomics economics;
  double params_bytes = 0;
  std::vector<ScenarioOffer> offers;
  std::optional<Demand> demand;  // present exactly in /2 (economics.demand_proofs_per_hour is /1's)
};

// Validates the whole document. On failure the message lists every problem found, one per
// line, each starting with the key path (e.g. `offers[3].truth.failure.kind: ...`).
tl::expected<Scenario, std::string> parse_scenario(const nlohmann::json& doc);

// Parses scenario JSON text (with kScenarioLimits), then validates it as parse_scenario does.
// Invalid JSON is "invalid JSON: <where and why>".
tl::expected<Scenario, std::string> parse_scenario_text(std::string_view text);

// Reads and parses a scenario file. Unreadable files and invalid JSON (with line and column)
// are reported too; every message starts with the path.
tl::expected<Scenario, std::string> load_scenario(const std::string& path);

}  // namespace pf::scenario
