// The policy simulator on small hand-written scenarios whose right answers are known
// (tests/fixtures/des/*.json; each file's offers are described where it is used).
#include "sim/des_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "core/billing.h"
#include "core/memory_model.h"
#include "sim/des_policies.h"

namespace pf::sim {
namespace {

using ::testing::HasSubstr;

Scenario fixture(const std::string& name) {
  auto s = scenario::load_scenario(std::string(PF_SOURCE_DIR) + "/tests/fixtures/des/" + name);
  if (!s) throw std::runtime_error(s.error());
  return *s;
}

DesReport run(const Scenario& s, const std::string& policy_name) {
  auto policy = make_policy(policy_name, s);
  if (!policy) throw std::runtime_error("no policy " + policy_name);
  DesOptions options;
  options.details = true;
  return run_des(s, *policy, options);
}

const InstanceOutcome* rental_of(const DesReport& r, std::int64_t offer_id) {
  for (const auto& i : r.instances)
    if (i.offer_id == offer_id) return &i;
  return nullptr;
}

std::set<std::int64_t> accepted_offers(const DesReport& r) {
  std::set<std::int64_t> out;
  for (const auto& i : r.instances)
    if (i.accepted) out.insert(i.offer_id);
  return out;
}

// single-good: one offer, 60/hr for $0.30 (break-even 25/hr), 10 hours, unlimited demand.
TEST(DesEngine, OneGoodOfferIsRentedKeptAndEarnsWhatThePhysicsSays) {
  const Scenario s = fixture("single-good.json");
  const DesReport r = run(s, "default");
  EXPECT_EQ(r.instances_rented, 1);
  EXPECT_EQ(r.instances_accepted, 1);
  EXPECT_EQ(r.rejected_profitable, 0);
  EXPECT_EQ(r.accepted_unprofitable, 0);
  // Boot 5 min, download 47 GB at 800 Mb/s (~7.8 min), warm-up 5 min + one proof, a few
  // benchmark proofs: ~9.6 h of production at 60/hr.
  EXPECT_NEAR(static_cast<double>(r.proofs), 9.6 * 60, 9.6 * 60 * 0.05);
  EXPECT_NEAR(r.revenue_usd, r.proofs * 0.012, 1e-9);
  // Billed from boot to the horizon: (10 h − 5 min) × $0.30.
  EXPECT_NEAR(r.spend_usd, (10 - 5.0 / 60) * 0.30, 0.01);
  EXPECT_NEAR(r.profit_usd, r.revenue_usd - r.spend_usd, 1e-9);
  ASSERT_TRUE(r.cost_per_proof_usd);
  EXPECT_NEAR(*r.cost_per_proof_usd, r.spend_usd / r.proofs, 1e-12);
  EXPECT_GT(r.benchmark_spend_usd, 0);
  EXPECT_LT(r.benchmark_spend_usd, 0.2);
  EXPECT_EQ(r.ooms, 0);
}

// mixed: 1001 pays; 1002 looks like any 4090 but proves 8/hr; 1003 never boots; 1004 pays but
// its container has 128 GiB of the 512 GiB it advertises.
TEST(DesEngine, MixedMarketEachPolicyMakesItsExpectedChoices) {
  const Scenario s = fixture("mixed.json");

  const DesReport clairvoyant = run(s, "clairvoyant");
  EXPECT_EQ(accepted_offers(clairvoyant), (std::set<std::int64_t>{1001, 1004}));
  EXPECT_EQ(clairvoyant.instances_rented, 2);
  EXPECT_EQ(clairvoyant.ooms, 0);

  const DesReport def = run(s, "default");
  EXPECT_EQ(accepted_offers(def), (std::set<std::int64_t>{1001, 1004}));
  const InstanceOutcome* slow = rental_of(def, 1002);
  ASSERT_TRUE(slow);
  EXPECT_FALSE(slow->accepted);
  EXPECT_THAT(slow->close_reason, HasSubstr("benchmark rejected"));
  // A clear case decides at the fewest samples serve's [acceptance] allows (6).
  EXPECT_EQ(slow->verdict_samples, serve_defaults().sprt.min_samples);
  const InstanceOutcome* dead = rental_of(def, 1003);
  ASSERT_TRUE(dead);
  EXPECT_THAT(dead->close_reason, HasSubstr("booting"));
  // Never booted: no compute, but vast bills the rented disk from creation until the boot
  // deadline closes it (core/billing.h).
  EXPECT_NEAR(dead->spend_usd,
              core::storage_usd_per_hour(s.offers[2].offer, core::kDefaultDiskGb) *
                  serve_defaults().lifecycle.boot_loading_max_s / 3600,
              1e-9);
  const InstanceOutcome* small = rental_of(def, 1004);
  ASSERT_TRUE(small);
  EXPECT_EQ(small->partitions, planned_partitions(probe_of(s.offers[3])));
  EXPECT_EQ(def.ooms, 0);
  EXPECT_EQ(def.rejected_profitable, 0);
  EXPECT_EQ(def.accepted_unprofitable, 0);
  // The host that never booted is blocked, then retried once its block expires (6 h).
  int dead_rentals = 0;
  for (const auto& i : def.instances) dead_rentals += i.offer_id == 1003;
  EXPECT_EQ(dead_rentals, 2);

  // Classic runs 16 partitions on the advertised 512 GiB: 1004 OOMs and is never retried.
  const DesReport classic = run(s, "classic");
  EXPECT_GE(classic.ooms, 1);
  const InstanceOutcome* oomed = rental_of(classic, 1004);
  ASSERT_TRUE(oomed);
  EXPECT_FALSE(oomed->accepted);
  EXPECT_TRUE(oomed->rejected_profitable);
  EXPECT_GT(def.profit_usd, classic.profit_usd);
}

// A planner that trusts the advertised RAM first and re-plans from the probe after an OOM.
class ReplanningPolicy final : public DesPolicy {
 public:
  explicit ReplanningPolicy(const Scenario& s) : inner_(default_policy_config(s)) {}
  std::string name() const override { return "replanning"; }
  core::LifecycleConfig lifecycle() const override { return inner_.lifecycle(); }
  const core::Acceptance* acceptance() const override { return inner_.acceptance(); }
  double break_even_rate(const core::Offer& o) const override { return inner_.break_even_rate(o); }
  int plan_partitions(const core::Offer& offer, const AgentProbe& probe,
                      int after_oom) const override {
    if (after_oom == 0) return core::partitions_for_ram(offer.cpu_ram_gib, core::MemoryModel{});
    return inner_.plan_partitions(offer, probe, after_oom);
  }
  std::vector<core::Action> decide(const DesView& view) override {
    std::vector<core::Action> out;
    if (!view.fleet.empty()) return out;
    for (const auto& o : view.offers) {
      if (o.id != 1004) continue;
      core::Action a;
      a.kind = core::Action::Kind::Rent;
      a.offer = o;
      a.reason = "test";
      out.push_back(a);
    }
    return out;
  }

 private:
  DefaultPolicy inner_;
};

TEST(DesEngine, OomDuringWarmupIsFollowedByAReplanAndNoSecondOom) {
  const Scenario s = fixture("mixed.json");
  ReplanningPolicy policy(s);
  DesOptions options;
  options.details = true;
  const DesReport r = run_des(s, policy, options);
  EXPECT_EQ(r.ooms, 1);
  EXPECT_EQ(r.ooms_after_first_on_host, 0);
  EXPECT_EQ(r.instances_accepted, 1);
  ASSERT_EQ(r.instances.size(), 1u);
  EXPECT_EQ(r.instances[0].partitions, planned_partitions(probe_of(s.offers[3])));
  EXPECT_GT(r.proofs, 0);
}

// shared-machine: two slices of one machine, 50/hr alone, ×0.6 each while both run. Together
// 60/hr for $0.70 (break-even 58/hr): the second slice does not pay.
TEST(DesEngine, DefaultRentsOneSliceOfAContendedMachine) {
  const Scenario s = fixture("shared-machine.json");
  const DesReport def = run(s, "default");
  EXPECT_EQ(def.instances_rented, 1);
  EXPECT_EQ(def.instances_accepted, 1);
  const DesReport classic = run(s, "classic");
  EXPECT_EQ(classic.instances_rented, 2);  // both at once, benchmarks contended
  EXPECT_GT(def.profit_usd, classic.profit_usd);
}

// demand-capped: three equal 60/hr offers, demand 60 proofs/hour.
TEST(DesEngine, DemandCapsRevenueAndTheDefaultRentsOnlyWhatDemandBuys) {
  const Scenario s = fixture("demand-capped.json");
  const DesReport def = run(s, "default");
  EXPECT_EQ(def.instances_accepted, 1);
  EXPECT_LE(def.proofs, 60 * 10);
  const DesReport classic = run(s, "classic");
  EXPECT_EQ(classic.instances_accepted, 3);
  EXPECT_LE(classic.proofs, 60 * 10);
  EXPECT_GT(classic.proofs_unpaid, 0);
  EXPECT_GT(def.profit_usd, classic.profit_usd);
}

TEST(DesEngine, CrashShowsExitedAndTheLifecycleDestroysIt) {
  Scenario s = fixture("single-good.json");
  s.offers[0].truth.failure = {FailureKind::Crash, 2.0};
  const DesReport r = run(s, "default");
  const InstanceOutcome* first = rental_of(r, 1001);
  ASSERT_TRUE(first);
  EXPECT_THAT(first->close_reason, HasSubstr("exited"));
  ASSERT_TRUE(first->closed_h);
  // Parameters done at ~0.2 h, crash 2 h later, destroyed within a tick.
  EXPECT_NEAR(*first->closed_h, 2.2, 0.1);
  EXPECT_EQ(r.rejected_profitable, 0);  // a host failure is not a mistake of the policy
}

TEST(DesEngine, OfflineHostIsNotBilledAfterItDisappears) {
  Scenario s = fixture("single-good.json");
  s.offers[0].truth.failure = {FailureKind::Offline, 3.0};
  s.offers[0].listed_until_h = 1;  // it cannot be rented again
  const DesReport r = run(s, "clairvoyant");
  EXPECT_EQ(r.instances_rented, 1);
  // Billed from boot (5 min) to offline (3 h after boot).
  EXPECT_NEAR(r.spend_usd, 3.0 * 0.30, 0.01);
}

TEST(DesEngine, ThrottledHostIsDroppedByTheWatchButKeptByClassic) {
  Scenario s = fixture("single-good.json");
  // 60/hr → 15/hr after an hour of proving, against break-even 20.8/hr at $0.25.
  s.offers[0].offer.dph_total = 0.25;
  s.offers[0].truth.throttle = Throttle{1.0, 0.25};
  s.offers[0].listed_until_h = 1;
  const DesReport def = run(s, "default");
  const DesReport classic = run(s, "classic");
  ASSERT_EQ(def.instances.size(), 1u);
  EXPECT_TRUE(def.instances[0].accepted);
  EXPECT_THAT(def.instances[0].close_reason, HasSubstr("production watch"));
  EXPECT_EQ(def.accepted_unprofitable, 0);
  ASSERT_EQ(classic.instances.size(), 1u);
  EXPECT_TRUE(classic.instances[0].accepted);
  EXPECT_FALSE(classic.instances[0].closed_h);
  EXPECT_EQ(classic.accepted_unprofitable, 1);
  EXPECT_GT(def.profit_usd, classic.profit_usd);
}

TEST(DesEngine, SameSeedSameReportOtherSeedOtherProofTimes) {
  Scenario s = fixture("mixed.json");
  for (const auto& name : policy_names()) {
    const auto a = report_json(run(s, name), true);
    const auto b = report_json(run(s, name), true);
    EXPECT_EQ(a, b) << name;
  }
  // Another seed draws other proof times: the benchmark measures another rate.
  const DesReport first = run(s, "default");
  s.seed += 1;
  const DesReport other = run(s, "default");
  ASSERT_TRUE(rental_of(first, 1001) && rental_of(other, 1001));
  EXPECT_NE(rental_of(first, 1001)->verdict_rate, rental_of(other, 1001)->verdict_rate);
}

TEST(DesEngine, ReportHasEverySpecKey) {
  const auto j = report_json(run(fixture("single-good.json"), "default"));
  for (const char* key :
       {"scenario", "policy", "hours", "proofs", "revenue_usd", "spend_usd", "profit_usd",
        "cost_per_proof_usd", "benchmark_spend_usd", "instances_rented", "instances_accepted",
        "accepted_unprofitable", "rejected_profitable", "ooms", "mean_proofs_per_hour"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.at("policy"), "default");
  EXPECT_EQ(j.at("scenario"), "single-good");
  EXPECT_FALSE(j.contains("instances"));
}

TEST(DesPolicies, ClassicTimesATwelveProofBatchAfterWarmUpAndRestart) {
  ClassicAcceptance test(12, 90);
  core::BenchmarkInput in;
  in.since = 1000;            // the warm-up proof is done (not timed); the daemon restarts
  in.break_even_rate = 49.5;  // $0.396 / 0.008 → min_rate ⌈49.5⌉ = 50
  // One proof a minute after the restart: 12 proofs in 12 min + the 90 s preload = 53.3/hr.
  for (int i = 0; i < 11; ++i) {
    core::ProofSample p;
    p.at = 1000 + 60.0 * (i + 1);
    in.samples.push_back(p);
  }
  in.now = in.samples.back().at;
  EXPECT_EQ(test.evaluate(in).decision, core::Verdict::Decision::Continue);
  core::ProofSample last;
  last.at = 1000 + 60.0 * 12;
  in.samples.push_back(last);
  const core::Verdict v = test.evaluate(in);
  EXPECT_EQ(v.decision, core::Verdict::Decision::Accept);
  EXPECT_NEAR(v.rate, 12 * 3600.0 / 810, 1e-9);
  in.break_even_rate = 53.4;  // min_rate 54 > 53.3
  EXPECT_EQ(test.evaluate(in).decision, core::Verdict::Decision::Reject);
}

TEST(DesPolicies, ClassicRunsTenPartitionsSixteenAbove400Gb) {
  const Scenario s = fixture("mixed.json");
  ClassicPolicy classic(s, ClassicConfig{});
  // 1004 advertises 512 GiB (550 GB): 16 partitions; 1001 advertises 256 GiB (275 GB): 10.
  EXPECT_EQ(classic.plan_partitions(s.offers[3].offer, probe_of(s.offers[3]), 0), 16);
  EXPECT_EQ(classic.plan_partitions(s.offers[0].offer, probe_of(s.offers[0]), 0), 10);
  EXPECT_EQ(classic.plan_partitions(s.offers[3].offer, probe_of(s.offers[3]), 16),
            0);  // no re-plan
}

TEST(DesPolicies, UnknownPolicyNameGivesNothing) {
  EXPECT_EQ(make_policy("greedy", fixture("mixed.json")), nullptr);
}

}  // namespace
}  // namespace pf::sim
