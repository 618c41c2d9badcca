#include "core/economics.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/break_even.h"
#include "core/ranking.h"

namespace pf::core {
namespace {

Offer offer(std::int64_t id, double dph, double ram = 512, double inet = 1000) {
  Offer o;
  o.id = id;
  o.machine_id = id * 10;
  o.gpu_name = "RTX 4090";
  o.num_gpus = 1;
  o.cpu_ram_gib = ram;
  o.cpu_cores = o.cpu_cores_effective = 64;
  o.pcie_bw_gbs = 25;
  o.inet_down_mbps = inet;
  o.inet_down_cost_per_gb = 0.01;
  o.dph_total = dph;
  derive_offer_fields(o);
  return o;
}

Prediction fixed_rate(double rate) {
  Prediction p;
  p.rate = rate;
  p.low = rate * 0.8;
  p.high = rate * 1.2;
  p.source = "test";
  return p;
}

TEST(Economics, BreakEvenMatchesFieldPractice) {
  // field-notes: $0.201/hr → 26/hr (ceil'd), $0.472 → 59/hr at $0.008/proof.
  EXPECT_NEAR(break_even_rate(0.201, 0.008), 25.125, 1e-9);
  EXPECT_NEAR(break_even_rate(0.472, 0.008), 59.0, 1e-9);
  // A proof that may cost nothing (its transfer ate the price) never pays for an instance.
  EXPECT_TRUE(std::isinf(break_even_rate(0.5, 0)));
  EXPECT_EQ(break_even_rate(0, 0), 0);
}

// vast.ai bills a proof's input down and its proof up at the offer's inet costs: they come out
// of what the proof earns, in the break-even, the expected $/proof and the score.
TEST(Economics, AProofsInputAndProofAreCostsOfTheProof) {
  EconomicsConfig econ;
  econ.revenue_per_proof_usd = 0.012;
  Offer o;
  o.dph_total = 0.24;
  o.inet_down_cost_per_gb = 0.02;
  o.inet_up_cost_per_gb = 0.05;
  const double transfer = 51e6 / 1e9 * 0.02 + 1920 / 1e9 * 0.05;  // $0.00102
  EXPECT_NEAR(transfer_per_proof_usd(o, econ), transfer, 1e-12);
  EXPECT_NEAR(instance_break_even_rate(o.dph_total, transfer, econ, true),
              0.24 / (0.012 - transfer), 1e-9);
  EXPECT_GT(instance_break_even_rate(o.dph_total, transfer, econ, true), 20.0);

  // Without a gateway a proof moves nothing.
  EconomicsConfig no_jobs = econ;
  no_jobs.job_input_bytes = 0;
  no_jobs.proof_bytes = 0;
  EXPECT_EQ(transfer_per_proof_usd(o, no_jobs), 0);

  // value_offer: every paid proof's transfer is in the expected $/proof.
  SetupConfig setup;
  setup.params_bytes = 0;
  econ.target_cost_per_proof_usd = 0.012;
  const Valuation with = value_offer(o, fixed_rate(30), econ, setup);
  const Valuation without = value_offer(o, fixed_rate(30), no_jobs, setup);
  ASSERT_TRUE(with.expected_cost_per_proof && without.expected_cost_per_proof);
  EXPECT_NEAR(*with.expected_cost_per_proof - *without.expected_cost_per_proof, transfer, 1e-9);
  EXPECT_NEAR(with.min_rate, 0.24 / (0.012 - transfer), 1e-9);

  // A host whose bandwidth costs more than a proof earns never breaks even.
  o.inet_down_cost_per_gb = 1.0;  // $0.051 a proof
  EXPECT_TRUE(std::isinf(
      instance_break_even_rate(o.dph_total, transfer_per_proof_usd(o, econ), econ, true)));
}

TEST(Economics, DownloadAtConservativeFractionOfAdvertised) {
  SetupConfig s;
  s.params_bytes = 47e9;
  s.download_speed_fraction = 0.5;
  auto o = offer(1, 0.3, 512, 200);  // 200 Mb/s advertised → 100 Mb/s assumed
  EXPECT_NEAR(download_hours(o, s), 47e9 * 8 / 100e6 / 3600, 1e-9);
  o.inet_down_mbps = 0;  // unknown → configured fallback
  EXPECT_NEAR(download_hours(o, s), 47e9 * 8 / (s.unknown_download_mbps * 1e6) / 3600, 1e-9);
}

TEST(Economics, SetupAmortisedOverLifetime) {
  EconomicsConfig e{0.012, 0.008};
  SetupConfig s;
  s.expected_lifetime_h = 72;
  s.boot_h = 0.5;
  s.warmup_h = 0.5;
  s.benchmark_proofs = 10;
  s.params_bytes = 47e9;
  s.download_speed_fraction = 1.0;
  auto o = offer(1, 0.4, 512, 1000);
  auto v = value_offer(o, fixed_rate(50), e, s);
  double dl = 47e9 * 8 / 1e9 / 3600;
  double setup_h = 0.5 + dl + 0.5 + 10.0 / 50;
  EXPECT_NEAR(v.setup_hours, setup_h, 1e-9);
  double bandwidth = 47 * 0.01;
  EXPECT_NEAR(v.setup_cost_usd, setup_h * 0.4 + bandwidth, 1e-9);
  double proofs = 50 * (72 - setup_h);
  const double transfer = 51e6 / 1e9 * 0.01;  // each proof's job input down
  double cost = 72 * 0.4 + bandwidth + proofs * transfer;
  ASSERT_TRUE(v.expected_cost_per_proof.has_value());
  EXPECT_NEAR(*v.expected_cost_per_proof, cost / proofs, 1e-12);
  EXPECT_NEAR(v.expected_profit_per_hour, (proofs * 0.012 - cost) / 72, 1e-12);
  EXPECT_NEAR(v.min_rate, 0.4 / (0.008 - transfer), 1e-9);
  // Amortised $/proof is always above the naive dph/rate.
  EXPECT_GT(*v.expected_cost_per_proof, 0.4 / 50);
}

TEST(Economics, SlowDownloadGetsReason) {
  SetupConfig s;
  auto v = value_offer(offer(1, 0.3, 512, 50), fixed_rate(40), EconomicsConfig{}, s);
  bool found = false;
  for (auto& r : v.reasons) found |= r.rfind("slow download: ~", 0) == 0;
  EXPECT_TRUE(found);
  EXPECT_GT(v.download_hours, 5);
}

TEST(Economics, ZeroRateHasNoCostPerProofAndLosesMoney) {
  auto v = value_offer(offer(1, 0.3), fixed_rate(0), EconomicsConfig{}, SetupConfig{});
  EXPECT_FALSE(v.expected_cost_per_proof.has_value());
  EXPECT_LT(v.expected_profit_per_hour, 0);
}

TEST(Economics, LifetimeShorterThanSetupDoesNotDivideByZero) {
  SetupConfig s;
  s.expected_lifetime_h = 0.1;
  auto v = value_offer(offer(1, 0.3, 512, 10), fixed_rate(40), EconomicsConfig{}, s);
  EXPECT_FALSE(v.expected_cost_per_proof.has_value());
  EXPECT_LT(v.expected_profit_per_hour, 0);
}

TEST(Ranking, CostOrderPutsCheapestProofFirstAndNonProversLast) {
  RankConfig cfg;
  cfg.predictor = default_predictor_config();
  std::vector<Offer> offers = {offer(1, 0.6), offer(2, 0.2), offer(3, 0.2, 40), offer(4, 0.4)};
  auto ranked = rank_offers(offers, cfg, RankOrder::Cost);
  ASSERT_EQ(ranked.size(), 4u);
  EXPECT_EQ(ranked[0].offer.id, 2);
  EXPECT_EQ(ranked[1].offer.id, 4);
  EXPECT_EQ(ranked[2].offer.id, 1);
  EXPECT_EQ(ranked[3].offer.id, 3);  // 40 GiB RAM cannot prove
  EXPECT_FALSE(ranked[3].valuation.expected_cost_per_proof.has_value());
}

// A host's contract that ends soon (offer end_date) leaves its setup fewer hours to be paid back
// over: the same machine costs more per proof and says why. Without `now` nothing is assumed.
TEST(Ranking, AContractEndingSoonAmortisesSetupOverWhatIsLeft) {
  RankConfig cfg;
  cfg.predictor = default_predictor_config();
  const double now = 1'750'000'000;
  Offer ending = offer(1, 0.3);
  ending.end_date = now + 3 * 3600;
  RankHistory history;
  history.now = now;
  const auto ranked = rank_offers({ending, offer(2, 0.3)}, cfg, RankOrder::Cost, history);
  ASSERT_EQ(ranked.size(), 2u);
  EXPECT_EQ(ranked[0].offer.id, 2);
  ASSERT_TRUE(ranked[0].valuation.expected_cost_per_proof &&
              ranked[1].valuation.expected_cost_per_proof);
  EXPECT_GT(*ranked[1].valuation.expected_cost_per_proof,
            *ranked[0].valuation.expected_cost_per_proof);
  ASSERT_FALSE(ranked[1].valuation.reasons.empty());
  EXPECT_NE(ranked[1].valuation.reasons[0].find("contract ends in 3.0 h"), std::string::npos)
      << ranked[1].valuation.reasons[0];
  const auto undated = rank_offers({ending}, cfg, RankOrder::Cost);  // now unknown
  EXPECT_EQ(undated[0].valuation.expected_cost_per_proof,
            ranked[0].valuation.expected_cost_per_proof);
}

TEST(Ranking, ProfitOrderIsDescendingAndStable) {
  RankConfig cfg;
  cfg.predictor = default_predictor_config();
  std::vector<Offer> offers = {offer(7, 0.3), offer(5, 0.3), offer(6, 0.9)};
  auto ranked = rank_offers(offers, cfg, RankOrder::Profit);
  EXPECT_EQ(ranked[0].offer.id, 5);  // tie with 7 broken by id
  EXPECT_EQ(ranked[1].offer.id, 7);
  EXPECT_EQ(ranked[2].offer.id, 6);
  EXPECT_GE(ranked[0].valuation.expected_profit_per_hour,
            ranked[2].valuation.expected_profit_per_hour);
}

// --- one break-even, and the machine's history (issue 13 items 5 and 6) -----------------

TEST(Ranking, BreakEvenIsTheObjectiveAndBothFiguresAreShown) {
  RankConfig cfg;
  cfg.predictor = default_predictor_config();
  cfg.economics.revenue_per_proof_usd = 0.012;
  cfg.economics.target_cost_per_proof_usd = 0.008;
  // About the objective: no transfer (Economics.AProofsInputAndProofAreCostsOfTheProof).
  cfg.economics.job_input_bytes = 0;
  cfg.economics.proof_bytes = 0;
  cfg.profit_objective = true;
  const auto ranked = rank_offers({offer(1, 0.24)}, cfg, RankOrder::Cost);
  ASSERT_EQ(ranked.size(), 1u);
  const auto& r = ranked[0];
  // The verdicts' break-even (revenue), not dph / 0.008.
  EXPECT_NEAR(r.valuation.min_rate, 0.24 / 0.012, 1e-9);
  EXPECT_NEAR(r.break_even.rate, 0.24 / 0.012, 1e-9);
  EXPECT_NEAR(r.break_even.revenue_rate, 20, 1e-9);
  EXPECT_NEAR(r.break_even.target_rate, 30, 1e-9);
  EXPECT_TRUE(r.break_even.differ());
  EXPECT_STREQ(r.break_even.objective(), "revenue");

  cfg.profit_objective = false;
  const auto classic = rank_offers({offer(1, 0.24)}, cfg, RankOrder::Cost);
  EXPECT_NEAR(classic[0].valuation.min_rate, 30, 1e-9);
  EXPECT_STREQ(classic[0].break_even.objective(), "target");
  // The same function the verdicts and deadlines call.
  EXPECT_DOUBLE_EQ(classic[0].break_even.rate,
                   instance_break_even_rate(0.24, 0, cfg.economics, false));
  EXPECT_DOUBLE_EQ(r.break_even.rate, instance_break_even_rate(0.24, 0, cfg.economics, true));

  cfg.economics.target_cost_per_proof_usd = 0.012;
  EXPECT_FALSE(rank_offers({offer(1, 0.24)}, cfg, RankOrder::Cost)[0].break_even.differ());
}

TEST(Ranking, AMachineThatFailedBeforeShowsItAndIsPredictedFromItsRuns) {
  RankConfig cfg;
  cfg.predictor = default_predictor_config();
  const Offer seen_before = offer(1, 0.3);  // machine 10
  const Offer fresh = offer(2, 0.3);        // machine 20, same hardware and price
  InstanceRecord rental;
  rental.id = 5;
  rental.offer = seen_before;
  rental.created_at = 100;
  rental.state = InstanceState::Destroyed;
  rental.verdict = Verdict{Verdict::Decision::Reject, 20, 18, 22, 6, 25, "below break-even"};
  rental.close_cause = CloseCause::Rejected;
  BenchRun r1;
  r1.host = {seen_before.machine_id, seen_before.gpu_name, seen_before.num_gpus};
  r1.instance_id = 5;
  r1.at = 200;
  r1.rate = 20;
  BenchRun r2 = r1;
  r2.at = 300;
  r2.rate = 22;
  const BadHost entry{
      seen_before.machine_id, "slow benchmark: 20/hr vs 25/hr", "{}", 300, 5000, 1, "auto"};
  const std::vector<InstanceRecord> fleet = {rental};
  const std::vector<BenchRun> runs = {r1, r2};
  const std::vector<BadHost> bad = {entry};
  RankHistory history{fleet, runs, bad, 1000};

  const auto ranked = rank_offers({seen_before, fresh}, cfg, RankOrder::Cost, history);
  ASSERT_EQ(ranked.size(), 2u);
  // The fresh machine ranks first: the other one measured far below the 4090 prior.
  EXPECT_EQ(ranked[0].offer.id, 2);
  const auto& known = ranked[1];
  EXPECT_EQ(known.prediction.source, "host");
  EXPECT_NEAR(known.prediction.rate, 21, 1e-9);  // the median of its runs
  EXPECT_EQ(known.history.rentals, 1);
  EXPECT_EQ(known.history.runs, 2);
  EXPECT_NEAR(*known.history.median_rate, 21, 1e-9);
  EXPECT_EQ(known.history.last_verdict, "reject");
  ASSERT_TRUE(known.history.bad_host.has_value());
  EXPECT_EQ(known.history.bad_host->reason, "slow benchmark: 20/hr vs 25/hr");
  EXPECT_FALSE(ranked[0].history.known());
  // The fresh machine's model prediction learned from the measured one (fleet data).
  EXPECT_EQ(ranked[0].prediction.source, "model");
}

TEST(Ranking, TheFleetsMeasuredDownloadsLengthenSetup) {
  RankConfig cfg;
  cfg.predictor = default_predictor_config();
  const Offer candidate = offer(3, 0.3, 512, 1000);
  const auto before = rank_offers({candidate}, cfg, RankOrder::Cost);
  // Ten earlier rentals on other machines each got 5% of their advertised speed.
  std::vector<InstanceRecord> fleet;
  for (int i = 0; i < 10; ++i) {
    InstanceRecord r;
    r.id = i + 1;
    r.offer = offer(100 + i, 0.3, 512, 1000);
    r.params_rate_bps = 50e6 / 8;
    r.state = InstanceState::Destroyed;
    fleet.push_back(r);
  }
  RankHistory history;
  history.fleet = fleet;
  const auto after = rank_offers({candidate}, cfg, RankOrder::Cost, history);
  EXPECT_LT(after[0].download_fraction, before[0].download_fraction);
  EXPECT_GT(after[0].valuation.download_hours, before[0].valuation.download_hours);
  EXPECT_GT(*after[0].valuation.expected_cost_per_proof,
            *before[0].valuation.expected_cost_per_proof);
  EXPECT_NE(after[0].valuation.reasons.front().find("measured on 10 machine(s)"),
            std::string::npos);
}

}  // namespace
}  // namespace pf::core
