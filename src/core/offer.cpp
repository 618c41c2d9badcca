#include "core/offer.h"

#include <algorithm>
#include <string>
#include <utility>

namespace pf::core {
namespace {
void flag(Offer& o, std::string note) {
  if (std::find(o.data_flags.begin(), o.data_flags.end(), note) == o.data_flags.end()) {
    o.data_flags.push_back(std::move(note));
  }
}
}  // namespace

double within_contract_h(const Offer& offer, double lifetime_h, double now) {
  if (!(offer.end_date > 0) || !(now > 0)) return lifetime_h;
  return std::min(lifetime_h, std::max(0.0, (offer.end_date - now) / 3600));
}

void derive_offer_fields(Offer& o) {
  // Vast allocates RAM in proportion to the offer's GPU share and advertises that share in
  // cpu_ram; the container's real limit may still be lower (the agent measures it).
  o.usable_ram_gib = o.cpu_ram_gib > 0 ? o.cpu_ram_gib : 0;
  if (o.cpu_ram_gib <= 0) flag(o, "cpu_ram missing: memory unknown, partitions assumed 1");

  if (o.cpu_cores_effective > 0) {
    o.usable_cores = o.cpu_cores_effective;
    if (o.cpu_cores > 0 && o.cpu_cores_effective > o.cpu_cores) {
      flag(o, "cpu_cores_effective exceeds cpu_cores: using cpu_cores");
      o.usable_cores = o.cpu_cores;
    }
  } else if (o.cpu_cores > 0) {
    o.usable_cores = o.cpu_cores;
    flag(o, "cpu_cores_effective missing: using whole-machine cpu_cores");
  } else {
    o.usable_cores = 0;
    flag(o, "cpu_cores missing: core count unknown");
  }
  if (o.num_gpus <= 0) flag(o, "num_gpus missing: assuming 1");
  if (o.gpu_name.empty()) flag(o, "gpu_name missing");
  if (o.dph_total <= 0) flag(o, "dph_total missing: price unknown");
  if (o.end_date < 0) {
    flag(o, "end_date negative: contract end unknown");
    o.end_date = 0;
  }
  // A price below zero would bill negative money (core/billing.h): read as unknown (0).
  for (auto [field, name] : {std::pair{&o.dph_base, "dph_base"}, std::pair{&o.min_bid, "min_bid"},
                             std::pair{&o.storage_cost_gb_month, "storage_cost"},
                             std::pair{&o.storage_total_cost_per_hour, "storage_total_cost"},
                             std::pair{&o.inet_down_cost_per_gb, "inet_down_cost"},
                             std::pair{&o.inet_up_cost_per_gb, "inet_up_cost"}}) {
    if (*field < 0) {
      *field = 0;
      flag(o, std::string(name) + " is negative: read as 0");
    }
  }
  if (o.inet_down_mbps <= 0) flag(o, "inet_down missing: download speed unknown");
  if (o.pcie_bw_gbs <= 0) flag(o, "pcie_bw missing");
}

}  // namespace pf::core
