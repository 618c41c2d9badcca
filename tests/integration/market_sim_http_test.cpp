// Runs the real `proverfleet market-sim` binary and talks to it over HTTP, as a vast.ai client
// would. The state rules themselves are covered by tests/unit/market_sim_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "support/subprocess.h"

namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using pf::test::Subprocess;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kKey = "it-secret-key-5f2c";

std::string fixture(const std::string& name) {
  return std::string(PF_SOURCE_DIR) + "/tests/fixtures/scenarios/" + name;
}

httplib::Headers bearer(const std::string& key = kKey) {
  return {{"Authorization", "Bearer " + key}};
}

json body_of(const httplib::Result& res) {
  if (!res) return json();
  return json::parse(res->body, nullptr, false);
}

struct RunningSim {
  Subprocess process;
  std::string url;
};

// Starts market-sim on a free port and waits for its "listening" line.
// `key`: the API key to require, passed in the environment (never on the command line).
RunningSim start_sim(const std::vector<std::string>& extra_args,
                     const std::string& scenario = fixture("tiny.json"),
                     const std::optional<std::string>& key = std::nullopt) {
  std::vector<std::string> argv = {PF_BINARY, "market-sim", "--scenario",
                                   scenario,  "--listen",   "127.0.0.1:0"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  pf::test::SpawnOptions options;
  options.env["PROVERFLEET_MARKET_SIM_API_KEY"] = key;
  auto process = Subprocess::spawn(argv, options);
  auto ready = process.wait_for_line(
      std::regex(R"(^market-sim listening on (http://127\.0\.0\.1:[0-9]+)$)"), 20s);
  if (!ready) throw std::runtime_error("market-sim did not start: " + process.stderr_text());
  return RunningSim{std::move(process), ready->groups[1]};
}

// Offers 1001, 1003, 1004 are listed from hour 0; 1002 from hour 2 to 5 (tiny.json). At time
// scale 1 nothing boots during a test (boot takes >= 3 scenario minutes), so nothing is billed.
class MarketSimHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sim_ = std::make_unique<RunningSim>(
        start_sim({"--start-h", "3", "--balance", "250"}, fixture("tiny.json"), kKey));
    client_ = std::make_unique<httplib::Client>(sim_->url);
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(10, 0);
  }

  std::int64_t create(std::int64_t ask, const std::string& label) {
    json body = {{"image", "ghcr.io/proverfleet/agent:1"},
                 {"disk", 50},
                 {"label", label},
                 {"env", {{"PF_DEPLOYMENT", "d-1"}}},
                 {"runtype", "args"}};
    auto res = client_->Put("/api/v0/asks/" + std::to_string(ask) + "/", bearer(), body.dump(),
                            "application/json");
    if (!res || res->status != 200) {
      ADD_FAILURE() << "create " << ask << " failed: " << (res ? res->body : "no reply");
      return 0;
    }
    return body_of(res).at("new_contract").get<std::int64_t>();
  }

  std::vector<std::int64_t> searched_ids() {
    auto res = client_->Post("/api/v0/bundles/", "{}", "application/json");
    std::vector<std::int64_t> ids;
    if (!res) {
      ADD_FAILURE() << "search failed: " << httplib::to_string(res.error());
      return ids;
    }
    const json reply = body_of(res);
    for (const auto& o : reply.at("offers")) ids.push_back(o.at("id").get<std::int64_t>());
    return ids;
  }

  std::unique_ptr<RunningSim> sim_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(MarketSimHttpTest, PrintsASummaryAfterTheListeningLine) {
  auto summary = sim_->process.wait_for_line("scenario tiny:", 5s);
  ASSERT_TRUE(summary);
  EXPECT_EQ(summary->line, "scenario tiny: 4 offers (4 listed now), horizon 10.0 h");
  EXPECT_TRUE(sim_->process.wait_for_line("auth: Bearer key required", 5s));
}

TEST_F(MarketSimHttpTest, HealthzAndSearchNeedNoKey) {
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  json query = {{"dph_total", {{"lte", 1.0}}},
                {"order", json::array({json::array({"dph_total", "asc"})})},
                {"limit", 2}};
  auto res = client_->Post("/api/v0/bundles/", query.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  json offers = body_of(res).at("offers");
  ASSERT_EQ(offers.size(), 2u);
  EXPECT_EQ(offers[0].at("id"), 1004);  // $0.25
  EXPECT_EQ(offers[1].at("id"), 1002);  // $0.50
  EXPECT_EQ(offers[0].at("rentable"), true);
  EXPECT_FALSE(offers[0].contains("truth"));

  // The older GET form with the query in ?q= answers the same.
  auto legacy = client_->Get("/api/v0/bundles/", {{"q", query.dump()}}, httplib::Headers{});
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->status, 200);
  EXPECT_EQ(body_of(legacy).at("offers"), offers);
}

TEST_F(MarketSimHttpTest, MalformedSearchIs400WithVastErrorShape) {
  for (const std::string body : {"{not json", R"({"num_gpus": {"like": 2}})", "[1,2]"}) {
    auto res = client_->Post("/api/v0/bundles/", body, "application/json");
    ASSERT_TRUE(res) << body;
    EXPECT_EQ(res->status, 400) << body;
    json error = body_of(res);
    EXPECT_EQ(error.at("success"), false) << body;
    EXPECT_EQ(error.at("error"), "invalid_args") << body;
    EXPECT_TRUE(error.at("msg").is_string()) << body;
  }
}

// Issue 10: deep nesting and overflowing numbers in a request are a 400 naming the problem.
TEST_F(MarketSimHttpTest, DeepOrOverflowingRequestsAre400AndTheServerLives) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  auto search = client_->Post("/api/v0/bundles/", R"({"num_gpus": {"in": )" + deep + "}}",
                              "application/json");
  ASSERT_TRUE(search);
  EXPECT_EQ(search->status, 400);
  EXPECT_THAT(body_of(search).at("msg").get<std::string>(), HasSubstr("nesting deeper than 64"));
  auto overflow =
      client_->Post("/api/v0/bundles/", R"({"cpu_ram": {"gte": 1e400}})", "application/json");
  ASSERT_TRUE(overflow);
  EXPECT_EQ(overflow->status, 400);
  EXPECT_THAT(body_of(overflow).at("msg").get<std::string>(), HasSubstr("number out of range"));
  // Within httplib's URI limit (longer is a 414 before the route runs).
  auto legacy =
      client_->Get("/api/v0/bundles/", {{"q", std::string(1000, '[')}}, httplib::Headers{});
  ASSERT_TRUE(legacy);
  EXPECT_EQ(legacy->status, 400);
  EXPECT_THAT(body_of(legacy).at("msg").get<std::string>(), HasSubstr("nesting deeper than 64"));
  auto create = client_->Put("/api/v0/asks/1001/", bearer(), R"({"image": )" + deep + "}",
                             "application/json");
  ASSERT_TRUE(create);
  EXPECT_EQ(create->status, 400);
  EXPECT_THAT(searched_ids(), ::testing::ElementsAre(1001, 1002, 1003, 1004));
}

TEST_F(MarketSimHttpTest, EveryOtherEndpointNeedsTheBearerKey) {
  struct Call {
    std::string method, path;
  };
  const std::vector<Call> calls = {
      {"PUT", "/api/v0/asks/1001/"},          {"GET", "/api/v1/instances/"},
      {"GET", "/api/v0/instances/"},          {"GET", "/api/v0/instances/90000001/"},
      {"PUT", "/api/v0/instances/90000001/"}, {"DELETE", "/api/v0/instances/90000001/"},
      {"GET", "/api/v0/users/current/"}};
  for (const auto& headers :
       {httplib::Headers{}, bearer("wrong-key"), httplib::Headers{{"Authorization", kKey}}}) {
    for (const auto& c : calls) {
      httplib::Result res =
          c.method == "GET" ? client_->Get(c.path, headers)
          : c.method == "PUT"
              ? client_->Put(c.path, headers, R"({"image":"x","label":"y"})", "application/json")
              : client_->Delete(c.path, headers);
      ASSERT_TRUE(res) << c.method << " " << c.path;
      EXPECT_EQ(res->status, 401) << c.method << " " << c.path;
      EXPECT_EQ(body_of(res).at("error"), "unauthorized") << c.method << " " << c.path;
    }
  }
  // Nothing was created by the refused calls.
  EXPECT_THAT(searched_ids(), ::testing::ElementsAre(1001, 1002, 1003, 1004));
}

TEST_F(MarketSimHttpTest, CreateShowLabelDestroyRoundTrip) {
  const auto id = create(1001, "it-a");
  ASSERT_NE(id, 0);
  EXPECT_THAT(searched_ids(), ::testing::ElementsAre(1002, 1003, 1004));

  auto again = client_->Put("/api/v0/asks/1001/", bearer(), R"({"image":"x"})", "application/json");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 404);
  EXPECT_EQ(
      body_of(again),
      (json{{"success", false},
            {"error", "no_such_ask"},
            {"msg", "error 404/3603: no_such_ask Instance type by id 1001 is not available."}}));

  auto bad = client_->Put("/api/v0/asks/1003/", bearer(), R"({"image":"x","env":"A=1"})",
                          "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(body_of(bad).at("error"), "invalid_args");
  EXPECT_THAT(body_of(bad).at("msg").get<std::string>(), HasSubstr("env"));

  const std::string path = "/api/v0/instances/" + std::to_string(id) + "/";
  auto shown = client_->Get(path, bearer());
  ASSERT_TRUE(shown);
  EXPECT_EQ(shown->status, 200);
  json instance = body_of(shown).at("instances");
  EXPECT_EQ(instance.at("id"), id);
  EXPECT_EQ(instance.at("label"), "it-a");
  EXPECT_EQ(instance.at("actual_status"), "loading");
  EXPECT_EQ(instance.at("machine_id"), 501);
  EXPECT_EQ(instance.at("extra_env"), json::parse(R"([["PF_DEPLOYMENT","d-1"]])"));
  EXPECT_EQ(instance.at("image_runtype"), "args");

  auto relabel = client_->Put(path, bearer(), R"({"label":"it-b"})", "application/json");
  ASSERT_TRUE(relabel);
  EXPECT_EQ(relabel->status, 200);
  EXPECT_EQ(body_of(relabel), (json{{"success", true}}));
  EXPECT_EQ(body_of(client_->Get(path, bearer())).at("instances").at("label"), "it-b");

  auto too_long = client_->Put(path, bearer(), json{{"label", std::string(300, 'x')}}.dump(),
                               "application/json");
  ASSERT_TRUE(too_long);
  EXPECT_EQ(too_long->status, 400);
  EXPECT_EQ(body_of(too_long).at("error"), "label_too_long");

  auto stop = client_->Put(path, bearer(), R"({"state":"stopped"})", "application/json");
  ASSERT_TRUE(stop);
  EXPECT_EQ(stop->status, 200);
  EXPECT_EQ(body_of(client_->Get(path, bearer())).at("instances").at("actual_status"), "stopped");

  auto destroyed = client_->Delete(path, bearer());
  ASSERT_TRUE(destroyed);
  EXPECT_EQ(destroyed->status, 200);
  EXPECT_EQ(body_of(destroyed), (json{{"success", true}}));
  EXPECT_EQ(body_of(client_->Get(path, bearer())), (json{{"instances", nullptr}}));
  EXPECT_THAT(searched_ids(), ::testing::ElementsAre(1001, 1002, 1003, 1004));

  auto twice = client_->Delete(path, bearer());
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->status, 404);
  EXPECT_EQ(body_of(twice).at("success"), false);
  EXPECT_EQ(body_of(twice).at("error"), "no_such_instance");
  EXPECT_TRUE(body_of(twice).at("msg").is_string());

  auto unknown =
      client_->Put("/api/v0/instances/12345/", bearer(), R"({"label":"x"})", "application/json");
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(body_of(unknown).at("error"), "no_such_instance");
}

TEST_F(MarketSimHttpTest, ListPagesAndFiltersByLabel) {
  const auto a = create(1001, "fleet-a");
  const auto b = create(1003, "fleet-a");
  const auto c = create(1004, "fleet-b");
  ASSERT_TRUE(a && b && c);

  auto first = client_->Get("/api/v1/instances/", {{"limit", "2"}}, bearer());
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  json page = body_of(first);
  EXPECT_EQ(page.at("success"), true);
  EXPECT_EQ(page.at("instances_found"), 2);
  EXPECT_EQ(page.at("total_instances"), 3);
  EXPECT_EQ(page.at("label_counts"), (json{{"fleet-a", 2}, {"fleet-b", 1}}));
  ASSERT_TRUE(page.at("next_token").is_string());

  auto second = client_->Get(
      "/api/v1/instances/",
      {{"limit", "2"}, {"after_token", page.at("next_token").get<std::string>()}}, bearer());
  ASSERT_TRUE(second);
  json rest = body_of(second);
  ASSERT_EQ(rest.at("instances").size(), 1u);
  EXPECT_EQ(rest.at("instances")[0].at("id"), c);
  EXPECT_TRUE(rest.at("next_token").is_null());

  auto filtered = client_->Get("/api/v1/instances/",
                               {{"select_filters", R"({"label":{"eq":"fleet-a"}})"}}, bearer());
  ASSERT_TRUE(filtered);
  json mine = body_of(filtered);
  ASSERT_EQ(mine.at("instances").size(), 2u);
  EXPECT_EQ(mine.at("instances")[0].at("id"), a);
  EXPECT_EQ(mine.at("instances")[1].at("id"), b);

  auto computed = client_->Get("/api/v1/instances/",
                               {{"select_filters", R"({"dph_total":{"lt":1}})"}}, bearer());
  ASSERT_TRUE(computed);
  EXPECT_EQ(computed->status, 400);
  EXPECT_EQ(body_of(computed).at("error"), "invalid_args");
}

TEST_F(MarketSimHttpTest, DeprecatedV0ListIsGone) {
  auto res = client_->Get("/api/v0/instances/", bearer());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 410);
  EXPECT_EQ(body_of(res).at("success"), false);
  EXPECT_THAT(body_of(res).at("msg").get<std::string>(), HasSubstr("/api/v1/instances/"));
}

TEST_F(MarketSimHttpTest, UserCarriesTheConfiguredBalance) {
  create(1001, "fleet-a");  // still loading: only its disk is billed (core/billing.h)
  auto res = client_->Get("/api/v0/users/current/", bearer());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  json user = body_of(res);
  // Seconds of scaled time of storage: well under a cent, never more than the start balance.
  EXPECT_NEAR(user.at("balance").get<double>(), 250.0, 0.01);
  EXPECT_LE(user.at("balance").get<double>(), 250.0);
  EXPECT_EQ(user.at("credit").get<double>(), user.at("balance").get<double>());
  EXPECT_TRUE(user.at("id").is_number());
  EXPECT_TRUE(user.at("username").is_string());
  EXPECT_TRUE(user.at("email").is_string());
}

TEST_F(MarketSimHttpTest, UnknownPathIsJson404) {
  auto res = client_->Get("/api/v0/nothing/", bearer());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(body_of(res).at("error"), "not_found");
}

TEST_F(MarketSimHttpTest, KeyIsNeverPrintedAndSigtermStopsCleanly) {
  create(1001, "fleet-a");
  client_->Get("/api/v0/users/current/", bearer("wrong-key-abc"));
  EXPECT_EQ(sim_->process.terminate(), 0);
  EXPECT_THAT(sim_->process.stderr_text(), HasSubstr("market-sim stopped"));
  EXPECT_THAT(sim_->process.stderr_text(), HasSubstr("PUT /api/v0/asks/1001/ -> 200"));
  EXPECT_THAT(sim_->process.stderr_text(), Not(HasSubstr(kKey)));
  EXPECT_THAT(sim_->process.stderr_text(), Not(HasSubstr("wrong-key-abc")));
  for (const auto& line : sim_->process.stdout_lines()) EXPECT_THAT(line, Not(HasSubstr(kKey)));
}

TEST(MarketSimFaultsTest, RateLimitAnswersBeforeProcessing) {
  auto sim = start_sim({"--faults", "429=1"});
  httplib::Client client(sim.url);
  for (int i = 0; i < 3; ++i) {
    auto res = client.Put("/api/v0/asks/1001/", R"({"image":"x"})", "application/json");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 429);
    EXPECT_EQ(res->body, "API requests too frequent endpoint threshold=4.5");
    EXPECT_THAT(res->get_header_value("Content-Type"), HasSubstr("text/plain"));
  }
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(sim.process.terminate(), 0);
  EXPECT_THAT(sim.process.stderr_text(), HasSubstr("0 instances created"));
}

TEST(MarketSimFaultsTest, ServerErrorIsJson500) {
  auto sim = start_sim({"--faults", "500=1"});
  httplib::Client client(sim.url);
  auto res = client.Post("/api/v0/bundles/", "{}", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(body_of(res).at("success"), false);
  EXPECT_EQ(body_of(res).at("error"), "server_error");
}

TEST(MarketSimFaultsTest, DroppedCreateReplyStillCreatesTheInstance) {
  auto sim = start_sim({"--faults", "drop_create_reply=1", "--fault-seed", "3"});
  httplib::Client client(sim.url);
  client.set_read_timeout(10, 0);
  auto res =
      client.Put("/api/v0/asks/1001/", R"({"image":"x","label":"lost-reply"})", "application/json");
  // The connection is cut mid-body: no usable reply reaches the client.
  EXPECT_FALSE(res && res->status == 200 && !body_of(res).is_discarded() &&
               body_of(res).contains("new_contract"));

  auto list =
      client.Get("/api/v1/instances/", {{"select_filters", R"({"label":{"eq":"lost-reply"}})"}},
                 httplib::Headers{});
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200);
  json page = body_of(list);
  ASSERT_EQ(page.at("instances").size(), 1u);
  EXPECT_EQ(page.at("instances")[0].at("machine_id"), 501);
}

TEST(MarketSimCliTest, MissingScenarioExitsNonZeroNamingThePath) {
  auto p = Subprocess::spawn({PF_BINARY, "market-sim", "--scenario", "/nonexistent/market.json",
                              "--listen", "127.0.0.1:0"});
  auto code = p.wait_exit(20s);
  ASSERT_TRUE(code);
  EXPECT_NE(*code, 0);
  EXPECT_THAT(p.stderr_text(),
              HasSubstr("/nonexistent/market.json: cannot read scenario file: no such file"));
  EXPECT_TRUE(p.stdout_lines().empty());
}

TEST(MarketSimCliTest, InvalidScenarioExitsNonZeroNamingTheKey) {
  auto p = Subprocess::spawn({PF_BINARY, "market-sim", "--scenario", fixture("wrong-format.json")});
  auto code = p.wait_exit(20s);
  ASSERT_TRUE(code);
  EXPECT_NE(*code, 0);
  EXPECT_THAT(p.stderr_text(), HasSubstr("format: expected \"proverfleet-scenario/1\""));
}

TEST(MarketSimCliTest, BadFaultSpecExitsNonZero) {
  auto p = Subprocess::spawn(
      {PF_BINARY, "market-sim", "--scenario", fixture("tiny.json"), "--faults", "429=2"});
  auto code = p.wait_exit(20s);
  ASSERT_TRUE(code);
  EXPECT_NE(*code, 0);
  EXPECT_THAT(p.stderr_text(), HasSubstr("--faults: fault spec entry \"429=2\""));
}

// --rate-limits: a call over its endpoint's limit for its caller (key and address) is refused
// as vast refuses it — 429, a plain-text body naming the threshold, no Retry-After — before it
// changes anything; another caller has an allowance of its own.
TEST(MarketSimCliTest, RateLimitsRefuseACallerOverItsLimitAsVastDoes) {
  auto sim = start_sim({"--start-h", "3", "--rate-limits", "create=60,search=2/60"},
                       fixture("tiny.json"), kKey);
  EXPECT_TRUE(sim.process.wait_for_line(
      "rate limits (per caller, wall clock): search=2/60s,create=60s", 5s));
  httplib::Client client(sim.url);
  client.set_read_timeout(10, 0);
  const json body = {{"image", "ghcr.io/proverfleet/agent:1"}, {"disk", 50}, {"label", "rl-1"}};
  auto first = client.Put("/api/v0/asks/1001/", bearer(), body.dump(), "application/json");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200) << first->body;
  auto second = client.Put("/api/v0/asks/1003/", bearer(), body.dump(), "application/json");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 429);
  EXPECT_EQ(second->body, "API requests too frequent endpoint threshold=60");
  EXPECT_THAT(second->get_header_value("Content-Type"), HasSubstr("text/plain"));
  EXPECT_FALSE(second->has_header("Retry-After"));
  auto listed = client.Get("/api/v1/instances/", bearer());
  ASSERT_TRUE(listed);
  EXPECT_EQ(body_of(listed).at("instances").size(), 1u) << "the refused create rented";

  // Offer search is open: the anonymous caller uses its two, a keyed one still has its own.
  for (int i = 0; i < 2; ++i) {
    auto r = client.Post("/api/v0/bundles/", "{}", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "search " << i;
  }
  auto third = client.Post("/api/v0/bundles/", "{}", "application/json");
  ASSERT_TRUE(third);
  EXPECT_EQ(third->status, 429);
  EXPECT_EQ(third->body, "API requests too frequent");
  auto keyed = client.Post("/api/v0/bundles/", bearer(), "{}", "application/json");
  ASSERT_TRUE(keyed);
  EXPECT_EQ(keyed->status, 200);
}

TEST(MarketSimCliTest, BadRateLimitsExitNonZeroNamingTheEntry) {
  auto p = Subprocess::spawn({PF_BINARY, "market-sim", "--scenario", fixture("tiny.json"),
                              "--rate-limits", "create=4.5,launch=5"});
  auto code = p.wait_exit(20s);
  ASSERT_TRUE(code);
  EXPECT_NE(*code, 0);
  EXPECT_THAT(p.stderr_text(),
              HasSubstr("--rate-limits: rate limits: \"launch=5\": unknown endpoint"));
}

// The key comes from a file (or the environment), never from the command line; a file other
// users may read is refused.
TEST(MarketSimCliTest, ApiKeyFileIsUsedAndAWorldReadableOneRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("pf-sim-key-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path key_file = dir / "key";
  std::ofstream(key_file) << kKey << "\n";
  fs::permissions(key_file, fs::perms::owner_read | fs::perms::owner_write,
                  fs::perm_options::replace);
  {
    auto sim = start_sim({"--api-key-file", key_file.string()});
    httplib::Client client(sim.url);
    client.set_read_timeout(10, 0);
    auto with_key = client.Get("/api/v1/instances/", bearer());
    ASSERT_TRUE(with_key);
    EXPECT_EQ(with_key->status, 200);
    auto without = client.Get("/api/v1/instances/");
    ASSERT_TRUE(without);
    EXPECT_EQ(without->status, 401);
    EXPECT_THAT(sim.process.stderr_text(), Not(HasSubstr(kKey)));
  }
  fs::permissions(key_file, fs::perms::others_read, fs::perm_options::add);
  auto refused = Subprocess::spawn({PF_BINARY, "market-sim", "--scenario", fixture("tiny.json"),
                                    "--api-key-file", key_file.string()});
  EXPECT_EQ(refused.wait_exit(20s), 1);
  EXPECT_THAT(refused.stderr_text(), HasSubstr("readable by every user"));
  fs::remove_all(dir);
}

TEST(MarketSimCliTest, SigintStopsCleanly) {
  auto sim = start_sim({});
  ASSERT_EQ(kill(sim.process.pid(), SIGINT), 0);
  auto code = sim.process.wait_exit(20s);
  ASSERT_TRUE(code);
  EXPECT_EQ(*code, 0);
}

// At 36000x, a scenario hour passes in 0.1 s: instances boot and get billed while we watch.
TEST(MarketSimTimeTest, InstancesBootAndAreBilledInScaledTime) {
  std::ifstream in(fixture("tiny.json"));
  json doc = json::parse(in);
  doc["hours"] = 24 * 365;  // the longest horizon a scenario may have
  for (auto& offer : doc["offers"]) offer["listed_until_h"] = 1e6;
  const std::string path = ::testing::TempDir() + "market_sim_http_test_long.json";
  std::ofstream(path) << doc.dump();

  auto sim = start_sim({"--time-scale", "36000", "--quiet"}, path);
  httplib::Client client(sim.url);
  auto created = client.Put("/api/v0/asks/1001/", R"({"image":"x"})", "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 200) << created->body;
  const auto id = body_of(created).at("new_contract").get<std::int64_t>();

  std::string status;
  double balance = 1000;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline && (status != "running" || balance >= 1000)) {
    std::this_thread::sleep_for(50ms);
    auto shown = client.Get("/api/v0/instances/" + std::to_string(id) + "/");
    ASSERT_TRUE(shown);
    status = body_of(shown).at("instances").at("actual_status").get<std::string>();
    auto user = client.Get("/api/v0/users/current/");
    ASSERT_TRUE(user);
    balance = body_of(user).at("balance").get<double>();
  }
  EXPECT_EQ(status, "running");
  EXPECT_LT(balance, 1000);
  EXPECT_THAT(sim.process.stderr_text(), Not(HasSubstr("GET /api")));  // --quiet
}

// The helper itself (other integration tests reuse it).
TEST(SubprocessTest, EnvironmentOverridesAndBothStreamsAreCaptured) {
  pf::test::SpawnOptions options;
  options.env = {{"PF_SUBPROCESS_TEST", "v1"}, {"HOME", std::nullopt}};
  auto p = Subprocess::spawn(
      {"/bin/sh", "-c", "echo out:$PF_SUBPROCESS_TEST; echo err:${HOME-unset} >&2; exit 3"},
      options);
  auto line = p.wait_for_line(std::regex("^out:(.*)$"), 10s);
  ASSERT_TRUE(line);
  EXPECT_EQ(line->groups[1], "v1");
  EXPECT_EQ(p.wait_exit(10s), 3);
  EXPECT_EQ(p.stderr_text(), "err:unset\n");
}

TEST(SubprocessTest, LinesAreConsumedAndTimeoutsReturnNothing) {
  auto p = Subprocess::spawn({"/bin/sh", "-c", "echo one; echo two; exec sleep 30"});
  EXPECT_TRUE(p.wait_for_line("two", 10s));
  EXPECT_FALSE(p.wait_for_line("one", 200ms));  // before the last match: consumed
  EXPECT_TRUE(p.running());
  EXPECT_EQ(p.terminate(), 128 + SIGTERM);
  EXPECT_FALSE(p.running());
}

TEST(SubprocessTest, TerminateEscalatesToSigkill) {
  auto p = Subprocess::spawn(
      {"/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_TRUE(p.wait_for_line("ready", 10s));
  EXPECT_EQ(p.terminate(300ms), 128 + SIGKILL);
}

TEST(SubprocessTest, MissingProgramThrows) {
  try {
    Subprocess::spawn({"/nonexistent/program", "--flag"});
    FAIL() << "spawn did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot start /nonexistent/program"));
  }
}

}  // namespace
