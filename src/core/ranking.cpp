#include "core/ranking.h"

#include <algorithm>
#include <map>

#include "core/policy.h"
#include "core/text.h"

namespace pf::core {

std::vector<RankedOffer> rank_offers(std::vector<Offer> offers, const RankConfig& config,
                                     RankOrder order, const RankHistory& history) {
  // What the autopilot learns from (core::decide): runs joined with their instances' offers.
  const std::vector<InstanceRecord> fleet(history.fleet.begin(), history.fleet.end());
  const std::vector<BenchRun> runs(history.runs.begin(), history.runs.end());
  const std::vector<Measurement> measurements = join_measurements(runs, fleet);
  LearnedPredictorConfig learned;
  learned.base = config.predictor;
  const FleetKnowledge knowledge = learn_fleet(measurements, learned);
  const DownloadKnowledge download =
      learn_download_fraction(fleet, config.setup.download_speed_fraction, learned);
  const std::map<std::int64_t, double> downloads = measured_download_mbps(fleet);
  std::map<std::int64_t, int> alive_on_machine;
  for (const auto& rec : fleet) {
    if (rec.state != InstanceState::Destroyed && rec.state != InstanceState::Destroying) {
      ++alive_on_machine[rec.offer.machine_id];
    }
  }

  SetupConfig setup = config.setup;
  setup.download_speed_fraction = download.fraction;
  EconomicsConfig economics = config.economics;
  // value_offer's min_rate is dph ÷ this price: the objective's break-even.
  economics.target_cost_per_proof_usd = break_even_price(config.economics, config.profit_objective);

  std::vector<RankedOffer> ranked;
  ranked.reserve(offers.size());
  for (auto& offer : offers) {
    RankedOffer r;
    const auto alive = alive_on_machine.find(offer.machine_id);
    r.our_others_on_machine = alive == alive_on_machine.end() ? 0 : alive->second;
    r.prediction = predict_offer(offer, knowledge, learned, r.our_others_on_machine);
    r.download_fraction = download.fraction;
    Offer as_measured = offer;
    if (auto it = downloads.find(offer.machine_id); it != downloads.end() && it->second > 0) {
      // The machine's own measured download replaces the advertised speed (as score_offer).
      r.measured_download_mbps = it->second;
      as_measured.inet_down_mbps = it->second / setup.download_speed_fraction;
    }
    // Setup is amortised over the hours the host's contract leaves, when they are fewer.
    SetupConfig offer_setup = setup;
    offer_setup.expected_lifetime_h =
        within_contract_h(offer, setup.expected_lifetime_h, history.now);
    r.valuation = value_offer(as_measured, r.prediction, economics, offer_setup);
    if (offer_setup.expected_lifetime_h < setup.expected_lifetime_h) {
      r.valuation.reasons.insert(r.valuation.reasons.begin(),
                                 "the host's contract ends in " +
                                     fixed(offer_setup.expected_lifetime_h, 1) +
                                     " h: setup is paid back over that, not " +
                                     fixed(setup.expected_lifetime_h, 0) + " h");
    }
    if (download.machines > 0 && !r.measured_download_mbps) {
      r.valuation.reasons.insert(
          r.valuation.reasons.begin(),
          "downloads assumed at " + fixed(100 * download.fraction, 0) +
              "% of the advertised speed (measured on " + std::to_string(download.machines) +
              " machine(s); configured " + fixed(100 * download.prior_fraction, 0) + "%)");
    }
    r.break_even =
        break_even_rates(offer.dph_total, transfer_per_proof_usd(offer, config.economics),
                         config.economics, config.profit_objective);
    r.history = machine_history({offer.machine_id, offer.gpu_name, offer.num_gpus}, history.fleet,
                                history.runs, history.bad_hosts, history.now);
    r.offer = std::move(offer);
    ranked.push_back(std::move(r));
  }
  auto by_cost = [](const RankedOffer& a, const RankedOffer& b) {
    const auto& ca = a.valuation.expected_cost_per_proof;
    const auto& cb = b.valuation.expected_cost_per_proof;
    if (ca.has_value() != cb.has_value()) return ca.has_value();
    if (ca && cb && *ca != *cb) return *ca < *cb;
    return a.offer.id < b.offer.id;
  };
  auto by_profit = [](const RankedOffer& a, const RankedOffer& b) {
    if (a.valuation.expected_profit_per_hour != b.valuation.expected_profit_per_hour) {
      return a.valuation.expected_profit_per_hour > b.valuation.expected_profit_per_hour;
    }
    return a.offer.id < b.offer.id;
  };
  if (order == RankOrder::Cost) {
    std::sort(ranked.begin(), ranked.end(), by_cost);
  } else {
    std::sort(ranked.begin(), ranked.end(), by_profit);
  }
  return ranked;
}

}  // namespace pf::core
