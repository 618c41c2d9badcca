#include "market_sim/market_sim.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "core/billing.h"
#include "core/text.h"
#include "market/market.h"
#include "market/query.h"
#include "scenario/json_text.h"
#include "scenario/offer_query.h"
#include "scenario/truth_model.h"
#include "util/bounded_json.h"

namespace pf::market_sim {
namespace {

using nlohmann::json;
using scenario::apply_search;
using scenario::describe_json;

ApiError invalid_args(const std::string& field, const std::string& problem) {
  return ApiError{400, "invalid_args", "Invalid args: " + field + ": " + problem};
}

ApiError no_such_instance(std::int64_t id) {
  return ApiError{404, "no_such_instance",
                  "error 404: no_such_instance Instance " + std::to_string(id) +
                      " does not exist or was destroyed."};
}

// Deterministic per-instance key: a double of the real thing, not a secret.
std::string make_instance_api_key(std::uint64_t seed, std::int64_t id) {
  std::uint64_t state = seed ^ (static_cast<std::uint64_t>(id) * 0x9E3779B97F4A7C15ULL);
  std::string key;
  for (int i = 0; i < 4; ++i) {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    char part[17];
    std::snprintf(part, sizeof part, "%016llx", static_cast<unsigned long long>(z));
    key += part;
  }
  return key;
}

constexpr std::string_view kRunTypes[] = {
    "ssh",           "ssh_proxy",      "ssh_direct",    "ssh_direc", "jupyter",
    "jupyter_proxy", "jupyter_direct", "jupyter_direc", "args"};

// vast-cli sends space-joined lists ("ssh_direc ssh_proxy"); every word must be a known type.
std::optional<std::string> unknown_runtype_word(const std::string& runtype) {
  std::size_t pos = 0;
  bool any = false;
  while (pos < runtype.size()) {
    std::size_t end = runtype.find(' ', pos);
    if (end == std::string::npos) end = runtype.size();
    std::string_view word(runtype.data() + pos, end - pos);
    if (!word.empty()) {
      any = true;
      if (std::find(std::begin(kRunTypes), std::end(kRunTypes), word) == std::end(kRunTypes)) {
        return std::string(word);
      }
    }
    pos = end + 1;
  }
  if (!any) return std::string();
  return std::nullopt;
}

// An optional body field: absent and null both mean "not given".
const json* optional_field(const json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

// Columns stored on the contract: the only ones GET /api/v1/instances/ can filter on.
constexpr std::string_view kFilterableColumns[] = {"id",
                                                   "machine_id",
                                                   "host_id",
                                                   "label",
                                                   "actual_status",
                                                   "intended_status",
                                                   "cur_state",
                                                   "next_state",
                                                   "gpu_name",
                                                   "verification",
                                                   "geolocation",
                                                   "image_uuid",
                                                   "image_runtype",
                                                   "template_hash_id"};

constexpr std::string_view kFilterOps[] = {"eq", "neq", "gt", "gte", "lt", "lte", "in", "notin"};

bool is_filterable(std::string_view column) {
  return std::find(std::begin(kFilterableColumns), std::end(kFilterableColumns), column) !=
         std::end(kFilterableColumns);
}

std::string filterable_list() {
  std::string out;
  for (auto column : kFilterableColumns) {
    if (!out.empty()) out += ", ";
    out += column;
  }
  return out;
}

// Numbers may arrive as strings ("numbers are sent as strings" in vast's query language).
std::optional<double> as_number(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return market::parse_query_number(v.get_ref<const std::string&>());
  return std::nullopt;
}

bool values_equal(const json& value, const json& operand) {
  if (value.is_number() || operand.is_number()) {
    auto a = as_number(value);
    auto b = as_number(operand);
    return a && b && *a == *b;
  }
  return value == operand;
}

// -1 / 0 / +1, or nullopt when the two values have no order.
std::optional<int> compare_values(const json& value, const json& operand) {
  if (value.is_number() || operand.is_number()) {
    auto a = as_number(value);
    auto b = as_number(operand);
    if (!a || !b) return std::nullopt;
    return *a < *b ? -1 : (*a > *b ? 1 : 0);
  }
  if (value.is_string() && operand.is_string()) {
    int c = value.get_ref<const std::string&>().compare(operand.get_ref<const std::string&>());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  return std::nullopt;
}

bool matches_op(const json& value, const std::string& op, const json& operand) {
  if (op == "eq") return values_equal(value, operand);
  if (op == "neq") return !values_equal(value, operand);
  if (op == "in" || op == "notin") {
    bool found = std::any_of(operand.begin(), operand.end(),
                             [&](const json& o) { return values_equal(value, o); });
    return op == "in" ? found : !found;
  }
  auto c = compare_values(value, operand);
  if (!c) return false;
  if (op == "gt") return *c > 0;
  if (op == "gte") return *c >= 0;
  if (op == "lt") return *c < 0;
  return *c <= 0;  // lte
}

ApiError bad_list_param(const std::string& name, const std::string& problem) {
  return ApiError{400, "invalid_args", "Invalid args: " + name + ": " + problem};
}

// Query parameters of /api/v1/instances/ are JSON-encoded; a bare word is taken as a string.
json decode_param(const std::string& text) {
  auto parsed = util::parse_json(text);
  if (!parsed) return json(text);
  return std::move(*parsed);
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

json ApiError::body() const {
  return json{{"success", false}, {"error", code}, {"msg", msg}};
}

MarketSim::MarketSim(Scenario scenario, MarketSimOptions options)
    : scenario_(std::move(scenario)),
      options_(options),
      renter_of_offer_(scenario_.offers.size()),
      next_instance_id_(options.first_instance_id) {
  for (std::size_t i = 0; i < scenario_.offers.size(); ++i) {
    offer_index_by_id_.emplace(scenario_.offers[i].offer.id, i);
  }
}

bool MarketSim::is_listed(std::size_t offer_index, double now_h) const {
  const ScenarioOffer& o = scenario_.offers[offer_index];
  return now_h >= o.listed_from_h && now_h < o.listed_until_h &&
         !(o.contract_end_h && now_h >= *o.contract_end_h) &&
         !renter_of_offer_[offer_index].has_value();
}

std::vector<json> MarketSim::listed_offers(double now_h) const {
  std::vector<json> out;
  for (std::size_t i = 0; i < scenario_.offers.size(); ++i) {
    if (!is_listed(i, now_h)) continue;
    const ScenarioOffer& o = scenario_.offers[i];
    json j = o.vast_json;
    j["dph_total"] = scenario::listed_dph(o, now_h);  // /2 dph_changes
    // What vast adds to every offer it serves; clients filter on these (the CLI's defaults).
    j.emplace("ask_contract_id", o.offer.id);
    j.emplace("rentable", true);
    j.emplace("rented", false);
    j.emplace("external", false);
    j.emplace("reliability", o.offer.reliability);
    j.emplace("verification", o.offer.verified ? "verified" : "unverified");
    // /3: the contract's end as vast shows it (epoch s), and the lowest bid it takes.
    if (o.contract_end_h) j["end_date"] = epoch_of(*o.contract_end_h);
    if (o.bid_market) j["min_bid"] = o.bid_market->min_bid;
    out.push_back(std::move(j));
  }
  return out;
}

ApiResult<json> MarketSim::search_offers(const json& query, double now_h) const {
  if (!query.is_object()) {
    return tl::unexpected(ApiError{
        400, "invalid_args",
        "Invalid args: the search query must be a JSON object, got " + describe_json(query)});
  }
  auto offers = apply_search(listed_offers(now_h), query);
  if (!offers)
    return tl::unexpected(ApiError{400, "invalid_args", "Invalid args: " + offers.error()});
  return json{{"offers", std::move(*offers)}};
}

namespace {

// A create's or a bid change's `price`, as vast takes it: a number in [0.001, 128] $/hour
// (market::kMinBidPrice..kMaxBidPrice).
ApiResult<double> bid_price(const json* price) {
  if (price == nullptr || !price->is_number() ||
      !(price->get<double>() >= market::kMinBidPrice &&
        price->get<double>() <= market::kMaxBidPrice)) {
    return tl::unexpected(
        ApiError{400, "invalid_price",
                 "Invalid args: price: must be a number in [0.001, 128] $/hr, got " +
                     (price == nullptr ? std::string("nothing") : describe_json(*price))});
  }
  return price->get<double>();
}

}  // namespace

ApiResult<json> MarketSim::create_instance(std::int64_t ask_id, const json& body, double now_h) {
  if (!body.is_object()) {
    return tl::unexpected(ApiError{
        400, "invalid_args",
        "Invalid args: the request body must be a JSON object, got " + describe_json(body)});
  }
  SimInstance inst;

  const bool has_template = optional_field(body, "template_hash_id") != nullptr;
  if (const json* image = optional_field(body, "image")) {
    if (!image->is_string() || image->get_ref<const std::string&>().empty()) {
      return tl::unexpected(
          invalid_args("image", "expected a non-empty string, got " + describe_json(*image)));
    }
    inst.image = image->get<std::string>();
  } else if (!has_template) {
    return tl::unexpected(invalid_args("image", "required (or template_hash_id)"));
  }

  if (const json* disk = optional_field(body, "disk")) {
    if (!disk->is_number() || !std::isfinite(disk->get<double>())) {
      return tl::unexpected(invalid_args("disk", "expected a number, got " + describe_json(*disk)));
    }
    if (disk->get<double>() < kMinDiskGb) {
      return tl::unexpected(invalid_args("disk", "must be >= 8 (GB), got " + disk->dump()));
    }
    inst.disk_gb = disk->get<double>();
  }

  if (const json* label = optional_field(body, "label")) {
    if (!label->is_string()) {
      return tl::unexpected(
          invalid_args("label", "expected a string, got " + describe_json(*label)));
    }
    if (label->get_ref<const std::string&>().size() > kMaxLabelChars) {
      return tl::unexpected(invalid_args(
          "label", "longer than 256 characters (" +
                       std::to_string(label->get_ref<const std::string&>().size()) + ")"));
    }
    inst.label = label->get<std::string>();
  }

  if (const json* env = optional_field(body, "env")) {
    if (!env->is_object()) {
      return tl::unexpected(invalid_args(
          "env", "expected a JSON object like {\"KEY\": \"value\"}, got " + describe_json(*env)));
    }
    std::size_t total = 0;
    for (const auto& [key, value] : env->items()) {
      if (!value.is_string()) {
        return tl::unexpected(
            invalid_args("env." + key, "expected a string, got " + describe_json(value)));
      }
      std::size_t entry = key.size() + value.get_ref<const std::string&>().size();
      if (entry > 256) {
        return tl::unexpected(invalid_args(
            "env." + key, "entry longer than 256 characters (" + std::to_string(entry) + ")"));
      }
      total += entry;
    }
    if (total > 32768) {
      return tl::unexpected(invalid_args(
          "env", "entries longer than 32768 characters together (" + std::to_string(total) + ")"));
    }
    inst.env = *env;
  }

  std::size_t script_chars = 0;
  if (const json* onstart = optional_field(body, "onstart")) {
    if (!onstart->is_string()) {
      return tl::unexpected(
          invalid_args("onstart", "expected a string, got " + describe_json(*onstart)));
    }
    inst.onstart = onstart->get<std::string>();
    script_chars += inst.onstart.size();
  }
  if (const json* args = optional_field(body, "args")) {
    if (!args->is_array() ||
        !std::all_of(args->begin(), args->end(), [](const json& a) { return a.is_string(); })) {
      return tl::unexpected(
          invalid_args("args", "expected a list of strings, got " + describe_json(*args)));
    }
    for (const auto& a : *args) script_chars += a.get_ref<const std::string&>().size();
    inst.args = *args;
  }
  if (const json* args_str = optional_field(body, "args_str")) {
    if (!args_str->is_string()) {
      return tl::unexpected(
          invalid_args("args_str", "expected a string, got " + describe_json(*args_str)));
    }
    script_chars += args_str->get_ref<const std::string&>().size();
  }
  if (script_chars > 4096) {
    return tl::unexpected(invalid_args("onstart",
                                       "args + args_str + onstart longer than 4096 "
                                       "characters (" +
                                           std::to_string(script_chars) + ")"));
  }

  inst.runtype = inst.args.is_array() ? "args" : "ssh";
  if (const json* runtype = optional_field(body, "runtype")) {
    if (!runtype->is_string()) {
      return tl::unexpected(
          invalid_args("runtype", "expected a string, got " + describe_json(*runtype)));
    }
    if (auto bad = unknown_runtype_word(runtype->get<std::string>())) {
      return tl::unexpected(invalid_args(
          "runtype", "unknown run type \"" + *bad +
                         "\" (expected ssh, ssh_proxy, ssh_direct, jupyter, jupyter_proxy, "
                         "jupyter_direct or args)"));
    }
    inst.runtype = runtype->get<std::string>();
  }

  if (const json* price = optional_field(body, "price")) {
    auto bid = bid_price(price);
    if (!bid) return tl::unexpected(bid.error());
    inst.is_bid = true;  // presence alone makes the instance interruptible, as on vast
    inst.bids.emplace_back(now_h, *bid);
  }

  bool start_stopped = false;
  if (const json* target = optional_field(body, "target_state")) {
    if (*target != "running" && *target != "stopped") {
      return tl::unexpected(invalid_args(
          "target_state", "expected \"running\" or \"stopped\", got " + describe_json(*target)));
    }
    start_stopped = *target == "stopped";
  }

  auto found = offer_index_by_id_.find(ask_id);
  if (found == offer_index_by_id_.end() || !is_listed(found->second, now_h)) {
    return tl::unexpected(ApiError{404, "no_such_ask",
                                   "error 404/3603: no_such_ask Instance type by id " +
                                       std::to_string(ask_id) + " is not available."});
  }
  const ScenarioOffer& offer = scenario_.offers[found->second];
  if (offer.offer.disk_space_gb > 0 && inst.disk_gb > offer.offer.disk_space_gb) {
    return tl::unexpected(invalid_args(
        "disk", std::to_string(inst.disk_gb) + " GB exceeds the offer's disk_space of " +
                    std::to_string(offer.offer.disk_space_gb) + " GB"));
  }

  inst.id = next_instance_id_++;
  inst.offer_index = found->second;
  inst.created_h = now_h;
  inst.dph = scenario::listed_dph(offer, now_h);
  inst.api_key = make_instance_api_key(scenario_.seed, inst.id);
  if (start_stopped) inst.stopped.emplace_back(now_h, kNever);
  renter_of_offer_[inst.offer_index] = inst.id;
  json reply{{"success", true}, {"new_contract", inst.id}, {"instance_api_key", inst.api_key}};
  if (inst.is_bid && offer.bid_market && inst.bids.front().second < offer.bid_market->min_bid) {
    // vast creates an under-priced bid anyway, stopped (it never outbids anyone), and answers
    // with a failure that still names the new contract (dstack's vastai backend found this and
    // destroys it: it bills storage). The words of the real reply are not documented.
    reply = json{{"success", false},
                 {"error", "bid_too_low"},
                 {"msg", "bid " + core::fixed(inst.bids.front().second, 3) +
                             " $/hr is below this offer's min_bid " +
                             core::fixed(offer.bid_market->min_bid, 3) +
                             ": the instance is created stopped"},
                 {"new_contract", inst.id}};
  }
  instances_.emplace(inst.id, std::move(inst));
  return reply;
}

const MarketSim::SimInstance* MarketSim::find_live(std::int64_t id) const {
  auto it = instances_.find(id);
  if (it == instances_.end() || it->second.destroyed_h) return nullptr;
  return &it->second;
}

MarketSim::SimInstance* MarketSim::find_live(std::int64_t id) {
  return const_cast<SimInstance*>(std::as_const(*this).find_live(id));
}

double MarketSim::timeline_h(const SimInstance& inst, double scenario::RentalTimeline::*at) const {
  const scenario::RentalTimeline t =
      scenario::rental_timeline(scenario_.offers[inst.offer_index].truth, scenario_.params_bytes);
  return t.*at >= scenario::kNeverS ? kNever : inst.created_h + t.*at / 3600;
}

double MarketSim::boot_h(const SimInstance& inst) const {
  return timeline_h(inst, &scenario::RentalTimeline::boot_s);
}

double MarketSim::exit_h(const SimInstance& inst) const {
  return timeline_h(inst, &scenario::RentalTimeline::exit_s);
}

double MarketSim::offline_h(const SimInstance& inst) const {
  return timeline_h(inst, &scenario::RentalTimeline::offline_s);
}

int MarketSim::co_tenants(std::int64_t id) const {
  const SimInstance* inst = find_live(id);
  if (inst == nullptr) return 0;
  const std::int64_t machine = scenario_.offers[inst->offer_index].offer.machine_id;
  int n = 0;
  for (const auto& [other_id, other] : instances_) {
    if (other_id == id || other.destroyed_h) continue;
    if (scenario_.offers[other.offer_index].offer.machine_id == machine) ++n;
  }
  return n;
}

bool MarketSim::stopped_at(const SimInstance& inst, double t) const {
  return std::any_of(inst.stopped.begin(), inst.stopped.end(),
                     [t](const auto& period) { return t >= period.first && t < period.second; });
}

std::optional<MarketSim::MarketStop> MarketSim::market_stop_at(const SimInstance& inst,
                                                               double t) const {
  return scenario::market_stop_at(scenario_.offers[inst.offer_index], inst.bids, t);
}

std::vector<std::pair<double, double>> MarketSim::market_stops(const SimInstance& inst,
                                                               double until) const {
  return scenario::market_stop_periods(scenario_.offers[inst.offer_index], inst.bids,
                                       inst.created_h, until);
}

bool MarketSim::container_stopped(std::int64_t id, double now_h) const {
  const SimInstance* inst = find_live(id);
  if (inst == nullptr) return false;
  const double t = std::max(now_h, inst->created_h);
  return stopped_at(*inst, t) || market_stop_at(*inst, t).has_value();
}

std::string MarketSim::actual_status(const SimInstance& inst, double now_h) const {
  const double t = std::max(now_h, inst.created_h);
  if (t >= offline_h(inst)) return "offline";
  if (stopped_at(inst, t) || market_stop_at(inst, t)) return "stopped";
  if (t >= exit_h(inst)) return "exited";
  if (t >= boot_h(inst)) return "running";
  return "loading";
}

double MarketSim::billed_hours(const SimInstance& inst, double now_h) const {
  const double start = boot_h(inst);
  const double end = std::min({now_h, inst.destroyed_h.value_or(kNever), offline_h(inst)});
  if (!(end > start)) return 0;
  // Compute is billed while it runs: not while the client or the market has it stopped (the
  // two may overlap: their union is taken once).
  std::vector<std::pair<double, double>> stops = inst.stopped;
  for (const auto& p : market_stops(inst, end)) stops.push_back(p);
  std::sort(stops.begin(), stops.end());
  double hours = end - start;
  double covered_to = start;
  for (const auto& [from, until] : stops) {
    const double a = std::max(from, covered_to);
    const double b = std::min(until, end);
    if (b > a) hours -= b - a;
    covered_to = std::max(covered_to, std::min(until, end));
  }
  return std::max(0.0, hours);
}

// As vast bills (core/billing.h): compute while running, storage of the rented disk from
// creation until destroyed in every state but offline (loading and stopped included). The
// listed dph_total prices the disk rented (search's allocated_storage), so compute is the rest.
double MarketSim::storage_hours(const SimInstance& inst, double now_h) const {
  const double end = std::min({now_h, inst.destroyed_h.value_or(kNever), offline_h(inst)});
  return std::max(0.0, end - inst.created_h);
}

double MarketSim::spent_usd(double now_h) const {
  double total = 0;
  for (const auto& [id, inst] : instances_) {
    core::Offer priced = scenario_.offers[inst.offer_index].offer;
    priced.dph_total = inst.dph;
    total += storage_hours(inst, now_h) * core::storage_usd_per_hour(priced, inst.disk_gb);
    if (inst.bids.empty()) {
      total += billed_hours(inst, now_h) * core::compute_usd_per_hour(priced, inst.disk_gb);
      continue;
    }
    // Each bid for the compute hours billed while it stood.
    for (std::size_t i = 0; i < inst.bids.size(); ++i) {
      const double from = std::min(inst.bids[i].first, now_h);
      const double until =
          i + 1 < inst.bids.size() ? std::min(inst.bids[i + 1].first, now_h) : now_h;
      total += (billed_hours(inst, until) - billed_hours(inst, from)) * inst.bids[i].second;
    }
  }
  return total;
}

std::size_t MarketSim::live_instances() const {
  return static_cast<std::size_t>(std::count_if(
      instances_.begin(), instances_.end(), [](const auto& e) { return !e.second.destroyed_h; }));
}

json MarketSim::instance_json(const SimInstance& inst, double now_h) const {
  const ScenarioOffer& offer = scenario_.offers[inst.offer_index];
  const json& v = offer.vast_json;
  const std::string status = actual_status(inst, now_h);
  const double t = std::max(now_h, inst.created_h);
  const auto market_stop = market_stop_at(inst, t);
  // Outbid, vast reads all three states "stopped" (how dstack tells a preemption).
  const std::string intended = stopped_at(inst, t) || market_stop ? "stopped" : "running";
  std::string status_msg;
  if (status == "loading") status_msg = "Loading image " + inst.image;
  if (status == "running") status_msg = "success, running " + inst.image;
  if (status == "exited") status_msg = "container exited with status 1";
  if (status == "offline") status_msg = "host offline: no heartbeat";
  if (status == "stopped") status_msg = "stopped by request";
  if (status == "stopped" && market_stop == MarketStop::Outbid)
    status_msg = "outbid: a higher bid has this machine";
  if (status == "stopped" && market_stop == MarketStop::ContractEnded)
    status_msg = "the host's contract for this machine ended";

  json extra_env = json::array();
  for (const auto& [key, value] : inst.env.items()) extra_env.push_back(json::array({key, value}));

  return json{
      {"id", inst.id},
      {"machine_id", v.at("machine_id")},
      {"host_id", v.at("host_id")},
      {"label", inst.label ? json(*inst.label) : json(nullptr)},
      {"actual_status", status},
      {"intended_status", intended},
      {"cur_state", intended},
      {"next_state", intended},
      {"status_msg", status_msg},
      {"gpu_name", v.at("gpu_name")},
      {"num_gpus", v.at("num_gpus")},
      {"gpu_ram", v.at("gpu_ram")},
      {"gpu_totalram", v.at("gpu_total_ram")},
      {"cpu_name", v.at("cpu_name")},
      {"cpu_cores", v.at("cpu_cores")},
      {"cpu_cores_effective", v.at("cpu_cores_effective")},
      {"cpu_ram", v.at("cpu_ram")},
      {"disk_space", inst.disk_gb},
      {"inet_up", v.at("inet_up")},
      {"inet_down", v.at("inet_down")},
      {"inet_down_cost", v.at("inet_down_cost")},
      {"inet_up_cost", v.value("inet_up_cost", 0.0)},  // /3 only; free where not written
      {"pcie_bw", v.at("pcie_bw")},
      {"pci_gen", v.at("pci_gen")},
      {"cuda_max_good", v.at("cuda_max_good")},
      {"compute_cap", v.at("compute_cap")},
      {"dph_total", inst.dph},
      {"storage_cost", v.at("storage_cost")},
      {"is_bid", inst.is_bid},
      {"start_date", epoch_of(inst.created_h)},
      {"end_date", offer.contract_end_h ? json(epoch_of(*offer.contract_end_h)) : json(nullptr)},
      {"uptime_mins", billed_hours(inst, now_h) * 60.0},
      {"reliability2", v.at("reliability2")},
      {"verification", offer.offer.verified ? "verified" : "unverified"},
      {"geolocation", v.at("geolocation")},
      {"image_uuid", inst.image},
      {"image_args", inst.args.is_array() ? inst.args : json::array()},
      {"image_runtype", inst.runtype},
      {"extra_env", std::move(extra_env)},
      {"onstart", inst.onstart},
      {"template_hash_id", nullptr},
      // Nothing real runs behind a simulated instance: there is nothing to connect to.
      {"public_ipaddr", nullptr},
      {"ssh_host", nullptr},
      {"ssh_port", nullptr},
      {"ports", nullptr},
  };
}

ApiResult<json> MarketSim::list_instances(const std::map<std::string, std::string>& params,
                                          double now_h) const {
  int limit = kMaxInstancesPerPage;
  if (auto it = params.find("limit"); it != params.end()) {
    json value = decode_param(it->second);
    std::optional<std::int64_t> n;
    if (value.is_number_integer()) n = value.get<std::int64_t>();
    if (value.is_string()) n = parse_int(value.get_ref<const std::string&>());
    if (!n || *n < 1) {
      return tl::unexpected(
          bad_list_param("limit", "expected a positive integer, got " + describe_json(value)));
    }
    limit = static_cast<int>(std::min<std::int64_t>(*n, kMaxInstancesPerPage));
  }

  bool descending = false;
  if (auto it = params.find("order_by"); it != params.end()) {
    json order = decode_param(it->second);
    if (!order.is_array()) {
      return tl::unexpected(bad_list_param(
          "order_by",
          "expected a list like [{\"col\":\"id\",\"dir\":\"asc\"}], got " + describe_json(order)));
    }
    for (const json& term : order) {
      if (!term.is_object() || term.value("col", json()) != "id") {
        return tl::unexpected(
            bad_list_param("order_by", "market-sim orders by col \"id\" only, got " + term.dump()));
      }
      json dir = term.value("dir", json("asc"));
      if (dir != "asc" && dir != "desc") {
        return tl::unexpected(
            bad_list_param("order_by", "dir must be \"asc\" or \"desc\", got " + dir.dump()));
      }
      descending = dir == "desc";
    }
  }

  std::optional<std::int64_t> after;
  if (auto it = params.find("after_token"); it != params.end()) {
    json token = decode_param(it->second);
    if (token.is_number_integer()) after = token.get<std::int64_t>();
    if (token.is_string()) after = parse_int(token.get_ref<const std::string&>());
    if (!after && !token.is_null()) {
      return tl::unexpected(
          bad_list_param("after_token", "not a token this server issued: " + describe_json(token)));
    }
  }

  json filters = json::object();
  if (auto it = params.find("select_filters"); it != params.end()) {
    filters = decode_param(it->second);
    if (!filters.is_object()) {
      return tl::unexpected(bad_list_param(
          "select_filters",
          "expected a JSON object like {\"label\":{\"eq\":\"x\"}}, got " + describe_json(filters)));
    }
    for (const auto& [column, condition] : filters.items()) {
      if (!is_filterable(column)) {
        return tl::unexpected(bad_list_param(
            "select_filters", "cannot filter on \"" + column +
                                  "\": only columns stored on the contract can be filtered (" +
                                  filterable_list() + ")"));
      }
      if (!condition.is_object()) {
        return tl::unexpected(
            bad_list_param("select_filters." + column,
                           "expected {\"<op>\": value}, got " + describe_json(condition)));
      }
      for (const auto& [op, operand] : condition.items()) {
        if (std::find(std::begin(kFilterOps), std::end(kFilterOps), op) == std::end(kFilterOps)) {
          return tl::unexpected(bad_list_param(
              "select_filters." + column,
              "unknown operator \"" + op + "\" (expected eq, neq, gt, gte, lt, lte, in, notin)"));
        }
        if ((op == "in" || op == "notin") && !operand.is_array()) {
          return tl::unexpected(bad_list_param("select_filters." + column + "." + op,
                                               "expected a list, got " + describe_json(operand)));
        }
      }
    }
  }

  json label_counts = json::object();
  std::vector<json> matching;
  for (const auto& [id, inst] : instances_) {
    if (inst.destroyed_h) continue;
    if (inst.label) {
      json& count = label_counts[*inst.label];
      count = count.is_null() ? 1 : count.get<int>() + 1;
    }
    json record = instance_json(inst, now_h);
    bool keep = true;
    for (const auto& [column, condition] : filters.items()) {
      const json& value = record.contains(column) ? record[column] : json();
      for (const auto& [op, operand] : condition.items()) {
        keep = keep && matches_op(value, op, operand);
      }
    }
    if (keep) matching.push_back(std::move(record));
  }
  if (descending) std::reverse(matching.begin(), matching.end());

  auto first = matching.begin();
  if (after) {
    first = std::find_if(matching.begin(), matching.end(), [&](const json& r) {
      auto id = r["id"].get<std::int64_t>();
      return descending ? id < *after : id > *after;
    });
  }
  const auto remaining = static_cast<std::size_t>(std::distance(first, matching.end()));
  const std::size_t page_size = std::min(remaining, static_cast<std::size_t>(limit));
  json page = json::array();
  for (auto it = first; it != first + static_cast<std::ptrdiff_t>(page_size); ++it) {
    page.push_back(std::move(*it));
  }
  json next_token = nullptr;
  if (remaining > page_size) next_token = std::to_string(page.back()["id"].get<std::int64_t>());

  return json{{"success", true},
              {"instances_found", page.size()},
              {"total_instances", matching.size()},
              {"label_counts", std::move(label_counts)},
              {"next_token", std::move(next_token)},
              {"instances", std::move(page)}};
}

std::optional<InstanceLaunch> MarketSim::launch(std::int64_t id) const {
  const SimInstance* inst = find_live(id);
  if (inst == nullptr) return std::nullopt;
  InstanceLaunch l;
  l.id = inst->id;
  l.offer_index = inst->offer_index;
  l.created_h = inst->created_h;
  l.boot_h = boot_h(*inst);
  l.failure_h = std::min(exit_h(*inst), offline_h(*inst));
  const std::int64_t machine = scenario_.offers[inst->offer_index].offer.machine_id;
  for (const auto& [other_id, other] : instances_) {
    if (other_id == id || other.destroyed_h || other.created_h > inst->created_h) continue;
    if (scenario_.offers[other.offer_index].offer.machine_id == machine) ++l.co_tenants;
  }
  l.onstart = inst->onstart;
  l.env = inst->env;
  return l;
}

std::vector<std::size_t> MarketSim::rented_offer_indices() const {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < renter_of_offer_.size(); ++i) {
    if (renter_of_offer_[i]) out.push_back(i);
  }
  return out;
}

json MarketSim::show_instance(std::int64_t id, double now_h) const {
  const SimInstance* inst = find_live(id);
  if (inst == nullptr) return json{{"instances", nullptr}};
  return json{{"instances", instance_json(*inst, now_h)}};
}

ApiResult<json> MarketSim::change_bid(std::int64_t id, const json& body, double now_h) {
  SimInstance* inst = find_live(id);
  if (inst == nullptr) return tl::unexpected(no_such_instance(id));
  auto bid = bid_price(body.is_object() ? optional_field(body, "price") : nullptr);
  if (!bid) return tl::unexpected(bid.error());
  if (!inst->is_bid) {
    return tl::unexpected(invalid_args(
        "price", "instance " + std::to_string(id) + " is on-demand: there is no bid to change"));
  }
  inst->bids.emplace_back(now_h, *bid);
  return json{{"success", true}};
}

ApiResult<json> MarketSim::update_instance(std::int64_t id, const json& body, double now_h) {
  SimInstance* inst = find_live(id);
  if (inst == nullptr) return tl::unexpected(no_such_instance(id));
  if (!body.is_object()) {
    return tl::unexpected(ApiError{
        400, "invalid_args",
        "Invalid args: the request body must be a JSON object, got " + describe_json(body)});
  }
  const bool has_label = body.contains("label");
  const bool has_state = body.contains("state");
  if (!has_label && !has_state) {
    return tl::unexpected(ApiError{
        400, "invalid_args", "Invalid args: expected \"label\" and/or \"state\" in the body"});
  }
  if (has_label) {
    const json& label = body["label"];
    if (!label.is_string() && !label.is_null()) {
      return tl::unexpected(
          invalid_args("label", "expected a string, got " + describe_json(label)));
    }
    if (label.is_string() && label.get_ref<const std::string&>().size() > kMaxLabelChars) {
      return tl::unexpected(ApiError{
          400, "label_too_long",
          "label_too_long: label is " + std::to_string(label.get_ref<const std::string&>().size()) +
              " characters, at most 256 are allowed"});
    }
  }
  if (has_state && body["state"] != "stopped" && body["state"] != "running") {
    return tl::unexpected(invalid_args(
        "state", "expected \"running\" or \"stopped\", got " + describe_json(body["state"])));
  }

  if (has_label) {
    const json& label = body["label"];
    inst->label = label.is_null() ? std::nullopt : std::optional(label.get<std::string>());
  }
  if (has_state) {
    const double t = std::max(now_h, inst->created_h);
    const bool stopped_now = !inst->stopped.empty() && inst->stopped.back().second == kNever;
    if (body["state"] == "stopped" && !stopped_now) inst->stopped.emplace_back(t, kNever);
    if (body["state"] == "running" && stopped_now) {
      inst->stopped.back().second = std::max(t, inst->stopped.back().first);
    }
  }
  return json{{"success", true}};
}

ApiResult<json> MarketSim::destroy_instance(std::int64_t id, double now_h) {
  SimInstance* inst = find_live(id);
  if (inst == nullptr) return tl::unexpected(no_such_instance(id));
  const double t = std::max(now_h, inst->created_h);
  inst->destroyed_h = t;
  if (!inst->stopped.empty() && inst->stopped.back().second == kNever) {
    inst->stopped.back().second = std::max(t, inst->stopped.back().first);
  }
  renter_of_offer_[inst->offer_index].reset();
  return json{{"success", true}};
}

json MarketSim::current_user(double now_h) const {
  const double balance = balance_usd(now_h);
  return json{{"id", 1},
              {"username", "market-sim"},
              {"email", "market-sim@localhost"},
              {"credit", balance},
              {"balance", balance},
              {"balance_threshold", 0},
              {"balance_threshold_enabled", false},
              {"can_pay", balance > 0},
              {"has_billing", true}};
}

}  // namespace pf::market_sim
