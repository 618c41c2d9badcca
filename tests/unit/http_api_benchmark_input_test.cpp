// GET /api/v1/agent/benchmark-input over loopback: a real Manager with a benchmark input, its
// HttpApi on the HTTP front. The register reply's offer, agent-token auth, byte ranges, the
// end of the file, a manager without an input (404), and the agent's own fetch (agent/
// benchmark_input.h) against the route, token and chunk size as the register reply gives them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <fstream>
#include <optional>
#include <string>

#include "agent/benchmark_input.h"
#include "agent/params.h"
#include "manager/http_api.h"
#include "support/front_serving.h"
#include "support/manager_fixture.h"
#include "support/param_server.h"
#include "support/temp_dir.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kOperatorToken = "operator-token-benchmark-input";

class BenchmarkInputApiTest : public pf::test::ManagerFixture {
 protected:
  void SetUp() override {}

  void start(bool with_input) {
    ManagerConfig cfg = default_config();
    if (with_input) {
      c1_ = pf::test::ParamServer::random_bytes(100 * 1024 + 7, 3);
      BenchmarkInput input;
      input.name = "c1.json";
      input.digest = agent::param_digest_of(c1_);
      input.bytes = std::make_shared<const std::string>(c1_);
      input.reply_bytes = 16 * 1024;
      cfg.benchmark_input = input;
    }
    start_manager(cfg);
    ApiOptions options;
    options.operator_token_hash = hash_token(kOperatorToken);
    options.clock = [this] { return now_.load(); };
    api_ = std::make_unique<HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    port_ = serving_->port();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }

  // Deploys offer 101 and registers its agent; the register reply.
  json deploy_and_register() {
    auto deployed = client_->Post("/api/v1/instances",
                                  {{"Authorization", std::string("Bearer ") + kOperatorToken}},
                                  json{{"offer_id", 101}}.dump(), "application/json");
    EXPECT_TRUE(deployed && deployed->status == 201);
    const auto& env = market_.create_requests.back().env;
    auto reg = client_->Post("/api/v1/agent/register",
                             json{{"deployment", env.at("PROVERFLEET_DEPLOYMENT")},
                                  {"secret", env.at("PROVERFLEET_SECRET")},
                                  {"hardware", {{"gpus", 1}}}}
                                 .dump(),
                             "application/json");
    EXPECT_TRUE(reg);
    if (!reg) return json();
    EXPECT_EQ(reg->status, 200) << reg->body;
    json body = json::parse(reg->body);
    token_ = body.value("token", "");
    return body;
  }

  httplib::Result get(const httplib::Headers& headers) {
    return client_->Get(kBenchmarkInputRoute, headers);
  }
  httplib::Headers agent(const std::string& range = "") const {
    httplib::Headers h{{"Authorization", "Bearer " + token_}};
    if (!range.empty()) h.emplace("Range", range);
    return h;
  }

  std::string c1_;
  std::string token_;
  std::unique_ptr<HttpApi> api_;
  net::HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;  // after server_ and api_: stops first
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(BenchmarkInputApiTest, TheRegisterReplyOffersItAndOnlyAgentsGetIt) {
  start(true);
  const json reg = deploy_and_register();
  ASSERT_TRUE(reg.contains("benchmark_input")) << reg.dump();
  const json& offer = reg["benchmark_input"];
  EXPECT_EQ(offer["name"], "c1.json");
  EXPECT_EQ(offer["bytes"], c1_.size());
  EXPECT_EQ(offer["digest"], agent::param_digest_of(c1_));
  EXPECT_EQ(offer["path"], kBenchmarkInputRoute);
  EXPECT_EQ(offer["chunk_bytes"], 16 * 1024);

  for (const httplib::Headers& h :
       {httplib::Headers{}, httplib::Headers{{"Authorization", "Bearer f00d"}},
        httplib::Headers{{"Authorization", std::string("Bearer ") + kOperatorToken}}}) {
    auto r = get(h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_THAT(r->body, HasSubstr("token"));
  }
}

TEST_F(BenchmarkInputApiTest, RangesAreServedInBoundedRepliesUpToTheEnd) {
  start(true);
  deploy_and_register();
  auto first = get(agent());
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 206);  // larger than one reply: the first 16 KiB
  EXPECT_EQ(first->body, c1_.substr(0, 16 * 1024));
  EXPECT_EQ(first->get_header_value("Content-Range"),
            "bytes 0-16383/" + std::to_string(c1_.size()));
  EXPECT_EQ(first->get_header_value("ETag"), "\"" + agent::param_digest_of(c1_) + "\"");

  auto mid = get(agent("bytes=1000-1999"));
  ASSERT_TRUE(mid);
  EXPECT_EQ(mid->status, 206);
  EXPECT_EQ(mid->body, c1_.substr(1000, 1000));

  auto tail = get(agent("bytes=" + std::to_string(c1_.size() - 5) + "-"));
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->status, 206);
  EXPECT_EQ(tail->body, c1_.substr(c1_.size() - 5));

  auto past = get(agent("bytes=" + std::to_string(c1_.size()) + "-"));
  ASSERT_TRUE(past);
  EXPECT_EQ(past->status, 416) << past->body;
  EXPECT_EQ(past->get_header_value("Content-Range"), "bytes */" + std::to_string(c1_.size()));

  auto bad = get(agent("bytes=9-3"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_THAT(bad->body, HasSubstr("Range"));
}

TEST_F(BenchmarkInputApiTest, WithoutAnInputTheRouteIs404AndNothingIsOffered) {
  start(false);
  const json reg = deploy_and_register();
  EXPECT_TRUE(reg.value("benchmark_input", json()).is_null()) << reg.dump();
  auto r = get(agent());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_THAT(r->body, HasSubstr("deploy.benchmark_input"));
}

TEST_F(BenchmarkInputApiTest, TheAgentFetchesItFromTheRouteAsTheRegisterReplySays) {
  start(true);
  const json reg = deploy_and_register();
  const std::string manager_url = "http://127.0.0.1:" + std::to_string(port_);
  auto offer = agent::parse_benchmark_input(reg["benchmark_input"], manager_url);
  ASSERT_TRUE(offer && *offer) << (offer ? "none" : offer.error());
  pf::testing::TempDir dir;
  agent::FetchOptions options;
  options.dir = dir.file("benchmark-input");
  options.free_gib = [](const std::string&) { return std::optional<double>(100.0); };
  auto path = agent::fetch_benchmark_input(**offer, options, "Authorization: Bearer " + token_);
  ASSERT_TRUE(path) << path.error();
  std::ifstream in(*path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), c1_);
}

}  // namespace
}  // namespace pf::manager
