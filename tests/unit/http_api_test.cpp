// The manager's HTTP layer end to end over loopback: a real Manager on an in-memory store and
// the scripted FakeMarket (tests/support), HttpApi mounted on the HTTP front (net::HttpServer), a
// manual clock. Auth on every route, every kind of bad input (which must change nothing), the agent
// protocol from deploy to destroy, bad hosts, /metrics and /healthz.
#include "manager/http_api.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "manager/metrics.h"
#include "manager/views.h"
#include "support/fake_market.h"
#include "support/front_serving.h"
#include "support/hostile_json.h"
#include "support/manager_fixture.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kHttpApiToken = "operator-token-3b9f0c27d1e4";
constexpr std::size_t kMaxBody = 64 * 1024;
constexpr std::size_t kMaxLogPush = 4096;

json parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "reply is not JSON: " << text;
  return j;
}

class HttpApiTest : public pf::test::ManagerFixture {
 protected:
  void SetUp() override {
    ManagerConfig cfg = default_config();
    cfg.lifecycle.destroy_retry_s = 0;
    start_manager(cfg);

    ApiOptions options;
    options.operator_token_hash = hash_token(kHttpApiToken);
    options.clock = [this] { return now_.load(); };
    options.max_body_bytes = kMaxBody;
    options.max_log_push_bytes = kMaxLogPush;
    options.max_events_per_batch = 50;
    api_ = std::make_unique<HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    port_ = serving_->port();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }

  static httplib::Headers bearer(const std::string& token) {
    return {{"Authorization", "Bearer " + token}};
  }
  static httplib::Headers op() { return bearer(kHttpApiToken); }

  httplib::Result get(const std::string& path, const httplib::Headers& headers = op()) {
    return client_->Get(path.c_str(), headers);
  }
  httplib::Result post(const std::string& path, const std::string& body,
                       const httplib::Headers& headers = op(),
                       const char* content_type = "application/json") {
    return client_->Post(path.c_str(), headers, body, content_type);
  }
  httplib::Result del(const std::string& path, const httplib::Headers& headers = op()) {
    return client_->Delete(path.c_str(), headers);
  }

  // Everything an API call could change, as text: compared before and after bad input.
  std::string snapshot() {
    json s;
    for (const auto& rec : store_->instances(true)) {
      s["instances"].push_back(to_json(rec));
      s["secrets"].push_back(rec.secret_hash + "/" + rec.token_hash);
      for (const auto& e : store_->events(rec.id, 0)) s["events"].push_back(to_json(e));
      for (const auto& p : store_->proof_samples(rec.id)) s["samples"].push_back(to_json(p));
      s["logs"].push_back(manager_->logs(rec.id));
    }
    for (const auto& b : store_->bad_hosts()) s["bad_hosts"].push_back(to_json(b));
    s["creates"] = market_.creates;
    s["destroys"] = market_.destroys;
    return s.dump();
  }

  struct Agent {
    std::int64_t instance_id = 0;
    std::string token;
  };

  // Deploys an offer over the API and registers its agent with the secret from the create's
  // env, as the agent on the rented machine would.
  Agent deploy_and_register(std::int64_t offer_id) {
    auto deployed = post("/api/v1/instances", json{{"offer_id", offer_id}}.dump());
    EXPECT_TRUE(deployed);
    if (!deployed) return {};
    EXPECT_EQ(deployed->status, 201) << deployed->body;
    const auto& env = market_.create_requests.back().env;
    auto reg = post("/api/v1/agent/register",
                    json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                         {"secret", env.at("PROVERFLEET_SECRET")},
                         {"hardware", {{"gpus", 1}}},
                         {"agent_version", "test"}}
                        .dump(),
                    {});
    EXPECT_TRUE(reg);
    if (!reg) return {};
    EXPECT_EQ(reg->status, 200) << reg->body;
    json body = parse(reg->body);
    return Agent{body.value("instance_id", std::int64_t{0}), body.value("token", "")};
  }

  std::unique_ptr<HttpApi> api_;
  net::HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;  // after server_ and api_: stops first
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

void expect_error(const httplib::Result& r, int status, const std::string& needle) {
  ASSERT_TRUE(r) << "no reply: " << httplib::to_string(r.error());
  EXPECT_EQ(r->status, status) << r->body;
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("application/json"));
  json body = parse(r->body);
  ASSERT_TRUE(body.is_object()) << r->body;
  ASSERT_TRUE(body.contains("error")) << r->body;
  EXPECT_THAT(body["error"].get<std::string>(), HasSubstr(needle)) << r->body;
}

// ---- health, auth ---------------------------------------------------------------------------

TEST_F(HttpApiTest, HealthzNeedsNoToken) {
  auto r = get("/healthz", {});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(parse(r->body), (json{{"ok", true}}));
}

struct RouteCall {
  std::string method;
  std::string path;
  std::string body;
};

const std::vector<RouteCall>& operator_routes() {
  static const std::vector<RouteCall> routes = {
      {"GET", "/api/v1/offers", ""},
      {"GET", "/api/v1/offers?q=num_gpus>=1", ""},
      {"POST", "/api/v1/instances", R"({"offer_id": 101})"},
      {"GET", "/api/v1/instances", ""},
      {"GET", "/api/v1/instances?all=1", ""},
      {"GET", "/api/v1/instances/1", ""},
      {"DELETE", "/api/v1/instances/1", ""},
      {"GET", "/api/v1/hosts", ""},
      {"GET", "/api/v1/hosts/11", ""},
      {"GET", "/api/v1/bad-hosts", ""},
      {"POST", "/api/v1/bad-hosts", R"({"machine_id": 11, "reason": "slow"})"},
      {"DELETE", "/api/v1/bad-hosts/11", ""},
      {"GET", "/api/v1/fleet", ""},
  };
  return routes;
}

TEST_F(HttpApiTest, EveryOperatorRouteRejectsMissingWrongAndAgentTokens) {
  const Agent agent = deploy_and_register(102);
  ASSERT_FALSE(agent.token.empty());
  const std::string before = snapshot();
  const std::vector<std::pair<std::string, httplib::Headers>> bad_auth = {
      {"no header", {}},
      {"wrong token", bearer("not-the-operator-token")},
      {"empty bearer", {{"Authorization", "Bearer "}}},
      {"basic scheme", {{"Authorization", std::string("Basic ") + kHttpApiToken}}},
      {"agent token", bearer(agent.token)},
  };
  for (const auto& route : operator_routes()) {
    for (const auto& [what, headers] : bad_auth) {
      SCOPED_TRACE(route.method + " " + route.path + " with " + what);
      httplib::Result r = route.method == "GET"    ? get(route.path, headers)
                          : route.method == "POST" ? post(route.path, route.body, headers)
                                                   : del(route.path, headers);
      expect_error(r, 401, "token");
      EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
    }
  }
  EXPECT_EQ(snapshot(), before);
}

TEST_F(HttpApiTest, AgentRoutesRejectOperatorTokenAndMissingToken) {
  const Agent agent = deploy_and_register(101);
  ASSERT_FALSE(agent.token.empty());
  const std::string before = snapshot();
  const std::vector<RouteCall> routes = {
      {"POST", "/api/v1/agent/heartbeat", R"({"phase": "fetching_params"})"},
      {"POST", "/api/v1/agent/events",
       R"({"events": [{"seq": 1, "type": "error", "message": "x"}]})"},
      {"POST", "/api/v1/agent/logs", R"({"text": "hello"})"},
  };
  for (const auto& route : routes) {
    SCOPED_TRACE(route.path);
    expect_error(post(route.path, route.body), 401, "invalid agent token");
    expect_error(post(route.path, route.body, {}), 401, "missing bearer token");
    expect_error(post(route.path, route.body, bearer("f00d")), 401, "invalid agent token");
  }
  EXPECT_EQ(snapshot(), before);
}

TEST_F(HttpApiTest, RegisterRejectsWrongSecretAndUnknownDeployment) {
  ASSERT_EQ(post("/api/v1/instances", R"({"offer_id": 101})")->status, 201);
  const auto env = market_.create_requests.back().env;
  const std::string before = snapshot();
  expect_error(
      post("/api/v1/agent/register",
           json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")}, {"secret", "wrong"}}.dump(), {}),
      401, "wrong secret");
  expect_error(
      post("/api/v1/agent/register",
           json{{"deployment", "nope"}, {"secret", env.at("PROVERFLEET_SECRET")}}.dump(), {}),
      401, "unknown deployment");
  expect_error(post("/api/v1/agent/register",
                    json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")}}.dump(), {}),
               400, "missing field 'secret'");
  expect_error(post("/api/v1/agent/register",
                    json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                         {"secret", env.at("PROVERFLEET_SECRET")},
                         {"hardware", "big"}}
                        .dump(),
                    {}),
               400, "field 'hardware' must be an object");
  EXPECT_EQ(snapshot(), before);
}

// ---- bad input ------------------------------------------------------------------------------

TEST_F(HttpApiTest, BadOperatorBodiesAreRejectedNamingTheProblemAndChangeNothing) {
  const std::string before = snapshot();
  expect_error(post("/api/v1/instances", R"({"offer_id": 101)"), 400, "malformed JSON body");
  expect_error(post("/api/v1/instances", "not json"), 400, "malformed JSON body");
  expect_error(post("/api/v1/instances", ""), 400, "request body is empty");
  expect_error(post("/api/v1/instances", "[101]"), 400, "must be a JSON object");
  expect_error(post("/api/v1/instances", "{}"), 400, "missing field 'offer_id'");
  expect_error(post("/api/v1/instances", R"({"offer_id": "101"})"), 400,
               "field 'offer_id' must be an integer");
  expect_error(post("/api/v1/instances", R"({"offer_id": 101.5})"), 400,
               "field 'offer_id' must be an integer");
  expect_error(post("/api/v1/instances", R"({"offer_id": -3})"), 400, "offer_id");
  expect_error(post("/api/v1/instances", R"({"offer_id": 18446744073709551615})"), 400, "offer_id");
  expect_error(post("/api/v1/instances", R"({"offer_id": 101, "ofer": 1})"), 400,
               "unknown field 'ofer'");
  expect_error(post("/api/v1/instances?dry=1", R"({"offer_id": 101})"), 400,
               "unknown query parameter 'dry'");
  expect_error(post("/api/v1/instances", "offer_id=101", op(), "application/x-www-form-urlencoded"),
               415, "Content-Type: application/json");
  expect_error(post("/api/v1/bad-hosts", R"({"machine_id": 11})"), 400, "missing field 'reason'");
  expect_error(post("/api/v1/bad-hosts", R"({"machine_id": 11, "reason": ""})"), 400,
               "field 'reason' must not be empty");
  expect_error(post("/api/v1/bad-hosts", R"({"machine_id": 11, "reason": "x", "ttl_hours": 0})"),
               400, "ttl_hours");
  expect_error(post("/api/v1/bad-hosts", R"({"machine_id": 11, "reason": "x", "ttl_hours": "1"})"),
               400, "field 'ttl_hours' must be a number");
  expect_error(post("/api/v1/bad-hosts", R"({"machine_id": true, "reason": "x"})"), 400,
               "field 'machine_id' must be an integer");
  expect_error(get("/api/v1/instances?all=maybe"), 400, "query parameter 'all'");
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(market_.creates, 0);
}

TEST_F(HttpApiTest, OversizedBodiesGet413AndChangeNothing) {
  const Agent agent = deploy_and_register(101);
  const std::string before = snapshot();
  const std::string huge = R"({"offer_id": 102, "pad": ")" + std::string(kMaxBody, 'x') + "\"}";
  expect_error(post("/api/v1/instances", huge), 413, "too large");
  expect_error(
      post("/api/v1/agent/logs", std::string(kMaxBody + 1, 'y'), bearer(agent.token), "text/plain"),
      413, "too large");
  // Under the body limit but over the per-push log limit.
  expect_error(post("/api/v1/agent/logs", std::string(kMaxLogPush + 1, 'z'), bearer(agent.token),
                    "text/plain"),
               413, "log push too large");
  json many = {{"events", json::array()}};
  for (int i = 0; i < 51; ++i) many["events"].push_back({{"seq", i}, {"type", "error"}});
  expect_error(post("/api/v1/agent/events", many.dump(), bearer(agent.token)), 413,
               "too many events");
  EXPECT_EQ(snapshot(), before);
}

// Sends `head` (request line and headers, no body) on a fresh connection and returns all the
// server writes until it closes. The server answers a body it refuses before reading it, so no
// body is sent: nothing is left unread to reset the connection under the reply.
std::string raw_exchange(int port, const std::string& head) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  timeval guard{30, 0};  // only so a broken server cannot hang the test
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &guard, sizeof guard);
  std::string reply;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::send(fd, head.data(), head.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(head.size())) {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) reply.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return reply;
}

TEST_F(HttpApiTest, ChunkedAndUnsizedBodiesAreRefusedBeforeTheyAreRead) {
  const std::string before = snapshot();
  const std::string auth = std::string("Authorization: Bearer ") + kHttpApiToken + "\r\n";
  for (const std::string& framing :
       {std::string("Transfer-Encoding: chunked\r\n"), std::string()}) {
    SCOPED_TRACE(framing.empty() ? "no Content-Length" : framing);
    const std::string reply =
        raw_exchange(port_, "POST /api/v1/instances HTTP/1.1\r\nHost: test\r\n" + auth +
                                "Content-Type: application/json\r\n" + framing + "\r\n");
    EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 411"));
    const auto body_at = reply.find("\r\n\r\n");
    ASSERT_NE(body_at, std::string::npos) << reply;
    const json body = parse(reply.substr(body_at + 4));
    EXPECT_THAT(body.value("error", ""), HasSubstr("Content-Length"));
  }
  EXPECT_EQ(snapshot(), before);
}

TEST_F(HttpApiTest, UnknownInstanceIs404AndBadIdIs400) {
  expect_error(get("/api/v1/instances/999"), 404, "unknown instance 999");
  expect_error(del("/api/v1/instances/999"), 404, "unknown instance 999");
  expect_error(get("/api/v1/instances/abc"), 400, "instance id must be a positive integer");
  expect_error(del("/api/v1/instances/0"), 400, "instance id must be a positive integer");
  expect_error(del("/api/v1/bad-hosts/77"), 404, "not on the bad-host list");
  expect_error(get("/api/v1/nothing-here"), 404, "no such route: GET /api/v1/nothing-here");
}

TEST_F(HttpApiTest, BadHeartbeatsAndEventBatchesNameTheFieldAndChangeNothing) {
  const Agent agent = deploy_and_register(101);
  const auto auth = bearer(agent.token);
  const std::string before = snapshot();
  expect_error(post("/api/v1/agent/heartbeat", "{", auth), 400, "malformed JSON body");
  expect_error(post("/api/v1/agent/heartbeat", "{}", auth), 400, "missing field 'phase'");
  expect_error(post("/api/v1/agent/heartbeat", R"({"phase": 3})", auth), 400,
               "field 'phase' must be a string");
  expect_error(post("/api/v1/agent/heartbeat",
                    R"({"phase": "fetching_params", "params": {"done": "lots"}})", auth),
               400, "field 'params.done' must be a number");
  expect_error(post("/api/v1/agent/heartbeat",
                    R"({"phase": "fetching_params", "params": {"done": -1}})", auth),
               400, "params.done");
  expect_error(post("/api/v1/agent/heartbeat",
                    R"({"phase": "proving", "prover": {"in_flight": 1.5}})", auth),
               400, "field 'prover.in_flight' must be an integer");
  expect_error(
      post("/api/v1/agent/heartbeat", R"({"phase": "proving", "gpus": [{"throttle": 3}]})", auth),
      400, "field 'gpus[0].throttle' must be a boolean or an array");
  expect_error(post("/api/v1/agent/heartbeat",
                    R"({"phase": "proving", "gpus": [{"util": 50}, {"util": 150}]})", auth),
               400, "gpus[1].util");
  expect_error(post("/api/v1/agent/heartbeat", R"({"phase": "proving", "gpus": {}})", auth), 400,
               "field 'gpus' must be an array");

  expect_error(post("/api/v1/agent/heartbeat", R"({"phase": "proving", "jobs": {}})", auth), 400,
               "field 'jobs' must be an array");
  expect_error(post("/api/v1/agent/heartbeat",
                    R"({"phase": "proving", "jobs": [{"id": 1, "attempt": 1}, {"id": 2}]})", auth),
               400, "missing field 'jobs[1].attempt'");
  expect_error(post("/api/v1/agent/heartbeat",
                    R"({"phase": "proving", "jobs": [{"id": -4, "attempt": 1}]})", auth),
               400, "field 'jobs[0].id' must be an integer in [1, ");
  {
    json many = {{"phase", "proving"}, {"jobs", json::array()}};
    for (int i = 1; i <= 65; ++i) many["jobs"].push_back({{"id", i}, {"attempt", 1}});
    expect_error(post("/api/v1/agent/heartbeat", many.dump(), auth), 400,
                 "field 'jobs' has 65 entries (at most 64)");
  }

  // One bad event rejects the whole batch: the good one before it is not applied either.
  const json batch = {{"events",
                       {{{"seq", 1}, {"type", "prover_started"}},
                        {{"type", "proof_done"}, {"seconds", 60}, {"phase", "measured"}}}}};
  expect_error(post("/api/v1/agent/events", batch.dump(), auth), 400,
               "missing field 'events[1].seq'");
  expect_error(post("/api/v1/agent/events",
                    R"({"events": [{"seq": 1, "type": "proof_done", "seconds": 60,
                        "phase": "warm-up"}]})",
                    auth),
               400, "field 'events[0].phase' must be warmup or measured");
  expect_error(post("/api/v1/agent/events",
                    R"({"events": [{"seq": 1, "type": "proof_done", "phase": "measured"}]})", auth),
               400, "missing field 'events[0].seconds'");
  expect_error(post("/api/v1/agent/events", R"({"events": {"seq": 1}})", auth), 400,
               "field 'events' must be an array");
  expect_error(post("/api/v1/agent/events", R"({"events": [{"seq": "1", "type": "x"}]})", auth),
               400, "field 'events[0].seq' must be an integer");
  expect_error(post("/api/v1/agent/logs", R"({"txt": "x"})", auth), 400, "missing field 'text'");
  EXPECT_EQ(snapshot(), before);

  // The rejected batch left no trace: sent again correctly, both events are new.
  const json fixed = {
      {"events",
       {{{"seq", 1}, {"type", "prover_started"}},
        {{"seq", 2}, {"type", "proof_done"}, {"seconds", 60}, {"phase", "warmup"}}}}};
  auto r = post("/api/v1/agent/events", fixed.dump(), auth);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(parse(r->body), (json{{"accepted", 2}, {"duplicates", 0}}));
}

// ---- the agent protocol, deploy to destroy --------------------------------------------------

TEST_F(HttpApiTest, DeployRegisterHeartbeatEventsLogsShowUpInTheInstance) {
  auto deployed = post("/api/v1/instances", R"({"offer_id": 101})");
  ASSERT_TRUE(deployed);
  ASSERT_EQ(deployed->status, 201) << deployed->body;
  const json instance = parse(deployed->body);
  EXPECT_EQ(instance["state"], "booting");
  EXPECT_EQ(instance["offer"]["id"], 101);
  EXPECT_FALSE(instance.contains("secret_hash"));
  EXPECT_FALSE(instance.contains("token_hash"));
  const std::int64_t id = instance["id"].get<std::int64_t>();

  const auto& env = market_.create_requests.back().env;
  auto reg = post("/api/v1/agent/register",
                  json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                       {"secret", env.at("PROVERFLEET_SECRET")},
                       {"hardware", {{"gpus", 1}}},
                       {"agent_version", "0.1"}}
                      .dump(),
                  {});
  ASSERT_TRUE(reg);
  ASSERT_EQ(reg->status, 200) << reg->body;
  const json registered = parse(reg->body);
  EXPECT_EQ(registered["instance_id"], id);
  const std::string token = registered["token"];
  ASSERT_FALSE(token.empty());
  const auto auth = bearer(token);

  now_ = now_ + 10;
  auto hb = post(
      "/api/v1/agent/heartbeat",
      json{
          {"phase", "fetching_params"},
          {"params", {{"done", 1e9}, {"total", 4e9}, {"bytes_per_s", 5e7}}},
          {"prover", {{"in_flight", 0}, {"completed", 0}, {"failed", 0}, {"peak_memory_gib", 0}}},
          {"gpus",
           {{{"util", 40},
             {"memory_used_mib", 100},
             {"temp_c", 50},
             {"sm_clock_mhz", 2500},
             {"throttle", json::array()}},
            {{"util", 60}, {"throttle", false}}}},
      }
          .dump(),
      auth);
  ASSERT_TRUE(hb);
  ASSERT_EQ(hb->status, 200) << hb->body;
  // Without a job queue there is never work, and nothing to drop.
  EXPECT_EQ(parse(hb->body),
            (json{{"commands", json::array()}, {"work", false}, {"drop_jobs", json::array()}}));

  const json events = {{"events",
                        {{{"seq", 1}, {"type", "prover_started"}, {"message", "cuzk 1.0"}},
                         {{"seq", 2},
                          {"type", "proof_done"},
                          {"at", now_ + 100},
                          {"seconds", 300},
                          {"phase", "warmup"}},
                         {{"seq", 3},
                          {"type", "proof_done"},
                          {"at", now_ + 200},
                          {"seconds", 90},
                          {"gpu_ms", 60000},
                          {"queue_ms", 5},
                          {"phase", "measured"}}}}};
  auto ev = post("/api/v1/agent/events", events.dump(), auth);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->status, 200) << ev->body;
  EXPECT_EQ(parse(ev->body), (json{{"accepted", 3}, {"duplicates", 0}}));

  // A resent batch (the agent did not see our reply) counts the old seq as a duplicate.
  const json again = {
      {"events",
       {{{"seq", 3}, {"type", "proof_done"}, {"seconds", 90}, {"phase", "measured"}},
        {{"seq", 4}, {"type", "error"}, {"message", "disk almost full"}}}}};
  ev = post("/api/v1/agent/events", again.dump(), auth);
  ASSERT_TRUE(ev);
  ASSERT_EQ(ev->status, 200) << ev->body;
  EXPECT_EQ(parse(ev->body), (json{{"accepted", 1}, {"duplicates", 1}}));

  auto logs = post("/api/v1/agent/logs", "line one\n", auth, "text/plain");
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 200) << logs->body;
  EXPECT_EQ(parse(logs->body), (json{{"accepted_bytes", 9}}));
  logs = post("/api/v1/agent/logs", json{{"text", "line two\n"}}.dump(), auth);
  ASSERT_TRUE(logs);
  EXPECT_EQ(logs->status, 200) << logs->body;

  auto shown = get("/api/v1/instances/" + std::to_string(id));
  ASSERT_TRUE(shown);
  ASSERT_EQ(shown->status, 200) << shown->body;
  const json detail = parse(shown->body);
  EXPECT_EQ(detail["instance"]["state"], "benchmarking");
  EXPECT_EQ(detail["instance"]["proofs_benchmark"], 1);
  EXPECT_DOUBLE_EQ(detail["instance"]["gpu_util"].get<double>(), 50.0);
  EXPECT_DOUBLE_EQ(detail["instance"]["params_total_bytes"].get<double>(), 4e9);
  EXPECT_FALSE(detail["instance"].contains("token_hash"));
  ASSERT_EQ(detail["samples"].size(), 2u);
  EXPECT_EQ(detail["samples"][0]["phase"], "warmup");
  EXPECT_EQ(detail["samples"][1]["phase"], "benchmark");
  EXPECT_DOUBLE_EQ(detail["samples"][1]["gpu_ms"].get<double>(), 60000.0);
  EXPECT_EQ(detail["logs"], "line one\nline two\n");
  std::string messages;
  for (const auto& e : detail["events"]) messages += e["message"].get<std::string>() + "\n";
  EXPECT_THAT(messages, HasSubstr("prover started: cuzk 1.0"));
  EXPECT_THAT(messages, HasSubstr("disk almost full"));
  EXPECT_THAT(messages, HasSubstr("agent registered (version 0.1)"));

  auto listed = get("/api/v1/instances");
  ASSERT_TRUE(listed);
  ASSERT_EQ(listed->status, 200);
  const json rows = parse(listed->body);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["id"], id);
  EXPECT_EQ(rows[0]["state"], "benchmarking");
  EXPECT_TRUE(rows[0]["close_cause"].is_null());
  EXPECT_EQ(rows[0]["gpu_throttled"], false);
  EXPECT_EQ(rows[0]["oom_partitions"], 0);
}

// A manager serving without a job queue says so on every job route, instead of leaving an
// agent's long-poll to guess.
TEST_F(HttpApiTest, JobRoutesAnswer503WithoutAJobQueue) {
  const Agent agent = deploy_and_register(101);
  const auto auth = bearer(agent.token);
  expect_error(post("/api/v1/agent/jobs/lease", R"({"max_jobs": 1, "wait_ms": 10})", auth), 503,
               "without a job queue");
  expect_error(get("/api/v1/agent/jobs/1/input?attempt=1", auth), 503, "without a job queue");
  expect_error(post("/api/v1/agent/jobs/1/started", R"({"attempt": 1})", auth), 503,
               "without a job queue");
  expect_error(
      post("/api/v1/agent/jobs/1/result", R"({"attempt": 1, "ok": false, "message": "x"})", auth),
      503, "without a job queue");
  // And only to its own agents: the token is checked first.
  expect_error(post("/api/v1/agent/jobs/lease", R"({"max_jobs": 1})", bearer("nope")), 401,
               "invalid agent token");
}

TEST_F(HttpApiTest, DestroyIs202AndDestroyingUntilTheMarketConfirms) {
  const Agent agent = deploy_and_register(101);
  market_.destroy_failures = 100;  // the market keeps refusing: the row must stay destroying
  auto r = del("/api/v1/instances/" + std::to_string(agent.instance_id));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 202) << r->body;
  const json body = parse(r->body);
  EXPECT_EQ(body["state"], "destroying");
  EXPECT_EQ(body["destroy_reason"], "operator request");
  EXPECT_EQ(body["close_cause"], "operator");
  EXPECT_EQ(store_->instance(agent.instance_id)->state, core::InstanceState::Destroying);

  // The agent learns it on its next heartbeat.
  auto hb = post("/api/v1/agent/heartbeat", R"({"phase": "fetching_params"})", bearer(agent.token));
  ASSERT_TRUE(hb);
  EXPECT_EQ(parse(hb->body),
            (json{{"commands", {"stop"}}, {"work", false}, {"drop_jobs", json::array()}}));

  // A destroying instance is still live (it may bill); destroyed ones only with ?all=1.
  EXPECT_EQ(parse(get("/api/v1/instances")->body).size(), 1u);
  market_.destroy_failures = 0;
  now_ = now_ + 60;
  manager_->tick();
  EXPECT_EQ(parse(get("/api/v1/instances")->body).size(), 0u);
  const json all = parse(get("/api/v1/instances?all=1")->body);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0]["state"], "destroyed");

  // Destroyed: the agent's calls are refused with 410 and change nothing.
  const std::string before = snapshot();
  expect_error(
      post("/api/v1/agent/events",
           R"({"events": [{"seq": 1, "type": "proof_done", "seconds": 60, "phase": "measured"}]})",
           bearer(agent.token)),
      410, "destroyed");
  expect_error(post("/api/v1/agent/heartbeat", R"({"phase": "proving"})", bearer(agent.token)), 410,
               "destroyed");
  expect_error(post("/api/v1/agent/logs", R"({"text": "late"})", bearer(agent.token)), 410,
               "destroyed");
  EXPECT_EQ(snapshot(), before);
}

TEST_F(HttpApiTest, TheDeploymentSecretRegistersOnceAndThenOnlyWithItsToken) {
  ASSERT_EQ(post("/api/v1/instances", R"({"offer_id": 101})")->status, 201);
  const auto env = market_.create_requests.back().env;
  const std::string own_token(64, 'c');
  json request = {{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                  {"secret", env.at("PROVERFLEET_SECRET")},
                  {"token", own_token}};
  auto first = post("/api/v1/agent/register", request.dump(), {});
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  EXPECT_EQ(parse(first->body)["token"], own_token);
  // The same request again (its reply was lost) gets the same answer.
  auto again = post("/api/v1/agent/register", request.dump(), {});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200) << again->body;
  // Whoever read the secret in the market's instance list cannot take the instance over.
  request.erase("token");
  expect_error(post("/api/v1/agent/register", request.dump(), {}), 409, "already used");
  request["token"] = std::string(64, 'd');
  expect_error(post("/api/v1/agent/register", request.dump(), {}), 409, "already used");
  EXPECT_EQ(
      post("/api/v1/agent/heartbeat", R"({"phase": "fetching_params"})", bearer(own_token))->status,
      200);
  request["token"] = "not-hex";
  expect_error(post("/api/v1/agent/register", request.dump(), {}), 400, "hex");
}

// ---- operator reads and bad hosts -----------------------------------------------------------

TEST_F(HttpApiTest, BadHostsAddListBlockDeployAndRemove) {
  auto added = post("/api/v1/bad-hosts",
                    R"({"machine_id": 11, "reason": "46/hr on a 61/hr card", "ttl_hours": 2,
                        "evidence": {"rate": 46.2}})");
  ASSERT_TRUE(added);
  ASSERT_EQ(added->status, 201) << added->body;
  const json entry = parse(added->body);
  EXPECT_EQ(entry["machine_id"], 11);
  EXPECT_EQ(entry["source"], "operator");
  EXPECT_EQ(entry["active"], true);
  EXPECT_DOUBLE_EQ(entry["expires_at"].get<double>(), now_.load() + 2 * 3600);
  EXPECT_EQ(entry["evidence"], (json{{"rate", 46.2}}));

  json listed = parse(get("/api/v1/bad-hosts")->body);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["reason"], "46/hr on a 61/hr card");
  EXPECT_EQ(listed[0]["active"], true);

  expect_error(post("/api/v1/instances", R"({"offer_id": 101})"), 409, "bad-host");
  EXPECT_EQ(market_.creates, 0);

  now_ = now_ + 3 * 3600;  // past the TTL: listed, but no longer active
  listed = parse(get("/api/v1/bad-hosts")->body);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["active"], false);

  auto removed = del("/api/v1/bad-hosts/11");
  ASSERT_TRUE(removed);
  ASSERT_EQ(removed->status, 200) << removed->body;
  EXPECT_EQ(parse(removed->body)["removed"], 1);
  EXPECT_TRUE(parse(get("/api/v1/bad-hosts")->body).empty());
  expect_error(del("/api/v1/bad-hosts/11"), 404, "not on the bad-host list");
}

TEST_F(HttpApiTest, OffersAreRankedAndBadQueriesNameTheTerm) {
  auto r = get("/api/v1/offers?q=num_gpus%3E%3D1&sort=profit&limit=1");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json offers = parse(r->body);
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_TRUE(offers[0].contains("predicted_rate"));
  EXPECT_TRUE(offers[0].contains("expected_cost_per_proof"));
  EXPECT_EQ(parse(get("/api/v1/offers")->body).size(), 2u);

  expect_error(get("/api/v1/offers?q=num_gpus%3E%3E1"), 400, "num_gpus>>1");
  expect_error(get("/api/v1/offers?sort=cheapest"), 400, "query parameter 'sort'");
  expect_error(get("/api/v1/offers?limit=0"), 400, "query parameter 'limit'");
  expect_error(get("/api/v1/offers?limit=ten"), 400, "query parameter 'limit'");
  expect_error(get("/api/v1/offers?query=x"), 400, "unknown query parameter 'query'");
}

TEST_F(HttpApiTest, HostsSummariseRunsWithTheirHistory) {
  for (double rate : {61.4, 46.2}) {
    core::BenchRun run;
    run.host = {15136, "RTX 4090", 1};
    run.at = now_ + rate;
    run.rate = rate;
    run.samples = 12;
    run.contended = rate < 50;
    store_->insert_bench_run(run);
  }
  auto r = get("/api/v1/hosts");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json hosts = parse(r->body);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_EQ(hosts[0]["machine_id"], 15136);
  EXPECT_EQ(hosts[0]["runs"], 2);
  // The contended run does not drag the median down.
  EXPECT_DOUBLE_EQ(hosts[0]["median"].get<double>(), 61.4);
  // Every run is kept, oldest first, flags included.
  const json& history = hosts[0]["history"];
  ASSERT_EQ(history.size(), 2u);
  EXPECT_DOUBLE_EQ(history[0]["rate"].get<double>(), 46.2);
  EXPECT_EQ(history[0]["contended"], true);
  EXPECT_DOUBLE_EQ(history[1]["rate"].get<double>(), 61.4);
  EXPECT_EQ(history[1]["contended"], false);
}

// The host page's data (issue 36): one machine's rentals, runs, strikes and blocks.
TEST_F(HttpApiTest, AHostHoldsEveryRentalRunStrikeAndBlockOfItsMachine) {
  expect_error(get("/api/v1/hosts/11"), 404, "never rented");
  expect_error(get("/api/v1/hosts/x"), 400, "machine id");
  expect_error(get("/api/v1/hosts/11?verbose=1"), 400, "unknown query parameter");
  const Agent agent = deploy_and_register(101);  // offer 101 is on machine 11
  core::BenchRun run;
  run.host = {11, "RTX 4090", 1};
  run.instance_id = agent.instance_id;
  run.at = now_;
  run.rate = 52.5;
  run.samples = 10;
  store_->insert_bench_run(run);
  core::Strike strike;
  strike.kind = core::StrikeKind::FailedProofs;
  strike.instance_id = agent.instance_id;
  strike.machine_id = 11;
  strike.at = now_;
  strike.reason = "3 failed proofs in a row";
  manager_->record_strike(agent.instance_id, strike);
  auto added = post("/api/v1/bad-hosts", R"({"machine_id": 11, "reason": "flaky"})");
  ASSERT_TRUE(added && added->status == 201);

  const json host = parse(get("/api/v1/hosts/11")->body);
  EXPECT_EQ(host["machine_id"], 11);
  ASSERT_EQ(host["rentals"].size(), 1u);
  EXPECT_EQ(host["rentals"][0]["id"], agent.instance_id);
  EXPECT_EQ(host["totals"]["rentals"], 1);
  ASSERT_EQ(host["runs"].size(), 1u);
  EXPECT_DOUBLE_EQ(host["runs"][0]["rate"].get<double>(), 52.5);
  ASSERT_EQ(host["summaries"].size(), 1u);
  EXPECT_EQ(host["blocked"], true);
  // The strike's own entry (source auto) and the operator's.
  std::set<std::string> sources;
  for (const auto& e : host["bad_host_entries"]) sources.insert(e["source"].get<std::string>());
  EXPECT_EQ(sources, (std::set<std::string>{"auto", "operator"})) << host.dump();
  std::set<std::string> kinds;
  for (const auto& e : host["history"]) kinds.insert(e["kind"].get<std::string>());
  EXPECT_TRUE(kinds.count("blame")) << host["history"].dump();
  EXPECT_TRUE(kinds.count("bad_host")) << host["history"].dump();
  // Another machine is not this one's business.
  expect_error(get("/api/v1/hosts/12"), 404, "machine 12");
}

TEST_F(HttpApiTest, FleetSummaryListsEveryState) {
  deploy_and_register(101);
  auto r = get("/api/v1/fleet");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json fleet = parse(r->body);
  EXPECT_EQ(fleet["by_state"].size(), kAllInstanceStates.size());
  EXPECT_EQ(fleet["by_state"]["registered"], 1);
  EXPECT_EQ(fleet["by_state"]["proving"], 0);
  EXPECT_DOUBLE_EQ(fleet["dollars_per_hour"].get<double>(), 0.40);
  EXPECT_TRUE(fleet["cost_per_proof"].is_null());
}

// ---- /metrics -------------------------------------------------------------------------------

TEST_F(HttpApiTest, MetricsNeedNoTokenAndCountRequestsByRoutePattern) {
  ASSERT_EQ(post("/api/v1/instances", R"({"offer_id": 101})")->status, 201);
  ASSERT_EQ(get("/api/v1/instances/1")->status, 200);
  ASSERT_EQ(get("/api/v1/instances/2")->status, 404);
  ASSERT_EQ(get("/api/v1/instances", {})->status, 401);
  ASSERT_EQ(get("/healthz", {})->status, 200);
  ASSERT_EQ(get("/no/such/thing", {})->status, 404);

  auto r = get("/metrics", {});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4");
  const std::string& text = r->body;
  EXPECT_THAT(text, HasSubstr("proverfleet_instances{state=\"booting\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instances{state=\"proving\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instances{state=\"destroyed\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_dollars_per_hour 0.4\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_proofs_total 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_spend_usd_total counter"));
  EXPECT_THAT(text, HasSubstr("proverfleet_api_requests_total{route=\"/api/v1/instances\","
                              "code=\"201\",method=\"POST\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_api_requests_total{route=\"/api/v1/instances/{id}\","
                              "code=\"200\",method=\"GET\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_api_requests_total{route=\"/api/v1/instances/{id}\","
                              "code=\"404\",method=\"GET\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_api_requests_total{route=\"/api/v1/instances\","
                              "code=\"401\",method=\"GET\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_api_requests_total{route=\"/healthz\",code=\"200\","
                              "method=\"GET\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_api_requests_total{route=\"unmatched\",code=\"404\","
                              "method=\"GET\"} 1\n"));
  EXPECT_THAT(text, Not(HasSubstr("/no/such/thing")));  // raw paths never become labels
  EXPECT_THAT(text, Not(HasSubstr("cost_per_proof")));  // nothing proves yet
}

TEST_F(HttpApiTest, MetricsCarryTheWatchsAlertsAndTheAgeOfTheLastCompleteMarketList) {
  auto before = get("/metrics", {});
  ASSERT_TRUE(before);
  EXPECT_THAT(before->body, HasSubstr("proverfleet_instance_alerts{kind=\"stall\"} 0\n"));
  EXPECT_THAT(before->body, HasSubstr("proverfleet_fleet_alert{kind=\"spend\"} 0\n"));
  EXPECT_THAT(before->body, Not(HasSubstr("proverfleet_market_list_age_seconds")));
  manager_->reconcile();
  now_ = now_.load() + 90;
  auto after = get("/metrics", {});
  ASSERT_TRUE(after);
  EXPECT_THAT(after->body, HasSubstr("proverfleet_market_list_age_seconds 90\n"));
}

// ---- pieces without a server ----------------------------------------------------------------

TEST(HttpApiRoutes, RouteOfMapsPathsToPatterns) {
  auto store = store::open_store(":memory:");
  pf::testing::FakeMarket market;
  Manager manager(*store, market, ManagerConfig{}, [] { return 0.0; });
  HttpApi api(manager, ApiOptions{});
  EXPECT_EQ(api.route_of("GET", "/api/v1/instances/42"), "/api/v1/instances/{id}");
  EXPECT_EQ(api.route_of("DELETE", "/api/v1/bad-hosts/7"), "/api/v1/bad-hosts/{machine_id}");
  EXPECT_EQ(api.route_of("GET", "/api/v1/instances/42/extra"), "unmatched");
  EXPECT_EQ(api.route_of("PUT", "/api/v1/instances/42"), "unmatched");
  EXPECT_EQ(api.route_of("GET", "/metrics"), "/metrics");
}

TEST(HttpApiMetrics, RenderEscapesLabelsAndOmitsUnknownCostPerProof) {
  FleetSummary fleet;
  fleet.by_state["proving"] = 2;
  fleet.proofs = 7;
  fleet.spend_usd = 1.5;
  std::map<RequestKey, std::uint64_t> requests{{RequestKey{"a\"b\\c", 200, "GET"}, 3}};
  const std::string text = render_prometheus(fleet, requests);
  EXPECT_THAT(text, HasSubstr("proverfleet_instances{state=\"proving\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_instances{state=\"renting\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_proofs_total 7\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_spend_usd_total 1.5\n"));
  EXPECT_THAT(text, HasSubstr(R"(route="a\"b\\c",code="200",method="GET"} 3)"));
  EXPECT_THAT(text, Not(HasSubstr("proverfleet_cost_per_proof_usd")));
  EXPECT_THAT(text, HasSubstr("proverfleet_silence_judged 1\n"));
  fleet.hearing.may_judge_silence = false;
  fleet.hearing.agents_silent = 4;
  EXPECT_THAT(render_prometheus(fleet, {}), HasSubstr("proverfleet_silence_judged 0\n"));
  EXPECT_THAT(render_prometheus(fleet, {}), HasSubstr("proverfleet_agents_silent 4\n"));
  fleet.cost_per_proof = 0.0065;
  EXPECT_THAT(render_prometheus(fleet, {}), HasSubstr("proverfleet_cost_per_proof_usd 0.0065"));
}

TEST(HttpApiViews, InstanceViewHasNoCredentialsAndEmbedsJsonText) {
  core::InstanceRecord rec;
  rec.id = 3;
  rec.state = core::InstanceState::WarmingUp;
  rec.secret_hash = "secret-hash-value";
  rec.token_hash = "token-hash-value";
  rec.plan_json = R"({"partitions": 4})";
  rec.offer.id = 101;
  const json view = to_json(rec);
  EXPECT_EQ(view["state"], "warming_up");
  EXPECT_EQ(view["plan"], (json{{"partitions", 4}}));
  EXPECT_TRUE(view["deadline_at"].is_null());
  EXPECT_TRUE(view["market_id"].is_null());
  EXPECT_EQ(view["offer"]["id"], 101);
  EXPECT_THAT(view.dump(), Not(HasSubstr("hash")));
  EXPECT_EQ(embed_json_text("not json"), "not json");
  EXPECT_TRUE(embed_json_text("").is_null());
}

TEST(HttpApiServer, ServesHealthzAndRejectsUnusableTlsFiles) {
  auto store = store::open_store(":memory:");
  pf::testing::FakeMarket market;
  Manager manager(*store, market, ManagerConfig{}, [] { return 0.0; });
  HttpApi api(manager, ApiOptions{});

  auto missing = ApiServer::create(TlsFiles{"/nonexistent/cert.pem", "/nonexistent/key.pem"});
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error(), HasSubstr("/nonexistent/cert.pem"));

  const auto dir =
      std::filesystem::temp_directory_path() / ("http_api_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "cert.pem") << "not a certificate\n";
  std::ofstream(dir / "key.pem") << "not a key\n";
  auto garbage =
      ApiServer::create(TlsFiles{(dir / "cert.pem").string(), (dir / "key.pem").string()});
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(garbage);
  EXPECT_THAT(garbage.error(), HasSubstr("cannot use TLS certificate"));

  auto plain = ApiServer::create(std::nullopt);
  ASSERT_TRUE(plain) << plain.error();
  auto port = (*plain)->bind("127.0.0.1", 0);
  ASSERT_TRUE(port) << port.error();
  (*plain)->mount(api);
  std::thread serving([&] { (*plain)->serve(); });
  httplib::Client client("127.0.0.1", *port);
  auto r = client.Get("/healthz");
  (*plain)->stop();
  serving.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(parse(r->body), (json{{"ok", true}}));
}

// ---- issue 10: bounded JSON bodies ----------------------------------------------------------

using pf::test::nested_objects;

TEST_F(HttpApiTest, DeeplyNestedBodiesAre400NamingTheDepthAndChangeNothing) {
  const Agent agent = deploy_and_register(101);
  const std::string before = snapshot();
  // Within the 64 KiB body limit of this fixture: 10,000 levels.
  const std::string deep = nested_objects(10'000);
  expect_error(post("/api/v1/agent/register",
                    R"({"deployment": "d", "secret": "s", "hardware": )" + deep + "}", {}),
               400, "malformed JSON body: nesting deeper than 64 at byte");
  expect_error(
      post("/api/v1/agent/events", R"({"events": [{"seq": 9, "type": "x", "data": )" + deep + "}]}",
           bearer(agent.token)),
      400, "malformed JSON body: nesting deeper than 64");
  expect_error(post("/api/v1/agent/heartbeat", std::string(60'000, '['), bearer(agent.token)), 400,
               "malformed JSON body: nesting deeper than 64 at byte 65");
  expect_error(
      post("/api/v1/bad-hosts", R"({"machine_id": 11, "reason": "x", "evidence": )" + deep + "}"),
      400, "malformed JSON body: nesting deeper than 64");
  EXPECT_EQ(snapshot(), before);
  // The server is still up.
  auto health = get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(HttpApiTest, NumbersThatOverflowADoubleAre400NotInternalErrors) {
  const Agent agent = deploy_and_register(101);
  const std::string before = snapshot();
  const std::string digits400 = "1" + std::string(399, '0');
  expect_error(post("/api/v1/instances", R"({"offer_id": 1e400})"), 400,
               "malformed JSON body: number out of range at byte 18");
  expect_error(post("/api/v1/instances", R"({"offer_id": )" + digits400 + "}"), 400,
               "number out of range");
  expect_error(
      post("/api/v1/bad-hosts", R"({"machine_id": 11, "reason": "x", "ttl_hours": -1e400})"), 400,
      "number out of range");
  expect_error(post("/api/v1/bad-hosts", R"({"machine_id": )" + digits400 + R"(, "reason": "x"})"),
               400, "number out of range");
  expect_error(post("/api/v1/agent/heartbeat", R"({"phase": "proving", "params": {"done": 1e400}})",
                    bearer(agent.token)),
               400, "number out of range");
  expect_error(
      post("/api/v1/agent/events", R"({"events": [{"seq": )" + digits400 + R"(, "type": "x"}]})",
           bearer(agent.token)),
      400, "number out of range");
  expect_error(post("/api/v1/agent/register",
                    R"({"deployment": "d", "secret": "s", "hardware": {"gpus": 1e999}})", {}),
               400, "number out of range");
  expect_error(post("/api/v1/autopilot", R"({"paused": NaN})"), 400, "malformed JSON body");
  EXPECT_EQ(snapshot(), before);
}

TEST_F(HttpApiTest, OfferQueryValueOutOfRangeIs400NotABadGateway) {
  // cpu_ram>=1e308 GB is infinite in MB: it reached the market as null and came back as a 502.
  expect_error(get("/api/v1/offers?q=cpu_ram%3E%3D1e308"), 400,
               "bad query term 'cpu_ram>=1e308': value out of range");
  expect_error(get("/api/v1/offers?q=num_gpus%3E%3D1e400"), 400, "num_gpus>=1e400");
  EXPECT_EQ(parse(get("/api/v1/offers?q=cpu_ram%3E%3D1")->body).size(), 2u);
}

TEST_F(HttpApiTest, AMarketBusyOrDownAfterItsRetriesIs503WithRetryAfter) {
  market_.search_fails = true;  // the offer re-check cannot reach the market
  auto down = post("/api/v1/instances", R"({"offer_id": 101})");
  expect_error(down, 503, "(transport)");
  EXPECT_EQ(down->get_header_value("Retry-After"), "10");
  market_.search_fails = false;

  market_.create_errors.push_back(
      pf::market::MarketError{pf::market::ErrorKind::RateLimited, 429, "", "slow down"});
  auto busy = post("/api/v1/instances", R"({"offer_id": 101})");
  expect_error(busy, 503, "(rate_limited)");
  EXPECT_EQ(busy->get_header_value("Retry-After"), "10");

  // The market failing on its side (5xx after every retry) is down for now, not a bad gateway.
  market_.create_errors.push_back(pf::market::MarketError{pf::market::ErrorKind::MarketError, 500,
                                                          "server_error", "internal error"});
  auto failing = post("/api/v1/instances", R"({"offer_id": 101})");
  expect_error(failing, 503, "(market_error)");
  EXPECT_EQ(failing->get_header_value("Retry-After"), "10");

  // Any other market failure is still a bad gateway, without a retry hint.
  market_.create_errors.push_back(
      pf::market::MarketError{pf::market::ErrorKind::BadResponse, 200, "", "truncated"});
  auto bad = post("/api/v1/instances", R"({"offer_id": 101})");
  expect_error(bad, 502, "(bad_response)");
  EXPECT_FALSE(bad->has_header("Retry-After"));
}

// The reproduction at full size: 600 KB bodies need a body limit above this fixture's 64 KiB.
class HttpApiLargeBodyTest : public HttpApiTest {
 protected:
  void SetUp() override {
    HttpApiTest::SetUp();
    ApiOptions options = api_->options();
    options.max_body_bytes = 2 << 20;
    large_api_ = std::make_unique<HttpApi>(*manager_, options);
    large_api_->mount(large_server_);
    large_serving_.emplace(large_server_);
    large_client_ = std::make_unique<httplib::Client>("127.0.0.1", large_serving_->port());
    large_client_->set_read_timeout(60, 0);
  }

  httplib::Result post_large(const std::string& path, const std::string& body,
                             const httplib::Headers& headers) {
    return large_client_->Post(path.c_str(), headers, body, "application/json");
  }

  std::unique_ptr<HttpApi> large_api_;
  net::HttpServer large_server_;
  std::optional<pf::test::FrontServing> large_serving_;
  std::unique_ptr<httplib::Client> large_client_;
};

TEST_F(HttpApiLargeBodyTest, SixHundredKilobytesOfNestingIs400AndTheServerLives) {
  const Agent agent = deploy_and_register(101);
  const std::string before = snapshot();
  const std::string deep = nested_objects(100'000);  // 600 KB
  ASSERT_GT(deep.size(), 600'000u);
  expect_error(post_large("/api/v1/agent/register",
                          R"({"deployment": "d", "secret": "s", "hardware": )" + deep + "}", {}),
               400, "nesting deeper than 64");
  expect_error(post_large("/api/v1/agent/events",
                          R"({"events": [{"seq": 9, "type": "x", "data": )" + deep + "}]}",
                          bearer(agent.token)),
               400, "nesting deeper than 64");
  expect_error(post_large("/api/v1/bad-hosts",
                          R"({"machine_id": 11, "reason": "x", "evidence": )" + deep + "}", op()),
               400, "nesting deeper than 64");
  expect_error(post_large("/api/v1/bad-hosts", std::string(600'000, '['), op()), 400,
               "nesting deeper than 64 at byte 65");
  EXPECT_EQ(snapshot(), before);
  // Nesting within the limit is still accepted, and kept whole.
  const json evidence = json::parse(nested_objects(60));
  auto added =
      post_large("/api/v1/bad-hosts",
                 json{{"machine_id", 11}, {"reason", "x"}, {"evidence", evidence}}.dump(), op());
  ASSERT_TRUE(added);
  ASSERT_EQ(added->status, 201) << added->body;
  EXPECT_EQ(parse(added->body)["evidence"], evidence);
}

}  // namespace
}  // namespace pf::manager
