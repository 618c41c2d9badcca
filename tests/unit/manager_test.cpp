// The manager's lifecycle over an in-memory store and a scripted FakeMarket, with a manual
// clock: every path from rent to destroy, and the money-safety rules.
#include "manager/manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/text.h"
#include "manager/views.h"
#include "store/store.h"
#include "support/fake_market.h"

namespace pf::manager {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using S = core::InstanceState;

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    market_.add_offer(101, 11, 0.40);  // break-even 50/hr at $0.008
    market_.add_offer(102, 12, 0.20);
    market_.add_offer(103, 11, 0.40);  // same machine as 101
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    // Break-even rates as commented below whichever price judges benchmarks (revenue per proof
    // or the $/proof target).
    cfg.rank.economics.target_cost_per_proof_usd = 0.008;
    cfg.rank.economics.revenue_per_proof_usd = 0.008;
    cfg.params = {{"a.params", "http://x/a", 1000000000, "00"}};
    cfg.lifecycle.destroy_retry_s = 0;
    cfg.still_leading = [this] { return leading_; };
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  }

  core::InstanceRecord get(std::int64_t id) { return *store_->instance(id); }

  // Deploys offer and registers its agent using the secret passed in the create's env.
  std::pair<std::int64_t, std::string> deploy_and_register(std::int64_t offer) {
    auto rec = manager_->deploy(offer, "test");
    EXPECT_TRUE(rec) << rec.error().message;
    const auto& env = market_.create_requests.back().env;
    RegisterRequest req{env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
    auto reg = manager_->agent_register(req);
    EXPECT_TRUE(reg) << reg.error().message;
    return {rec->id, reg->token};
  }

  AgentEvent proof(std::int64_t seq, double at, const std::string& phase = "measured") {
    AgentEvent e;
    e.seq = seq;
    e.type = "proof_done";
    e.at = at;
    e.seconds = 60;
    e.phase = phase;
    return e;
  }

  // Walks an instance to benchmarking with one warm-up proof ending at t0.
  void to_benchmarking(std::int64_t id, double t0) {
    Heartbeat hb;
    hb.phase = "fetching_params";
    hb.params_total = 1e9;
    ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
    AgentEvent started;
    started.seq = 1;
    started.type = "prover_started";
    started.data = {{"plan", {{"partitions", 12}}}};
    ASSERT_TRUE(manager_->agent_events(id, {started}));
    ASSERT_TRUE(manager_->agent_events(id, {proof(2, t0, "warmup")}));
  }

  // Sends measured proofs one POST each, `gaps` seconds apart from t, with the manager's clock
  // in step with the agent's; stops after the POST that ended the benchmark. Returns how many
  // were sent.
  int prove_one_by_one(std::int64_t id, double& t, const std::vector<double>& gaps,
                       std::int64_t& seq) {
    int sent = 0;
    for (double gap : gaps) {
      t += gap;
      now_ = t;
      EXPECT_TRUE(manager_->agent_events(id, {proof(seq++, t)}));
      ++sent;
      if (get(id).state != S::Benchmarking) break;
    }
    return sent;
  }

  // Intervals around `mean` with a ±jitter pattern, as real proofs vary.
  static std::vector<double> gaps(int n, double mean, double jitter) {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) out.push_back(mean + jitter * ((i % 3) - 1));
    return out;
  }

  double now_ = 1'000'000;
  bool leading_ = true;  // what config.still_leading answers (a replica's term)
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
};

TEST_F(ManagerTest, DeployRecordsIntentCreatesWithLabelAndEnv) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec) << rec.error().message;
  EXPECT_EQ(rec->state, S::Booting);
  ASSERT_TRUE(rec->market_id);
  ASSERT_EQ(market_.create_requests.size(), 1u);
  const auto& req = market_.create_requests[0];
  EXPECT_EQ(req.label, "proverfleet:" + rec->deployment_id);
  EXPECT_EQ(req.env.at("PROVERFLEET_DEPLOYMENT"), rec->deployment_id);
  EXPECT_FALSE(req.env.at("PROVERFLEET_SECRET").empty());
  EXPECT_EQ(req.env.at("PROVERFLEET_MANAGER"), manager_->config().public_url);
  // The secret itself is never stored, only its hash.
  EXPECT_NE(rec->secret_hash, req.env.at("PROVERFLEET_SECRET"));
  auto events = store_->events(rec->id, 0);
  ASSERT_GE(events.size(), 2u);
  EXPECT_THAT(events[0].message, HasSubstr("renting offer 101"));
}

// [bids] on: an offer that takes bids is rented interruptible where its bid is cheaper per
// proof (core/rental_terms.h); the bid is on the row before the create and on the create.
TEST_F(ManagerTest, WithBidsOnACheapBidIsRentedInterruptibleAndADearOneOnDemand) {
  market_.offers[0].min_bid = 0.10;  // offer 101, $0.40/hr: bid 0.13
  market_.offers[1].min_bid = 0.18;  // offer 102, $0.20/hr: 0.234 would be over 85 % of it
  ManagerConfig cfg = manager_->config();
  cfg.bids.enabled = true;
  Manager bidding(*store_, market_, cfg, [this] { return now_; });
  auto bid = bidding.deploy(101, "operator");
  ASSERT_TRUE(bid) << bid.error().message;
  ASSERT_TRUE(market_.create_requests.back().bid_price);
  EXPECT_NEAR(*market_.create_requests.back().bid_price, 0.13, 1e-12);
  ASSERT_TRUE(get(bid->id).bid_price);
  EXPECT_NEAR(*get(bid->id).bid_price, 0.13, 1e-12);
  EXPECT_THAT(store_->events(bid->id, 0)[0].message, HasSubstr("bid $0.130/hr"));

  auto on_demand = bidding.deploy(102, "operator");
  ASSERT_TRUE(on_demand) << on_demand.error().message;
  EXPECT_FALSE(market_.create_requests.back().bid_price);
  EXPECT_FALSE(get(on_demand->id).bid_price);
  EXPECT_THAT(store_->events(on_demand->id, 0)[0].message, HasSubstr("on-demand: a bid of"));
  // Off (the default): no bid, and the row says why.
  auto off = manager_->deploy(103, "operator");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_FALSE(market_.create_requests.back().bid_price);
  EXPECT_THAT(store_->events(off->id, 0)[0].message, HasSubstr("[bids] enabled"));
}

// A stopped bid rental that pays its setup back is raised to the terms' ceiling after
// raise_stopped_after_s (core/bid_change.h): the intent is an event before the call, the row's
// bid changes only once the market confirms, and a failed change is sent again.
TEST_F(ManagerTest, AnAcceptedBidStoppedByTheMarketIsRaisedOnceTheMarketConfirms) {
  market_.offers[0].min_bid = 0.10;  // offer 101, $0.40/hr: bid 0.13
  ManagerConfig cfg = manager_->config();
  cfg.bids.enabled = true;
  Manager bidding(*store_, market_, cfg, [this] { return now_; });
  auto rented = bidding.deploy(101, "operator");
  ASSERT_TRUE(rented) << rented.error().message;
  core::InstanceRecord rec = get(rented->id);
  ASSERT_TRUE(rec.market_id);
  core::Verdict accepted;
  accepted.decision = core::Verdict::Decision::Accept;
  accepted.rate = 100;  // $0.80/hr of proofs: pays at the ceiling
  rec.verdict = accepted;
  rec.state = S::Proving;
  rec.market_status = "stopped";
  rec.market_status_since = now_;
  store_->update_instance(rec);
  const double ceiling = core::bid_ceiling(rec.offer, rec.disk_gb, cfg.bids);

  now_ += 60;  // a stop may be short
  bidding.tick();
  EXPECT_EQ(market_.bid_changes, 0);
  market_.change_bid_failures = 1;
  now_ += 60;
  bidding.tick();
  EXPECT_EQ(market_.bid_changes, 1);
  EXPECT_NEAR(*get(rec.id).bid_price, 0.13, 1e-12) << "unconfirmed: the row keeps its bid";
  bidding.tick();
  EXPECT_EQ(market_.bid_changes, 2);
  EXPECT_NEAR(market_.bids.at(*rec.market_id), ceiling, 1e-12);
  EXPECT_NEAR(*get(rec.id).bid_price, ceiling, 1e-12);
  bidding.tick();
  EXPECT_EQ(market_.bid_changes, 2) << "raised once";
  std::vector<std::string> messages;
  for (const auto& e : store_->events(rec.id, 0)) messages.push_back(e.message);
  EXPECT_THAT(messages, Contains(HasSubstr("changing the bid: stopped by the market for 2 min")));
  EXPECT_THAT(messages, Contains(HasSubstr("failed, will retry: connection reset")));
  EXPECT_THAT(messages, Contains(HasSubstr("bid changed from $0.130 to $" +
                                           core::fixed(ceiling, 3) + "/hr (market confirmed)")));
}

TEST_F(ManagerTest, SameOfferIsNeverRentedTwice) {
  ASSERT_TRUE(manager_->deploy(101, "operator"));
  auto again = manager_->deploy(101, "operator");
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().status, 409);
  EXPECT_EQ(market_.creates, 1);
}

TEST_F(ManagerTest, UnlistedOfferIsRefusedWithoutCreate) {
  auto r = manager_->deploy(999, "operator");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 404);
  EXPECT_EQ(market_.creates, 0);
  EXPECT_TRUE(store_->instances(true).empty());
}

TEST_F(ManagerTest, BadHostIsRefused) {
  core::BadHost b;
  b.machine_id = 11;
  b.reason = "slow";
  b.added_at = now_;
  store_->put_bad_host(b);
  auto r = manager_->deploy(101, "operator");
  ASSERT_FALSE(r);
  EXPECT_THAT(r.error().message, HasSubstr("bad-host"));
  EXPECT_EQ(market_.creates, 0);
}

TEST_F(ManagerTest, OfferGoneAtCreateClosesRowWithoutDestroy) {
  market_.create_errors.push_back({market::ErrorKind::OfferGone, 404, "no_such_ask", "taken"});
  auto r = manager_->deploy(101, "operator");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().status, 409);
  auto rows = store_->instances(true);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].state, S::Destroyed);
  EXPECT_EQ(market_.destroys, 0);
}

TEST_F(ManagerTest, LostCreateReplyIsAdoptedByReconciliationNotRecreated) {
  market_.create_executes_despite_error = true;
  market_.create_errors.push_back({market::ErrorKind::CreateUnknown, 0, "", "reply lost"});
  auto r = manager_->deploy(101, "operator");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, S::Renting);
  EXPECT_FALSE(r->market_id);
  manager_->reconcile();
  auto rec = get(r->id);
  EXPECT_EQ(rec.state, S::Booting);
  ASSERT_TRUE(rec.market_id);
  EXPECT_EQ(market_.instances.count(*rec.market_id), 1u);
  EXPECT_EQ(market_.creates, 1);
  EXPECT_EQ(market_.instances.size(), 1u);
}

TEST_F(ManagerTest, CreateAnswered500IsClosedAfterTheGraceNotTheRentingDeadline) {
  // Reproduction (issue 10): a create answered 500 (outcome unknown, nothing rented) held its
  // renting row, and with it an autopilot slot, for renting_max_s.
  ASSERT_LT(manager_->config().vanish_grace_s, manager_->config().lifecycle.renting_max_s);
  market_.create_errors.push_back(
      {market::ErrorKind::CreateUnknown, 500, "", "server error; nothing found by label"});
  auto r = manager_->deploy(101, "autopilot");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, S::Renting);
  manager_->reconcile();
  EXPECT_EQ(get(r->id).state, S::Renting);  // reads lag creates: not yet
  now_ += manager_->config().vanish_grace_s + 1;
  market_.list_fails = true;  // an incomplete list proves nothing
  manager_->reconcile();
  EXPECT_EQ(get(r->id).state, S::Renting);
  market_.list_fails = false;
  manager_->reconcile();
  const auto rec = get(r->id);
  EXPECT_EQ(rec.state, S::Destroyed);
  EXPECT_THAT(rec.destroy_reason, HasSubstr("no instance with its label"));
  EXPECT_EQ(market_.creates, 1);                  // never re-created
  EXPECT_TRUE(store_->instances(false).empty());  // the slot is free
}

TEST_F(ManagerTest, CreateAnswered500ThatAppearsLateIsAdoptedNotRecreated) {
  market_.create_executes_despite_error = true;
  market_.create_errors.push_back({market::ErrorKind::CreateUnknown, 500, "", "server error"});
  auto r = manager_->deploy(101, "autopilot");
  ASSERT_TRUE(r);
  now_ += manager_->config().vanish_grace_s + 1;
  manager_->reconcile();
  const auto rec = get(r->id);
  EXPECT_EQ(rec.state, S::Booting);
  ASSERT_TRUE(rec.market_id);
  EXPECT_EQ(market_.creates, 1);
}

// A market whose create runs a reconcile while it is still in flight, past the grace.
class SlowCreateMarket : public testing::FakeMarket {
 public:
  std::function<void()> during_create;
  market::Result<market::CreateResult> create_instance(const market::CreateRequest& req) override {
    if (during_create) during_create();
    return FakeMarket::create_instance(req);
  }
};

TEST_F(ManagerTest, ACreateStillInFlightIsNotClosedForMissingFromTheList) {
  SlowCreateMarket slow;
  slow.add_offer(101, 11, 0.40);
  ManagerConfig cfg = manager_->config();
  Manager m(*store_, slow, cfg, [this] { return now_; });
  std::optional<S> seen_during_create;
  slow.during_create = [&] {
    now_ += cfg.vanish_grace_s + 1;
    m.reconcile();  // the instance is not listed yet: the create has not happened
    seen_during_create = store_->instances(false).at(0).state;
  };
  auto r = m.deploy(101, "operator");
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(seen_during_create, S::Renting);
  EXPECT_EQ(get(r->id).state, S::Booting);
}

TEST_F(ManagerTest, CreateThatNeverAppearsIsClosedAfterDeadline) {
  market_.create_errors.push_back({market::ErrorKind::CreateUnknown, 0, "", "reply lost"});
  auto r = manager_->deploy(101, "operator");
  ASSERT_TRUE(r);
  manager_->reconcile();
  EXPECT_EQ(get(r->id).state, S::Renting);
  now_ += manager_->config().lifecycle.renting_max_s + 1;
  manager_->reconcile();
  EXPECT_EQ(get(r->id).state, S::Destroyed);
}

// A replica whose term ended while its round was under way (it stood still past the lease)
// writes nothing from that round and sends nothing: the rows are the new leader's.
TEST_F(ManagerTest, ARoundAfterTheTermEndedChangesNothing) {
  market_.create_errors.push_back({market::ErrorKind::CreateUnknown, 0, "", "reply lost"});
  auto lost = manager_->deploy(101, "operator");
  ASSERT_TRUE(lost);
  auto [id, token] = deploy_and_register(102);
  market_.destroy_failures = 1;  // destroying until the next tick
  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));
  ASSERT_EQ(get(id).state, S::Destroying);
  const auto destroys_sent = market_.destroyed.size();
  const auto events_before = store_->events(id, 0).size();
  now_ += manager_->config().lifecycle.renting_max_s + 1;

  leading_ = false;
  manager_->reconcile();
  manager_->tick();
  EXPECT_EQ(get(lost->id).state, S::Renting);  // past its deadline, but not ours to close now
  EXPECT_EQ(get(id).state, S::Destroying);
  EXPECT_EQ(market_.destroyed.size(), destroys_sent);
  EXPECT_EQ(store_->events(id, 0).size(), events_before);

  leading_ = true;  // leading again (a new term): the same rounds act
  manager_->reconcile();
  manager_->tick();
  EXPECT_EQ(get(lost->id).state, S::Destroyed);
  EXPECT_EQ(get(id).state, S::Destroyed);
}

TEST_F(ManagerTest, RegisterChecksSecretAndTheSecretIsSingleUse) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec);
  const auto& env = market_.create_requests.back().env;
  const std::string dep = env.at("PROVERFLEET_DEPLOYMENT");
  const std::string secret = env.at("PROVERFLEET_SECRET");
  auto bad = manager_->agent_register({dep, "wrong", {}, "t"});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().status, 401);
  auto unknown = manager_->agent_register({"nope", secret, {}, "t"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, bad.error().message);  // no probing which exists
  auto first = manager_->agent_register({dep, secret, {}, "t"});
  ASSERT_TRUE(first);
  EXPECT_EQ(get(rec->id).state, S::Registered);
  EXPECT_EQ(first->body["params"].size(), 1u);
  EXPECT_EQ(manager_->authenticate_agent(first->token), rec->id);
  EXPECT_FALSE(manager_->authenticate_agent(""));

  // Reproduction (issue 10): the secret, readable in the market's instance list, re-registered
  // and took the instance's token, cutting the real agent off. Now it is spent.
  auto stolen = manager_->agent_register({dep, secret, {}, "t"});
  ASSERT_FALSE(stolen);
  EXPECT_EQ(stolen.error().status, 409);
  EXPECT_THAT(stolen.error().message, HasSubstr("already used"));
  auto with_own_token = manager_->agent_register({dep, secret, {}, "t", std::string(64, 'a')});
  ASSERT_FALSE(with_own_token);
  EXPECT_EQ(with_own_token.error().status, 409);
  EXPECT_EQ(manager_->authenticate_agent(first->token), rec->id);  // the real agent keeps it
  int refusals = 0;
  for (const auto& e : store_->events(rec->id, 0)) {
    refusals += e.kind == "agent" && e.message == "registration refused: secret already used";
  }
  EXPECT_EQ(refusals, 2);
  // The holder of the token may register again (a retry whose reply was lost): same answer.
  auto retry = manager_->agent_register({dep, secret, {}, "t", first->token});
  ASSERT_TRUE(retry) << retry.error().message;
  EXPECT_EQ(retry->instance_id, rec->id);
  EXPECT_EQ(retry->token, first->token);
}

TEST_F(ManagerTest, AnAgentChosenTokenMakesRegistrationIdempotent) {
  auto rec = manager_->deploy(101, "operator");
  ASSERT_TRUE(rec);
  const auto& env = market_.create_requests.back().env;
  RegisterRequest req{env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"};
  req.token = "short";
  auto malformed = manager_->agent_register(req);
  ASSERT_FALSE(malformed);
  EXPECT_EQ(malformed.error().status, 400);
  EXPECT_TRUE(get(rec->id).token_hash.empty());  // a malformed try does not spend the secret

  req.token = random_token();
  auto first = manager_->agent_register(req);
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_EQ(first->token, req.token);
  EXPECT_EQ(manager_->authenticate_agent(req.token), rec->id);
  // The reply was lost: the agent sends the very same request again.
  auto again = manager_->agent_register(req);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(again->instance_id, rec->id);
  EXPECT_EQ(manager_->authenticate_agent(req.token), rec->id);
  // Another token with the same secret is refused.
  RegisterRequest other = req;
  other.token = random_token();
  auto refused = manager_->agent_register(other);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().status, 409);
  EXPECT_FALSE(manager_->authenticate_agent(other.token));
}

TEST_F(ManagerTest, ADestroyedInstanceTakesNoMoreEventsHeartbeatsOrLogs) {
  auto [id, token] = deploy_and_register(101);
  market_.destroy_failures = 1;  // destroying until the next tick
  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));
  ASSERT_EQ(get(id).state, S::Destroying);
  // While destroying, heartbeats answer stop and the agent's last words are still taken.
  auto hb = manager_->agent_heartbeat(id, Heartbeat{});
  ASSERT_TRUE(hb);
  EXPECT_THAT(hb->commands, ::testing::ElementsAre("stop"));
  AgentEvent exiting;
  exiting.seq = 100;
  exiting.type = "exiting";
  exiting.message = "the manager sent stop";
  ASSERT_TRUE(manager_->agent_events(id, {exiting}));
  ASSERT_TRUE(manager_->agent_logs(id, "last line\n"));
  manager_->tick();
  ASSERT_EQ(get(id).state, S::Destroyed);
  const auto before = get(id);
  const auto events_before = store_->events(id, 0).size();

  // Reproduction (issue 10): events were still applied to a destroyed instance.
  auto events = manager_->agent_events(id, {proof(1, now_), proof(2, now_ + 60)});
  ASSERT_FALSE(events);
  EXPECT_EQ(events.error().status, 410);
  EXPECT_THAT(events.error().message, HasSubstr("destroyed"));
  auto beat = manager_->agent_heartbeat(id, Heartbeat{});
  ASSERT_FALSE(beat);
  EXPECT_EQ(beat.error().status, 410);
  auto logs = manager_->agent_logs(id, "late line\n");
  ASSERT_FALSE(logs);
  EXPECT_EQ(logs.error().status, 410);

  const auto after = get(id);
  EXPECT_EQ(after.state, S::Destroyed);
  EXPECT_EQ(after.proofs_benchmark, before.proofs_benchmark);
  EXPECT_EQ(after.last_heartbeat_at, before.last_heartbeat_at);
  EXPECT_TRUE(store_->proof_samples(id).empty());
  EXPECT_EQ(store_->events(id, 0).size(), events_before);
  EXPECT_EQ(manager_->logs(id).find("late line"), std::string::npos);
  // The seqs were not consumed either: nothing of the refused batch counts as seen.
  EXPECT_TRUE(store_->mark_agent_seq(id, 1));
}

TEST_F(ManagerTest, FastHostIsAcceptedAndProves) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  EXPECT_EQ(get(id).state, S::WarmingUp);
  std::vector<AgentEvent> evs;
  for (int i = 0; i < 8; ++i) evs.push_back(proof(10 + i, t += 36 + (i % 3)));  // ~95/hr
  auto r = manager_->agent_events(id, evs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->accepted, 8);
  auto rec = get(id);
  EXPECT_EQ(rec.state, S::Proving);
  ASSERT_TRUE(rec.verdict);
  EXPECT_EQ(rec.verdict->decision, core::Verdict::Decision::Accept);
  EXPECT_GT(rec.verdict->rate, 80);
  // The test decides after each proof, also inside one batch: the proofs after the deciding
  // one (the 6th: acceptance.min_samples) are production.
  EXPECT_EQ(rec.verdict->samples, manager_->config().acceptance.min_samples);
  EXPECT_EQ(rec.proofs_benchmark, 6);
  EXPECT_EQ(rec.proofs_production, 2);
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].host.machine_id, 11);
  EXPECT_EQ(runs[0].samples, 6);
  EXPECT_DOUBLE_EQ(runs[0].rate, rec.verdict->rate);
  EXPECT_DOUBLE_EQ(runs[0].low, rec.verdict->low);
  EXPECT_DOUBLE_EQ(runs[0].high, rec.verdict->high);
  EXPECT_LT(runs[0].low, runs[0].rate);
  EXPECT_GT(runs[0].high, runs[0].rate);
  EXPECT_EQ(nlohmann::json::parse(runs[0].plan_json)["partitions"], 12);
  EXPECT_FALSE(runs[0].contended);
  EXPECT_FALSE(runs[0].throttled);
  // Later proofs count as production.
  ASSERT_TRUE(manager_->agent_events(id, {proof(40, t + 40)}));
  EXPECT_EQ(get(id).proofs_production, 3);
  auto s = manager_->summary();
  EXPECT_EQ(s.by_state["proving"], 1);
  EXPECT_GT(s.proofs_per_hour, 80);
  ASSERT_TRUE(s.cost_per_proof);
  EXPECT_LT(*s.cost_per_proof, 0.40 / 80);
}

// The summary's $/hour is what the rentals cost as they stand (core::fleet_usd_per_hour): a bid
// at its bid, one the market stopped its disk only; and it counts the live rentals by terms.
TEST_F(ManagerTest, TheSummaryCostsEachRentalAtItsTermsAndCountsThem) {
  market_.offers[0].min_bid = 0.10;  // offer 101, $0.40/hr: a bid of 0.13
  ManagerConfig cfg = manager_->config();
  cfg.bids.enabled = true;
  Manager bidding(*store_, market_, cfg, [this] { return now_; });
  auto bid = bidding.deploy(101, "operator");
  auto on_demand = bidding.deploy(102, "operator");
  ASSERT_TRUE(bid && on_demand);
  core::InstanceRecord b = get(bid->id);
  ASSERT_TRUE(b.bid_price);
  b.market_status = "running";
  store_->update_instance(b);
  core::InstanceRecord d = get(on_demand->id);
  d.market_status = "running";
  store_->update_instance(d);
  auto running = bidding.summary();
  EXPECT_EQ(running.bid_instances, 1);
  EXPECT_EQ(running.on_demand_instances, 1);
  EXPECT_EQ(running.market_stopped, 0);
  const double bid_storage = core::storage_usd_per_hour(b.offer, b.disk_gb);
  const double on_demand_storage = core::storage_usd_per_hour(d.offer, d.disk_gb);
  EXPECT_NEAR(running.dollars_per_hour, 0.13 + bid_storage + d.offer.dph_total, 1e-9);
  EXPECT_NEAR(running.storage_usd_per_hour, bid_storage + on_demand_storage, 1e-9);

  b.market_status = "stopped";  // outbid: its disk only
  b.market_stops = 2;
  store_->update_instance(b);
  auto stopped = bidding.summary();
  EXPECT_EQ(stopped.market_stopped, 1);
  EXPECT_EQ(stopped.market_stops, 2);
  EXPECT_NEAR(stopped.dollars_per_hour, bid_storage + d.offer.dph_total, 1e-9);
  const auto j = to_json(stopped);
  EXPECT_EQ(j.at("terms").at("bid_instances"), 1);
  EXPECT_EQ(j.at("terms").at("market_stopped"), 1);
  EXPECT_EQ(j.at("terms").at("market_stops"), 2);
}

TEST_F(ManagerTest, DuplicateEventsAreIgnored) {
  auto [id, token] = deploy_and_register(101);
  to_benchmarking(id, now_);
  auto first = manager_->agent_events(id, {proof(10, now_ + 40), proof(11, now_ + 80)});
  auto again = manager_->agent_events(id, {proof(10, now_ + 40), proof(11, now_ + 80)});
  ASSERT_TRUE(first && again);
  EXPECT_EQ(first->accepted, 2);
  EXPECT_EQ(again->accepted, 0);
  EXPECT_EQ(again->duplicates, 2);
  EXPECT_EQ(get(id).proofs_benchmark, 2);
}

TEST_F(ManagerTest, SlowHostIsRejectedDestroyedAndConfirmed) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  std::vector<AgentEvent> evs;
  for (int i = 0; i < 8; ++i) evs.push_back(proof(10 + i, t += 180 + 5 * (i % 2)));  // ~20/hr
  ASSERT_TRUE(manager_->agent_events(id, evs));
  auto rec = get(id);
  EXPECT_EQ(rec.state, S::Destroying);
  EXPECT_THAT(rec.destroy_reason, HasSubstr("rejected"));
  ASSERT_TRUE(rec.verdict);
  EXPECT_EQ(rec.verdict->samples, 6);  // decided at the first proof it may decide on
  ASSERT_EQ(store_->all_bench_runs().size(), 1u);
  EXPECT_LT(store_->all_bench_runs()[0].rate, 25);
  manager_->tick();
  EXPECT_EQ(get(id).state, S::Destroyed);
  EXPECT_EQ(market_.destroyed.size(), 1u);
  EXPECT_TRUE(market_.instances.empty());
  // The agent still running is told it is gone (410: the agent stops on it).
  auto cmds = manager_->agent_heartbeat(id, {});
  ASSERT_FALSE(cmds);
  EXPECT_EQ(cmds.error().status, 410);
}

// The sequential test: clear cases stop at min_samples, whatever side they fall on; a host
// near break-even keeps being measured.
TEST_F(ManagerTest, ClearHostsDecideEarlyMarginalOnesRunLonger) {
  const int min_samples = manager_->config().acceptance.min_samples;
  const int max_samples = manager_->config().acceptance.max_samples;
  ASSERT_LT(min_samples + 6, max_samples);
  auto run = [&](std::int64_t offer, double mean_gap) {
    auto [id, token] = deploy_and_register(offer);
    double t = now_;
    to_benchmarking(id, t);
    std::int64_t seq = 10;
    const int sent = prove_one_by_one(id, t, gaps(max_samples + 5, mean_gap, 2), seq);
    return std::make_pair(id, sent);
  };
  // Break-even is 50/hr for 101 ($0.40/hr) and 25/hr for 102 ($0.20/hr) at $0.008 per proof.
  auto [fast, fast_n] = run(101, 36);          // 100/hr: twice break-even
  auto [slow, slow_n] = run(102, 290);         // 12.4/hr: half of break-even
  auto [marginal, marginal_n] = run(103, 68);  // 53/hr: between the test's two hypotheses
  EXPECT_EQ(fast_n, min_samples);
  EXPECT_EQ(get(fast).state, S::Proving);
  EXPECT_EQ(slow_n, min_samples);
  EXPECT_EQ(get(slow).state, S::Destroying);
  EXPECT_THAT(get(slow).destroy_reason, HasSubstr("SPRT"));
  EXPECT_GT(marginal_n, min_samples + 6);
  EXPECT_LE(marginal_n, max_samples);
  const auto verdict = *get(marginal).verdict;
  EXPECT_NE(verdict.decision, core::Verdict::Decision::Continue);
  EXPECT_EQ(verdict.samples, marginal_n);
  // Every verdict is kept in the host history with its rate, interval and sample count.
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].samples, min_samples);
  EXPECT_EQ(runs[1].samples, min_samples);
  EXPECT_EQ(runs[2].samples, marginal_n);
  EXPECT_NEAR(runs[2].rate, 3600 / 68.0, 1.5);
  EXPECT_LT(runs[2].low, runs[2].rate);
  EXPECT_GT(runs[2].high, runs[2].rate);
  // 103 shares machine 11 with the fast instance, still alive: that run is marked contended.
  EXPECT_FALSE(runs[0].contended);
  EXPECT_TRUE(runs[2].contended);
}

TEST_F(ManagerTest, TimeCapEndsABenchmarkThatCannotDecide) {
  ManagerConfig cfg = manager_->config();
  cfg.acceptance.max_seconds = 900;
  manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  std::int64_t seq = 10;
  const int sent = prove_one_by_one(id, t, gaps(cfg.acceptance.max_samples, 68, 6), seq);
  EXPECT_LT(sent, cfg.acceptance.max_samples);  // the cap came first
  EXPECT_GE(sent, 900 / 74);
  auto rec = get(id);
  ASSERT_TRUE(rec.verdict);
  EXPECT_NE(rec.verdict->decision, core::Verdict::Decision::Continue);
  EXPECT_THAT(rec.verdict->reason, HasSubstr("time cap"));
  EXPECT_EQ(rec.verdict->samples, sent);
  ASSERT_EQ(store_->all_bench_runs().size(), 1u);
}

TEST_F(ManagerTest, HeartbeatRejectsAHostThatStoppedProving) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  std::int64_t seq = 10;
  prove_one_by_one(id, t, gaps(3, 40, 2), seq);
  ASSERT_EQ(get(id).state, S::Benchmarking);
  Heartbeat hb;
  hb.phase = "benchmarking";
  now_ = t + 60;  // quiet, but not for long: nothing to decide yet
  auto cmds = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(cmds);
  EXPECT_TRUE(cmds->commands.empty());
  EXPECT_EQ(get(id).state, S::Benchmarking);
  // Break-even (50/hr) needs a proof every 72 s; after many times that with none, the
  // heartbeat ends the benchmark instead of waiting for the caps or the state deadline.
  now_ = t + 1200;
  cmds = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(cmds);
  EXPECT_THAT(cmds->commands, ::testing::ElementsAre("stop"));
  auto rec = get(id);
  EXPECT_EQ(rec.state, S::Destroying);
  EXPECT_THAT(rec.destroy_reason, HasSubstr("no proof for"));
  ASSERT_EQ(store_->all_bench_runs().size(), 1u);
  EXPECT_EQ(store_->all_bench_runs()[0].samples, 3);
}

TEST_F(ManagerTest, ThrottledBenchmarkIsMarked) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  Heartbeat hb;
  hb.phase = "warming_up";
  hb.gpu_throttled = true;
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  std::int64_t seq = 10;
  prove_one_by_one(id, t, gaps(8, 36, 1), seq);
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].throttled);
}

// An OOM is a lesson about the machine, kept on the row: the next rental of that machine is told
// the smallest plan it was killed at, so its agent starts below it (as the simulator plans);
// another machine is told nothing, and a report without a sane plan changes nothing.
TEST_F(ManagerTest, AnOomTeachesTheMachinesNextRental) {
  auto [id, token] = deploy_and_register(101);  // machine 11
  AgentEvent garbage;
  garbage.seq = 1;
  garbage.type = "oom";
  garbage.data = {{"partitions", "many"}};
  AgentEvent oom;
  oom.seq = 2;
  oom.type = "oom";
  oom.data = {{"partitions", 14}, {"next_partitions", 12}};
  AgentEvent again;
  again.seq = 3;
  again.type = "oom";
  again.data = {{"partitions", 16}};  // a larger plan teaches nothing new
  ASSERT_TRUE(manager_->agent_events(id, {garbage}));
  EXPECT_EQ(get(id).oom_partitions, 0);
  ASSERT_TRUE(manager_->agent_events(id, {oom, again}));
  EXPECT_EQ(get(id).oom_partitions, 14);
  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));

  auto next = manager_->deploy(103, "test");  // machine 11 again
  ASSERT_TRUE(next) << next.error().message;
  const auto& env = market_.create_requests.back().env;
  auto reg = manager_->agent_register(
      {env.at("PROVERFLEET_DEPLOYMENT"), env.at("PROVERFLEET_SECRET"), {}, "t"});
  ASSERT_TRUE(reg) << reg.error().message;
  EXPECT_EQ(reg->body["machine"]["oom_partitions"], 14);

  auto other = manager_->deploy(102, "test");  // machine 12
  ASSERT_TRUE(other) << other.error().message;
  const auto& env2 = market_.create_requests.back().env;
  auto reg2 = manager_->agent_register(
      {env2.at("PROVERFLEET_DEPLOYMENT"), env2.at("PROVERFLEET_SECRET"), {}, "t"});
  ASSERT_TRUE(reg2) << reg2.error().message;
  EXPECT_EQ(reg2->body["machine"]["oom_partitions"], 0);
}

// A batch is applied whole: every event of it, one commit, and a retry of it changes nothing.
TEST_F(ManagerTest, EventBatchIsAppliedOnceAndKeepsEveryEvent) {
  auto [id, token] = deploy_and_register(101);
  AgentEvent oom;
  oom.seq = 1;
  oom.type = "oom";
  oom.message = "partitions 14";
  AgentEvent crash;
  crash.seq = 2;
  crash.type = "prover_crashed";
  AgentEvent done;
  done.seq = 3;
  done.type = "params_done";
  AgentEvent started;
  started.seq = 4;
  started.type = "prover_started";
  started.data = {{"plan", {{"partitions", 10}}}};
  const std::vector<AgentEvent> batch{started, crash, oom, done, proof(5, now_, "warmup")};
  const auto events_before = store_->events(id, 0).size();
  auto first = manager_->agent_events(id, batch);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->accepted, 5);
  auto rec = get(id);
  EXPECT_EQ(rec.ooms, 1);
  EXPECT_EQ(rec.prover_crashes, 1);
  EXPECT_EQ(rec.params_done_bytes, rec.params_total_bytes);
  EXPECT_EQ(nlohmann::json::parse(rec.plan_json)["partitions"], 10);
  EXPECT_EQ(rec.state, S::WarmingUp);
  EXPECT_EQ(store_->proof_samples(id).size(), 1u);
  const auto events_after = store_->events(id, 0).size();
  EXPECT_EQ(events_after, events_before + 5);  // four agent events and one state change
  auto again = manager_->agent_events(id, batch);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->accepted, 0);
  EXPECT_EQ(again->duplicates, 5);
  EXPECT_EQ(get(id).ooms, 1);
  EXPECT_EQ(store_->events(id, 0).size(), events_after);
}

TEST_F(ManagerTest, DestroyIsRetriedUntilConfirmed) {
  auto [id, token] = deploy_and_register(101);
  market_.destroy_failures = 3;
  auto r = manager_->request_destroy(id, "operator request");
  ASSERT_TRUE(r);
  EXPECT_EQ(get(id).state, S::Destroying);
  manager_->tick();
  manager_->tick();
  EXPECT_EQ(get(id).state, S::Destroying);
  manager_->tick();
  EXPECT_EQ(get(id).state, S::Destroyed);
  EXPECT_EQ(market_.destroys, 4);
  // Idempotent: destroying again changes nothing and sends nothing.
  ASSERT_TRUE(manager_->request_destroy(id, "again"));
  EXPECT_EQ(market_.destroys, 4);
}

TEST_F(ManagerTest, DeadlineAndLostHeartbeatDestroy) {
  auto [id, token] = deploy_and_register(101);
  auto [id2, token2] = deploy_and_register(102);
  // id sits in registered past its deadline; id2 keeps heart-beating but in fetching.
  Heartbeat hb;
  hb.phase = "fetching_params";
  hb.params_total = 1e9;
  ASSERT_TRUE(manager_->agent_heartbeat(id2, hb));
  now_ += manager_->config().lifecycle.registered_max_s + 1;
  ASSERT_TRUE(manager_->agent_heartbeat(id, {}));  // alive, but stuck
  ASSERT_TRUE(manager_->agent_heartbeat(id2, hb));
  manager_->tick();
  EXPECT_THAT(get(id).destroy_reason, HasSubstr("deadline passed in registered"));
  EXPECT_EQ(get(id2).state, S::FetchingParams);
  now_ += manager_->config().lifecycle.heartbeat_timeout_s + 1;
  manager_->tick();
  EXPECT_THAT(get(id2).destroy_reason, HasSubstr("heartbeat lost"));
  EXPECT_EQ(get(id2).state, S::Destroyed);
}

TEST_F(ManagerTest, MarketExitedDestroys) {
  auto [id, token] = deploy_and_register(101);
  market_.set_status(*get(id).market_id, "exited");
  manager_->reconcile();
  EXPECT_EQ(get(id).market_status, "exited");
  manager_->tick();
  EXPECT_THAT(get(id).destroy_reason, HasSubstr("exited"));
  EXPECT_EQ(get(id).state, S::Destroyed);
}

TEST_F(ManagerTest, OrphansWithOurLabelAreDestroyedOthersLeftAlone) {
  auto orphan = market_.inject("proverfleet:feedface");
  auto foreign = market_.inject("someone-else");
  manager_->reconcile();
  manager_->tick();
  EXPECT_EQ(market_.instances.count(orphan), 0u);
  EXPECT_EQ(market_.instances.count(foreign), 1u);
  auto rows = store_->instances(true);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].origin, "orphan");
  EXPECT_EQ(rows[0].state, S::Destroyed);
  EXPECT_EQ(rows[0].close_cause, core::CloseCause::Orphan);
}

TEST_F(ManagerTest, VanishedInstanceIsClosedAfterGrace) {
  auto [id, token] = deploy_and_register(101);
  market_.instances.clear();  // gone behind our back
  manager_->reconcile();
  EXPECT_EQ(get(id).state, S::Registered);  // too young to judge
  now_ += manager_->config().vanish_grace_s + 1;
  ASSERT_TRUE(manager_->agent_heartbeat(id, {}));
  manager_->reconcile();
  EXPECT_EQ(get(id).state, S::Destroyed);
  EXPECT_THAT(get(id).destroy_reason, HasSubstr("vanished"));
  EXPECT_EQ(get(id).close_cause, core::CloseCause::Vanished);
}

TEST_F(ManagerTest, IncompleteMarketListClosesNothing) {
  auto [id, token] = deploy_and_register(101);
  market_.list_fails = true;
  now_ += 3600;
  manager_->reconcile();
  EXPECT_EQ(get(id).state, S::Registered);
  EXPECT_EQ(manager_->last_reconcile_error(), "down");
}

TEST_F(ManagerTest, SpendAccruesWhileRunningPlusBandwidth) {
  // Lifecycle limits out of the way: this test is about money only.
  ManagerConfig cfg = manager_->config();
  cfg.lifecycle.heartbeat_timeout_s = 1e9;
  cfg.lifecycle.registered_max_s = 1e9;
  manager_ = std::make_unique<Manager>(*store_, market_, cfg, [this] { return now_; });
  auto [id, token] = deploy_and_register(101);
  auto mid = *get(id).market_id;
  manager_->reconcile();  // status loading: not billed
  now_ += 3600;
  manager_->tick();
  EXPECT_NEAR(get(id).spend_usd, 0, 1e-9);
  market_.set_status(mid, "running");
  manager_->reconcile();
  now_ += 1800;
  manager_->tick();
  EXPECT_NEAR(get(id).spend_usd, 0.20, 1e-9);
  Heartbeat hb;
  hb.phase = "fetching_params";
  hb.params_done = 1e9;
  hb.params_total = 1e9;
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  EXPECT_NEAR(get(id).spend_usd, 0.20 + 0.001, 1e-9);
  // Job inputs served to it (down) are billed by its next heartbeat, once (transfer_meter.h).
  manager_->agent_transferred(id, 2e9, 0);
  EXPECT_NEAR(get(id).spend_usd, 0.20 + 0.001, 1e-9);  // not before the heartbeat
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  EXPECT_NEAR(get(id).spend_usd, 0.20 + 0.003, 1e-9);
  EXPECT_NEAR(get(id).bandwidth_spend_usd, 0.003, 1e-9);
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  EXPECT_NEAR(get(id).spend_usd, 0.20 + 0.003, 1e-9);
}

TEST_F(ManagerTest, ContendedBenchmarkIsMarked) {
  auto [a, ta] = deploy_and_register(101);
  auto [b, tb] = deploy_and_register(103);  // same machine 11
  double t = now_;
  to_benchmarking(b, t);
  std::vector<AgentEvent> evs;
  for (int i = 0; i < 8; ++i) evs.push_back(proof(10 + i, t += 36));
  ASSERT_TRUE(manager_->agent_events(b, evs));
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].contended);
  (void)a;
}

TEST_F(ManagerTest, LogsAreBoundedRing) {
  auto [id, token] = deploy_and_register(101);
  std::string chunk(100 * 1024, 'x');
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(manager_->agent_logs(id, chunk));
  EXPECT_LE(manager_->logs(id).size(), manager_->config().log_ring_bytes);
  EXPECT_FALSE(manager_->agent_logs(424242, "x"));
}

// What the manager judges by lives on the row: a manager restarted between a throttle report
// and the verdict still marks the run throttled (it kept the report in memory before), and the
// benchmark clock still starts at the warm-up's end.
// Issue 12: an instance takes jobs only once the manager accepted it (proving), never while it
// is still being measured, and not while it is being destroyed.
TEST_F(ManagerTest, HeartbeatsSayWorkOnlyWhileTheInstanceIsProving) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  Heartbeat hb;
  hb.phase = "benchmarking";
  auto beat = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(beat);
  EXPECT_FALSE(beat->work);
  std::int64_t seq = 10;
  prove_one_by_one(id, t, gaps(8, 36, 1), seq);
  ASSERT_EQ(get(id).state, S::Proving);
  beat = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(beat);
  EXPECT_TRUE(beat->work);
  EXPECT_TRUE(beat->commands.empty());
  market_.destroy_failures = 1;  // destroying until the next tick
  ASSERT_TRUE(manager_->request_destroy(id, "operator request"));
  beat = manager_->agent_heartbeat(id, hb);
  ASSERT_TRUE(beat);
  EXPECT_FALSE(beat->work);
  EXPECT_THAT(beat->commands, ::testing::ElementsAre("stop"));
}

TEST_F(ManagerTest, ARestartedManagerJudgesIdentically) {
  auto [id, token] = deploy_and_register(101);
  double t = now_;
  to_benchmarking(id, t);
  Heartbeat hb;
  hb.phase = "warming_up";
  hb.gpu_throttled = true;
  ASSERT_TRUE(manager_->agent_heartbeat(id, hb));
  EXPECT_EQ(get(id).bench_since, t);  // the warm-up proof's completion
  manager_ =
      std::make_unique<Manager>(*store_, market_, manager_->config(), [this] { return now_; });
  std::int64_t seq = 10;
  prove_one_by_one(id, t, gaps(8, 36, 1), seq);
  ASSERT_EQ(get(id).state, S::Proving);
  auto runs = store_->all_bench_runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].throttled);
  ASSERT_TRUE(get(id).verdict);
  // Intervals from the warm-up's end: every measured proof is one.
  EXPECT_EQ(get(id).verdict->samples, get(id).proofs_benchmark);
}

TEST_F(ManagerTest, EveryDestroyPathStoresItsCause) {
  auto [op, t1] = deploy_and_register(101);
  ASSERT_TRUE(manager_->request_destroy(op, kOperatorDestroyReason));
  EXPECT_EQ(get(op).close_cause, core::CloseCause::Operator);
  auto [dropped, t2] = deploy_and_register(102);
  core::Strike strike;
  strike.machine_id = 12;
  strike.kind = core::StrikeKind::SlowDownload;
  strike.reason = "parameters at 5 Mb/s";
  strike.at = now_;
  strike.instance_id = dropped;
  ASSERT_TRUE(
      manager_->request_destroy(dropped, "autopilot: slow", core::CloseCause::Dropped, strike));
  EXPECT_EQ(get(dropped).close_cause, core::CloseCause::Dropped);
  // The drop's blame went through the Manager: an entry and a "blame" event.
  const auto hosts = store_->bad_hosts();
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0].machine_id, 12);
  EXPECT_EQ(hosts[0].source, "auto");
  bool blamed = false;
  for (const auto& e : store_->events(dropped, 0)) blamed = blamed || e.kind == "blame";
  EXPECT_TRUE(blamed);
}

TEST_F(ManagerTest, BadHostChangesGoThroughTheManagerWithEvents) {
  auto [id, token] = deploy_and_register(101);  // machine 11
  core::BadHost b;
  b.machine_id = 11;
  b.reason = "flaky PSU";
  b.added_at = now_;
  manager_->put_bad_host(b, "the operator");
  ASSERT_EQ(store_->bad_hosts().size(), 1u);
  auto has_event = [&](const std::string& text) {
    for (const auto& e : store_->events(id, 0))
      if (e.kind == "bad_host" && e.message.find(text) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has_event("put on the bad-host list by the operator: flaky PSU"));
  EXPECT_EQ(manager_->remove_bad_host(11, "the operator"), 1);
  EXPECT_TRUE(store_->bad_hosts().empty());
  EXPECT_TRUE(has_event("taken off the bad-host list"));
  EXPECT_EQ(manager_->remove_bad_host(11, "the operator"), 0);
}

}  // namespace
}  // namespace pf::manager
