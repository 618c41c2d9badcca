#include "scenario/scenario.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <sstream>

#include "core/planner.h"
#include "market/offer_json.h"
#include "scenario/json_text.h"
#include "util/bounded_json.h"

namespace pf::scenario {
namespace {

using nlohmann::json;

// Beyond this, more messages only bury the first ones (usually one mistake repeated per offer).
constexpr std::size_t kMaxReportedErrors = 20;

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

std::string child_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string index_path(const std::string& path, std::size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// Allowed interval of a numeric value; absent bounds are open-ended.
struct Range {
  std::optional<double> min;
  bool min_inclusive = true;
  std::optional<double> max;
  bool max_inclusive = true;

  bool contains(double v) const {
    if (min && (min_inclusive ? v < *min : v <= *min)) return false;
    if (max && (max_inclusive ? v > *max : v >= *max)) return false;
    return true;
  }

  std::string describe() const {
    if (min && max) {
      return std::string("in ") + (min_inclusive ? "[" : "(") + format_number(*min) + ", " +
             format_number(*max) + (max_inclusive ? "]" : ")");
    }
    if (min) return (min_inclusive ? ">= " : "> ") + format_number(*min);
    if (max) return (max_inclusive ? "<= " : "< ") + format_number(*max);
    return "any number";
  }
};

const Range kNonNegative{0.0, true, std::nullopt, true};
const Range kPositive{0.0, false, std::nullopt, true};
const Range kAtLeastOne{1.0, true, std::nullopt, true};
const Range kUnitInterval{0.0, true, 1.0, true};
const Range kFraction{0.0, false, 1.0, true};  // a multiplier that may only reduce: (0, 1]
// Upper bounds keep a simulation's work bounded by sane inputs: events scale with hours times
// proof rates, and hours or times past these are typos (or attacks), not markets.
const Range kHours{0.0, false, kMaxScenarioHours, true};
const Range kTimeH{0.0, true, 1e6, true};  // a time within or past the horizon, in hours
const Range kWindowEndH{-1e6, true, 1e6, true};
const Range kMinutes{0.0, true, 1e6, true};
const Range kPositiveMinutes{0.0, false, 1e6, true};
const Range kProofRateDemand{0.0, true, 1e6, true};  // jobs per hour; 0 = a quiet period
const Range kProofRate{0.0, true, 1e4, true};        // proofs per hour
const Range kDemand{0.0, false, 1e6, true};          // proofs per hour
const Range kMoney{0.0, true, 1e6, true};            // USD per proof
const Range kPositiveMoney{0.0, false, 1e6, true};
const Range kBandwidthMbps{0.0, false, 1e6, true};
const Range kMachineSize{0.0, false, 1e5, true};  // GiB or cores
const Range kCv{0.0, true, 10.0, true};
const Range kParamsBytes{0.0, false, 1e14, true};
const Range kMemoryGib{0.0, true, 1e5, true};
const Range kGpus{1.0, true, static_cast<double>(core::kMaxPlanGpus), true};

// Collects every problem with its key path; readers return nullopt for a missing or bad
// value so parsing can continue and report the rest of the file in one go.
class Validator {
 public:
  void fail(const std::string& path, const std::string& message) {
    errors_.push_back(path.empty() ? message : path + ": " + message);
  }

  bool ok() const { return errors_.empty(); }
  std::size_t error_count() const { return errors_.size(); }

  std::string message() const {
    std::string out;
    for (std::size_t i = 0; i < errors_.size() && i < kMaxReportedErrors; ++i) {
      if (i > 0) out += "\n";
      out += errors_[i];
    }
    if (errors_.size() > kMaxReportedErrors) {
      out += "\n... and " + std::to_string(errors_.size() - kMaxReportedErrors) + " more problems";
    }
    return out;
  }

  // Checks that `j` is an object whose keys are `keys`, every one present, plus any of
  // `optional_keys`, and no other.
  bool object_with_keys(const json& j, const std::string& path,
                        std::initializer_list<const char*> keys,
                        std::initializer_list<const char*> optional_keys = {}) {
    if (!j.is_object()) {
      fail(path.empty() ? "scenario" : path, "expected a JSON object, got " + describe_json(j));
      return false;
    }
    const std::string where = path.empty() ? "top-level " : "";
    for (const auto& [key, value] : j.items()) {
      // Captured by name: clang 14 (the fuzz build) cannot capture a structured binding.
      const auto is_key = [&key = key](const char* k) { return key == k; };
      if (std::any_of(keys.begin(), keys.end(), is_key) ||
          std::any_of(optional_keys.begin(), optional_keys.end(), is_key)) {
        continue;
      }
      std::string message = "unknown " + where + "key \"" + key + "\"";
      for (auto list : {keys, optional_keys}) {
        const auto near = std::find_if(list.begin(), list.end(), [&key = key](const char* k) {
          return edit_distance(key, k) <= 2;
        });
        if (near != list.end()) {
          message += " (did you mean \"" + std::string(*near) + "\"?)";
          break;
        }
      }
      fail(path, message);
    }
    std::string missing;
    std::size_t missing_count = 0;
    for (const char* key : keys) {
      if (j.contains(key)) continue;
      missing += (missing_count++ > 0 ? ", \"" : "\"") + std::string(key) + "\"";
    }
    if (missing_count > 0) {
      fail(path, "missing " + where + (missing_count > 1 ? "keys " : "key ") + missing);
    }
    return true;
  }

  std::optional<double> number(const json& obj, const std::string& path, const char* key,
                               const Range& range) {
    const json* value = find(obj, key);
    if (value == nullptr) return std::nullopt;
    const std::string at = child_path(path, key);
    if (!value->is_number()) {
      fail(at, "expected a number, got " + describe_json(*value));
      return std::nullopt;
    }
    double v = value->get<double>();
    if (!std::isfinite(v) || !range.contains(v)) {
      fail(at, "must be " + range.describe() + ", got " + value->dump());
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::int64_t> integer(const json& obj, const std::string& path, const char* key,
                                      const Range& range) {
    const json* value = find(obj, key);
    if (value == nullptr) return std::nullopt;
    const std::string at = child_path(path, key);
    if (!value->is_number_integer() ||
        (value->is_number_unsigned() &&
         value->get<std::uint64_t>() >
             static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))) {
      fail(at, "expected an integer, got " + describe_json(*value));
      return std::nullopt;
    }
    auto v = value->get<std::int64_t>();
    if (!range.contains(static_cast<double>(v))) {
      fail(at, "must be " + range.describe() + ", got " + value->dump());
      return std::nullopt;
    }
    return v;
  }

  std::optional<std::string> string(const json& obj, const std::string& path, const char* key,
                                    bool allow_empty) {
    const json* value = find(obj, key);
    if (value == nullptr) return std::nullopt;
    const std::string at = child_path(path, key);
    if (!value->is_string()) {
      fail(at, "expected a string, got " + describe_json(*value));
      return std::nullopt;
    }
    if (!allow_empty && value->get_ref<const std::string&>().empty()) {
      fail(at, "must not be empty");
      return std::nullopt;
    }
    return value->get<std::string>();
  }

  std::optional<bool> boolean(const json& obj, const std::string& path, const char* key) {
    const json* value = find(obj, key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_boolean()) {
      fail(child_path(path, key), "expected true or false, got " + describe_json(*value));
      return std::nullopt;
    }
    return value->get<bool>();
  }

  // The object under `key`, checked to hold exactly `keys`; nullptr if absent or wrong.
  const json* object(const json& obj, const std::string& path, const char* key,
                     std::initializer_list<const char*> keys,
                     std::initializer_list<const char*> optional_keys = {}) {
    const json* value = find(obj, key);
    if (value == nullptr) return nullptr;
    if (!object_with_keys(*value, child_path(path, key), keys, optional_keys)) return nullptr;
    return value;
  }

  // The array under `key` with at most `max_size` elements; nullptr if absent or wrong.
  const json* array(const json& obj, const std::string& path, const char* key,
                    std::size_t max_size) {
    const json* value = find(obj, key);
    if (value == nullptr) return nullptr;
    const std::string at = child_path(path, key);
    if (!value->is_array()) {
      fail(at, "expected an array, got " + describe_json(*value));
      return nullptr;
    }
    if (value->size() > max_size) {
      fail(at, std::to_string(value->size()) + " entries, at most " + std::to_string(max_size));
      return nullptr;
    }
    return value;
  }

 private:
  // Absent keys were already reported by object_with_keys.
  static const json* find(const json& obj, const char* key) {
    if (!obj.is_object()) return nullptr;
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }

  std::vector<std::string> errors_;
};

std::optional<FailureKind> failure_kind_from(const std::string& text) {
  for (auto kind :
       {FailureKind::None, FailureKind::NeverBoots, FailureKind::Crash, FailureKind::Offline}) {
    if (text == to_string(kind)) return kind;
  }
  return std::nullopt;
}

// The keys /2 adds to a /1 object: optional there, unknown in /1.
std::initializer_list<const char*> v2_keys(int version, std::initializer_list<const char*> keys) {
  return version >= 2 ? keys : std::initializer_list<const char*>{};
}

void parse_truth(Validator& v, const json& offer, const std::string& path, int version,
                 Truth& truth) {
  const json* t =
      v.object(offer, path, "truth",
               {"rate_full", "partitions_full", "ram_visible_gib", "cores_visible", "proof_time_cv",
                "boot_min", "download_mbps", "warmup_min", "contention", "throttle", "failure"},
               v2_keys(version, {"mem_base_gib", "mem_per_partition_gib", "warmup_proofs"}));
  if (t == nullptr) return;
  const std::string at = child_path(path, "truth");
  truth.rate_full = v.number(*t, at, "rate_full", kProofRate).value_or(0);
  truth.partitions_full =
      static_cast<int>(v.integer(*t, at, "partitions_full", {1.0, true, 1000.0, true}).value_or(1));
  truth.ram_visible_gib = v.number(*t, at, "ram_visible_gib", kMachineSize).value_or(0);
  truth.cores_visible = v.number(*t, at, "cores_visible", kMachineSize).value_or(0);
  truth.proof_time_cv = v.number(*t, at, "proof_time_cv", kCv).value_or(0);
  truth.boot_min = v.number(*t, at, "boot_min", kMinutes).value_or(0);
  truth.download_mbps = v.number(*t, at, "download_mbps", kBandwidthMbps).value_or(0);
  truth.warmup_min = v.number(*t, at, "warmup_min", kMinutes).value_or(0);
  truth.contention = v.number(*t, at, "contention", kFraction).value_or(1);
  truth.mem_base_gib = v.number(*t, at, "mem_base_gib", kMemoryGib).value_or(truth.mem_base_gib);
  truth.mem_per_partition_gib =
      v.number(*t, at, "mem_per_partition_gib", kMemoryGib).value_or(truth.mem_per_partition_gib);
  truth.warmup_proofs = static_cast<int>(
      v.integer(*t, at, "warmup_proofs", {0.0, true, 1000.0, true}).value_or(truth.warmup_proofs));

  if (t->contains("throttle") && !(*t)["throttle"].is_null()) {
    if (const json* th =
            v.object(*t, at, "throttle", {"after_h", "factor"}, v2_keys(version, {"reported"}))) {
      const std::string tat = child_path(at, "throttle");
      Throttle throttle;
      throttle.after_h = v.number(*th, tat, "after_h", kTimeH).value_or(0);
      throttle.factor = v.number(*th, tat, "factor", kFraction).value_or(1);
      throttle.reported = v.boolean(*th, tat, "reported").value_or(true);
      truth.throttle = throttle;
    }
  }

  if (const json* f = v.object(*t, at, "failure", {"kind", "after_h"})) {
    const std::string fat = child_path(at, "failure");
    if (auto kind_text = v.string(*f, fat, "kind", true)) {
      if (auto kind = failure_kind_from(*kind_text)) {
        truth.failure.kind = *kind;
      } else {
        v.fail(child_path(fat, "kind"),
               "expected one of none, never_boots, crash, offline, got \"" + *kind_text + "\"");
      }
    }
    truth.failure.after_h = v.number(*f, fat, "after_h", kTimeH).value_or(0);
  }
}

constexpr const char* kWindowFrom = "listed_from_h";
constexpr const char* kWindowUntil = "listed_until_h";

void parse_price_changes(Validator& v, const json& o, const std::string& path, ScenarioOffer& out) {
  const json* changes = v.array(o, path, "dph_changes", kMaxPriceChanges);
  if (changes == nullptr) return;
  const std::string at = child_path(path, "dph_changes");
  for (std::size_t i = 0; i < changes->size(); ++i) {
    const std::string cat = index_path(at, i);
    if (!v.object_with_keys((*changes)[i], cat, {"at_h", "dph_total"})) continue;
    auto at_h = v.number((*changes)[i], cat, "at_h", kTimeH);
    auto dph = v.number((*changes)[i], cat, "dph_total", kMoney);
    if (!at_h || !dph) continue;
    if (!out.dph_changes.empty() && !(*at_h > out.dph_changes.back().at_h)) {
      v.fail(child_path(cat, "at_h"), "must be after the previous change's (" +
                                          format_number(out.dph_changes.back().at_h) + ")");
      continue;
    }
    out.dph_changes.push_back({*at_h, *dph});
  }
}

void parse_bid_market(Validator& v, const json& o, const std::string& path, ScenarioOffer& out) {
  const json* m = v.object(o, path, "bid_market", {"min_bid"}, {"rivals"});
  if (m == nullptr) return;
  const std::string at = child_path(path, "bid_market");
  BidMarket market;
  market.min_bid = v.number(*m, at, "min_bid", kMoney).value_or(0);
  if (const json* rivals = v.array(*m, at, "rivals", kMaxRivalBids)) {
    const std::string rat = child_path(at, "rivals");
    for (std::size_t i = 0; i < rivals->size(); ++i) {
      const std::string bat = index_path(rat, i);
      if (!v.object_with_keys((*rivals)[i], bat, {"from_h", "to_h", "price"})) continue;
      auto from = v.number((*rivals)[i], bat, "from_h", kTimeH);
      auto to = v.number((*rivals)[i], bat, "to_h", kWindowEndH);
      auto price = v.number((*rivals)[i], bat, "price", kMoney);
      if (!from || !to || !price) continue;
      if (!(*from < *to)) {
        v.fail(bat,
               "from_h (" + format_number(*from) + ") must be < to_h (" + format_number(*to) + ")");
        continue;
      }
      if (!market.rivals.empty() && *from < market.rivals.back().from_h) {
        v.fail(child_path(bat, "from_h"), "must not be before the previous rival's (" +
                                              format_number(market.rivals.back().from_h) + ")");
        continue;
      }
      market.rivals.push_back({*from, *to, *price});
    }
  }
  out.bid_market = std::move(market);
}

void parse_offer(Validator& v, const json& o, const std::string& path, int version,
                 ScenarioOffer& out) {
  if (!v.object_with_keys(o, path,
                          {"id",
                           "machine_id",
                           "host_id",
                           "gpu_name",
                           "num_gpus",
                           "gpu_ram",
                           "gpu_total_ram",
                           "cpu_name",
                           "cpu_cores",
                           "cpu_cores_effective",
                           "cpu_ram",
                           "pcie_bw",
                           "pci_gen",
                           "inet_down",
                           "inet_up",
                           "inet_down_cost",
                           "disk_space",
                           "cuda_max_good",
                           "compute_cap",
                           "reliability2",
                           "verified",
                           "geolocation",
                           "dph_total",
                           "storage_cost",
                           "dlperf",
                           kWindowFrom,
                           kWindowUntil,
                           "truth"},
                          version >= 3
                              ? std::initializer_list<const char*>{"dph_changes", "contract_end_h",
                                                                   "bid_market", "inet_up_cost"}
                              : v2_keys(version, {"dph_changes"}))) {
    return;
  }
  const std::size_t errors_before = v.error_count();

  // Visible fields: only types and ranges here; the conversion to core::Offer (units) happens
  // in offer_from_vast_json, the one place that knows vast's units.
  v.integer(o, path, "id", kAtLeastOne);
  v.integer(o, path, "machine_id", kAtLeastOne);
  v.integer(o, path, "host_id", kNonNegative);
  v.string(o, path, "gpu_name", false);
  v.integer(o, path, "num_gpus", kGpus);
  v.number(o, path, "gpu_ram", kPositive);
  v.number(o, path, "gpu_total_ram", kPositive);
  v.string(o, path, "cpu_name", true);
  v.number(o, path, "cpu_cores", kNonNegative);
  v.number(o, path, "cpu_cores_effective", kNonNegative);
  v.number(o, path, "cpu_ram", kNonNegative);
  v.number(o, path, "pcie_bw", kNonNegative);
  v.integer(o, path, "pci_gen", kNonNegative);
  v.number(o, path, "inet_down", kNonNegative);
  v.number(o, path, "inet_up", kNonNegative);
  v.number(o, path, "inet_down_cost", kNonNegative);
  v.number(o, path, "disk_space", kNonNegative);
  v.number(o, path, "cuda_max_good", kNonNegative);
  v.integer(o, path, "compute_cap", kNonNegative);
  v.number(o, path, "reliability2", kUnitInterval);
  v.boolean(o, path, "verified");
  v.string(o, path, "geolocation", true);
  v.number(o, path, "dph_total", kNonNegative);
  v.number(o, path, "storage_cost", kNonNegative);
  v.number(o, path, "dlperf", kNonNegative);

  auto from = v.number(o, path, kWindowFrom, kTimeH);
  auto until = v.number(o, path, kWindowUntil, kWindowEndH);
  if (from && until && !(*from < *until)) {
    v.fail(path, std::string(kWindowFrom) + " (" + format_number(*from) + ") must be < " +
                     kWindowUntil + " (" + format_number(*until) + ")");
  }
  out.listed_from_h = from.value_or(0);
  out.listed_until_h = until.value_or(0);

  parse_price_changes(v, o, path, out);
  parse_truth(v, o, path, version, out.truth);
  if (version >= 3) {
    // vast prices upload apart from download (an offer's `inet_up_cost`, $/GB): a proof goes up.
    v.number(o, path, "inet_up_cost", kNonNegative);
    out.contract_end_h = v.number(o, path, "contract_end_h", kTimeH);
    if (out.contract_end_h && from && !(*out.contract_end_h > *from)) {
      v.fail(child_path(path, "contract_end_h"),
             "must be after " + std::string(kWindowFrom) + " (" + format_number(*from) + ")");
    }
    parse_bid_market(v, o, path, out);
  }

  out.vast_json = o;
  out.vast_json.erase("truth");
  out.vast_json.erase("dph_changes");
  out.vast_json.erase("contract_end_h");
  out.vast_json.erase("bid_market");
  out.vast_json.erase(kWindowFrom);
  out.vast_json.erase(kWindowUntil);
  if (v.error_count() == errors_before) {
    auto offer = market::offer_from_vast_json(out.vast_json);
    if (offer) {
      out.offer = std::move(*offer);
    } else {
      v.fail(path, offer.error());
    }
  }
}

void parse_demand(Validator& v, const json& doc, Scenario& s) {
  const json* d = v.object(doc, "", "demand", {"arrivals", "deadline_min"});
  if (d == nullptr) return;
  Demand demand;
  demand.deadline_min = v.number(*d, "demand", "deadline_min", kPositiveMinutes).value_or(0);
  const json* arrivals = v.array(*d, "demand", "arrivals", kMaxDemandSegments);
  double expected_jobs = 0;
  if (arrivals != nullptr) {
    for (std::size_t i = 0; i < arrivals->size(); ++i) {
      const std::string at = index_path("demand.arrivals", i);
      if (!v.object_with_keys((*arrivals)[i], at, {"from_h", "to_h", "proofs_per_hour"})) continue;
      auto from = v.number((*arrivals)[i], at, "from_h", kTimeH);
      auto to = v.number((*arrivals)[i], at, "to_h", kTimeH);
      auto rate = v.number((*arrivals)[i], at, "proofs_per_hour", kProofRateDemand);
      if (!from || !to || !rate) continue;
      if (!(*from < *to)) {
        v.fail(at,
               "from_h (" + format_number(*from) + ") must be < to_h (" + format_number(*to) + ")");
        continue;
      }
      if (!demand.arrivals.empty() && *from < demand.arrivals.back().to_h) {
        v.fail(child_path(at, "from_h"), "must not be before the previous segment's to_h (" +
                                             format_number(demand.arrivals.back().to_h) +
                                             "): segments are in time order");
        continue;
      }
      // Only the part inside the horizon produces jobs.
      expected_jobs += *rate * std::max(0.0, std::min(*to, s.hours) - *from);
      demand.arrivals.push_back({*from, *to, *rate});
    }
  }
  if (expected_jobs > kMaxScenarioJobs) {
    v.fail("demand.arrivals", format_number(expected_jobs) +
                                  " jobs expected over the horizon, at most " +
                                  format_number(kMaxScenarioJobs));
  }
  s.demand = std::move(demand);
}

// /2: failures belong to the machine, so every offer of one machine must say the same.
void check_machine_failures(Validator& v, const Scenario& s) {
  std::map<std::int64_t, std::size_t> first_of_machine;
  for (std::size_t i = 0; i < s.offers.size(); ++i) {
    if (s.offers[i].offer.machine_id <= 0) continue;  // the offer itself was invalid
    const auto [it, inserted] = first_of_machine.emplace(s.offers[i].offer.machine_id, i);
    if (inserted) continue;
    const Failure& a = s.offers[it->second].truth.failure;
    const Failure& b = s.offers[i].truth.failure;
    const bool timed = a.kind == FailureKind::Crash || a.kind == FailureKind::Offline;
    if (a.kind != b.kind || (timed && a.after_h != b.after_h)) {
      v.fail(index_path("offers", i) + ".truth.failure",
             "must equal offers[" + std::to_string(it->second) + "]'s (same machine_id " +
                 std::to_string(s.offers[i].offer.machine_id) +
                 "): in /2 failures belong to the machine");
    }
  }
}

}  // namespace

const char* to_string(FailureKind kind) {
  switch (kind) {
    case FailureKind::None:
      return "none";
    case FailureKind::NeverBoots:
      return "never_boots";
    case FailureKind::Crash:
      return "crash";
    case FailureKind::Offline:
      return "offline";
  }
  return "none";
}

tl::expected<Scenario, std::string> parse_scenario(const json& doc) {
  // A different format is a different language: its other keys would only produce noise.
  int version = 1;
  if (doc.is_object() && doc.contains("format")) {
    const json& format = doc["format"];
    if (format == kScenarioFormatV2) {
      version = 2;
    } else if (format == kScenarioFormatV3) {
      version = 3;
    } else if (format != kScenarioFormat) {
      return tl::unexpected(std::string("format: expected \"") + kScenarioFormat + "\", \"" +
                            kScenarioFormatV2 + "\" or \"" + kScenarioFormatV3 + "\", got " +
                            (format.is_string() ? format.dump() : describe_json(format)));
    }
  }
  Validator v;
  const bool shaped =
      version >= 2
          ? v.object_with_keys(
                doc, "",
                {"format", "name", "seed", "hours", "economics", "params", "offers", "demand"})
          : v.object_with_keys(
                doc, "", {"format", "name", "seed", "hours", "economics", "params", "offers"});
  if (!shaped) return tl::unexpected(v.message());

  Scenario s;
  s.format_version = version;
  s.name = v.string(doc, "", "name", false).value_or("");
  s.seed = static_cast<std::uint64_t>(v.integer(doc, "", "seed", kNonNegative).value_or(0));
  s.hours = v.number(doc, "", "hours", kHours).value_or(0);

  // /2 replaces the demand cap with job arrivals: there the cap is optional and unused.
  const json* e =
      version >= 2
          ? v.object(doc, "", "economics", {"revenue_per_proof_usd", "target_cost_per_proof_usd"},
                     {"demand_proofs_per_hour"})
          : v.object(
                doc, "", "economics",
                {"revenue_per_proof_usd", "target_cost_per_proof_usd", "demand_proofs_per_hour"});
  if (e != nullptr) {
    s.economics.revenue_per_proof_usd =
        v.number(*e, "economics", "revenue_per_proof_usd", kMoney).value_or(0);
    s.economics.target_cost_per_proof_usd =
        v.number(*e, "economics", "target_cost_per_proof_usd", kPositiveMoney).value_or(0);
    if (e->contains("demand_proofs_per_hour") && !(*e)["demand_proofs_per_hour"].is_null()) {
      s.economics.demand_proofs_per_hour =
          v.number(*e, "economics", "demand_proofs_per_hour", kDemand);
    }
  }

  if (const json* p = v.object(doc, "", "params", {"bytes"})) {
    s.params_bytes =
        static_cast<double>(v.integer(*p, "params", "bytes", kParamsBytes).value_or(0));
  }

  if (doc.contains("offers")) {
    const json& offers = doc["offers"];
    if (!offers.is_array()) {
      v.fail("offers", "expected an array, got " + describe_json(offers));
    } else if (offers.size() > kMaxScenarioOffers) {
      v.fail("offers", std::to_string(offers.size()) + " offers, at most " +
                           std::to_string(kMaxScenarioOffers));
    } else {
      std::map<std::int64_t, std::size_t> index_of_id;
      s.offers.resize(offers.size());
      for (std::size_t i = 0; i < offers.size(); ++i) {
        const std::string path = index_path("offers", i);
        parse_offer(v, offers[i], path, version, s.offers[i]);
        const json& id =
            offers[i].is_object() && offers[i].contains("id") ? offers[i]["id"] : json();
        if (!id.is_number_integer()) continue;
        auto [it, inserted] = index_of_id.emplace(id.get<std::int64_t>(), i);
        if (!inserted) {
          v.fail(child_path(path, "id"), "duplicate offer id " + id.dump() + " (also offers[" +
                                             std::to_string(it->second) + "])");
        }
      }
    }
  }

  if (version >= 2) {
    parse_demand(v, doc, s);
    check_machine_failures(v, s);
  }

  if (!v.ok()) return tl::unexpected(v.message());
  return s;
}

tl::expected<Scenario, std::string> parse_scenario_text(std::string_view text) {
  auto doc = util::parse_json(text, kScenarioLimits);
  if (!doc) return tl::unexpected("invalid JSON: " + doc.error());
  return parse_scenario(*doc);
}

tl::expected<Scenario, std::string> load_scenario(const std::string& path) {
  // Checked before reading: the whole file is held in memory.
  auto text = util::read_bounded_file(path, kScenarioLimits.max_bytes);
  if (!text) return tl::unexpected(path + ": cannot read scenario file: " + text.error());
  auto scenario = parse_scenario_text(*text);
  if (!scenario) {
    const std::string& problems = scenario.error();
    if (problems.find('\n') == std::string::npos) return tl::unexpected(path + ": " + problems);
    std::string message = path + ": invalid scenario:";
    std::istringstream lines(problems);
    for (std::string line; std::getline(lines, line);) message += "\n  " + line;
    return tl::unexpected(message);
  }
  return scenario;
}

}  // namespace pf::scenario
