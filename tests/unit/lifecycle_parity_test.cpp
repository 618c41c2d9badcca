// Parity of the two shells around the one lifecycle (issue 11, item 6): one scripted sequence
// of market and agent observations, driven through the Manager (fake market, in-memory store)
// and through the simulator's lifecycle (sim::RentalLifecycle, as the engine calls it, with the
// default policy's own acceptance test and break-even), must yield the same transitions,
// verdicts, strikes, close causes and benchmark runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/blocklist.h"
#include "manager/manager.h"
#include "sim/des_lifecycle.h"
#include "sim/des_policies.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf {
namespace {

using S = core::InstanceState;

// One observation: what the market or the agent says at time t (seconds from the start).
struct Obs {
  enum class Kind { Running, Register, Fetching, ProverStarted, Warmup, Proof, Throttle, Exited };
  Kind kind;
  double t = 0;
};

// What a shell made of the script.
struct Outcome {
  std::vector<std::string> states;  // every state entered, in order
  std::optional<core::Verdict> verdict;
  std::optional<core::CloseCause> close_cause;
  std::string destroy_reason;
  std::optional<core::BadHost> blame;  // the automatic bad-host entry the close earned
  std::vector<core::BenchRun> runs;
  double benchmark_deadline_s = 0;  // deadline_at − state_since on entering benchmarking
  int proofs_benchmark = 0;
  int proofs_production = 0;
};

constexpr double kStart = 1'000'000;
constexpr std::int64_t kMachine = 11;
constexpr double kDph = 0.40;

// The operator's configuration, which the simulator's default policy is given too.
manager::ManagerConfig manager_config() {
  manager::ManagerConfig cfg;
  cfg.rank.predictor = core::default_predictor_config();
  cfg.rank.economics.revenue_per_proof_usd = 0.012;
  cfg.rank.economics.target_cost_per_proof_usd = 0.008;
  cfg.profit_objective = true;
  cfg.params = {{"a.params", "http://x/a", 1000000000, "00"}};
  cfg.lifecycle.destroy_retry_s = 0;
  cfg.production_window_s = 900;
  cfg.acceptance.z = 1.96;  // not the simulator's old hard-coded 1.645
  return cfg;
}

sim::DefaultPolicyConfig policy_config(const manager::ManagerConfig& m) {
  sim::DefaultPolicyConfig c;
  c.policy.scoring.economics = m.rank.economics;
  c.policy.scoring.profit_objective = m.profit_objective;
  c.policy.blocklist = m.blocklist;
  c.sprt = core::with_caps(m.sprt, m.acceptance);
  c.lifecycle = m.lifecycle;
  return c;
}

Outcome run_manager(const std::vector<Obs>& script) {
  const auto cfg = manager_config();
  double now = kStart;
  auto store = store::open_store(":memory:");
  testing::FakeMarket market;
  market.add_offer(101, kMachine, kDph);
  manager::Manager m(*store, market, cfg, [&] { return now; });
  Outcome out;
  auto rec = m.deploy(101, "parity");
  EXPECT_TRUE(rec) << rec.error().message;
  const std::int64_t id = rec->id;
  const auto env = market.create_requests.back().env;
  std::string token;
  std::int64_t seq = 0;
  auto heartbeat = [&](const std::string& phase, bool throttled) {
    manager::Heartbeat hb;
    hb.phase = phase;
    hb.params_total = 1e9;
    hb.gpu_throttled = throttled;
    EXPECT_TRUE(m.agent_heartbeat(id, hb));
  };
  // The agent reports each proof's wall time: since the prover started or the proof before
  // (the simulator's side passes the same).
  double last_completion = 0;
  auto proof = [&](const std::string& phase) {
    manager::AgentEvent e;
    e.seq = ++seq;
    e.type = "proof_done";
    e.at = now;
    e.seconds = now - last_completion;
    last_completion = now;
    e.phase = phase;
    auto r = m.agent_events(id, {e});
    if (!r) {
      EXPECT_EQ(r.error().status, 410);  // a closed instance takes nothing more
    }
  };
  for (const auto& o : script) {
    now = kStart + o.t;
    const bool live = store->instance(id)->state < S::Destroying;
    switch (o.kind) {
      case Obs::Kind::Running:
        market.set_status(*store->instance(id)->market_id, "running");
        m.reconcile();
        break;
      case Obs::Kind::Register: {
        manager::RegisterRequest req{
            env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
        auto reg = m.agent_register(req);
        EXPECT_TRUE(reg) << reg.error().message;
        break;
      }
      case Obs::Kind::Fetching:
        heartbeat("fetching_params", false);
        break;
      case Obs::Kind::ProverStarted: {
        manager::AgentEvent e;
        e.seq = ++seq;
        e.type = "prover_started";
        EXPECT_TRUE(m.agent_events(id, {e}));
        last_completion = now;
        break;
      }
      case Obs::Kind::Warmup:
      case Obs::Kind::Proof:
        if (!live) break;
        heartbeat("proving", false);
        proof(o.kind == Obs::Kind::Warmup ? "warmup" : "measured");
        break;
      case Obs::Kind::Throttle:
        if (live) heartbeat("proving", true);
        break;
      case Obs::Kind::Exited:
        market.set_status(*store->instance(id)->market_id, "exited");
        m.reconcile();
        break;
    }
    m.tick();  // the loops run between observations
    const auto row = store->instance(id);
    if (row->state == S::Benchmarking && out.benchmark_deadline_s == 0) {
      out.benchmark_deadline_s = row->deadline_at - row->state_since;
    }
  }
  for (const auto& e : store->events(id, 0)) {
    if (e.kind != "state") continue;
    out.states.push_back(nlohmann::json::parse(e.data_json).at("state").get<std::string>());
  }
  const auto row = *store->instance(id);
  out.verdict = row.verdict;
  out.close_cause = row.close_cause;
  out.destroy_reason = row.destroy_reason;
  for (const auto& b : store->bad_hosts())
    if (b.machine_id == kMachine && b.source == "auto") out.blame = b;
  out.runs = store->all_bench_runs();
  out.proofs_benchmark = row.proofs_benchmark;
  out.proofs_production = row.proofs_production;
  return out;
}

// The simulator's side, glued as des_engine.cpp glues it: physics events become the same
// record updates (market status, heartbeats, a reported throttle) and every decision is the
// lifecycle's.
Outcome run_simulator(const std::vector<Obs>& script) {
  const auto mcfg = manager_config();
  testing::FakeMarket offers;
  offers.add_offer(101, kMachine, kDph);
  sim::DefaultPolicy policy(policy_config(mcfg));
  core::InstanceRecord rec;
  rec.id = 1;
  rec.offer = offers.offers.front();
  rec.created_at = rec.state_since = rec.billed_until = kStart;
  rec.market_status = "loading";
  rec.market_status_since = kStart;
  rec.params_total_bytes = 1e9;
  sim::RentalLifecycle life(sim::RentalSettings{policy.lifecycle(), policy.acceptance(),
                                                policy.break_even_rate(rec.offer),
                                                mcfg.production_window_s});
  Outcome out;
  std::vector<core::BadHost> bad_hosts;
  auto enter = [&](S to, double now, const std::string& why) {
    if (life.transition(rec, to, now, why)) out.states.push_back(core::to_string(to));
  };
  auto close = [&](const core::Closing& closing, double now) {
    auto step = life.close(rec, closing, now, 0, std::nullopt);
    if (!step) return;
    out.states.push_back(core::to_string(rec.state));
    if (step->strike) {
      auto outcome = core::apply_strike(bad_hosts, *step->strike, mcfg.blocklist);
      if (outcome.entry) out.blame = outcome.entry;
    }
    enter(S::Destroyed, now, "market confirmed");
  };
  // The manager re-evaluates a benchmark on every heartbeat (the test's time rules), the engine
  // on every tick: the script's heartbeats are those ticks here.
  auto heartbeat = [&](double now) {
    rec.last_heartbeat_at = now;
    std::optional<core::BenchRun> run;
    bool accepted = false;
    auto step = life.evaluate(rec, now, {false, rec.gpu_throttled}, run, accepted);
    if (accepted) out.states.push_back(core::to_string(rec.state));
    if (run) out.runs.push_back(*run);
    if (step && step->reject) close(*step->reject, now);
  };
  enter(S::Booting, kStart, "rented");
  double last = kStart;
  for (const auto& o : script) {
    const double now = kStart + o.t;
    const bool live = rec.state < S::Destroying;
    switch (o.kind) {
      case Obs::Kind::Running:
        rec.market_status = "running";
        rec.market_status_since = now;
        break;
      case Obs::Kind::Register:
        rec.last_heartbeat_at = now;
        enter(S::Registered, now, "agent registered");
        break;
      case Obs::Kind::Fetching:
        heartbeat(now);
        enter(S::FetchingParams, now, "downloading parameters");
        break;
      case Obs::Kind::ProverStarted:
        enter(S::WarmingUp, now, "prover started");
        last = now;
        break;
      case Obs::Kind::Warmup:
      case Obs::Kind::Proof: {
        if (!live) break;
        heartbeat(now);
        if (rec.state >= S::Destroying) break;
        const S before = rec.state;
        const auto result = life.proof(rec, o.kind == Obs::Kind::Warmup, now, now - last,
                                       {false, rec.gpu_throttled}, {false, rec.gpu_throttled});
        last = now;
        if (rec.state != before) out.states.push_back(core::to_string(rec.state));
        if (before < S::Benchmarking && rec.state == S::Benchmarking) {
          out.benchmark_deadline_s = rec.deadline_at - rec.state_since;
        }
        if (result.benchmark_run) out.runs.push_back(*result.benchmark_run);
        for (const auto& r : result.production_runs) out.runs.push_back(r);
        if (result.benchmark && result.benchmark->reject) close(*result.benchmark->reject, now);
        break;
      }
      case Obs::Kind::Throttle:
        if (!live) break;
        rec.gpu_throttled = true;
        heartbeat(now);
        break;
      case Obs::Kind::Exited:
        rec.market_status = "exited";
        rec.market_status_since = now;
        break;
    }
    if (rec.state < S::Destroying) {
      if (auto closing = life.check(rec, now)) close(*closing, now);
    }
  }
  out.verdict = rec.verdict;
  out.close_cause = rec.close_cause;
  out.destroy_reason = rec.destroy_reason;
  out.proofs_benchmark = rec.proofs_benchmark;
  out.proofs_production = rec.proofs_production;
  return out;
}

// The agent's side of the script: boot, register, fetch, start the prover, one warm-up proof,
// then measured proofs every `gap` seconds from `from` for `count` proofs.
std::vector<Obs> setup_script() {
  return {{Obs::Kind::Running, 60},
          {Obs::Kind::Register, 120},
          {Obs::Kind::Fetching, 130},
          {Obs::Kind::ProverStarted, 400},
          {Obs::Kind::Warmup, 700}};
}
void add_proofs(std::vector<Obs>& script, double from, double gap, int count) {
  for (int i = 1; i <= count; ++i) script.push_back({Obs::Kind::Proof, from + gap * i});
}

void expect_same(const Outcome& mgr, const Outcome& sim) {
  EXPECT_EQ(mgr.states, sim.states);
  ASSERT_EQ(mgr.verdict.has_value(), sim.verdict.has_value());
  if (mgr.verdict) {
    EXPECT_EQ(mgr.verdict->decision, sim.verdict->decision);
    EXPECT_EQ(mgr.verdict->samples, sim.verdict->samples);
    EXPECT_DOUBLE_EQ(mgr.verdict->rate, sim.verdict->rate);
    EXPECT_DOUBLE_EQ(mgr.verdict->break_even_rate, sim.verdict->break_even_rate);
    EXPECT_EQ(mgr.verdict->reason, sim.verdict->reason);
  }
  EXPECT_EQ(mgr.close_cause, sim.close_cause);
  EXPECT_EQ(mgr.destroy_reason, sim.destroy_reason);
  ASSERT_EQ(mgr.blame.has_value(), sim.blame.has_value());
  if (mgr.blame) {
    EXPECT_EQ(mgr.blame->reason, sim.blame->reason);
    EXPECT_EQ(mgr.blame->strikes, sim.blame->strikes);
    EXPECT_EQ(mgr.blame->expires_at, sim.blame->expires_at);
  }
  EXPECT_DOUBLE_EQ(mgr.benchmark_deadline_s, sim.benchmark_deadline_s);
  EXPECT_EQ(mgr.proofs_benchmark, sim.proofs_benchmark);
  EXPECT_EQ(mgr.proofs_production, sim.proofs_production);
  ASSERT_EQ(mgr.runs.size(), sim.runs.size());
  for (std::size_t i = 0; i < mgr.runs.size(); ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    EXPECT_EQ(mgr.runs[i].kind, sim.runs[i].kind);
    EXPECT_EQ(mgr.runs[i].samples, sim.runs[i].samples);
    EXPECT_DOUBLE_EQ(mgr.runs[i].rate, sim.runs[i].rate);
    EXPECT_DOUBLE_EQ(mgr.runs[i].low, sim.runs[i].low);
    EXPECT_DOUBLE_EQ(mgr.runs[i].high, sim.runs[i].high);
    EXPECT_EQ(mgr.runs[i].throttled, sim.runs[i].throttled);
    EXPECT_EQ(mgr.runs[i].contended, sim.runs[i].contended);
  }
}

// A fast host (60/hr against a break-even of 0.40 / 0.012 = 33/hr): accepted, proves through
// windows, reports a throttle, then the market says it exited.
TEST(LifecycleParity, AcceptedHostThrottlesThenCrashes) {
  auto script = setup_script();
  add_proofs(script, 700, 60, 12);  // benchmark
  script.push_back({Obs::Kind::Throttle, 1500});
  add_proofs(script, 1500, 75, 30);  // production across windows
  script.push_back({Obs::Kind::Exited, 3900});
  const Outcome mgr = run_manager(script);
  const Outcome sim = run_simulator(script);
  expect_same(mgr, sim);
  // The script did what it says, so the comparison above compared something.
  ASSERT_TRUE(mgr.verdict);
  EXPECT_EQ(mgr.verdict->decision, core::Verdict::Decision::Accept);
  EXPECT_EQ(mgr.close_cause, core::CloseCause::MarketExited);
  ASSERT_TRUE(mgr.blame);
  EXPECT_THAT(mgr.blame->reason, ::testing::HasSubstr("crashed"));
  ASSERT_GE(mgr.runs.size(), 3u);
  EXPECT_EQ(mgr.runs.front().kind, "benchmark");
  EXPECT_FALSE(mgr.runs.front().throttled);
  EXPECT_EQ(mgr.runs.back().kind, "production");
  EXPECT_TRUE(mgr.runs.back().throttled);
  EXPECT_EQ(mgr.states.back(), "destroyed");
}

// A slow host (12/hr against 33/hr): the test rejects it, the host earns a slow-benchmark
// strike, the benchmark run is recorded.
TEST(LifecycleParity, SlowHostIsRejectedWithAStrike) {
  auto script = setup_script();
  add_proofs(script, 700, 300, 12);
  const Outcome mgr = run_manager(script);
  const Outcome sim = run_simulator(script);
  expect_same(mgr, sim);
  ASSERT_TRUE(mgr.verdict);
  EXPECT_EQ(mgr.verdict->decision, core::Verdict::Decision::Reject);
  EXPECT_EQ(mgr.close_cause, core::CloseCause::Rejected);
  ASSERT_TRUE(mgr.blame);
  EXPECT_THAT(mgr.blame->reason, ::testing::HasSubstr("slow_benchmark"));
  ASSERT_EQ(mgr.runs.size(), 1u);
}

// An agent that goes quiet after warm-up: the warming-up deadline closes it, by the stage it
// hit (a slow benchmark strike), in both shells.
TEST(LifecycleParity, SilentProverHitsTheWarmupDeadline) {
  auto script = setup_script();
  const double warmup_max = manager::ManagerConfig{}.lifecycle.warmup_max_s;
  // Heartbeats only (the market still says running): the deadline, not the silence, decides.
  for (double t = 760; t < 400 + warmup_max + 120; t += 60) {
    script.push_back({Obs::Kind::Throttle, t});
  }
  const Outcome mgr = run_manager(script);
  const Outcome sim = run_simulator(script);
  expect_same(mgr, sim);
  EXPECT_EQ(mgr.close_cause, core::CloseCause::Deadline);
  EXPECT_THAT(mgr.destroy_reason, ::testing::HasSubstr("deadline passed in warming_up"));
}

}  // namespace
}  // namespace pf
