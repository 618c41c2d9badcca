#include "core/policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/production.h"

namespace pf::core {
namespace {

using ::testing::HasSubstr;
using Kind = Action::Kind;

constexpr double kNow = 1'750'000'000;

// A fast, cheap, well-connected 4090 slice: the prior says ~58/hr against break-even 25/hr.
Offer good_offer(std::int64_t id, std::int64_t machine, double dph = 0.3) {
  Offer o;
  o.id = id;
  o.machine_id = machine;
  o.gpu_name = "RTX 4090";
  o.num_gpus = 1;
  o.cpu_ram_gib = 256;
  o.cpu_cores = 64;
  o.cpu_cores_effective = 64;
  o.pcie_bw_gbs = 25;
  o.inet_down_mbps = 2000;
  o.dph_total = dph;
  o.reliability = 0.99;
  derive_offer_fields(o);
  return o;
}

PolicyConfig config() {
  PolicyConfig c;
  c.scoring.economics.revenue_per_proof_usd = 0.012;
  c.scoring.economics.target_cost_per_proof_usd = 0.008;
  return c;
}

InstanceRecord instance(std::int64_t id, const Offer& o, InstanceState state, double since) {
  InstanceRecord r;
  r.id = id;
  r.offer = o;
  r.state = state;
  r.state_since = since;
  r.created_at = since;
  return r;
}

Measurement window(const InstanceRecord& rec, double rate, double high, double at) {
  Measurement m;
  m.offer = rec.offer;
  m.run.host = {rec.offer.machine_id, rec.offer.gpu_name, rec.offer.num_gpus};
  m.run.instance_id = rec.id;
  m.run.kind = "production";
  m.run.rate = rate;
  m.run.low = rate * 0.9;
  m.run.high = high;
  m.run.samples = 30;
  m.run.at = at;
  return m;
}

std::vector<Action> of_kind(const std::vector<Action>& actions, Kind kind) {
  std::vector<Action> out;
  for (const auto& a : actions)
    if (a.kind == kind) out.push_back(a);
  return out;
}

std::vector<Offer> many_good_offers(int n) {
  std::vector<Offer> offers;
  for (int i = 0; i < n; ++i) offers.push_back(good_offer(100 + i, 1000 + i));
  return offers;
}

TEST(Policy, RentsGoodOffersWithAReasonAndAPlan) {
  const auto actions = decide({}, many_good_offers(2), {}, {}, kNow, config());
  ASSERT_EQ(actions.size(), 2u);
  for (const auto& a : actions) {
    EXPECT_EQ(a.kind, Kind::Rent);
    EXPECT_THAT(a.reason, HasSubstr("rent offer"));
    EXPECT_THAT(a.reason, HasSubstr("expected to pay"));
    EXPECT_GT(a.partitions, 0);
    EXPECT_GT(a.score.value_usd, 0);
    EXPECT_FALSE(a.prediction.reasons.empty());
  }
}

// vast stops an instance at its host's contract end (offer end_date) and it cannot restart: a
// rental is worth only the hours before it. One whose contract ends before it pays back its
// setup is not rented; the same machine with days left is.
TEST(Policy, NeverRentsABoxWhoseContractEndsBeforeItPaysBack) {
  Offer ending = good_offer(100, 1000);
  ending.end_date = kNow + 1800;  // half an hour: less than its setup
  Offer lasting = good_offer(101, 1001);
  lasting.end_date = kNow + 7 * 86400;
  const auto rents = of_kind(decide({}, {ending, lasting}, {}, {}, kNow, config()), Kind::Rent);
  ASSERT_EQ(rents.size(), 1u);
  EXPECT_EQ(rents[0].offer.id, 101);
  EXPECT_DOUBLE_EQ(within_contract_h(ending, 72, kNow), 0.5);
  EXPECT_DOUBLE_EQ(within_contract_h(lasting, 72, kNow), 72);
  EXPECT_DOUBLE_EQ(within_contract_h(good_offer(102, 1002), 72, kNow), 72);  // not said
  EXPECT_DOUBLE_EQ(within_contract_h(ending, 72, kNow + 3600), 0);           // already ended
}

TEST(Policy, RespectsMaxInstances) {
  PolicyConfig c = config();
  c.max_instances = 3;
  std::vector<InstanceRecord> fleet{
      instance(1, good_offer(1, 1), InstanceState::Proving, kNow - 3600)};
  EXPECT_EQ(of_kind(decide(fleet, many_good_offers(10), {}, {}, kNow, c), Kind::Rent).size(), 2u);
}

TEST(Policy, RespectsMaxConcurrentBenchmarks) {
  PolicyConfig c = config();
  c.max_concurrent_benchmarks = 2;
  std::vector<InstanceRecord> fleet{
      instance(1, good_offer(1, 1), InstanceState::FetchingParams, kNow - 60)};
  EXPECT_EQ(of_kind(decide(fleet, many_good_offers(10), {}, {}, kNow, c), Kind::Rent).size(), 1u);
}

TEST(Policy, RespectsMaxDollarsPerHour) {
  PolicyConfig c = config();
  c.max_dollars_per_hour = 1.0;  // 3 × $0.30 fit, a 4th does not
  EXPECT_EQ(of_kind(decide({}, many_good_offers(6), {}, {}, kNow, c), Kind::Rent).size(), 3u);
}

TEST(Policy, StopsRentingOnceDemandIsCovered) {
  PolicyConfig c = config();
  c.demand_proofs_per_hour = 100;
  const auto rents = of_kind(decide({}, many_good_offers(10), {}, {}, kNow, c), Kind::Rent);
  ASSERT_FALSE(rents.empty());
  EXPECT_LE(rents.size(), 3u);  // ~58/hr each: two cover 100/hr
  // A proving fleet already covering demand rents nothing.
  InstanceRecord busy = instance(1, good_offer(1, 1), InstanceState::Proving, kNow - 7200);
  busy.verdict = Verdict{Verdict::Decision::Accept, 120, 110, 130, 10, 25, "ok"};
  EXPECT_TRUE(of_kind(decide({busy}, many_good_offers(10), {}, {}, kNow, c), Kind::Rent).empty());
}

// A proving instance whose host's contract ends before a rental made now would prove is no
// capacity to plan with: its replacement is rented while it still proves.
TEST(Policy, ReplacesAnInstanceWhoseContractEndsBeforeAReplacementCouldProve) {
  PolicyConfig c = config();
  c.demand_proofs_per_hour = 100;
  InstanceRecord busy = instance(1, good_offer(1, 1), InstanceState::Proving, kNow - 7200);
  busy.verdict = Verdict{Verdict::Decision::Accept, 120, 110, 130, 10, 25, "ok"};
  busy.offer.end_date = kNow + 10 * 3600;  // ten hours left: it covers demand
  EXPECT_TRUE(of_kind(decide({busy}, many_good_offers(10), {}, {}, kNow, c), Kind::Rent).empty());
  busy.offer.end_date = kNow + 1800;  // half an hour: a replacement needs longer to prove
  EXPECT_FALSE(of_kind(decide({busy}, many_good_offers(10), {}, {}, kNow, c), Kind::Rent).empty());
}

TEST(Policy, NeverBenchmarksTwoOfOursOnOneMachineAtOnce) {
  // Two slices of machine 7 and one of machine 8.
  std::vector<Offer> offers{good_offer(1, 7), good_offer(2, 7), good_offer(3, 8)};
  const auto rents = of_kind(decide({}, offers, {}, {}, kNow, config()), Kind::Rent);
  std::set<std::int64_t> machines;
  for (const auto& a : rents) EXPECT_TRUE(machines.insert(a.offer.machine_id).second);
  EXPECT_EQ(rents.size(), 2u);
  // While ours on machine 7 is still benchmarking, nothing else goes there.
  std::vector<InstanceRecord> fleet{
      instance(1, good_offer(1, 7), InstanceState::Benchmarking, kNow - 600)};
  for (const auto& a : decide(fleet, {good_offer(2, 7)}, {}, {}, kNow, config())) {
    EXPECT_NE(a.kind, Kind::Rent);
  }
}

TEST(Policy, SkipsHostsWithALiveBlockOnly) {
  BadHost block;
  block.machine_id = 1000;
  block.source = "auto";
  block.reason = "crashed";
  block.expires_at = kNow + 3600;
  auto rents = of_kind(decide({}, many_good_offers(1), {}, {block}, kNow, config()), Kind::Rent);
  EXPECT_TRUE(rents.empty());
  block.expires_at = kNow - 1;
  rents = of_kind(decide({}, many_good_offers(1), {}, {block}, kNow, config()), Kind::Rent);
  EXPECT_EQ(rents.size(), 1u);
}

TEST(Policy, ProductionWatchDropsAnInstanceThatNoLongerPays) {
  const InstanceRecord rec = instance(1, good_offer(1, 1), InstanceState::Proving, kNow - 7200);
  // Break-even is 25/hr; the last window says 15/hr [13.5, 18].
  std::vector<Measurement> history{window(rec, 50, 55, kNow - 3600), window(rec, 15, 18, kNow)};
  PolicyHistory h;
  h.measurements = history;
  const auto drops = of_kind(decide({rec}, {}, h, {}, kNow, config()), Kind::Drop);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].instance_id, 1);
  EXPECT_THAT(drops[0].reason, HasSubstr("below break-even 25.0/hr"));
  // A healthy window keeps it.
  std::vector<Measurement> fine{window(rec, 50, 55, kNow)};
  h.measurements = fine;
  EXPECT_TRUE(of_kind(decide({rec}, {}, h, {}, kNow, config()), Kind::Drop).empty());
}

TEST(Policy, WatchDropsAfterConsecutiveWindowsBelowBreakEven) {
  const InstanceRecord rec = instance(1, good_offer(1, 1), InstanceState::Proving, kNow - 9000);
  WatchConfig cfg;
  // Point estimates below 25/hr but intervals reaching above it.
  std::vector<BenchRun> one{window(rec, 23, 27, kNow - 3600).run};
  EXPECT_FALSE(watch_production(rec, one, 25, cfg).drop);
  EXPECT_TRUE(watch_production(rec, one, 25, cfg).below);
  std::vector<BenchRun> two{one[0], window(rec, 24, 28, kNow).run};
  const WatchResult w = watch_production(rec, two, 25, cfg);
  EXPECT_TRUE(w.drop);
  EXPECT_THAT(w.reason, HasSubstr("last 2 windows"));
  // Windows from before it was accepted do not count.
  InstanceRecord later = rec;
  later.state_since = kNow - 10;
  EXPECT_FALSE(watch_production(later, two, 25, cfg).drop);
}

TEST(Policy, DropsADownloadTooSlowToPayWithAStrike) {
  InstanceRecord rec = instance(1, good_offer(1, 1), InstanceState::FetchingParams, kNow - 3600);
  rec.params_total_bytes = 47e9;
  rec.params_done_bytes = 1e9;
  rec.params_rate_bps = 100e3;  // 0.8 Mb/s: ~5 days left
  const auto drops = of_kind(decide({rec}, {}, {}, {}, kNow, config()), Kind::Drop);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_THAT(drops[0].reason, HasSubstr("download at 1 Mb/s"));
  ASSERT_TRUE(drops[0].strike);
  EXPECT_EQ(drops[0].strike->kind, StrikeKind::SlowDownload);
  // A fast download is left alone.
  rec.params_rate_bps = 100e6;
  EXPECT_TRUE(of_kind(decide({rec}, {}, {}, {}, kNow, config()), Kind::Drop).empty());
}

TEST(Policy, DropsADownloadThatCannotFinishBeforeItsDeadline) {
  // 80 Mb/s leaves ~1.3 h: paying on its own, but the state's deadline closes it in 30 min,
  // so waiting for it only pays for nothing.
  InstanceRecord rec = instance(1, good_offer(1, 1), InstanceState::FetchingParams, kNow - 1800);
  rec.params_total_bytes = 47e9;
  rec.params_done_bytes = 1e9;
  rec.params_rate_bps = 10e6;
  rec.deadline_at = kNow + 1800;
  const auto drops = of_kind(decide({rec}, {}, {}, {}, kNow, config()), Kind::Drop);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_THAT(drops[0].reason, HasSubstr("cannot finish before the download deadline"));
  ASSERT_TRUE(drops[0].strike);
  EXPECT_EQ(drops[0].strike->kind, StrikeKind::SlowDownload);
  // With time to finish it is left alone.
  rec.deadline_at = kNow + 3 * 3600;
  EXPECT_TRUE(of_kind(decide({rec}, {}, {}, {}, kNow, config()), Kind::Drop).empty());
}

TEST(Policy, RemembersAMachinesMeasuredDownloadRateWhenItIsOfferedAgain) {
  // Machine 7 advertises 2000 Mb/s, but our last rental there downloaded at 0.5 Mb/s and was
  // dropped: offered again, it is scored at the measured rate (a ~9 day download) and left
  // alone, while the same offer on a machine never measured is rented on its advertisement.
  const Offer slow_host = good_offer(10, 7);
  InstanceRecord before = instance(1, slow_host, InstanceState::Destroyed, kNow - 7200);
  before.destroyed_at = kNow - 3600;
  before.params_total_bytes = 47e9;
  before.params_done_bytes = 2e9;
  before.params_rate_bps = 62.5e3;
  const auto downloads = measured_download_mbps({before});
  ASSERT_EQ(downloads.count(7), 1u);
  EXPECT_NEAR(downloads.at(7), 0.5, 1e-9);

  const auto rents =
      of_kind(decide({before}, {slow_host, good_offer(11, 8)}, {}, {}, kNow, config()), Kind::Rent);
  ASSERT_EQ(rents.size(), 1u);
  EXPECT_EQ(rents[0].offer.id, 11);
  // Without the record, both are rented.
  EXPECT_EQ(of_kind(decide({}, {slow_host, good_offer(11, 8)}, {}, {}, kNow, config()), Kind::Rent)
                .size(),
            2u);
}

TEST(Policy, TheLatestRentalOnAMachineSetsItsRememberedDownloadRate) {
  InstanceRecord older = instance(1, good_offer(10, 7), InstanceState::Destroyed, kNow - 9000);
  older.params_rate_bps = 1e6;
  InstanceRecord newer = instance(2, good_offer(10, 7), InstanceState::Proving, kNow - 3000);
  newer.params_rate_bps = 50e6;
  InstanceRecord unmeasured = instance(3, good_offer(12, 9), InstanceState::Booting, kNow);
  const auto downloads = measured_download_mbps({newer, older, unmeasured});
  EXPECT_EQ(downloads.size(), 1u);
  EXPECT_NEAR(downloads.at(7), 400.0, 1e-9);
}

TEST(Policy, SwapsADearProvingInstanceForACheaperCandidateMakeBeforeBreak) {
  // Demand is covered by one instance at $9 per 1000 proofs; a 4090 predicted at ~$5 per 1000
  // is rented to replace it, which keeps proving until the replacement is accepted.
  PolicyConfig c = config();
  c.demand_proofs_per_hour = 100;
  InstanceRecord dear = instance(1, good_offer(1, 1, 0.9), InstanceState::Proving, kNow - 9000);
  std::vector<Measurement> history{window(dear, 100, 110, kNow)};
  PolicyHistory h;
  h.measurements = history;
  const auto actions = decide({dear}, many_good_offers(3), h, {}, kNow, c);
  EXPECT_TRUE(of_kind(actions, Kind::Drop).empty());
  const auto rents = of_kind(actions, Kind::Rent);
  ASSERT_EQ(rents.size(), 1u);
  EXPECT_THAT(rents[0].reason, HasSubstr("to replace #1"));
  // Hysteresis: an instance within swap_margin of the candidates' $/proof is kept as it is.
  InstanceRecord fair = instance(1, good_offer(1, 1, 0.55), InstanceState::Proving, kNow - 9000);
  std::vector<Measurement> fair_history{window(fair, 100, 110, kNow)};
  h.measurements = fair_history;
  EXPECT_TRUE(of_kind(decide({fair}, many_good_offers(3), h, {}, kNow, c), Kind::Rent).empty());
}

TEST(Swap, DisplacedThatWouldBeDroppedAnywayAreNoGain) {
  // The displaced instance earns nothing within demand (the fleet is already over it): its
  // price would be saved by the surplus step without the swap, so the swap gains nothing
  // from it and the candidate is valued on the room alone.
  const PolicyConfig c = config();
  const Offer candidate = good_offer(9, 9, 0.3);
  Prediction pred;
  pred.rate = 58;
  pred.low = 50;
  pred.high = 66;
  ScoreContext ctx;
  ctx.lifetime_h = 24;
  ctx.demand_room = -100;  // over demand by the whole displaced rate
  const auto over = best_swap(candidate, pred, c.scoring, ctx, {{1, 1, 100, 0.9}}, 0, 0.1, 3);
  ASSERT_TRUE(over);
  EXPECT_LE(over->value_usd, 0);
  ctx.demand_room = 0;  // the displaced fill demand exactly: replacing them gains
  const auto full = best_swap(candidate, pred, c.scoring, ctx, {{1, 1, 100, 0.9}}, 0, 0.1, 3);
  ASSERT_TRUE(full);
  EXPECT_GT(full->value_usd, 1);
  // Never an instance on the candidate's own machine, nor one cheaper per proof.
  EXPECT_FALSE(best_swap(candidate, pred, c.scoring, ctx, {{1, 9, 100, 0.9}}, 0, 0.1, 3));
  EXPECT_FALSE(best_swap(candidate, pred, c.scoring, ctx, {{1, 1, 100, 0.4}}, 0, 0.1, 3));
}

TEST(Policy, DropsTheDearestInstanceWhoseProofsDemandDoesNotBuy) {
  PolicyConfig c = config();
  c.demand_proofs_per_hour = 100;
  InstanceRecord cheap = instance(1, good_offer(1, 1, 0.3), InstanceState::Proving, kNow - 9000);
  InstanceRecord dear = instance(2, good_offer(2, 2, 0.6), InstanceState::Proving, kNow - 9000);
  std::vector<Measurement> history{window(cheap, 110, 120, kNow), window(dear, 60, 66, kNow)};
  PolicyHistory h;
  h.measurements = history;
  const auto drops = of_kind(decide({cheap, dear}, {}, h, {}, kNow, c), Kind::Drop);
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].instance_id, 2);
  EXPECT_THAT(drops[0].reason, HasSubstr("surplus"));
}

TEST(Policy, ExploratoryRentsDrawOnABoundedBudget) {
  // Priced so the prior's point estimate does not pay but its band might.
  std::vector<Offer> offers;
  for (int i = 0; i < 4; ++i) offers.push_back(good_offer(100 + i, 1000 + i, 0.75));
  PolicyConfig c = config();
  c.exploration_budget_usd = 100;
  const auto rents = of_kind(decide({}, offers, {}, {}, kNow, c), Kind::Rent);
  ASSERT_FALSE(rents.empty());
  for (const auto& a : rents) {
    EXPECT_TRUE(a.exploratory);
    EXPECT_THAT(a.reason, HasSubstr("to find out"));
  }
  PolicyHistory spent;
  spent.exploration_spent_usd = 100;
  EXPECT_TRUE(of_kind(decide({}, offers, spent, {}, kNow, c), Kind::Rent).empty());
}

TEST(Policy, ExplorationSpendCountsOnlyRecentRentalsThatWereNotAccepted) {
  InstanceRecord rejected = instance(1, good_offer(1, 1), InstanceState::Destroyed, kNow);
  rejected.destroyed_at = kNow - 3600;
  rejected.spend_usd = 2;
  InstanceRecord old = rejected;
  old.destroyed_at = kNow - 48 * 3600;
  InstanceRecord kept = rejected;
  kept.verdict = Verdict{Verdict::Decision::Accept, 60, 55, 65, 5, 25, "ok"};
  EXPECT_DOUBLE_EQ(exploration_spend({rejected, old, kept}, kNow, 24 * 3600), 2);
}

TEST(Policy, NothingIsRentedWhenTheHorizonLeavesNoTimeToEarn) {
  PolicyConfig c = config();
  c.stop_at = kNow + 600;
  EXPECT_TRUE(decide({}, many_good_offers(3), {}, {}, kNow, c).empty());
}

TEST(ProductionWindows, OnlyWindowsClosedByALaterProofAreComplete) {
  std::vector<ProofSample> samples;
  auto add = [&](double at, ProofPhase phase) {
    ProofSample s;
    s.seq = static_cast<std::int64_t>(samples.size()) + 1;
    s.at = at;
    s.seconds = 60;
    s.phase = phase;
    samples.push_back(s);
  };
  add(900, ProofPhase::Benchmark);  // not production: ignored
  // Production from t=1000 (first proof started at 940), one per minute for 150 minutes.
  for (int i = 0; i < 150; ++i) add(1000 + 60.0 * i, ProofPhase::Production);
  const auto windows = complete_production_windows(samples, 3600);
  ASSERT_EQ(windows.size(), 2u);  // [940, 4540), [4540, 8140); the third is still open
  EXPECT_DOUBLE_EQ(windows[0].start, 940);
  EXPECT_DOUBLE_EQ(windows[1].start, 4540);
  EXPECT_EQ(windows[0].samples.size(), 59u);  // 1000, 1060, ..., 4480
  EXPECT_EQ(windows[1].samples.size(), 60u);  // 4540, ..., 8080
  // Order of arrival does not matter; too few proofs for one window: none.
  std::reverse(samples.begin(), samples.end());
  EXPECT_EQ(complete_production_windows(samples, 3600).size(), 2u);
  EXPECT_TRUE(complete_production_windows(samples, 1e9).empty());
  EXPECT_TRUE(complete_production_windows({}, 3600).empty());
}

// new_production_windows skips the sort and the binning when no window has closed since the last
// recorded one (it runs on every production proof); it must find exactly the windows the full
// computation finds, ties on the earliest proof and out-of-order samples included.
TEST(ProductionWindows, NewWindowsAreTheCompleteOnesNotYetRecorded) {
  std::mt19937 rng(20261206);
  std::uniform_real_distribution<double> gap(0, 400), secs(30, 300);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<ProofSample> samples;
    double at = 1000;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      ProofSample s;
      s.seq = i + 1;
      if (rng() % 5 != 0) at += gap(rng);  // a fifth end together with the one before
      s.at = at;
      s.seconds = secs(rng);
      s.phase = rng() % 6 == 0 ? ProofPhase::Benchmark : ProofPhase::Production;
      samples.push_back(s);
    }
    if (trial % 2 == 1) std::shuffle(samples.begin(), samples.end(), rng);
    const double window_s = 600 + static_cast<double>(rng() % 3000);
    const auto complete = complete_production_windows(samples, window_s);
    for (int recorded = 0; recorded <= static_cast<int>(complete.size()) + 1; ++recorded) {
      InstanceRecord rec;
      rec.production_windows = recorded;
      const auto fresh = new_production_windows(rec, samples, window_s, 1.96);
      const std::size_t want =
          complete.size() > static_cast<std::size_t>(recorded) ? complete.size() - recorded : 0;
      ASSERT_EQ(fresh.size(), want) << "trial " << trial << " recorded " << recorded;
      for (std::size_t i = 0; i < fresh.size(); ++i)
        EXPECT_DOUBLE_EQ(fresh[i].start, complete[recorded + i].start);
    }
  }
}

}  // namespace
}  // namespace pf::core

namespace pf::core {
namespace {

// The operator cooldown reads the stored close cause, not the reason's text.
TEST(PolicyOperatorCooldown, MachinesTheOperatorClosedAreLeftAloneForTheCooldown) {
  const Offer a = good_offer(1, 100);
  const Offer b = good_offer(2, 200);
  auto closed_by_operator = instance(10, a, InstanceState::Destroyed, kNow - 3600);
  closed_by_operator.close_cause = CloseCause::Operator;
  closed_by_operator.destroy_reason = "please stop";  // any text
  closed_by_operator.destroyed_at = kNow - 3600;
  // A drop whose reason merely reads like the operator's: no cooldown.
  auto dropped = instance(11, b, InstanceState::Destroyed, kNow - 3600);
  dropped.close_cause = CloseCause::Dropped;
  dropped.destroy_reason = "operator request";
  dropped.destroyed_at = kNow - 3600;
  const std::vector<InstanceRecord> fleet{closed_by_operator, dropped};
  PolicyConfig cfg = config();
  cfg.operator_cooldown_s = 24 * 3600;
  EXPECT_EQ(operator_cooldown_machines(fleet, kNow, cfg.operator_cooldown_s),
            std::set<std::int64_t>{100});
  auto rented = [&](const PolicyConfig& c) {
    std::set<std::int64_t> machines;
    for (const auto& act : decide(fleet, {a, b}, {}, {}, kNow, c))
      if (act.kind == Kind::Rent) machines.insert(act.offer.machine_id);
    return machines;
  };
  EXPECT_EQ(rented(cfg), std::set<std::int64_t>{200});
  cfg.operator_cooldown_s = 1800;  // over
  EXPECT_EQ(rented(cfg), (std::set<std::int64_t>{100, 200}));
}

}  // namespace
}  // namespace pf::core
