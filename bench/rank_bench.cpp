// rank_10k_vs_parse_ratio: time to predict and rank 10,000 offers ÷ time to only parse their
// JSON, measured in the same process so machine noise cancels. Target ≤ 1.0.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/predictor.h"
#include "core/ranking.h"
#include "market/offer_json.h"

namespace {

using Clock = std::chrono::steady_clock;

// 10,000 offers shaped like vast's, drawn from a fixed seed.
std::string make_offers_json(int n) {
  static const char* gpus[] = {"RTX 4090", "RTX 3090", "RTX 5090", "RTX 5060 Ti",  "A40",
                               "RTX 4080", "L40S",     "H100 SXM", "RTX PRO 4000", "Mystery"};
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> u(0, 1);
  nlohmann::json offers = nlohmann::json::array();
  for (int i = 0; i < n; ++i) {
    int gpus_n = 1 << static_cast<int>(u(rng) * 4);
    offers.push_back({{"id", 1000000 + i},
                      {"machine_id", 5000 + i / 3},
                      {"host_id", 100 + i / 20},
                      {"gpu_name", gpus[i % 10]},
                      {"num_gpus", gpus_n},
                      {"gpu_ram", 24576},
                      {"gpu_total_ram", 24576 * gpus_n},
                      {"cpu_name", "AMD EPYC 7B13"},
                      {"cpu_cores", 128},
                      {"cpu_cores_effective", 8 + u(rng) * 120},
                      {"cpu_ram", 65536 + u(rng) * 1048576},
                      {"pcie_bw", 2 + u(rng) * 50},
                      {"pci_gen", 3 + (i % 2)},
                      {"inet_down", 50 + u(rng) * 5000},
                      {"inet_up", 50 + u(rng) * 5000},
                      {"inet_down_cost", u(rng) * 0.02},
                      {"disk_space", 500},
                      {"cuda_max_good", 12.8},
                      {"compute_cap", 890},
                      {"reliability2", 0.9 + u(rng) * 0.1},
                      {"verified", true},
                      {"geolocation", "Oslo, NO"},
                      {"dph_total", 0.1 + u(rng) * 2},
                      {"storage_cost", 0.1},
                      {"dlperf", 100 * u(rng)}});
  }
  return nlohmann::json{{"offers", offers}}.dump();
}

template <typename F>
double best_seconds(int reps, F&& f) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  const int n = 10000;
  const std::string body = make_offers_json(n);
  std::vector<pf::core::Offer> offers;
  const auto doc = nlohmann::json::parse(body);  // named: a temporary would die before the loop
  for (const auto& j : doc["offers"]) {
    offers.push_back(*pf::market::offer_from_vast_json(j));
  }
  pf::core::RankConfig cfg;
  cfg.predictor = pf::core::default_predictor_config();

  std::size_t sink = 0;
  double parse_s = best_seconds(7, [&] { sink += nlohmann::json::parse(body)["offers"].size(); });
  double convert_s = best_seconds(7, [&] {
    auto parsed = nlohmann::json::parse(body);
    for (const auto& j : parsed["offers"]) {
      sink += pf::market::offer_from_vast_json(j)->data_flags.size();
    }
  });
  double rank_s = best_seconds(7, [&] {
    auto ranked = pf::core::rank_offers(offers, cfg, pf::core::RankOrder::Cost);
    sink += ranked.front().offer.id > 0;
  });
  std::printf("rank_10k_vs_parse_ratio: %.3f\n", rank_s / parse_s);
  std::printf("parse_and_convert_vs_parse_ratio: %.3f\n", convert_s / parse_s);
  std::printf("# %d offers, %zu bytes; best of 7: parse %.1f ms, rank %.1f ms (sink %zu)\n", n,
              body.size(), parse_s * 1e3, rank_s * 1e3, sink);
  return 0;
}
