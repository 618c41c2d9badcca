// The fleet watch through a real Manager (in-memory store, FakeMarket, manual clock): alerts for
// hand-deployed instances with the autopilot off, announced once (event + webhook) and cleared,
// acted on only when the operator let the manager act; spend over budget; the autopilot's pause.
#include "manager/fleet_watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "jobs/job_queue.h"
#include "manager/autopilot.h"
#include "manager/webhooks.h"
#include "store/store.h"
#include "support/fake_market.h"
#include "support/temp_dir.h"

namespace pf::manager {
namespace {

using ::testing::HasSubstr;
using S = core::InstanceState;
using nlohmann::json;

class FleetWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);
    market_.add_offer(102, 12, 0.30);
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
    manager_->set_notifier([this](const std::string& event, json data) {
      sent_.push_back({event, data});
    });
    watch_cfg_.policy.scoring.economics.revenue_per_proof_usd = 0.012;
    watch_cfg_.heartbeat_s = 10;
    jobs::JobQueueConfig jc;
    jc.data_dir = dir_.path();
    jc.lease_s = 24 * 3600;  // no renewal in these tests: the lease must outlast them
    jc.default_deadline_s = 24 * 3600;
    queue_ = std::make_unique<jobs::JobQueue>(*store_, jc, manager_->job_hooks(),
                                              [this] { return now_; });
    manager_->attach_jobs(*queue_);
  }
  void TearDown() override {
    queue_.reset();
    manager_.reset();
  }

  // Gives the instance a job (submitted and leased to it), as the gateway would.
  void hold_a_job(std::int64_t id) {
    jobs::SubmitRequest r;
    r.request_id = "job-" + std::to_string(id) + "-" + std::to_string(++jobs_);
    r.input = "input";
    ASSERT_TRUE(queue_->submit(r));
    auto leased = queue_->lease(id, 1, std::chrono::milliseconds(0));
    ASSERT_TRUE(leased) << leased.error().message;
    ASSERT_EQ(leased->size(), 1u);
  }

  // A hand-deployed (or autopilot) instance already proving at `rate` proofs/hour.
  std::int64_t proving(std::int64_t offer, const std::string& origin, double rate) {
    auto rec = manager_->deploy(offer, origin);
    EXPECT_TRUE(rec) << rec.error().message;
    const auto& env = market_.create_requests.back().env;
    RegisterRequest req{env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
    EXPECT_TRUE(manager_->agent_register(req));
    auto row = *store_->instance(rec->id);
    row.state = S::Proving;
    row.state_since = now_;
    row.verdict = core::Verdict{
        core::Verdict::Decision::Accept, rate, rate * 0.9, rate * 1.1, 12, 25, "accepted"};
    store_->update_instance(row);
    heartbeat(rec->id);
    return rec->id;
  }

  void heartbeat(std::int64_t id) {
    Heartbeat hb;
    hb.phase = "proving";
    ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  }

  std::vector<json> sent(const std::string& name) {
    std::vector<json> out;
    for (const auto& [event, data] : sent_)
      if (event == name) out.push_back(data);
    return out;
  }

  int alert_events(std::int64_t id) {
    int n = 0;
    for (const auto& e : store_->events(id, 0)) n += e.kind == "alert" ? 1 : 0;
    return n;
  }

  double now_ = 1'000'000;
  pf::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
  std::unique_ptr<jobs::JobQueue> queue_;
  int jobs_ = 0;
  FleetWatchConfig watch_cfg_;
  std::vector<std::pair<std::string, json>> sent_;
};

TEST_F(FleetWatchTest, AStalledHandDeployedInstanceIsAlertedOnceButNotDestroyedByDefault) {
  const auto id = proving(101, "deploy", 60);
  hold_a_job(id);
  FleetWatch watch(*manager_, watch_cfg_, [this] { return now_; });
  EXPECT_TRUE(watch.run_once().instances.empty());
  // 31 minutes without a proof while the agent keeps reporting in.
  for (int minute = 1; minute <= 31; ++minute) {
    now_ += 60;
    heartbeat(id);
  }
  auto view = watch.run_once();
  ASSERT_EQ(view.instances.size(), 1u);
  EXPECT_EQ(view.instances[0].kind, core::AlertKind::Stall);
  EXPECT_FALSE(view.instances[0].acted);
  EXPECT_EQ(store_->instance(id)->state, S::Proving);  // alert only: hand-deployed
  ASSERT_EQ(sent(kWebhookAlertRaised).size(), 1u);
  EXPECT_EQ(sent(kWebhookAlertRaised)[0]["kind"], "stall");
  EXPECT_EQ(sent(kWebhookAlertRaised)[0]["origin"], "deploy");
  EXPECT_EQ(alert_events(id), 1);
  // The Manager serves what the watch found.
  ASSERT_EQ(manager_->alerts().instances.size(), 1u);

  // Looked at again: no second announcement.
  now_ += 60;
  heartbeat(id);
  watch.run_once();
  EXPECT_EQ(sent(kWebhookAlertRaised).size(), 1u);
  EXPECT_EQ(alert_events(id), 1);

  // A proof comes: the stall clears, once.
  AgentEvent proof;
  proof.seq = 1;
  proof.type = "proof_done";
  proof.at = now_;
  proof.seconds = 60;
  proof.phase = "measured";
  ASSERT_TRUE(manager_->agent_events(id, {proof}));
  ASSERT_GT(store_->instance(id)->proofs_production, 0);
  EXPECT_TRUE(watch.run_once().instances.empty());
  ASSERT_EQ(sent(kWebhookAlertCleared).size(), 1u);
  EXPECT_EQ(alert_events(id), 2);
}

TEST_F(FleetWatchTest, TheManagerActsWhenTheOperatorLetsItAndByOriginOtherwise) {
  watch_cfg_.alerts.act_on_hand_deployed = true;
  const auto hand = proving(101, "deploy", 60);
  hold_a_job(hand);
  FleetWatch watch(*manager_, watch_cfg_, [this] { return now_; });
  watch.run_once();
  now_ += 31 * 60;
  heartbeat(hand);
  const auto view = watch.run_once();
  ASSERT_EQ(view.instances.size(), 1u);
  EXPECT_TRUE(view.instances[0].acted);
  const auto rec = *store_->instance(hand);
  EXPECT_TRUE(rec.state == S::Destroying || rec.state == S::Destroyed);
  ASSERT_TRUE(rec.close_cause);
  EXPECT_EQ(*rec.close_cause, core::CloseCause::Dropped);
  EXPECT_THAT(rec.destroy_reason, HasSubstr("alert: no proof for"));
}

TEST_F(FleetWatchTest, AutopilotRentedInstancesAreLeftAloneWhenTheOperatorSaysSo) {
  watch_cfg_.alerts.act_on_autopilot_rented = false;
  const auto id = proving(101, "autopilot", 60);
  hold_a_job(id);
  FleetWatch watch(*manager_, watch_cfg_, [this] { return now_; });
  watch.run_once();
  now_ += 31 * 60;
  heartbeat(id);
  ASSERT_EQ(watch.run_once().instances.size(), 1u);
  EXPECT_EQ(store_->instance(id)->state, S::Proving);
}

TEST_F(FleetWatchTest, AnIdleInstanceWithNoJobIsNotStalled) {
  const auto id = proving(101, "autopilot", 60);
  FleetWatch watch(*manager_, watch_cfg_, [this] { return now_; });
  watch.run_once();
  for (int i = 0; i < 12; ++i) {
    now_ += 600;
    heartbeat(id);
    EXPECT_TRUE(watch.run_once().instances.empty());
  }
  // Work arrives: the stall clock starts now, not when it last proved.
  hold_a_job(id);
  now_ += 60;
  heartbeat(id);
  EXPECT_TRUE(watch.run_once().instances.empty());
  now_ += 31 * 60;
  heartbeat(id);
  EXPECT_EQ(watch.run_once().instances.size(), 1u);
}

TEST_F(FleetWatchTest, ProductionDriftOfAHandDeployedInstanceIsAlertedWithTheAutopilotOff) {
  const auto id = proving(101, "deploy", 60);
  const auto rec = *store_->instance(id);
  core::BenchRun window;
  window.host = {rec.offer.machine_id, rec.offer.gpu_name, rec.offer.num_gpus};
  window.instance_id = id;
  window.kind = "production";
  window.rate = 10;
  window.low = 8;
  window.high = 12;
  window.samples = 30;
  window.at = now_ + 10;
  store_->insert_bench_run(window);
  now_ += 20;
  heartbeat(id);
  FleetWatch watch(*manager_, watch_cfg_, [this] { return now_; });
  const auto view = watch.run_once();
  ASSERT_EQ(view.instances.size(), 1u);
  EXPECT_EQ(view.instances[0].kind, core::AlertKind::ProductionDrift);
  EXPECT_TRUE(view.instances[0].drop_warranted);
  EXPECT_THAT(view.instances[0].reason, HasSubstr("below break-even"));
  EXPECT_EQ(store_->instance(id)->state, S::Proving);
}

TEST_F(FleetWatchTest, SpendOverBudgetIsAnnouncedOnceWhileItLasts) {
  watch_cfg_.alerts.budget_dollars_per_hour = 0.5;
  proving(101, "deploy", 60);
  FleetWatch watch(*manager_, watch_cfg_, [this] { return now_; });
  EXPECT_TRUE(watch.run_once().fleet.empty());  // $0.40/hr
  const auto second = proving(102, "deploy", 60);
  auto view = watch.run_once();
  ASSERT_EQ(view.fleet.size(), 1u);
  EXPECT_EQ(view.fleet[0].kind, "spend");
  EXPECT_THAT(view.fleet[0].reason, HasSubstr("$0.70/hr, over the budget of $0.50/hr"));
  watch.run_once();
  EXPECT_EQ(sent(kWebhookSpendOverBudget).size(), 1u);
  ASSERT_TRUE(manager_->request_destroy(second, "operator request"));
  EXPECT_TRUE(watch.run_once().fleet.empty());
}

TEST_F(FleetWatchTest, PausingTheAutopilotSendsAWebhook) {
  AutopilotConfig cfg;
  Autopilot autopilot(*manager_, market_, cfg, [this] { return now_; });
  autopilot.set_paused(true, "operator via API");
  autopilot.set_paused(false, "operator via API");
  ASSERT_EQ(sent(kWebhookAutopilotPaused).size(), 1u);
  EXPECT_EQ(sent(kWebhookAutopilotPaused)[0]["paused_by"], "operator via API");
}

}  // namespace
}  // namespace pf::manager
