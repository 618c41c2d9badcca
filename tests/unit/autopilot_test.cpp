// The autopilot over a real Manager, an in-memory store and the scripted FakeMarket with a
// manual clock: it rents what the policy picks, within caps, records why, obeys a pause that
// survives a restart, and stays still when the market cannot be read. Also the manager's blame
// rules (strikes on lifecycle failures, none on operator destroys) and the HTTP routes.
#include "manager/autopilot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "jobs/job_queue.h"
#include "manager/http_api.h"
#include "manager/job_signal.h"
#include "store/store.h"
#include "support/fake_market.h"
#include "support/front_serving.h"

namespace pf::manager {
namespace {

using ::testing::HasSubstr;
using S = core::InstanceState;

class AutopilotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);
    market_.add_offer(102, 12, 0.30);
    market_.add_offer(103, 13, 0.35);
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.lifecycle.destroy_retry_s = 0;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
    pilot_config_.enabled = true;
    pilot_config_.policy.scoring.economics = cfg.rank.economics;
    pilot_config_.policy.scoring.setup = cfg.rank.setup;
  }

  std::unique_ptr<Autopilot> make_pilot(JobSignal jobs = {}) {
    return std::make_unique<Autopilot>(
        *manager_, market_, pilot_config_, [this] { return now_; }, std::move(jobs));
  }

  double now_ = 1'750'000'000;
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
  AutopilotConfig pilot_config_;
};

TEST_F(AutopilotTest, DisabledAutopilotRentsNothing) {
  pilot_config_.enabled = false;
  auto pilot = make_pilot();
  EXPECT_TRUE(pilot->run_once().empty());
  EXPECT_EQ(market_.creates, 0);
  EXPECT_EQ(pilot->status().runs, 0);
  EXPECT_FALSE(pilot->status().enabled);
}

TEST_F(AutopilotTest, RentsPayingOffersThroughTheManagerAndRecordsWhy) {
  auto pilot = make_pilot();
  const auto taken = pilot->run_once();
  ASSERT_FALSE(taken.empty());
  EXPECT_EQ(market_.creates, static_cast<int>(taken.size()));
  for (const auto& d : taken) {
    EXPECT_EQ(d.action, "rent");
    EXPECT_TRUE(d.ok) << d.reason;
    ASSERT_GT(d.instance_id, 0);
    const auto rec = store_->instance(d.instance_id);
    ASSERT_TRUE(rec);
    EXPECT_EQ(rec->origin, "autopilot");
    EXPECT_EQ(rec->offer.id, d.offer_id);
    bool explained = false;
    for (const auto& e : store_->events(d.instance_id, 0)) {
      if (e.kind == "autopilot") explained = e.message.find("rented") != std::string::npos;
    }
    EXPECT_TRUE(explained) << "no autopilot event on instance " << d.instance_id;
  }
  const auto st = pilot->status();
  EXPECT_EQ(st.runs, 1);
  EXPECT_EQ(st.rents, static_cast<int>(taken.size()));
  EXPECT_EQ(st.recent.size(), taken.size());
  // The next round sees the fleet it built: no offer is rented twice.
  const int creates = market_.creates;
  now_ += 60;
  for (const auto& d : pilot->run_once()) EXPECT_NE(d.action, "rent") << d.reason;
  EXPECT_EQ(market_.creates, creates);
}

// vast allows about ten searches a minute per account: a round rents from its own search (no
// second search per rental), and rounds closer than offers_max_age_s reuse the last search,
// less what was rented since.
TEST_F(AutopilotTest, RoundsShareOneSearchAndRentNothingTwice) {
  pilot_config_.policy.max_rents_per_decision = 1;
  pilot_config_.offers_max_age_s = 15;
  auto pilot = make_pilot();
  auto first = pilot->run_once();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first[0].ok) << first[0].reason;
  EXPECT_EQ(market_.searches, 1) << "the rental searched again";
  now_ += 5;
  auto second = pilot->run_once();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_TRUE(second[0].ok) << second[0].reason;
  EXPECT_NE(second[0].offer_id, first[0].offer_id);
  EXPECT_EQ(market_.searches, 1) << "a round 5 s after a search searched again";
  now_ += 15;
  pilot->run_once();
  EXPECT_EQ(market_.searches, 2);
  EXPECT_EQ(market_.creates, static_cast<int>(store_->instances(false).size()));
}

TEST_F(AutopilotTest, CapsLimitTheRents) {
  pilot_config_.policy.max_instances = 1;
  auto pilot = make_pilot();
  const auto taken = pilot->run_once();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(market_.creates, 1);
  EXPECT_EQ(store_->instances(false).size(), 1u);
}

TEST_F(AutopilotTest, PauseStopsDecisionsAndSurvivesARestart) {
  {
    auto pilot = make_pilot();
    pilot->set_paused(true, "operator via test");
    EXPECT_TRUE(pilot->run_once().empty());
  }
  auto restarted = make_pilot();  // same store: the pause is remembered
  const auto st = restarted->status();
  EXPECT_TRUE(st.paused);
  EXPECT_EQ(st.paused_by, "operator via test");
  EXPECT_TRUE(restarted->run_once().empty());
  EXPECT_EQ(market_.creates, 0);
  restarted->set_paused(false, "operator via test");
  EXPECT_FALSE(restarted->run_once().empty());
  EXPECT_GT(market_.creates, 0);
}

TEST_F(AutopilotTest, UnreadableMarketChangesNothing) {
  market_.search_fails = true;
  auto pilot = make_pilot();
  EXPECT_TRUE(pilot->run_once().empty());
  EXPECT_EQ(market_.creates, 0);
  EXPECT_THAT(pilot->status().last_error, HasSubstr("offer search failed"));
}

TEST_F(AutopilotTest, OfferTakenBetweenSearchAndRentIsReportedNotRetried) {
  pilot_config_.policy.max_instances = 1;
  market_.create_errors.push_back(
      market::MarketError{market::ErrorKind::OfferGone, 404, "no_such_ask", "taken"});
  auto pilot = make_pilot();
  const auto taken = pilot->run_once();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_FALSE(taken[0].ok);
  EXPECT_THAT(taken[0].reason, HasSubstr("not rented"));
  EXPECT_EQ(market_.creates, 1);  // a create is never blindly retried
  EXPECT_EQ(pilot->status().rents, 0);
  // The next round, on the same search, does not try the taken offer again.
  now_ += 5;
  for (const auto& d : pilot->run_once()) EXPECT_NE(d.offer_id, taken[0].offer_id) << d.reason;
  EXPECT_EQ(market_.searches, 1);
}

TEST_F(AutopilotTest, MachineTheOperatorDroppedIsNotRentedBack) {
  pilot_config_.policy.max_instances = 1;
  auto pilot = make_pilot();
  const auto first = pilot->run_once();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(first[0].ok) << first[0].reason;
  const auto rec = *store_->instance(first[0].instance_id);
  ASSERT_TRUE(manager_->request_destroy(rec.id, kOperatorDestroyReason));
  manager_->tick();
  ASSERT_EQ(store_->instance(rec.id)->state, S::Destroyed);
  now_ += 60;
  const auto next = pilot->run_once();
  ASSERT_EQ(next.size(), 1u);  // a rent, but elsewhere
  EXPECT_NE(store_->instance(next[0].instance_id)->offer.machine_id, rec.offer.machine_id);
}

// --- blame --------------------------------------------------------------------------------

TEST_F(AutopilotTest, HostThatNeverBootsGetsAStrikeWithEvidence) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec) << rec.error().message;
  market_.set_status(*rec->market_id, "loading");
  manager_->reconcile();
  now_ += manager_->config().lifecycle.boot_loading_max_s + 60;
  manager_->reconcile();
  manager_->tick();
  EXPECT_EQ(store_->instance(rec->id)->state, S::Destroyed);
  const auto bad = store_->bad_hosts();
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].machine_id, 11);
  EXPECT_EQ(bad[0].source, "auto");
  EXPECT_EQ(bad[0].strikes, 1);
  ASSERT_TRUE(bad[0].expires_at.has_value());
  EXPECT_GT(*bad[0].expires_at, now_);
  // The manager now refuses to rent that machine again.
  market_.add_offer(104, 11, 0.40);
  auto again = manager_->deploy(104, "operator");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().status, 409);
}

TEST_F(AutopilotTest, OperatorDestroyBlamesNobody) {
  auto rec = manager_->deploy(102, "operator");
  ASSERT_TRUE(rec) << rec.error().message;
  ASSERT_TRUE(manager_->request_destroy(rec->id, "operator asked"));
  manager_->tick();
  EXPECT_EQ(store_->instance(rec->id)->state, S::Destroyed);
  EXPECT_TRUE(store_->bad_hosts().empty());
}

// --- HTTP ---------------------------------------------------------------------------------

TEST_F(AutopilotTest, ApiShowsAndPausesTheAutopilot) {
  auto pilot = make_pilot();
  const std::string token = "op-token-for-autopilot-test";
  ApiOptions options;
  options.operator_token_hash = hash_token(token);
  options.clock = [this] { return now_; };
  options.autopilot = pilot.get();
  HttpApi api(*manager_, options);
  net::HttpServer server;
  api.mount(server);
  pf::test::FrontServing serving(server);
  const int port = serving.port();
  httplib::Client client("127.0.0.1", port);
  const httplib::Headers auth = {{"Authorization", "Bearer " + token}};

  auto fleet = client.Get("/api/v1/fleet", auth);
  ASSERT_TRUE(fleet);
  EXPECT_EQ(fleet->status, 200);
  auto fj = nlohmann::json::parse(fleet->body);
  EXPECT_EQ(fj["autopilot"]["enabled"], true);
  EXPECT_EQ(fj["autopilot"]["paused"], false);

  auto unauth = client.Post("/api/v1/autopilot", R"({"paused":true})", "application/json");
  ASSERT_TRUE(unauth);
  EXPECT_EQ(unauth->status, 401);
  EXPECT_FALSE(pilot->status().paused);

  auto bad = client.Post("/api/v1/autopilot", auth, R"({"paused":"yes"})", "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, HasSubstr("paused"));
  auto unknown =
      client.Post("/api/v1/autopilot", auth, R"({"paused":true,"x":1})", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 400);
  EXPECT_FALSE(pilot->status().paused);

  auto pause = client.Post("/api/v1/autopilot", auth, R"({"paused":true})", "application/json");
  ASSERT_TRUE(pause);
  EXPECT_EQ(pause->status, 200);
  EXPECT_EQ(nlohmann::json::parse(pause->body)["paused"], true);
  EXPECT_TRUE(pilot->status().paused);
  auto shown = client.Get("/api/v1/autopilot", auth);
  ASSERT_TRUE(shown);
  EXPECT_EQ(nlohmann::json::parse(shown->body)["paused_by"], "operator via API");
}

// --- production windows ---------------------------------------------------------------------

TEST_F(AutopilotTest, ProvingInstanceIsMeasuredInProductionWindows) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec) << rec.error().message;
  const auto& env = market_.create_requests.back().env;
  auto reg = manager_->agent_register(
      {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "test"});
  ASSERT_TRUE(reg) << reg.error().message;
  // Accepted earlier (the verdict path has its own tests): put it straight into proving.
  auto proving = *store_->instance(rec->id);
  proving.state = S::Proving;
  proving.state_since = now_;
  store_->update_instance(proving);
  std::vector<AgentEvent> proofs;
  for (int i = 0; i < 130; ++i) {
    AgentEvent e;
    e.seq = i + 1;
    e.type = "proof_done";
    e.at = 2'000'000 + 60.0 * i;  // one a minute: 60/hr
    e.seconds = 60;
    e.phase = "measured";
    proofs.push_back(e);
  }
  ASSERT_TRUE(manager_->agent_events(rec->id, proofs));
  manager_->tick();
  manager_->tick();  // idempotent: nothing new, nothing recorded twice
  std::vector<core::BenchRun> windows;
  for (const auto& run : store_->all_bench_runs()) {
    if (run.instance_id == rec->id && run.kind == "production") windows.push_back(run);
  }
  ASSERT_EQ(windows.size(), 2u);  // two complete hours; the third is still open
  for (const auto& w : windows) {
    EXPECT_GE(w.samples, 59);
    EXPECT_NEAR(w.rate, 60, 3);
    EXPECT_LE(w.low, w.rate);
    EXPECT_GE(w.high, w.rate);
  }
}

// --- demand from the job queue (core/scale_to_demand.h) -------------------------------------

// A job queue as the gateway's would show it: watched since `since`, `per_hour` arrivals over
// the last `busy_s` seconds, `queued` waiting.
struct FakeQueue {
  double since = 0;
  double per_hour = 0;
  double busy_s = 0;
  int queued = 0;
  bool any = true;
  int calls = 0;
  JobSignal signal() {
    return [this](double now, double) {
      ++calls;
      core::QueueSnapshot s;
      s.now = now;
      s.any_job = any;
      s.observed_since = since;
      if (per_hour > 0) {
        for (double t = now - busy_s; t < now; t += 3600 / per_hour) s.arrivals.push_back(t);
      }
      s.queued = queued;
      for (int i = 0; i < queued; ++i) s.queued_deadlines.push_back(now + 1800);
      return s;
    };
  }
};

TEST_F(AutopilotTest, AGrowingQueueMakesItRent) {
  // Configured demand 0: without jobs the autopilot rents nothing (today's behaviour).
  pilot_config_.policy.demand_proofs_per_hour = 0;
  FakeQueue queue;
  queue.any = false;
  auto pilot = make_pilot(queue.signal());
  EXPECT_TRUE(pilot->run_once().empty());
  EXPECT_EQ(market_.creates, 0);
  EXPECT_EQ(pilot->status().demand_reason, "configured");
  // Jobs start to arrive and wait: 60/hr for the last hour, 30 queued. The queue is the demand.
  queue.any = true;
  queue.since = now_ - 2 * 3600;
  queue.per_hour = 60;
  queue.busy_s = 3600;
  queue.queued = 30;
  now_ += 300;
  const auto taken = pilot->run_once();
  ASSERT_FALSE(taken.empty());
  for (const auto& d : taken) {
    EXPECT_EQ(d.action, "rent");
    EXPECT_TRUE(d.ok) << d.reason;
  }
  EXPECT_GT(market_.creates, 0);
  const auto st = pilot->status();
  ASSERT_TRUE(st.demand_proofs_per_hour);
  EXPECT_GT(*st.demand_proofs_per_hour, 60);
  EXPECT_THAT(st.demand_reason, HasSubstr("30 queued"));
  EXPECT_EQ(to_json(st)["demand"]["reason"], st.demand_reason);
}

TEST_F(AutopilotTest, AnIdleFleetMakesItDropTheLeastEfficient) {
  // Two proving instances, 40/hr each, at $0.40 and $0.30 an hour.
  std::vector<std::int64_t> ids;
  for (std::int64_t offer : {101, 102}) {
    auto rec = manager_->deploy(offer, "operator");
    ASSERT_TRUE(rec) << rec.error().message;
    auto proving = *store_->instance(rec->id);
    proving.state = S::Proving;
    proving.state_since = now_;
    core::Verdict v;
    v.decision = core::Verdict::Decision::Accept;
    v.rate = 40;
    proving.verdict = v;
    store_->update_instance(proving);
    ids.push_back(rec->id);
  }
  // Jobs were served before, but none arrived in the last two hours and none waits.
  pilot_config_.policy.max_instances = 2;  // nothing to rent instead
  FakeQueue queue;
  queue.since = now_ - 6 * 3600;
  auto pilot = make_pilot(queue.signal());
  const auto taken = pilot->run_once();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].action, "drop");
  EXPECT_TRUE(taken[0].ok) << taken[0].reason;
  EXPECT_EQ(taken[0].instance_id, ids[0]);  // the dearer per proof
  EXPECT_THAT(taken[0].reason, HasSubstr("surplus"));
  EXPECT_EQ(market_.creates, 2);
  ASSERT_TRUE(pilot->status().demand_proofs_per_hour);
  EXPECT_DOUBLE_EQ(*pilot->status().demand_proofs_per_hour, 0);
  // The next round drops the other one too (one per decision).
  manager_->tick();
  now_ += 300;
  const auto next = pilot->run_once();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].action, "drop");
  EXPECT_EQ(next[0].instance_id, ids[1]);
}

TEST_F(AutopilotTest, TheGatewaysJobQueueIsItsDemand) {
  // A real job queue on the manager's store: before any job the configured demand (0: rent
  // nothing); once jobs arrive and wait, the queue is the demand and the autopilot rents.
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("pf_autopilot_jobs_" + std::to_string(getpid()));
  fs::remove_all(dir);
  jobs::JobQueueConfig qcfg;
  qcfg.data_dir = dir.string();
  jobs::JobQueue queue(*store_, qcfg, jobs::JobQueueHooks{}, [this] { return now_; });
  pilot_config_.policy.demand_proofs_per_hour = 0;
  auto pilot = make_pilot(job_signal(queue, 64));
  EXPECT_TRUE(pilot->run_once().empty());
  EXPECT_EQ(pilot->status().demand_reason, "configured");
  // An hour of jobs, one a minute, none taken (no instance proves yet).
  for (int i = 0; i < 60; ++i) {
    now_ += 60;
    jobs::SubmitRequest r;
    r.request_id = "req-" + std::to_string(i);
    r.input = "input " + std::to_string(i);
    ASSERT_TRUE(queue.submit(r));
  }
  const auto taken = pilot->run_once();
  ASSERT_FALSE(taken.empty());
  for (const auto& d : taken) EXPECT_EQ(d.action, "rent") << d.reason;
  const auto st = pilot->status();
  ASSERT_TRUE(st.demand_proofs_per_hour);
  EXPECT_GT(*st.demand_proofs_per_hour, 60);
  EXPECT_THAT(st.demand_reason, HasSubstr("60 queued"));
  queue.shutdown();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pf::manager
