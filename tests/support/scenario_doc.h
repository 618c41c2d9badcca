// A one-offer scenario document to vary in tests (the policy simulator and the truth model):
// an RTX 4090 machine (id 1001, machine 501) at $0.30/h, 47 GB of parameters, no demand cap.
#pragma once

#include <nlohmann/json.hpp>

namespace pf::test {

// A healthy truth: 60 proofs/h at 10 partitions, 256 GiB visible, boots in 5 min, downloads
// at 800 Mb/s (470 s), 5 min warm-up, contention 0.8.
inline nlohmann::json good_truth() {
  return {{"rate_full", 60.0},
          {"partitions_full", 10},
          {"ram_visible_gib", 256.0},
          {"cores_visible", 64.0},
          {"proof_time_cv", 0.1},
          {"boot_min", 5.0},
          {"download_mbps", 800.0},
          {"warmup_min", 5.0},
          {"contention", 0.8},
          {"throttle", nullptr},
          {"failure", {{"kind", "none"}, {"after_h", 0}}}};
}

// A /1 scenario of `hours` with that one offer, listed throughout, carrying `truth`.
inline nlohmann::json one_offer_doc(const nlohmann::json& truth, double hours = 10) {
  nlohmann::json offer = {{"id", 1001},
                          {"machine_id", 501},
                          {"host_id", 7501},
                          {"gpu_name", "RTX 4090"},
                          {"num_gpus", 1},
                          {"gpu_ram", 24576},
                          {"gpu_total_ram", 24576},
                          {"cpu_name", "AMD EPYC 7543"},
                          {"cpu_cores", 64},
                          {"cpu_cores_effective", 64.0},
                          {"cpu_ram", 262144},
                          {"pcie_bw", 24.5},
                          {"pci_gen", 4},
                          {"inet_down", 1000.0},
                          {"inet_up", 500.0},
                          {"inet_down_cost", 0.0},
                          {"disk_space", 500},
                          {"cuda_max_good", 13.1},
                          {"compute_cap", 890},
                          {"reliability2", 0.99},
                          {"verified", true},
                          {"geolocation", "Texas, US"},
                          {"dph_total", 0.3},
                          {"storage_cost", 0.1},
                          {"dlperf", 80.0},
                          {"listed_from_h", 0.0},
                          {"listed_until_h", hours},
                          {"truth", truth}};
  return {{"format", "proverfleet-scenario/1"},
          {"name", "one"},
          {"seed", 5},
          {"hours", hours},
          {"economics",
           {{"revenue_per_proof_usd", 0.012},
            {"target_cost_per_proof_usd", 0.008},
            {"demand_proofs_per_hour", nullptr}}},
          {"params", {{"bytes", 47000000000}}},
          {"offers", nlohmann::json::array({offer})}};
}

}  // namespace pf::test
