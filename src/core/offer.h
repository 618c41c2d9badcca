// The offer model: a rentable slice of a machine, in normalised units.
// Market adapters convert the vendor's fields (MiB, Mb/s, ...) once, at the boundary;
// everything inside proverfleet reads these fields and never converts again.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pf::core {

// The bids vast takes, $/hour (create_instance's and change_bid's `price`: 0.001 to 128).
inline constexpr double kMinBidUsdPerHour = 0.001;
inline constexpr double kMaxBidUsdPerHour = 128;

struct Offer {
  std::int64_t id = 0;          // ask id: what a create rents
  std::int64_t machine_id = 0;  // physical machine; several offers may share one
  std::int64_t host_id = 0;     // the host (vendor account)
  std::string gpu_name;         // "RTX 4090", with spaces
  int num_gpus = 0;
  double gpu_ram_gib = 0;        // per GPU
  double gpu_total_ram_gib = 0;  // all GPUs of the offer
  std::string cpu_name;
  double cpu_cores = 0;            // whole machine (vendor may report 0/null)
  double cpu_cores_effective = 0;  // this offer's share
  double cpu_ram_gib = 0;          // as advertised for this offer
  double pcie_bw_gbs = 0;          // CPU<->GPU, GB/s
  int pci_gen = 0;
  double inet_down_mbps = 0;  // advertised, shared by the machine
  double inet_up_mbps = 0;
  double inet_down_cost_per_gb = 0;  // $/GB
  double inet_up_cost_per_gb = 0;    // $/GB
  double disk_space_gb = 0;
  double cuda_max_good = 0;
  int compute_cap = 0;
  double reliability = 0;  // reliability2, 0..1
  bool verified = false;
  std::string geolocation;
  // $/hour for the offer: dph_base (compute) plus the storage of the allocated_storage
  // searched, bandwidth excluded (core/billing.h).
  double dph_total = 0;
  double dph_base = 0;                     // compute $/hour; 0 when the market did not say
  double storage_cost_gb_month = 0;        // $/GB/month
  double storage_total_cost_per_hour = 0;  // search's price of the allocated_storage, $/hour
  double dlperf = 0;
  // When the host's contract for this machine ends (vast `end_date`, epoch s; 0: not said). At
  // end_date vast stops the instance and it cannot restart (docs.vast.ai, "Instances": contract
  // end), so a rental is worth only the hours before it.
  double end_date = 0;
  // The lowest interruptible (bid) price the market takes now, $/hour for the whole offer (vast
  // `min_bid`; 0: not said). A bid below it gets a stopped instance (vast creates it anyway:
  // market/vast_market.h), and a higher bid may outbid a running one.
  double min_bid = 0;

  // Derived once at the boundary (see derive_offer_fields).
  double usable_ram_gib = 0;  // memory we plan with: the offer's advertised share
  double usable_cores = 0;    // cores we plan with: effective share, else whole machine

  // Data-quality notes: each names a field the market returned null/zero/odd and what was
  // assumed instead. Never fatal: predictions widen their band instead.
  std::vector<std::string> data_flags;

  bool operator==(const Offer&) const = default;
};

// `lifetime_h` cut to the hours left before the offer's contract ends (end_date), at `now`
// (epoch s); unchanged when the offer does not say or `now` is unknown (0).
double within_contract_h(const Offer& offer, double lifetime_h, double now);

// Fills usable_ram_gib / usable_cores and appends data_flags for missing or odd fields.
// Idempotent.
void derive_offer_fields(Offer& offer);

}  // namespace pf::core
