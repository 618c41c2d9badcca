// VastMarket against the real `proverfleet market-sim` process: the client and the test double
// must agree on vast's wire format, and the client must survive the faults the sim injects.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "market/vast_market.h"
#include "support/eventually.h"
#include "support/subprocess.h"

namespace pf::market {
namespace {

using pf::test::eventually;

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kKey = "sim-key-5d1c0e7a9b";

std::string scenario_path() {
  return std::filesystem::weakly_canonical(std::filesystem::path(PF_SOURCE_DIR) / "scenarios" /
                                           "demo-small.json")
      .string();
}

// Offers of the scenario listed at hour 0 (the sim starts there and runs in real time).
std::vector<json> offers_listed_at_start() {
  std::ifstream in(scenario_path());
  const json scenario = json::parse(in);
  std::vector<json> listed;
  for (const auto& offer : scenario.at("offers")) {
    if (offer.at("listed_from_h").get<double>() <= 0 &&
        offer.at("listed_until_h").get<double>() > 1) {
      listed.push_back(offer);
    }
  }
  return listed;
}

std::size_t count_lines(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class VastMarketSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(scenario_path()))
        << "scenario not found at " << scenario_path();
    ASSERT_TRUE(std::filesystem::exists(PF_BINARY)) << "proverfleet not built at " << PF_BINARY;
  }

  // Starts market-sim; the key goes through the environment so it is not on a command line.
  void start_sim(const std::string& faults = "", std::uint64_t fault_seed = 1,
                 const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv = {PF_BINARY, "market-sim", "--scenario",
                                     scenario_, "--listen",   "127.0.0.1:0"};
    if (!faults.empty()) {
      argv.insert(argv.end(), {"--faults", faults, "--fault-seed", std::to_string(fault_seed)});
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    test::SpawnOptions options;
    options.env["PROVERFLEET_MARKET_SIM_API_KEY"] = kKey;
    sim_.emplace(test::Subprocess::spawn(argv, options));
    auto ready = sim_->wait_for_line(std::regex(R"(market-sim listening on (http://\S+))"), 30s);
    ASSERT_TRUE(ready) << "market-sim did not start: " << sim_->stderr_text();
    url_ = ready->groups[1];
  }

  VastConfig config() const {
    VastConfig config;
    config.base_url = url_;
    config.api_key = kKey;
    config.backoff_base_s = 0.001;
    config.backoff_cap_s = 0.02;
    config.jitter_seed = 5;
    config.request_timeout_s = 20;
    return config;
  }

  CreateRequest create_request(std::int64_t offer_id, const std::string& label) const {
    CreateRequest req;
    req.offer_id = offer_id;
    req.image = "ghcr.io/proverfleet/agent:test";
    req.disk_gb = 16;
    req.label = label;
    req.env = {{"PF_ROLE", "test"}};
    return req;
  }

  // The sim logs each request to stderr after answering it, so a line may still be in flight
  // when the client has its reply: wait (generously) until `needle` has appeared `n` times.
  std::size_t wait_for_log(const std::string& needle, std::size_t n) {
    std::size_t seen = 0;
    eventually([&] { return (seen = count_lines(sim_->stderr_text(), needle)) >= n; }, 10s);
    return seen;
  }

  std::optional<test::Subprocess> sim_;
  std::string url_;
  std::string scenario_ = scenario_path();
};

TEST_F(VastMarketSimTest, SearchWithFiltersReturnsOnlyMatchingOffers) {
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastMarket market(config());
  SearchRequest req;
  req.query = {{"gpu_name", {{"eq", "RTX 4090"}}}, {"num_gpus", {{"gte", "2"}}}};
  req.order = {{"dph_total", "asc"}};
  auto found = market.search_offers(req);
  ASSERT_TRUE(found) << found.error().message;

  std::set<std::int64_t> expected;
  for (const auto& offer : offers_listed_at_start()) {
    if (offer["gpu_name"] == "RTX 4090" && offer["num_gpus"].get<int>() >= 2) {
      expected.insert(offer["id"].get<std::int64_t>());
    }
  }
  ASSERT_FALSE(expected.empty()) << "the scenario should list 2+ GPU RTX 4090 offers";
  std::set<std::int64_t> got;
  for (const auto& offer : found->offers) {
    EXPECT_EQ(offer.gpu_name, "RTX 4090");
    EXPECT_GE(offer.num_gpus, 2);
    got.insert(offer.id);
  }
  EXPECT_EQ(got, expected);
  for (std::size_t i = 1; i < found->offers.size(); ++i) {
    EXPECT_LE(found->offers[i - 1].dph_total, found->offers[i].dph_total);
  }

  // Without a key the search still works (vast allows it); an unfiltered one sees everything.
  VastConfig anonymous = config();
  anonymous.api_key.clear();
  auto all = VastMarket(anonymous).search_offers({});
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->offers.size(), offers_listed_at_start().size());
}

TEST_F(VastMarketSimTest, RateLimitStormStillCompletesSearches) {
  ASSERT_NO_FATAL_FAILURE(start_sim("429=0.5", 11));
  VastConfig cfg = config();
  cfg.max_attempts = 12;
  VastMarket market(cfg);
  for (int i = 0; i < 10; ++i) {
    auto found = market.search_offers({});
    ASSERT_TRUE(found) << "search " << i << ": " << found.error().message;
    EXPECT_EQ(found->offers.size(), offers_listed_at_start().size());
  }
  EXPECT_GT(wait_for_log("-> 429", 1), 0u) << "the storm did not happen";
}

// market-sim holds callers to per-endpoint limits as vast does; a client paced to the same
// limits makes every call in a burst (searches, rentals, reads, destroys) without one 429, and
// one that is not paced is refused.
TEST_F(VastMarketSimTest, ACallerPacedToTheLimitsDrawsNo429AndAnUnpacedOneIsRefused) {
  const std::string limits = "search=3/2,create=0.6,show=0.4,destroy=0.4,list=0.4";
  ASSERT_NO_FATAL_FAILURE(start_sim("", 1, {"--rate-limits", limits}));
  VastConfig paced_config = config();
  paced_config.pacing = parse_rate_limits(limits).value();
  paced_config.max_attempts = 1;  // a 429 would be a failure, not a retry
  VastMarket paced(paced_config);
  const auto began = std::chrono::steady_clock::now();
  std::vector<core::Offer> offers;
  for (int i = 0; i < 5; ++i) {
    auto found = paced.search_offers({});
    ASSERT_TRUE(found) << "search " << i << ": " << found.error().message;
    offers = found->offers;
  }
  // Five searches at three per two seconds: the fourth waited for the first to age out.
  EXPECT_GE(std::chrono::steady_clock::now() - began, 2s);
  ASSERT_GE(offers.size(), 3u);
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto created =
        paced.create_instance(create_request(offers[i].id, "pf-paced-" + std::to_string(i)));
    ASSERT_TRUE(created) << "create " << i << ": " << created.error().message;
    ids.push_back(created->instance_id);
  }
  for (const auto id : ids) {
    auto shown = paced.show_instance(id);
    ASSERT_TRUE(shown) << shown.error().message;
    ASSERT_TRUE(shown->has_value());
  }
  auto listed = paced.list_instances();
  ASSERT_TRUE(listed) << listed.error().message;
  EXPECT_EQ(listed->size(), 3u);
  for (const auto id : ids) {
    auto destroyed = paced.destroy_instance(id);
    ASSERT_TRUE(destroyed) << destroyed.error().message;
  }
  EXPECT_EQ(count_lines(sim_->stderr_text(), "-> 429"), 0u) << sim_->stderr_text();

  VastConfig unpaced_config = config();
  unpaced_config.max_attempts = 1;
  VastMarket unpaced(unpaced_config);
  ASSERT_TRUE(unpaced.list_instances());
  auto again = unpaced.list_instances();
  ASSERT_FALSE(again) << "a second list 0 s after the first was not refused";
  EXPECT_EQ(again.error().kind, ErrorKind::RateLimited) << again.error().message;
  EXPECT_THAT(again.error().message,
              ::testing::HasSubstr("API requests too frequent endpoint threshold=0.4"));
}

// A /3 market (scenarios/demo-small-v3.json): offers carry min_bid (and end_date where the
// host's contract ends); a bid under min_bid gets vast's failure that still names a contract,
// which the client destroys; a bid at min_bid rents an interruptible instance.
TEST_F(VastMarketSimTest, AnUnderPricedBidsContractIsDestroyedAndAFairBidRents) {
  scenario_ = std::filesystem::weakly_canonical(std::filesystem::path(PF_SOURCE_DIR) / "scenarios" /
                                                "demo-small-v3.json")
                  .string();
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastMarket market(config());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_GE(found->offers.size(), 2u);
  bool any_end_date = false;
  for (const auto& o : found->offers) {
    EXPECT_GT(o.min_bid, 0) << "offer " << o.id;
    any_end_date = any_end_date || o.end_date > 0;
  }
  EXPECT_TRUE(any_end_date) << "no listed offer says when its contract ends";

  const core::Offer& first = found->offers[0];
  CreateRequest low = create_request(first.id, "pf-low-bid");
  low.bid_price = std::max(kMinBidPrice, first.min_bid / 2);
  auto refused = market.create_instance(low);
  ASSERT_FALSE(refused) << "an under-priced bid rented";
  EXPECT_THAT(refused.error().message, ::testing::HasSubstr("bid_too_low"));
  EXPECT_THAT(refused.error().message, ::testing::HasSubstr("which was destroyed"));
  auto left = market.list_instances(std::string("pf-low-bid"));
  ASSERT_TRUE(left) << left.error().message;
  EXPECT_TRUE(left->empty()) << "the under-priced bid's instance still bills";

  const core::Offer& second = found->offers[1];
  CreateRequest fair = create_request(second.id, "pf-fair-bid");
  fair.bid_price = second.min_bid + 0.01;
  auto rented = market.create_instance(fair);
  ASSERT_TRUE(rented) << rented.error().message;
  auto shown = market.show_instance(rented->instance_id);
  ASSERT_TRUE(shown && shown->has_value());
  EXPECT_TRUE((*shown)->is_bid);
}

TEST_F(VastMarketSimTest, ServerErrorsAreRetriedForReads) {
  ASSERT_NO_FATAL_FAILURE(start_sim("500=0.3", 12));
  VastConfig cfg = config();
  cfg.max_attempts = 10;
  VastMarket market(cfg);
  for (int i = 0; i < 10; ++i) {
    auto found = market.search_offers({});
    ASSERT_TRUE(found) << "search " << i << ": " << found.error().message;
    auto listed = market.list_instances();
    ASSERT_TRUE(listed) << "list " << i << ": " << listed.error().message;
    EXPECT_TRUE(listed->empty());
  }
  EXPECT_GT(wait_for_log("-> 500", 1), 0u) << "no 500 was injected";
}

// A test run quiets the market for a phase that tests something else (the chaos run's last
// phase counts orphan processes, not retries): PUT /proverfleet-sim/faults, with the key.
TEST_F(VastMarketSimTest, TheInjectedFaultsCanBeReplacedWhileItRuns) {
  ASSERT_NO_FATAL_FAILURE(start_sim("429=1", 3));
  VastConfig cfg = config();
  cfg.max_attempts = 2;
  VastMarket market(cfg);
  auto refused = market.search_offers({});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::RateLimited);

  httplib::Client http(url_);
  auto unkeyed = http.Put("/proverfleet-sim/faults", "none", "text/plain");
  ASSERT_TRUE(unkeyed);
  EXPECT_EQ(unkeyed->status, 401);
  const httplib::Headers keyed = {{"Authorization", std::string("Bearer ") + kKey}};
  auto bad = http.Put("/proverfleet-sim/faults", keyed, "429=2", "text/plain");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_THAT(bad->body, ::testing::HasSubstr("429"));
  auto huge = http.Put("/proverfleet-sim/faults", keyed, std::string(4096, 'x'), "text/plain");
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400);
  EXPECT_FALSE(market.search_offers({})) << "a refused change must leave the faults as they were";

  auto quiet = http.Put("/proverfleet-sim/faults", keyed, "none", "text/plain");
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->status, 200);
  EXPECT_EQ(json::parse(quiet->body).value("faults", ""), "none");
  for (int i = 0; i < 3; ++i) {
    auto found = market.search_offers({});
    EXPECT_TRUE(found) << found.error().message;
  }
}

TEST_F(VastMarketSimTest, DroppedCreateRepliesAreReconciledByLabel) {
  ASSERT_NO_FATAL_FAILURE(start_sim("drop_create_reply=1"));
  VastMarket market(config());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_GE(found->offers.size(), 2u);

  for (int i = 0; i < 2; ++i) {
    const std::string label = "pf-drop-" + std::to_string(i);
    auto created = market.create_instance(create_request(found->offers[i].id, label));
    ASSERT_TRUE(created) << created.error().message;
    EXPECT_TRUE(created->reconciled);
    EXPECT_TRUE(created->also_found.empty());
    auto by_label = market.list_instances(label);
    ASSERT_TRUE(by_label) << by_label.error().message;
    ASSERT_EQ(by_label->size(), 1u) << "exactly one instance carries " << label;
    EXPECT_EQ(by_label->front().id, created->instance_id);
    EXPECT_EQ(by_label->front().label, label);
  }
  auto all = market.list_instances();
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->size(), 2u) << "a create was sent twice";
  // The sim's log shows that each create arrived once and had its reply cut.
  EXPECT_EQ(wait_for_log("create reply dropped", 2), 2u);
}

TEST_F(VastMarketSimTest, OfferTakenBetweenSearchAndCreateIsOfferGone) {
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastMarket market(config());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_FALSE(found->offers.empty());
  const std::int64_t offer_id = found->offers.front().id;

  // Someone (here: ourselves) rents the offer after our search.
  auto first = market.create_instance(create_request(offer_id, "pf-first"));
  ASSERT_TRUE(first) << first.error().message;
  EXPECT_FALSE(first->reconciled);

  auto second = market.create_instance(create_request(offer_id, "pf-second"));
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().kind, ErrorKind::OfferGone);
  EXPECT_EQ(second.error().code, "no_such_ask");
  auto leftovers = market.list_instances(std::string("pf-second"));
  ASSERT_TRUE(leftovers) << leftovers.error().message;
  EXPECT_TRUE(leftovers->empty());
}

TEST_F(VastMarketSimTest, DestroyTwiceBothSucceed) {
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastMarket market(config());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_FALSE(found->offers.empty());
  auto created = market.create_instance(create_request(found->offers.front().id, "pf-destroy"));
  ASSERT_TRUE(created) << created.error().message;

  auto shown = market.show_instance(created->instance_id);
  ASSERT_TRUE(shown) << shown.error().message;
  ASSERT_TRUE(shown->has_value());
  EXPECT_EQ((*shown)->label, "pf-destroy");

  auto once = market.destroy_instance(created->instance_id);
  EXPECT_TRUE(once) << once.error().message;
  auto twice = market.destroy_instance(created->instance_id);
  EXPECT_TRUE(twice) << twice.error().message;
  auto gone = market.show_instance(created->instance_id);
  ASSERT_TRUE(gone) << gone.error().message;
  EXPECT_FALSE(gone->has_value());
}

// The client's interruptible rental and bid change against the double: a create with a bid is
// an is_bid instance, its bid can be changed, an on-demand instance's cannot.
TEST_F(VastMarketSimTest, ABidRentsAnInterruptibleInstanceWhoseBidCanBeChanged) {
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastMarket market(config());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_GE(found->offers.size(), 2u);
  auto request = create_request(found->offers[0].id, "pf-bid");
  request.bid_price = 0.3;
  auto bid = market.create_instance(request);
  ASSERT_TRUE(bid) << bid.error().message;
  auto shown = market.show_instance(bid->instance_id);
  ASSERT_TRUE(shown && shown->has_value());
  EXPECT_TRUE((*shown)->is_bid);
  auto changed = market.change_bid(bid->instance_id, 0.35);
  EXPECT_TRUE(changed) << changed.error().message;

  auto on_demand = market.create_instance(create_request(found->offers[1].id, "pf-on-demand"));
  ASSERT_TRUE(on_demand) << on_demand.error().message;
  auto refused = market.change_bid(on_demand->instance_id, 0.35);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().http_status, 400);
}

TEST_F(VastMarketSimTest, ListPagesOverMoreThan25Instances) {
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastMarket market(config());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_GT(found->offers.size(), 25u) << "the scenario needs more than 25 listed offers";

  std::set<std::int64_t> created_ids;
  for (std::size_t i = 0; i < found->offers.size(); ++i) {
    auto created =
        market.create_instance(create_request(found->offers[i].id, "pf-page-" + std::to_string(i)));
    ASSERT_TRUE(created) << created.error().message;
    created_ids.insert(created->instance_id);
  }
  auto relabelled = market.set_label(*created_ids.begin(), "pf-relabelled");
  ASSERT_TRUE(relabelled) << relabelled.error().message;

  auto all = market.list_instances();
  ASSERT_TRUE(all) << all.error().message;
  std::set<std::int64_t> listed_ids;
  for (const auto& instance : *all) listed_ids.insert(instance.id);
  EXPECT_EQ(all->size(), created_ids.size()) << "an instance was listed twice or missed";
  EXPECT_EQ(listed_ids, created_ids);
  // The sim serves at most 25 per page, so more than 25 instances took several pages.
  EXPECT_GE(wait_for_log("GET /api/v1/instances/", 2), 2u);

  auto relabelled_list = market.list_instances(std::string("pf-relabelled"));
  ASSERT_TRUE(relabelled_list) << relabelled_list.error().message;
  ASSERT_EQ(relabelled_list->size(), 1u);
  EXPECT_EQ(relabelled_list->front().id, *created_ids.begin());
}

TEST_F(VastMarketSimTest, WrongKeyIsUnauthorizedAndNotEchoed) {
  ASSERT_NO_FATAL_FAILURE(start_sim());
  VastConfig cfg = config();
  cfg.api_key = "wrong-key-0123456789";
  VastMarket market(cfg);
  auto listed = market.list_instances();
  ASSERT_FALSE(listed);
  EXPECT_EQ(listed.error().kind, ErrorKind::Unauthorized);
  EXPECT_THAT(listed.error().message, ::testing::Not(::testing::HasSubstr(cfg.api_key)));
}

}  // namespace
}  // namespace pf::market
