// The demo's built-in client (cli/load_generator.h): arrivals follow the scenario's demand in
// wall time, every arrival is one Curio-shaped Prove call with its own request_id and input,
// MaxPending bounds the calls in flight, UNAVAILABLE is retried and stop() ends it promptly.
#include "cli/load_generator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "support/eventually.h"
#include "support/fake_cuzk.h"

namespace pf::cli {
namespace {

using pf::test::eventually;
using namespace std::chrono_literals;

scenario::Demand constant_demand(double per_hour, double hours) {
  scenario::Demand d;
  d.arrivals.push_back({0, hours, per_hour});
  d.deadline_min = 45;
  return d;
}

TEST(WallArrivals, FollowTheDemandInScaledTime) {
  const auto demand = constant_demand(3600, 1);  // one a second of scenario time
  const auto at = wall_arrivals(demand, 3600, 60, 7);
  // Poisson with mean 3600: far outside ±10% only by a bug.
  EXPECT_GT(at.size(), 3240u);
  EXPECT_LT(at.size(), 3960u);
  for (std::size_t i = 0; i < at.size(); ++i) {
    EXPECT_GE(at[i], 0);
    EXPECT_LT(at[i], 60.0);  // the hour takes a minute at 60x
    if (i > 0) {
      EXPECT_LE(at[i - 1], at[i]);
    }
  }
  EXPECT_EQ(at, wall_arrivals(demand, 3600, 60, 7));
  EXPECT_NE(at, wall_arrivals(demand, 3600, 60, 8));
}

TEST(WallArrivals, GapsAndTheHorizonHoldNoArrivals) {
  scenario::Demand d;
  d.arrivals = {{0, 1, 3600}, {1, 2, 0}, {2, 3, 3600}};
  const auto at = wall_arrivals(d, 2.5 * 3600, 1, 3);
  ASSERT_FALSE(at.empty());
  for (double t : at) {
    EXPECT_TRUE(t < 3600 || (t >= 7200 && t < 9000)) << t;
  }
}

TEST(LoadDemand, V2ArrivalsV1ConstantRateOrNone) {
  scenario::Scenario v2;
  v2.format_version = 2;
  v2.hours = 24;
  v2.demand = constant_demand(197.1, 2);
  auto d = load_demand(v2);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->arrivals.size(), 1u);
  EXPECT_DOUBLE_EQ(d->arrivals[0].proofs_per_hour, 197.1);

  scenario::Scenario v1;
  v1.hours = 24;
  v1.economics.demand_proofs_per_hour = 600;
  d = load_demand(v1);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->arrivals.size(), 1u);
  EXPECT_DOUBLE_EQ(d->arrivals[0].from_h, 0);
  EXPECT_DOUBLE_EQ(d->arrivals[0].to_h, 24);
  EXPECT_DOUBLE_EQ(d->arrivals[0].proofs_per_hour, 600);

  v1.economics.demand_proofs_per_hour.reset();  // unlimited: nothing to follow
  EXPECT_FALSE(load_demand(v1));
}

LoadGeneratorOptions fast_load(const std::string& target, int max_pending) {
  LoadGeneratorOptions o;
  o.target = target;
  o.demand = constant_demand(40, 1);  // 40 arrivals per pass
  o.horizon_s = 3600;
  o.time_scale = 3600;  // a pass per wall second
  o.seed = 11;
  o.max_pending = max_pending;
  o.first_sector = 500;
  o.vanilla_bytes = 256;
  o.prove_timeout_s = 30;
  return o;
}

TEST(LoadGenerator, SendsEveryArrivalAsItsOwnCurioShapedProveCall) {
  test::FakeCuzk cuzk;
  cuzk.delay_ms = 40;
  auto o = fast_load(cuzk.address(), 4);
  o.nodes = 2;
  LoadGenerator load(o);
  load.start();
  ASSERT_TRUE(eventually([&] { return load.stats().proved >= 30; }))
      << "proved " << load.stats().proved;
  load.stop();
  const auto s = load.stats();
  EXPECT_EQ(s.failed, 0);
  EXPECT_GE(s.arrived, s.proved);
  EXPECT_EQ(s.in_flight, 0);
  EXPECT_LE(s.max_open_per_node, 4);         // each node's MaxPending
  EXPECT_LE(cuzk.max_concurrent.load(), 8);  // two nodes

  std::set<std::string> ids, inputs;
  for (const auto& r : cuzk.requests()) {
    ids.insert(r.request_id());
    inputs.insert(r.vanilla_proof());
    EXPECT_EQ(r.proof_kind(), cuzk::v1::POREP_SEAL_COMMIT);
    EXPECT_EQ(r.sector_size(), 34359738368ULL);
    EXPECT_EQ(r.miner_id(), 1000u);
    EXPECT_EQ(r.priority(), cuzk::v1::NORMAL);
    EXPECT_EQ(r.request_id(), "porep-1000-" + std::to_string(r.sector_number()));
    EXPECT_GE(r.sector_number(), 500u);
    EXPECT_NE(r.vanilla_proof().find("\"Phase1Out\""), std::string::npos);
  }
  const auto calls = cuzk.requests().size();
  EXPECT_EQ(ids.size(), calls) << "a request_id was sent twice";
  EXPECT_EQ(inputs.size(), calls) << "two jobs carried the same input";
}

// Curio's task engine: a failed try (here FAILED proofs) is taken again, with the same request
// and usually by another node, until the kind's tries are spent (PoRep: 10).
TEST(LoadGenerator, AFailedTaskIsTriedAgainAsCurioDoesUntilItsTriesAreSpent) {
  test::FakeCuzk cuzk;
  cuzk.mode = test::FakeCuzk::Mode::Failed;
  auto o = fast_load(cuzk.address(), 2);
  o.nodes = 2;
  LoadGenerator load(o);
  load.start();
  ASSERT_TRUE(eventually([&] { return load.stats().failed >= 3; }));
  load.stop();
  const auto s = load.stats();
  EXPECT_EQ(s.proved, 0);
  EXPECT_GE(s.retries, 9 * s.failed);
  EXPECT_GT(s.retries_elsewhere, 0);
  std::map<std::string, std::set<std::string>> inputs_by_id;
  for (const auto& r : cuzk.requests()) inputs_by_id[r.request_id()].insert(r.vanilla_proof());
  int spent = 0;
  for (const auto& [id, inputs] : inputs_by_id) {
    EXPECT_EQ(inputs.size(), 1u) << id << ": every try sends the same request";
  }
  std::map<std::string, int> tries;
  for (const auto& r : cuzk.requests()) ++tries[r.request_id()];
  for (const auto& [id, n] : tries) {
    EXPECT_LE(n, 10) << id;
    if (n == 10) ++spent;
  }
  EXPECT_GE(spent, s.failed);
  EXPECT_EQ(curio_retry(core::JobKind::PorepC2, 1).max_tries, 10);
  EXPECT_DOUBLE_EQ(curio_retry(core::JobKind::PorepC2, 1).wait_s, 2);
  EXPECT_DOUBLE_EQ(curio_retry(core::JobKind::PorepC2, 9).wait_s, 120);
  EXPECT_EQ(curio_retry(core::JobKind::SnapUpdate, 1).max_tries, 3);
  EXPECT_EQ(curio_retry(core::JobKind::WindowPost, 1).max_tries, 5);
  EXPECT_EQ(curio_retry(core::JobKind::WinningPost, 0).max_tries, 1);
}

// Each kind as lib/ffi/cuzk_funcs.go builds it.
TEST(LoadGenerator, EveryKindIsShapedAsCurioSendsIt) {
  test::FakeCuzk cuzk;
  auto o = fast_load(cuzk.address(), 4);
  o.mix = {1, 1, 1, 1};
  LoadGenerator load(o);
  load.start();
  ASSERT_TRUE(eventually([&] {
    std::set<int> kinds;
    for (const auto& r : cuzk.requests()) kinds.insert(r.proof_kind());
    return kinds.size() == 4;
  }));
  load.stop();
  for (const auto& r : cuzk.requests()) {
    switch (r.proof_kind()) {
      case cuzk::v1::SNAP_DEALS_UPDATE:
        EXPECT_EQ(r.request_id(), "snap-1000-" + std::to_string(r.sector_number()));
        EXPECT_EQ(r.vanilla_proofs_size(), 16);
        EXPECT_EQ(r.comm_r_old().size(), 32u);
        EXPECT_EQ(r.comm_d_new().size(), 32u);
        break;
      case cuzk::v1::WINDOW_POST_PARTITION:
        EXPECT_EQ(r.request_id().rfind("wdpost-1000-0-[", 0), 0u) << r.request_id();
        EXPECT_EQ(r.priority(), cuzk::v1::HIGH);
        EXPECT_EQ(r.randomness().size(), 32u);
        break;
      case cuzk::v1::WINNING_POST:
        EXPECT_EQ(r.request_id().rfind("winpost-1000-", 0), 0u) << r.request_id();
        EXPECT_EQ(r.request_id().size(), std::string("winpost-1000-").size() + 16);
        EXPECT_EQ(r.priority(), cuzk::v1::CRITICAL);
        break;
      default:
        EXPECT_EQ(r.proof_kind(), cuzk::v1::POREP_SEAL_COMMIT);
    }
  }
}

TEST(LoadGenerator, AnUnreachableGatewaySpendsTriesAndStopIsPrompt) {
  std::string gone;
  {
    test::FakeCuzk cuzk;  // a port that was a gateway a moment ago
    gone = cuzk.address();
  }
  LoadGenerator load(fast_load(gone, 3));
  load.start();
  ASSERT_TRUE(eventually([&] { return load.stats().retries >= 3; }));
  const auto before = std::chrono::steady_clock::now();
  load.stop();
  EXPECT_LT(std::chrono::steady_clock::now() - before, 10s);
  const auto s = load.stats();
  EXPECT_EQ(s.proved, 0);  // UNAVAILABLE is a failed try, as in Curio: no client retry
}

}  // namespace
}  // namespace pf::cli
