// The one truth model (scenario/truth_model.h) and the three simulators that take their
// behaviour from it: the policy simulator (sim/des_engine), market-sim (market_sim/market_sim)
// and the agent's sim prover (agent/prover_sim). The agreement tests pin the disagreements the
// split fixed: crash timing (proving hours everywhere), contention over time, portable draws.
#include "scenario/truth_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/clock.h"
#include "agent/prover_sim.h"
#include "core/memory_model.h"
#include "core/planner.h"
#include "market_sim/market_sim.h"
#include "scenario/draws.h"
#include "sim/des_engine.h"
#include "support/rent_all_once.h"
#include "support/scenario_doc.h"

namespace pf::scenario {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using test::good_truth;
using test::one_offer_doc;

Truth plain_truth() {
  Truth t;
  t.rate_full = 40;
  t.partitions_full = 10;
  t.ram_visible_gib = 256;
  t.cores_visible = 32;
  t.proof_time_cv = 0.1;
  t.boot_min = 6;
  t.download_mbps = 400;
  t.warmup_min = 5;
  t.contention = 0.8;
  return t;
}

// --- draws --------------------------------------------------------------------------------------

TEST(DrawsTest, TheStreamIsPortableAndReproducible) {
  // Pinned values: the same on every platform and library (no std distributions).
  std::uint64_t state = 42;
  EXPECT_EQ(splitmix64(state), 0xbdd732262feb6e95ULL);
  Stream a(7);
  Stream b(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.unit_lognormal(0.3), b.unit_lognormal(0.3));
  EXPECT_EQ(rental_seed(5, 1001, 0), rental_seed(5, 1001, 0));
  EXPECT_NE(rental_seed(5, 1001, 0), rental_seed(5, 1001, 1));
  EXPECT_NE(arrivals_seed(5), rental_seed(5, 0, 0));
}

TEST(DrawsTest, UnitLognormalHasMeanOneAndTheAskedSpread) {
  Stream s(11);
  const int n = 200'000;
  double sum = 0;
  double sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double x = s.unit_lognormal(0.25);
    EXPECT_GT(x, 0);
    sum += x;
    sum2 += x * x;
  }
  const double mean = sum / n;
  const double sd = std::sqrt(sum2 / n - mean * mean);
  EXPECT_NEAR(mean, 1, 0.01);
  EXPECT_NEAR(sd / mean, 0.25, 0.01);
  EXPECT_EQ(Stream(1).unit_lognormal(0), 1);
}

// --- the model ----------------------------------------------------------------------------------

TEST(TruthModelTest, RateFollowsPartitionsContentionAndThrottle) {
  Truth t = plain_truth();
  t.throttle = Throttle{2, 0.5, true};
  EXPECT_DOUBLE_EQ(truth_rate(t, 10, 0, false), 40);
  EXPECT_DOUBLE_EQ(truth_rate(t, 5, 0, false), 40 * core::rate_fraction(5, 10));
  EXPECT_DOUBLE_EQ(truth_rate(t, 10, 2, false), 40 * 0.8 * 0.8);
  EXPECT_DOUBLE_EQ(truth_rate(t, 10, 1, true), 40 * 0.8 * 0.5);
  EXPECT_DOUBLE_EQ(contention_factor(t, -1), 1);
}

TEST(TruthModelTest, MemoryIsTheMachinesNotThePlannersModel) {
  Truth t = plain_truth();
  // /1: the planner's model exactly.
  EXPECT_DOUBLE_EQ(peak_memory_gib(t, 8), core::peak_memory_gib(8, core::MemoryModel{}));
  t.ram_visible_gib = 180;  // 70 + 14·7 = 168 fits
  EXPECT_FALSE(out_of_memory(t, 7));
  t.mem_base_gib = 72;
  t.mem_per_partition_gib = 16;  // 72 + 16·7 = 184: the careful plan OOMs on this machine
  EXPECT_TRUE(out_of_memory(t, 7));
  EXPECT_DOUBLE_EQ(observed_peak_memory_gib(t, 7), 180);
  EXPECT_DOUBLE_EQ(oom_after_start_s(t), 5 * 60);
}

TEST(TruthModelTest, WarmupSlowsTheFirstProofsByHalves) {
  Truth t = plain_truth();
  EXPECT_DOUBLE_EQ(warmup_extra_s(t, 1), 300);
  EXPECT_DOUBLE_EQ(warmup_extra_s(t, 2), 0);  // /1: one slow proof
  t.warmup_proofs = 3;
  EXPECT_DOUBLE_EQ(warmup_extra_s(t, 2), 150);
  EXPECT_DOUBLE_EQ(warmup_extra_s(t, 3), 75);
  EXPECT_DOUBLE_EQ(warmup_extra_s(t, 4), 0);
  EXPECT_DOUBLE_EQ(warmup_extra_s(t, 0), 0);
}

TEST(TruthModelTest, CrashCountsProvingHoursOfflineCountsFromBoot) {
  Truth t = plain_truth();
  t.failure = {FailureKind::Crash, 1.5};
  EXPECT_EQ(crash_after_proving_s(t), 1.5 * 3600);
  EXPECT_FALSE(offline_after_boot_s(t));
  const RentalTimeline crash = rental_timeline(t, 47e9);
  EXPECT_DOUBLE_EQ(crash.boot_s, 360);
  EXPECT_DOUBLE_EQ(crash.prover_start_s, 360 + 940);  // 47 GB at 400 Mb/s
  EXPECT_DOUBLE_EQ(crash.exit_s, 360 + 940 + 1.5 * 3600);
  EXPECT_GE(crash.offline_s, kNeverS);

  t.failure = {FailureKind::Offline, 2};
  const RentalTimeline offline = rental_timeline(t, 47e9);
  EXPECT_DOUBLE_EQ(offline.offline_s, 360 + 2 * 3600);
  EXPECT_GE(offline.exit_s, kNeverS);

  t.failure = {FailureKind::NeverBoots, 0};
  EXPECT_GE(rental_timeline(t, 47e9).boot_s, kNeverS);
  EXPECT_GE(rental_timeline(t, 47e9).prover_start_s, kNeverS);
}

TEST(TruthModelTest, ThrottleAfterProvingHoursAndWhetherItShows) {
  Truth t = plain_truth();
  EXPECT_FALSE(throttle_after_proving_s(t));
  EXPECT_FALSE(throttle_reported(t));
  t.throttle = Throttle{3, 0.7, true};
  EXPECT_EQ(throttle_after_proving_s(t), 3 * 3600);
  EXPECT_TRUE(throttle_reported(t));
  t.throttle->reported = false;
  EXPECT_FALSE(throttle_reported(t));
}

TEST(TruthModelTest, ARentalPaysThePriceListedWhenCreated) {
  ScenarioOffer o;
  o.offer.dph_total = 1.0;
  o.dph_changes = {{5, 0.8}, {10, 1.2}};
  EXPECT_DOUBLE_EQ(listed_dph(o, 0), 1.0);
  EXPECT_DOUBLE_EQ(listed_dph(o, 4.99), 1.0);
  EXPECT_DOUBLE_EQ(listed_dph(o, 5), 0.8);
  EXPECT_DOUBLE_EQ(listed_dph(o, 20), 1.2);
}

TEST(TruthModelTest, ArrivalsArePoissonAtThePiecewiseRate) {
  Demand d;
  d.arrivals = {{0, 10, 100}, {12, 20, 50}};
  EXPECT_DOUBLE_EQ(arrival_rate(d, 5), 100);
  EXPECT_DOUBLE_EQ(arrival_rate(d, 11), 0);  // a gap
  EXPECT_DOUBLE_EQ(arrival_rate(d, 12), 50);
  Stream s(3);
  const auto jobs = draw_arrivals(d, 18 * 3600.0, s);  // the horizon cuts the second segment
  const double expected = 100 * 10 + 50 * 6;
  EXPECT_NEAR(static_cast<double>(jobs.size()), expected, 4 * std::sqrt(expected));
  EXPECT_TRUE(std::is_sorted(jobs.begin(), jobs.end()));
  EXPECT_TRUE(std::none_of(jobs.begin(), jobs.end(),
                           [](double t) { return t >= 10 * 3600 && t < 12 * 3600; }));
  EXPECT_LT(jobs.back(), 18 * 3600.0);
  Stream again(3);
  EXPECT_EQ(draw_arrivals(d, 18 * 3600.0, again), jobs);
}

// --- the simulators agree -----------------------------------------------------------------------

Scenario parsed(const json& doc) {
  auto s = parse_scenario(doc);
  if (!s) throw std::runtime_error(s.error());
  return *s;
}

sim::DesReport run_engine(const Scenario& s) {
  return test::run_rent_all_once(s);
}

// Crash timing: the engine's instance shows "exited" (and is closed at the next tick) when
// market-sim's timeline says, both after failure.after_h hours of proving.
TEST(TruthAgreementTest, EngineAndMarketSimCrashAtTheSameTime) {
  json truth = good_truth();
  truth["failure"] = {{"kind", "crash"}, {"after_h", 2.0}};
  const Scenario s = parsed(one_offer_doc(truth));

  market_sim::MarketSim market(s);
  auto created = market.create_instance(1001, {{"image", "x"}, {"disk", 100}}, 0);
  ASSERT_TRUE(created) << created.error().msg;
  const auto launch = market.launch((*created)["new_contract"].get<std::int64_t>());
  ASSERT_TRUE(launch);
  // 5 min boot, 47 GB at 800 Mb/s = 470 s, then 2 h of proving.
  EXPECT_NEAR(launch->failure_h, 5.0 / 60 + 470.0 / 3600 + 2, 1e-9);

  const sim::DesReport r = run_engine(s);
  ASSERT_EQ(r.instances.size(), 1u);
  ASSERT_TRUE(r.instances[0].closed_h);
  const double tick_h = sim::DesOptions{}.tick_s / 3600;
  EXPECT_GE(*r.instances[0].closed_h, launch->failure_h - 1e-9);
  EXPECT_LE(*r.instances[0].closed_h, launch->failure_h + tick_h + 1e-9);
}

// Rate under contention: market-sim's count of neighbours now, the sim prover's rate from it,
// and the engine's truth_rate are one function of the same count.
TEST(TruthAgreementTest, ContentionFollowsTheInstancesAliveNow) {
  json doc = one_offer_doc(good_truth());
  json second = doc["offers"][0];
  second["id"] = 1002;  // the same machine 501
  doc["offers"].push_back(second);
  const Scenario s = parsed(doc);

  market_sim::MarketSim market(s);
  const json body = {{"image", "x"}, {"disk", 100}};
  const auto first = (*market.create_instance(1001, body, 0))["new_contract"].get<std::int64_t>();
  const auto other = (*market.create_instance(1002, body, 1))["new_contract"].get<std::int64_t>();
  EXPECT_EQ(market.co_tenants(first), 1);

  const auto dir =
      std::filesystem::temp_directory_path() / ("pf-truth-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "co_tenants";
  const auto write_count = [&](int n) { std::ofstream(file) << n << "\n"; };

  agent::SimTruth st;
  st.truth = s.offers[0].truth;
  st.co_tenants_file = file.string();
  const agent::AgentClock clock;
  agent::SimProver prover(st, clock);

  write_count(market.co_tenants(first));
  EXPECT_DOUBLE_EQ(prover.rate_now(10), sim::truth_rate(s.offers[0].truth, 10, 1, false));
  EXPECT_DOUBLE_EQ(prover.rate_now(10), 60 * 0.8);

  ASSERT_TRUE(market.destroy_instance(other, 2));
  EXPECT_EQ(market.co_tenants(first), 0);  // not frozen at create
  write_count(market.co_tenants(first));
  EXPECT_DOUBLE_EQ(prover.rate_now(10), sim::truth_rate(s.offers[0].truth, 10, 0, false));
  std::filesystem::remove_all(dir);

  // The engine: the two instances' production rate on the shared machine is the contended one
  // until one goes. Here both stay, so each proves at 0.8 of the full rate.
  const sim::DesReport r = run_engine(s);
  ASSERT_EQ(r.instances.size(), 2u);
  const double hours_proving = 10 - (5.0 + 5.0) / 60 - 470.0 / 3600;
  const double expected = 2 * hours_proving * 60 * 0.8;
  EXPECT_NEAR(static_cast<double>(r.proofs), expected, expected * 0.04);
}

// The sim prover counts proving hours, not wall time since its first start: a prover that was
// down does not crash on restart (it used to, as its crash clock ran from the first start).
TEST(SimProverTruthTest, CrashCountsProvingHoursAcrossRestarts) {
  agent::SimTruth st;
  st.truth = plain_truth();
  st.truth.rate_full = 0.01;  // one proof per 100 h: the crash comes first
  st.truth.failure = {FailureKind::Crash, 1.0};
  const agent::AgentClock clock(3600.0 * 20);  // one simulated hour every 50 ms
  agent::SimProver prover(st, clock);
  core::ProverPlan plan;
  plan.partitions = plan.warmup_partitions = 10;
  plan.gpus = 1;
  ASSERT_TRUE(prover.start(plan, false));
  prover.stop();
  std::this_thread::sleep_for(200ms);  // ~4 simulated hours down
  auto restarted = prover.start(plan, false);
  ASSERT_TRUE(restarted) << restarted.error();
  const auto outcome = prover.prove({1, false});
  EXPECT_EQ(outcome.kind, agent::ProofOutcome::Kind::Transport);
  EXPECT_THAT(outcome.message, ::testing::HasSubstr("crashed"));
  EXPECT_FALSE(prover.start(plan, false));  // for good
}

TEST(SimProverTruthTest, ASilentThrottleShowsNoReason) {
  agent::SimTruth st;
  st.truth = plain_truth();
  st.truth.throttle = Throttle{0, 0.5, true};
  const agent::AgentClock clock;
  core::ProverPlan plan;
  plan.partitions = plan.warmup_partitions = 10;
  plan.gpus = 1;
  {
    agent::SimProver prover(st, clock);
    ASSERT_TRUE(prover.start(plan, false));
    EXPECT_DOUBLE_EQ(prover.rate_now(10), 20);
    const auto gpus = prover.gpu_samples();
    ASSERT_TRUE(gpus && gpus->size() == 1);
    EXPECT_FALSE((*gpus)[0].throttle.empty());
  }
  st.truth.throttle->reported = false;
  agent::SimProver silent(st, clock);
  ASSERT_TRUE(silent.start(plan, false));
  EXPECT_DOUBLE_EQ(silent.rate_now(10), 20);  // as slow
  const auto gpus = silent.gpu_samples();
  ASSERT_TRUE(gpus && gpus->size() == 1);
  EXPECT_TRUE((*gpus)[0].throttle.empty());  // and nothing says why
}

TEST(SimProverTruthTest, TheMachinesMemoryTruthDecidesTheOom) {
  agent::SimTruth st;
  st.truth = plain_truth();
  st.truth.ram_visible_gib = 180;
  st.truth.mem_per_partition_gib = 16;  // 70 + 16·7 = 182 > 180, though 70 + 14·7 fits
  st.truth.warmup_min = 0;
  const agent::AgentClock clock(3600);
  core::ProverPlan plan;
  plan.partitions = plan.warmup_partitions = 7;
  plan.gpus = 1;
  agent::SimProver prover(st, clock);
  ASSERT_TRUE(prover.start(plan, false));
  EXPECT_EQ(prover.prove({1, false}).kind, agent::ProofOutcome::Kind::OutOfMemory);
  EXPECT_DOUBLE_EQ(*prover.peak_memory_gib(), 180);
}

}  // namespace
}  // namespace pf::scenario
