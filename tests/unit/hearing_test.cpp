// Never blame a host for the manager's own blindness: silence verdicts wait while the manager
// could not hear (restart, stall, its front failing) and while most agents fell silent at once.
#include "core/hearing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/lifecycle.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf {
namespace {

using ::testing::HasSubstr;
using S = core::InstanceState;

core::InstanceRecord proving(std::int64_t id, double last_heartbeat) {
  core::InstanceRecord r;
  r.id = id;
  r.state = S::Proving;
  r.market_status = "running";
  r.market_status_since = 1000;
  r.last_heartbeat_at = last_heartbeat;
  return r;
}

TEST(Hearing, SilenceCountsOnlyFromWhenTheManagerListened) {
  const auto r = proving(1, 1000);
  EXPECT_DOUBLE_EQ(core::heard_silence_s(r, 2000, 0), 1000);
  EXPECT_DOUBLE_EQ(core::heard_silence_s(r, 2000, 1900), 100);         // restarted at 1900
  EXPECT_DOUBLE_EQ(core::heard_silence_s(proving(2, 0), 2000, 0), 0);  // never heartbeated
}

// Stopped with its container (outbid, stopped by its client), the agent was not silent: after
// the market says it runs again, its silence counts from then, so it has a whole timeout to be
// heard again before "heartbeat lost" blames its host.
TEST(Hearing, AfterAMarketStopSilenceCountsFromTheResume) {
  core::LifecycleConfig cfg;
  auto r = proving(1, 1000);
  r.market_status = "running";
  r.market_status_since = 5000;  // resumed at 5000 after a stop
  EXPECT_DOUBLE_EQ(core::heard_silence_s(r, 5010, 0), 10);
  const core::Hearing listening =
      core::judge_hearing({r}, 5010, {true, 0}, cfg.heartbeat_timeout_s);
  EXPECT_FALSE(core::destroy_reason(r, 5010, cfg, listening));
  const double late = 5000 + cfg.heartbeat_timeout_s + 1;
  const core::Hearing later = core::judge_hearing({r}, late, {true, 0}, cfg.heartbeat_timeout_s);
  auto closing = core::destroy_reason(r, late, cfg, later);
  ASSERT_TRUE(closing);
  EXPECT_THAT(closing->reason, HasSubstr("heartbeat lost"));
}

TEST(Hearing, ARestartedManagerWaitsOneTimeoutBeforeJudgingSilence) {
  core::LifecycleConfig cfg;
  const double restart = 10'000;
  const core::ListeningState listening{true, restart};
  // The agent last reached the old process long ago: its silence is not evidence yet.
  const std::vector<core::InstanceRecord> live{proving(1, restart - 3600)};
  auto h = core::judge_hearing(live, restart + 10, listening, cfg.heartbeat_timeout_s);
  EXPECT_FALSE(h.may_judge_silence);
  EXPECT_EQ(h.cause, core::HearingCause::Settling);
  EXPECT_FALSE(core::destroy_reason(live[0], restart + 10, cfg, h));
  // A deadline that reads the agent's progress waits too; a market verdict does not.
  auto fetching = live[0];
  fetching.state = S::FetchingParams;
  fetching.deadline_at = restart;
  EXPECT_FALSE(core::destroy_reason(fetching, restart + 10, cfg, h));
  auto exited = live[0];
  exited.market_status = "exited";
  EXPECT_THAT(core::destroy_reason(exited, restart + 10, cfg, h)->reason, HasSubstr("exited"));
  auto booting = live[0];  // booting ends with a registration the manager could not take
  booting.state = S::Booting;
  booting.deadline_at = restart;
  EXPECT_FALSE(core::destroy_reason(booting, restart + 10, cfg, h));
  auto renting = live[0];
  renting.state = S::Renting;
  renting.deadline_at = restart;
  EXPECT_THAT(core::destroy_reason(renting, restart + 10, cfg, h)->reason, HasSubstr("deadline"));

  // After a whole timeout of listening, an agent still silent is judged — by its heard silence.
  const double later = restart + cfg.heartbeat_timeout_s;
  h = core::judge_hearing(live, later, listening, cfg.heartbeat_timeout_s);
  EXPECT_TRUE(h.may_judge_silence) << h.reason;
  EXPECT_THAT(core::destroy_reason(live[0], later, cfg, h)->reason,
              HasSubstr("heartbeat lost for 300 s"));
}

// An agent that found the manager down retries up to kAgentRetryMaxS apart: a manager with a
// short heartbeat timeout (a scaled demo) still waits for that retry before judging a booting
// instance whose registration it could not take (seen in the chaos run: a host destroyed for a
// "deadline passed in booting" while its agent slept out a 32 s backoff).
TEST(Hearing, SettlingNeverEndsBeforeTheAgentsRetryHasLanded) {
  core::LifecycleConfig cfg;
  cfg.heartbeat_timeout_s = 5;
  const double restart = 10'000;
  const core::ListeningState listening{true, restart};
  auto booting = proving(1, 0);
  booting.state = S::Booting;
  booting.deadline_at = restart;
  const std::vector<core::InstanceRecord> live{booting};
  ASSERT_GT(core::kAgentRetryMaxS, cfg.heartbeat_timeout_s);
  EXPECT_DOUBLE_EQ(core::settling_window_s(cfg.heartbeat_timeout_s), core::kAgentRetryMaxS);
  const double early = restart + core::kAgentRetryMaxS - 1;
  auto h = core::judge_hearing(live, early, listening, cfg.heartbeat_timeout_s);
  EXPECT_EQ(h.cause, core::HearingCause::Settling);
  EXPECT_FALSE(core::destroy_reason(booting, early, cfg, h));
  const double settled = restart + core::kAgentRetryMaxS;
  h = core::judge_hearing(live, settled, listening, cfg.heartbeat_timeout_s);
  EXPECT_TRUE(h.may_judge_silence) << h.reason;
  EXPECT_THAT(core::destroy_reason(booting, settled, cfg, h)->reason, HasSubstr("deadline passed"));
}

TEST(Hearing, MostAgentsSilentAtOnceBlamesNobody) {
  core::LifecycleConfig cfg;
  const core::ListeningState listening{true, 0};
  const double now = 10'000;
  std::vector<core::InstanceRecord> live;
  for (int i = 1; i <= 4; ++i) live.push_back(proving(i, now - 600));  // all silent
  auto h = core::judge_hearing(live, now, listening, cfg.heartbeat_timeout_s);
  EXPECT_FALSE(h.may_judge_silence);
  EXPECT_EQ(h.cause, core::HearingCause::FleetSilent);
  EXPECT_EQ(h.agents_expected, 4);
  EXPECT_EQ(h.agents_silent, 4);
  EXPECT_THAT(h.reason, HasSubstr("4 of 4 agents are silent at once"));
  for (const auto& r : live) EXPECT_FALSE(core::destroy_reason(r, now, cfg, h));

  // One silent among many that talk is that host's silence.
  for (int i = 1; i < 4; ++i) live[i].last_heartbeat_at = now - 5;
  h = core::judge_hearing(live, now, listening, cfg.heartbeat_timeout_s);
  EXPECT_TRUE(h.may_judge_silence);
  EXPECT_THAT(core::destroy_reason(live[0], now, cfg, h)->reason, HasSubstr("heartbeat lost"));

  // Two silent of a fleet of two is below the minimum count: each is judged on its own.
  std::vector<core::InstanceRecord> pair{proving(1, now - 600), proving(2, now - 600)};
  EXPECT_TRUE(core::judge_hearing(pair, now, listening, cfg.heartbeat_timeout_s).may_judge_silence);
}

TEST(Hearing, NothingIsJudgedWhileTheFrontIsNotServing) {
  core::LifecycleConfig cfg;
  const std::vector<core::InstanceRecord> live{proving(1, 1000)};
  const auto h = core::judge_hearing(live, 5000, {false, 0}, cfg.heartbeat_timeout_s);
  EXPECT_FALSE(h.may_judge_silence);
  EXPECT_EQ(h.cause, core::HearingCause::NotServing);
  EXPECT_FALSE(core::destroy_reason(live[0], 5000, cfg, h));
  auto booting = live[0];
  booting.state = S::Booting;
  booting.last_heartbeat_at = 0;
  EXPECT_FALSE(core::destroy_reason(booting, 1000 + cfg.boot_register_grace_s + 1, cfg, h));
}

// The manager's side: restart, the front's self-check and fleet-wide silence, end to end through
// tick(), with the blame (bad-host entries) checked too.
class ManagerHearingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    for (int i = 0; i < 4; ++i) market_.add_offer(101 + i, 11 + i, 0.40);
    start();
  }

  void start() {
    manager::ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<manager::Manager>(*store_, market_, cfg, [this] { return now_; });
  }

  std::int64_t deploy_and_register(std::int64_t offer) {
    auto rec = manager_->deploy(offer, "test");
    EXPECT_TRUE(rec) << rec.error().message;
    const auto& env = market_.create_requests.back().env;
    manager::RegisterRequest req{
        env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
    EXPECT_TRUE(manager_->agent_register(req));
    manager::Heartbeat hb;
    hb.phase = "fetching_params";
    hb.params_total = 1e9;
    EXPECT_TRUE(manager_->agent_heartbeat(rec->id, hb));
    return rec->id;
  }

  void heartbeat(std::int64_t id) {
    manager::Heartbeat hb;
    hb.phase = "fetching_params";
    hb.params_total = 1e9;
    ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  }

  S state(std::int64_t id) { return store_->instance(id)->state; }
  static double timeout() { return core::LifecycleConfig{}.heartbeat_timeout_s; }

  double now_ = 1'000'000;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<manager::Manager> manager_;
};

TEST_F(ManagerHearingTest, RestartAfterALongOutageDestroysNobody) {
  const auto a = deploy_and_register(101);
  const auto b = deploy_and_register(102);
  // The manager is down for ten minutes (twice the timeout), then starts on the same store.
  manager_.reset();
  now_ += 2 * timeout();
  start();
  manager_->tick();
  EXPECT_EQ(state(a), S::FetchingParams);
  EXPECT_EQ(state(b), S::FetchingParams);
  EXPECT_EQ(manager_->hearing().cause, core::HearingCause::Settling);
  // a's agent reaches the restarted manager; b's host really is gone.
  now_ += timeout() / 2;
  heartbeat(a);
  now_ += timeout() / 2;
  manager_->tick();
  EXPECT_EQ(state(a), S::FetchingParams);
  EXPECT_EQ(state(b), S::Destroyed);
  EXPECT_THAT(store_->instance(b)->destroy_reason, HasSubstr("heartbeat lost for 300 s"));
}

TEST_F(ManagerHearingTest, WhileTheFrontFailsItsSelfCheckSilenceIsNotJudged) {
  const auto a = deploy_and_register(101);
  manager_->set_serving(false);
  now_ += 3 * timeout();
  manager_->tick();
  EXPECT_EQ(state(a), S::FetchingParams);
  EXPECT_TRUE(store_->bad_hosts().empty());
  // Serving again: silence counts afresh from the recovery.
  manager_->set_serving(true);
  now_ += timeout() - 1;
  manager_->tick();
  EXPECT_EQ(state(a), S::FetchingParams);
  now_ += 1;
  manager_->tick();
  EXPECT_EQ(state(a), S::Destroyed);
}

TEST_F(ManagerHearingTest, AStallOfTheManagerItselfRestartsTheCount) {
  const auto a = deploy_and_register(101);
  now_ += 2 * timeout();  // the process stood still this long
  manager_->listening_interrupted();
  manager_->tick();
  EXPECT_EQ(state(a), S::FetchingParams);
  const auto events = store_->events(a, 100);
  bool told = false;
  for (const auto& e : events) told = told || e.kind == "hearing";
  EXPECT_TRUE(told) << "the timeline says why silence was not judged";
}

TEST_F(ManagerHearingTest, FleetWideSilenceStrikesNoHost) {
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(deploy_and_register(101 + i));
  now_ += 2 * timeout();
  manager_->tick();
  for (auto id : ids) EXPECT_EQ(state(id), S::FetchingParams);
  EXPECT_TRUE(store_->bad_hosts().empty());
  EXPECT_EQ(manager_->summary().hearing.cause, core::HearingCause::FleetSilent);
  // Three come back; the one still silent is that host's own silence.
  for (int i = 1; i < 4; ++i) heartbeat(ids[i]);
  manager_->tick();
  EXPECT_EQ(state(ids[0]), S::Destroyed);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(state(ids[i]), S::FetchingParams);
}

}  // namespace
}  // namespace pf
