#include "market/offer_json.h"

#include <cmath>

namespace pf::market {
namespace {

using nlohmann::json;

// Reads a numeric field; null, absent, NaN or non-numeric gives `fallback` and a flag.
double num(const json& j, const char* key, core::Offer& o, double fallback = 0) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (it->is_number()) {
    double v = it->get<double>();
    if (std::isfinite(v)) return v;
  }
  if (it->is_string()) {
    // Some vendors stringify numbers; accept a clean number, flag anything else.
    try {
      std::size_t used = 0;
      const auto& s = it->get_ref<const std::string&>();
      double v = std::stod(s, &used);
      if (used == s.size() && std::isfinite(v)) return v;
    } catch (const std::exception&) {
    }
  }
  o.data_flags.push_back(std::string(key) + " is not a number: ignored");
  return fallback;
}

// A whole-number field (ids, counts) in [min, max]; anything else gives 0 and a flag. A float
// beyond the integer type's range must not be cast (undefined behaviour; seen by the fuzzer
// as machine_id 1e200).
std::int64_t whole(const json& j, const char* key, core::Offer& o, double min, double max) {
  if (j.find(key) == j.end() || j.at(key).is_null()) return 0;
  const double v = num(j, key, o);
  if (v >= min && v <= max && v == std::floor(v)) return static_cast<std::int64_t>(v);
  o.data_flags.push_back(std::string(key) + " is out of range: ignored");
  return 0;
}
constexpr double kMaxId = 9e15;  // ids are exact in a double only up to 2^53
constexpr double kMaxSmallCount = 1e6;

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

bool boolean(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number()) return it->get<double>() != 0;
  return false;
}

}  // namespace

tl::expected<core::Offer, std::string> offer_from_vast_json(const json& j) {
  if (!j.is_object()) return tl::unexpected(std::string("offer is not a JSON object"));
  core::Offer o;
  auto id = j.find("id");
  if (id == j.end() || !id->is_number_integer() || id->get<std::int64_t>() <= 0) {
    return tl::unexpected(std::string("offer has no numeric \"id\""));
  }
  o.id = id->get<std::int64_t>();
  o.machine_id = whole(j, "machine_id", o, 0, kMaxId);
  o.host_id = whole(j, "host_id", o, 0, kMaxId);
  o.gpu_name = str(j, "gpu_name");
  o.num_gpus = static_cast<int>(whole(j, "num_gpus", o, 0, kMaxSmallCount));
  o.gpu_ram_gib = num(j, "gpu_ram", o) / kMiBPerGiB;
  o.gpu_total_ram_gib = num(j, "gpu_total_ram", o) / kMiBPerGiB;
  if (o.gpu_total_ram_gib <= 0 && o.num_gpus > 0) o.gpu_total_ram_gib = o.gpu_ram_gib * o.num_gpus;
  o.cpu_name = str(j, "cpu_name");
  o.cpu_cores = num(j, "cpu_cores", o);
  o.cpu_cores_effective = num(j, "cpu_cores_effective", o);
  o.cpu_ram_gib = num(j, "cpu_ram", o) / kMiBPerGiB;
  o.pcie_bw_gbs = num(j, "pcie_bw", o);
  o.pci_gen = static_cast<int>(whole(j, "pci_gen", o, 0, kMaxSmallCount));
  o.inet_down_mbps = num(j, "inet_down", o);
  o.inet_up_mbps = num(j, "inet_up", o);
  o.inet_down_cost_per_gb = num(j, "inet_down_cost", o);
  o.inet_up_cost_per_gb = num(j, "inet_up_cost", o);
  o.disk_space_gb = num(j, "disk_space", o);
  o.cuda_max_good = num(j, "cuda_max_good", o);
  o.compute_cap = static_cast<int>(whole(j, "compute_cap", o, 0, kMaxSmallCount));
  // reliability2 is the current score; older responses only carry reliability.
  o.reliability = j.contains("reliability2") && j["reliability2"].is_number()
                      ? num(j, "reliability2", o)
                      : num(j, "reliability", o);
  o.verified = boolean(j, "verified");
  if (!o.verified && str(j, "verification") == "verified") o.verified = true;
  o.geolocation = str(j, "geolocation");
  o.dph_total = num(j, "dph_total", o);
  o.dph_base = num(j, "dph_base", o);
  o.storage_cost_gb_month = num(j, "storage_cost", o);
  o.storage_total_cost_per_hour = num(j, "storage_total_cost", o);
  o.dlperf = num(j, "dlperf", o);
  o.end_date = num(j, "end_date", o);
  o.min_bid = num(j, "min_bid", o);
  core::derive_offer_fields(o);
  return o;
}

json offer_to_vast_json(const core::Offer& o) {
  json out{
      {"id", o.id},
      {"ask_contract_id", o.id},
      {"machine_id", o.machine_id},
      {"host_id", o.host_id},
      {"gpu_name", o.gpu_name},
      {"num_gpus", o.num_gpus},
      {"gpu_ram", o.gpu_ram_gib * kMiBPerGiB},
      {"gpu_total_ram", o.gpu_total_ram_gib * kMiBPerGiB},
      {"cpu_name", o.cpu_name},
      {"cpu_cores", o.cpu_cores},
      {"cpu_cores_effective", o.cpu_cores_effective},
      {"cpu_ram", o.cpu_ram_gib * kMiBPerGiB},
      {"pcie_bw", o.pcie_bw_gbs},
      {"pci_gen", o.pci_gen},
      {"inet_down", o.inet_down_mbps},
      {"inet_up", o.inet_up_mbps},
      {"inet_down_cost", o.inet_down_cost_per_gb},
      {"inet_up_cost", o.inet_up_cost_per_gb},
      {"disk_space", o.disk_space_gb},
      {"cuda_max_good", o.cuda_max_good},
      {"compute_cap", o.compute_cap},
      {"reliability", o.reliability},
      {"reliability2", o.reliability},
      {"verified", o.verified},
      {"verification", o.verified ? "verified" : "unverified"},
      {"geolocation", o.geolocation},
      {"dph_total", o.dph_total},
      {"dph_base", o.dph_base},
      {"storage_cost", o.storage_cost_gb_month},
      {"storage_total_cost", o.storage_total_cost_per_hour},
      {"dlperf", o.dlperf},
      {"rentable", true},
      {"rented", false},
      {"external", false},
  };
  if (o.end_date > 0) out["end_date"] = o.end_date;
  if (o.min_bid > 0) out["min_bid"] = o.min_bid;
  return out;
}

}  // namespace pf::market
