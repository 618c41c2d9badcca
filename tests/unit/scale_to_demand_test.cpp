// The scaling decision (core/scale_to_demand.h): the demand the fleet is sized for, from the
// queue's arrivals, the daily forecast, the backlog against deadlines and measured capacity,
// and the censored signal of a full admission window.
#include "core/scale_to_demand.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace pf::core {
namespace {

using ::testing::HasSubstr;

constexpr double kStart = 1'750'000'000;
constexpr double kHour = 3600;
constexpr double kDay = 86400;

void add_steady(std::vector<double>& out, double from, double to, double per_hour) {
  const double gap = 3600 / per_hour;
  for (double t = from + gap / 2; t < to; t += gap) out.push_back(t);
}

struct Seen {
  double now = kStart + 2 * kHour;
  std::vector<double> arrivals;
  std::vector<double> deadlines;
  int queued = 0;
  int in_flight = 0;
  int window = 0;
  QueueObservation view() const {
    return {now, kStart, arrivals, queued, deadlines, in_flight, window};
  }
};

Seen steady_seen(double per_hour) {
  Seen s;
  add_steady(s.arrivals, kStart, s.now, per_hour);
  return s;
}

ScaleToDemandConfig scale_config() {
  ScaleToDemandConfig c;
  return c;
}

TEST(ScaleToDemand, NothingUntilEnoughHasBeenWatched) {
  Seen s;
  s.now = kStart + 60;
  EXPECT_FALSE(demand_to_serve(s.view(), std::nullopt, 0, scale_config()));
}

TEST(ScaleToDemand, SteadyArrivalsAreTheDemand) {
  const auto d = demand_to_serve(steady_seen(300).view(), std::nullopt, 320, scale_config());
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->proofs_per_hour, 300, 2);
  EXPECT_FALSE(d->would_miss);
  EXPECT_FALSE(d->censored);
  EXPECT_FALSE(d->forecast);  // two hours watched: no daily pattern yet
  EXPECT_THAT(d->reason, HasSubstr("jobs in the last 60 min"));
}

TEST(ScaleToDemand, ABacklogThatWouldMissDeadlinesAsksForTheCapacityThatMeetsThem) {
  // 100/hr arriving, 60 queued due 20 to 40 min from now, the fleet proves 60/hr: the 60th
  // job would be done in an hour, after its deadline. Earliest deadline first, meeting them
  // all needs k jobs ÷ the time to the k-th deadline, at its largest.
  Seen s = steady_seen(100);
  for (int k = 0; k < 60; ++k) s.deadlines.push_back(s.now + 20 * 60 + k * 20);
  s.queued = 60;
  const auto d = demand_to_serve(s.view(), std::nullopt, 60, scale_config());
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->would_miss);
  // k = 1 at 1200 s: 3/hr; k = 60 at 1200 + 59·20 = 2380 s: 90.8/hr — the largest.
  EXPECT_NEAR(d->deadline_rate, 60 * 3600 / 2380.0, 0.5);
  EXPECT_THAT(d->reason, HasSubstr("would miss deadlines"));
  // A burst due sooner asks for more than the arrival rate: the fleet must grow.
  Seen burst = steady_seen(100);
  for (int k = 0; k < 200; ++k) burst.deadlines.push_back(burst.now + 15 * 60);
  burst.queued = 200;
  const auto b = demand_to_serve(burst.view(), std::nullopt, 100, scale_config());
  ASSERT_TRUE(b);
  EXPECT_NEAR(b->deadline_rate, 800, 1);
  EXPECT_NEAR(b->proofs_per_hour, 800, 1);
}

TEST(ScaleToDemand, ABacklogTheFleetClearsInTimeAddsOnlyItsDrain) {
  Seen s = steady_seen(100);
  for (int k = 0; k < 10; ++k) s.deadlines.push_back(s.now + 40 * 60);
  s.queued = 10;
  const auto d = demand_to_serve(s.view(), std::nullopt, 200, scale_config());
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->would_miss);
  // 100/hr + 10 jobs drained within 2 h (5/hr); the 15/hr deadline need is below it.
  EXPECT_NEAR(d->proofs_per_hour, 105, 2);
}

TEST(ScaleToDemand, JobsDueTooSoonOrPastTheirDeadlineAskForNothingFromRenting) {
  Seen s = steady_seen(100);
  for (int k = 0; k < 50; ++k) s.deadlines.push_back(s.now + 60);  // due in a minute
  for (int k = 0; k < 50; ++k) s.deadlines.push_back(s.now - 60);  // already late
  s.queued = 100;
  const auto d = demand_to_serve(s.view(), std::nullopt, 100, scale_config());
  ASSERT_TRUE(d);
  EXPECT_DOUBLE_EQ(d->deadline_rate, 0);
  EXPECT_TRUE(d->would_miss);  // the fleet will miss them, but rentals cannot help
}

TEST(ScaleToDemand, AFullAdmissionWindowMeansAtLeastMoreThanCapacity) {
  // The client holds back: 64 open jobs of a 64 window, arrivals capped at what the fleet
  // takes (200/hr). Demand is at least capacity × 1.25 — and grows as capacity does.
  Seen s = steady_seen(200);
  s.queued = 40;
  s.in_flight = 24;
  s.window = 64;
  const auto d = demand_to_serve(s.view(), std::nullopt, 200, scale_config());
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->censored);
  EXPECT_NEAR(d->proofs_per_hour, 250, 1e-9);
  EXPECT_THAT(d->reason, HasSubstr("admission window full"));
  // Next decision, capacity has grown to 250/hr and the window is still full: 312.5/hr, never
  // held at the old figure.
  const auto again = demand_to_serve(s.view(), d->proofs_per_hour, 250, scale_config());
  ASSERT_TRUE(again);
  EXPECT_FALSE(again->held);
  EXPECT_NEAR(again->proofs_per_hour, 312.5, 1e-9);
  // The window not full: the same arrivals are the demand, held near the previous figure.
  s.queued = 10;
  const auto open = demand_to_serve(s.view(), std::nullopt, 250, scale_config());
  ASSERT_TRUE(open);
  EXPECT_FALSE(open->censored);
  EXPECT_LT(open->proofs_per_hour, 250);
}

TEST(ScaleToDemand, TheDailyPatternRaisesTheDemandBeforeThePeak) {
  // Yesterday 100/hr, and 600/hr from 09:00 to 12:00. Today 08:15: trailing 100/hr; a rental
  // rented now proves at 09:15, when yesterday ran at 600/hr.
  Seen s;
  s.now = kStart + kDay + 8.25 * kHour;
  add_steady(s.arrivals, kStart, kStart + 9 * kHour, 100);
  add_steady(s.arrivals, kStart + 9 * kHour, kStart + 12 * kHour, 600);
  add_steady(s.arrivals, kStart + 12 * kHour, s.now, 100);
  const auto d = demand_to_serve(s.view(), 100, 110, scale_config());
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->forecast);
  // The window around 09:15 yesterday: 45 min at 600/hr + 15 min at 100/hr = 475/hr.
  EXPECT_NEAR(d->forecast->pattern_rate, 475, 2);
  EXPECT_NEAR(d->proofs_per_hour, 0.5 * 475 + 0.5 * 100, 3);
  EXPECT_FALSE(d->held);
  // Without the forecast the trailing rate alone is held at 100.
  auto cfg = scale_config();
  cfg.use_forecast = false;
  const auto plain = demand_to_serve(s.view(), 100, 110, cfg);
  ASSERT_TRUE(plain);
  EXPECT_TRUE(plain->held);
  EXPECT_DOUBLE_EQ(plain->proofs_per_hour, 100);
}

TEST(ScaleToDemand, AForecastThatMissedLatelyLeavesTheTrailingRate) {
  // Yesterday was quiet at this hour; today runs at 500/hr: the pattern missed the last hours,
  // so the demand is what arrives.
  Seen s;
  s.now = kStart + kDay + 8 * kHour;
  add_steady(s.arrivals, kStart, kStart + kDay, 50);
  add_steady(s.arrivals, kStart + kDay, s.now, 500);
  const auto d = demand_to_serve(s.view(), std::nullopt, 500, scale_config());
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->forecast);
  EXPECT_NEAR(d->proofs_per_hour, 500, 5);
}

TEST(ScaleToDemand, AForecastThatPredictedWellLowersTheDemandBeforeALull) {
  // Every day 100/hr, and 600/hr from 06:00 to 12:00; day 3, 11:30: a rental rented now would
  // prove into the lull. The pattern foresaw this morning's rise, the trailing rate lagged it.
  Seen s;
  s.now = kStart + 2 * kDay + 11.5 * kHour;
  for (int d = 0; d < 3; ++d) {
    const double day = kStart + d * kDay;
    add_steady(s.arrivals, day, day + 6 * kHour, 100);
    add_steady(s.arrivals, day + 6 * kHour, day + 12 * kHour, 600);
    add_steady(s.arrivals, day + 12 * kHour, day + kDay, 100);
  }
  std::erase_if(s.arrivals, [&](double t) { return t > s.now; });
  const auto d = demand_to_serve(s.view(), 600, 600, scale_config());
  ASSERT_TRUE(d);
  ASSERT_TRUE(d->forecast);
  EXPECT_LT(d->proofs_per_hour, 300);
  EXPECT_FALSE(d->held);
}

TEST(ScaleToDemand, HysteresisHoldsTheFigureWithinTheNoise) {
  const auto d = demand_to_serve(steady_seen(300).view(), 310, 300, scale_config());
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->held);
  EXPECT_DOUBLE_EQ(d->proofs_per_hour, 310);
  const auto moved = demand_to_serve(steady_seen(300).view(), 500, 300, scale_config());
  ASSERT_TRUE(moved);
  EXPECT_FALSE(moved->held);
  EXPECT_NEAR(moved->proofs_per_hour, 300, 2);
}

// --- measured capacity and the one decision ---------------------------------------------------

InstanceRecord proving(std::int64_t id, double rate, double dph) {
  InstanceRecord r;
  r.id = id;
  r.state = InstanceState::Proving;
  r.state_since = kStart;
  r.offer.id = 1000 + id;
  r.offer.machine_id = 2000 + id;
  r.offer.dph_total = dph;
  r.offer.num_gpus = 1;
  r.offer.gpu_name = "RTX 4090";
  Verdict v;
  v.decision = Verdict::Decision::Accept;
  v.rate = rate;
  r.verdict = v;
  return r;
}

TEST(ScaleToDemand, MeasuredRatesPreferTheLatestProductionWindow) {
  std::vector<InstanceRecord> fleet = {proving(1, 40, 0.3), proving(2, 30, 0.3)};
  fleet.push_back(proving(3, 50, 0.3));
  fleet.back().state = InstanceState::Benchmarking;  // not proving: no capacity yet
  Measurement m;
  m.run.instance_id = 1;
  m.run.kind = "production";
  m.run.at = kStart + kHour;
  m.run.samples = 20;
  m.run.rate = 35;
  const std::vector<Measurement> ms = {m};
  const auto rates = measured_rates(fleet, ms, WatchConfig{});
  ASSERT_EQ(rates.size(), 2u);
  EXPECT_DOUBLE_EQ(rates.at(1), 35);
  EXPECT_DOUBLE_EQ(rates.at(2), 30);
}

TEST(ScaleToDemand, AnIdleFleetDropsTheLeastEfficientInstance) {
  // Two proving instances (40/hr at $0.30, 30/hr at $0.40) and 5 jobs/hr arriving: the
  // dearest per proof goes.
  std::vector<InstanceRecord> fleet = {proving(1, 40, 0.3), proving(2, 30, 0.4)};
  PolicyConfig policy;
  policy.scoring.economics.revenue_per_proof_usd = 0.012;
  Seen s = steady_seen(5);
  const auto out = decide_for_jobs(fleet, {}, PolicyHistory{}, {}, s.now, policy, s.view(),
                                   std::nullopt, scale_config());
  ASSERT_TRUE(out.demand);
  ASSERT_TRUE(out.sized_for);
  EXPECT_NEAR(*out.sized_for, 5, 1);
  EXPECT_DOUBLE_EQ(out.demand->capacity, 70);
  ASSERT_EQ(out.actions.size(), 1u);
  EXPECT_EQ(out.actions[0].kind, Action::Kind::Drop);
  EXPECT_EQ(out.actions[0].instance_id, 2);
  EXPECT_THAT(out.actions[0].reason, HasSubstr("surplus"));
}

TEST(ScaleToDemand, TheBacklogToDrainIsNotLastingDemand) {
  // 300/hr arriving, 100 queued due in 40 min that the measured 400/hr meets: the fleet is sized
  // for arrivals + the drain, but only the arrivals last.
  Seen s = steady_seen(300);
  for (int k = 0; k < 100; ++k) s.deadlines.push_back(s.now + 40 * 60);
  s.queued = 100;
  const auto d = demand_to_serve(s.view(), std::nullopt, 400, scale_config());
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->would_miss);
  EXPECT_NEAR(d->proofs_per_hour, 350, 3);
  EXPECT_NEAR(d->lasting_proofs_per_hour, 300, 3);
  // 200 queued due in 25 min at a measured 100/hr would miss their deadlines: a shortfall of
  // capacity (480/hr), not a backlog, and it lasts.
  s.deadlines.assign(200, s.now + 25 * 60);
  s.queued = 200;
  const auto short_of = demand_to_serve(s.view(), std::nullopt, 100, scale_config());
  ASSERT_TRUE(short_of);
  EXPECT_TRUE(short_of->would_miss);
  EXPECT_NEAR(short_of->lasting_proofs_per_hour, short_of->deadline_rate, 1e-9);
  EXPECT_NEAR(short_of->lasting_proofs_per_hour, 480, 1);
}

TEST(ScaleToDemand, AStepUpInArrivalsLastsBeforeTheTrailingHourSeesIt) {
  // 100/hr for 90 min, then 500/hr for the last 30 min: the trailing hour says 300/hr, the last
  // half hour 500/hr, and that is what lasts.
  Seen s;
  add_steady(s.arrivals, kStart, kStart + 1.5 * kHour, 100);
  add_steady(s.arrivals, kStart + 1.5 * kHour, s.now, 500);
  const auto d = demand_to_serve(s.view(), std::nullopt, 300, scale_config());
  ASSERT_TRUE(d);
  EXPECT_NEAR(d->recent.arrival_rate, 300, 3);
  EXPECT_NEAR(d->lasting_proofs_per_hour, 500, 3);
}

TEST(ScaleToDemand, WithTransientBacklogACandidateIsNotRentedForAQueueWorkedOffBeforeItProves) {
  // 150/hr arriving, measured 150/hr proving, 200 queued that the fleet meets by their
  // deadlines: demand 250/hr leaves 100/hr of room, all of it backlog. Rented for it as if it
  // lasted; not when the backlog is valued only while it lasts.
  std::vector<InstanceRecord> fleet = {proving(1, 150, 0.3)};
  PolicyConfig policy;
  policy.scoring.economics.revenue_per_proof_usd = 0.012;
  policy.scoring.economics.target_cost_per_proof_usd = 0.008;
  Seen s = steady_seen(150);
  for (int k = 0; k < 200; ++k) s.deadlines.push_back(s.now + 2 * kHour);
  s.queued = 200;
  Offer offer;
  offer.id = 7;
  offer.machine_id = 70;
  offer.gpu_name = "RTX 4090";
  offer.num_gpus = 1;
  offer.cpu_ram_gib = 256;
  offer.cpu_cores_effective = 64;
  offer.pcie_bw_gbs = 25;
  offer.inet_down_mbps = 2000;
  offer.dph_total = 0.4;
  offer.reliability = 0.99;
  derive_offer_fields(offer);
  auto rents = [](const ScaledDecision& out) {
    return std::count_if(out.actions.begin(), out.actions.end(),
                         [](const Action& a) { return a.kind == Action::Kind::Rent; });
  };
  ScaleToDemandConfig lasting = scale_config();
  lasting.transient_backlog = false;
  const auto as_lasting = decide_for_jobs(fleet, {offer}, PolicyHistory{}, {}, s.now, policy,
                                          s.view(), std::nullopt, lasting);
  ASSERT_TRUE(as_lasting.demand);
  EXPECT_FALSE(as_lasting.demand->would_miss);
  EXPECT_EQ(rents(as_lasting), 1);
  ScaleToDemandConfig transient = scale_config();
  transient.transient_backlog = true;
  transient.transient_room_h = 0.5;
  const auto as_transient = decide_for_jobs(fleet, {offer}, PolicyHistory{}, {}, s.now, policy,
                                            s.view(), std::nullopt, transient);
  EXPECT_EQ(rents(as_transient), 0);
}

TEST(ScaleToDemand, TooLittleWatchedKeepsThePreviousFigureOrTheShellsFallback) {
  std::vector<InstanceRecord> fleet = {proving(1, 40, 0.3)};
  PolicyConfig policy;
  policy.scoring.economics.revenue_per_proof_usd = 0.012;
  policy.demand_proofs_per_hour = 123;  // the shell's fallback
  Seen s;
  s.now = kStart + 60;
  auto out = decide_for_jobs(fleet, {}, PolicyHistory{}, {}, s.now, policy, s.view(), std::nullopt,
                             scale_config());
  EXPECT_FALSE(out.demand);
  ASSERT_TRUE(out.sized_for);
  EXPECT_DOUBLE_EQ(*out.sized_for, 123);
  out = decide_for_jobs(fleet, {}, PolicyHistory{}, {}, s.now, policy, s.view(), 40.0, scale_config());
  ASSERT_TRUE(out.sized_for);
  EXPECT_DOUBLE_EQ(*out.sized_for, 40);
  EXPECT_TRUE(out.actions.empty());
}

}  // namespace
}  // namespace pf::core
