// VastMarket against an in-process HTTP server scripted per test: retries, error mapping,
// paging, safe creates, key hygiene. Plus the backoff function and vast_config_from_env.
#include "market/vast_market.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "market/backoff.h"
#include "support/free_port.h"

namespace pf::market {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kKey = "test-key-7f3a9c1e5b42";

// ---- backoff ------------------------------------------------------------------------------

TEST(Backoff, CeilingDoublesUntilTheCap) {
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(0, 1.0, 30.0), 1.0);
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(1, 1.0, 30.0), 2.0);
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(4, 1.0, 30.0), 16.0);
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(5, 1.0, 30.0), 30.0);
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(1000, 1.0, 30.0), 30.0);  // no overflow
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(-3, 1.0, 30.0), 1.0);
  EXPECT_DOUBLE_EQ(backoff_ceiling_s(2, -1.0, 30.0), 0.0);
}

TEST(Backoff, FullJitterStaysUnderTheCeilingAndUsesTheWholeRange) {
  std::mt19937_64 rng(42);
  for (int retry = 0; retry < 8; ++retry) {
    const double ceiling = backoff_ceiling_s(retry, 0.5, 10.0);
    double lowest = ceiling, highest = 0;
    for (int i = 0; i < 2000; ++i) {
      const double d = full_jitter_delay_s(retry, 0.5, 10.0, rng);
      ASSERT_GE(d, 0.0);
      ASSERT_LE(d, ceiling);
      lowest = std::min(lowest, d);
      highest = std::max(highest, d);
    }
    // Full jitter: draws reach near zero and near the ceiling.
    EXPECT_LT(lowest, 0.05 * ceiling) << "retry " << retry;
    EXPECT_GT(highest, 0.95 * ceiling) << "retry " << retry;
  }
}

TEST(Backoff, SameSeedSameDelays) {
  std::mt19937_64 a(7), b(7), c(8);
  std::vector<double> da, db, dc;
  for (int i = 0; i < 6; ++i) {
    da.push_back(full_jitter_delay_s(i, 1.0, 30.0, a));
    db.push_back(full_jitter_delay_s(i, 1.0, 30.0, b));
    dc.push_back(full_jitter_delay_s(i, 1.0, 30.0, c));
  }
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
  std::mt19937_64 d(1);
  EXPECT_EQ(full_jitter_delay_s(3, 0.0, 30.0, d), 0.0);
}

// ---- the scripted server ------------------------------------------------------------------

struct Recorded {
  std::string method;
  std::string path;
  std::string body;
  std::string authorization;
  std::string content_type;
  std::multimap<std::string, std::string> params;
};

json offer(std::int64_t id, const std::string& gpu = "RTX 4090") {
  return {{"id", id},
          {"machine_id", id + 1000},
          {"host_id", 5},
          {"gpu_name", gpu},
          {"num_gpus", 1},
          {"gpu_ram", 24576},
          {"cpu_cores", 32},
          {"cpu_cores_effective", 16},
          {"cpu_ram", 131072},
          {"dph_total", 0.4},
          {"reliability2", 0.99},
          {"verified", true},
          {"inet_down", 1000},
          {"inet_up", 1000},
          {"disk_space", 500}};
}

json instance_record(std::int64_t id, const std::string& label) {
  return {{"id", id},
          {"machine_id", 77},
          {"label", label},
          {"actual_status", nullptr},
          {"intended_status", "running"},
          {"cur_state", "running"},
          {"status_msg", "loading"},
          {"gpu_name", "RTX 4090"},
          {"num_gpus", 2},
          {"dph_total", 0.8},
          {"start_date", 1700000000.5},
          {"extra_env", json::array()}};
}

void reply_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// Sends the headers and a prefix of a longer declared body, then drops the connection.
void reply_truncated(httplib::Response& res, std::string prefix, std::size_t declared) {
  res.status = 200;
  res.set_content_provider(declared, "application/json",
                           [prefix](std::size_t, std::size_t, httplib::DataSink& sink) {
                             if (!prefix.empty()) sink.write(prefix.data(), prefix.size());
                             return false;  // abort: httplib closes the connection
                           });
}

class VastMarketTest : public ::testing::Test {
 protected:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  void TearDown() override {
    if (!thread_.joinable()) return;
    while (!server_.is_running()) std::this_thread::yield();
    server_.stop();
    thread_.join();
  }

  // Registers a handler that records every request it serves before running `handler`.
  void on(const std::string& method, const std::string& pattern, Handler handler) {
    auto recorded = [this, handler](const httplib::Request& req, httplib::Response& res) {
      {
        std::lock_guard lock(mutex_);
        requests_.push_back({req.method,
                             req.path,
                             req.body,
                             req.get_header_value("Authorization"),
                             req.get_header_value("Content-Type"),
                             {req.params.begin(), req.params.end()}});
      }
      handler(req, res);
    };
    if (method == "GET") server_.Get(pattern, recorded);
    if (method == "POST") server_.Post(pattern, recorded);
    if (method == "PUT") server_.Put(pattern, recorded);
    if (method == "DELETE") server_.Delete(pattern, recorded);
  }

  // Handlers must be registered before this: the server reads them from its own threads.
  VastConfig start() {
    if (!thread_.joinable()) {
      port_ = server_.bind_to_any_port("127.0.0.1");
      EXPECT_GT(port_, 0);
      thread_ = std::thread([this] { server_.listen_after_bind(); });
    }
    VastConfig config;
    config.base_url = "http://127.0.0.1:" + std::to_string(port_);
    config.api_key = kKey;
    config.backoff_base_s = 0.001;
    config.backoff_cap_s = 0.004;
    config.jitter_seed = 99;
    config.connect_timeout_s = 5;
    config.request_timeout_s = 10;
    return config;
  }

  std::vector<Recorded> requests() {
    std::lock_guard lock(mutex_);
    return requests_;
  }

  std::size_t count(const std::string& method, const std::string& path_prefix) {
    std::size_t n = 0;
    for (const auto& r : requests()) {
      if (r.method == method && r.path.rfind(path_prefix, 0) == 0) ++n;
    }
    return n;
  }

  CreateRequest create_request(const std::string& label = "pf-test-1") {
    CreateRequest req;
    req.offer_id = 4242;
    req.image = "ghcr.io/example/prover:1";
    req.disk_gb = 120;
    req.label = label;
    req.env = {{"PF_TOKEN", "abc"}, {"-p 8080:8080", "1"}};
    req.onstart = "echo hi";
    return req;
  }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mutex_;
  std::vector<Recorded> requests_;
};

// ---- search -------------------------------------------------------------------------------

TEST_F(VastMarketTest, SearchSendsExplicitFieldsAndSkipsOffersWithoutId) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    json bad = offer(0);
    bad.erase("id");
    reply_json(res, {{"offers", json::array({offer(11), bad, offer(12, "H100 SXM")})}});
  });
  VastMarket market(start());
  SearchRequest req;
  req.query = {{"gpu_name", {{"eq", "RTX 4090"}}}, {"limit", 3}, {"type", "bid"}};
  req.order = {{"dph_total", "asc"}, {"reliability2", "desc"}};
  req.type = "on-demand";
  req.limit = 50;
  req.allocated_storage_gb = 150;

  auto found = market.search_offers(req);
  ASSERT_TRUE(found) << found.error().message;
  ASSERT_EQ(found->offers.size(), 2u);
  EXPECT_EQ(found->offers[0].id, 11);
  EXPECT_EQ(found->offers[1].gpu_name, "H100 SXM");
  EXPECT_DOUBLE_EQ(found->offers[0].gpu_ram_gib, 24);  // through offer_from_vast_json
  // One warning for the skipped offer; the others only note fields the test offers lack.
  std::vector<std::string> skipped;
  for (const auto& w : found->warnings) {
    if (w.find("skipped") != std::string::npos) skipped.push_back(w);
  }
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_THAT(skipped[0], HasSubstr("offer #1 skipped"));
  EXPECT_THAT(skipped[0], HasSubstr("\"id\""));

  auto sent = requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].authorization, std::string("Bearer ") + kKey);
  EXPECT_EQ(sent[0].content_type, "application/json");
  EXPECT_EQ(sent[0].params.count("api_key"), 0u);  // never the query-parameter form
  const json body = json::parse(sent[0].body);
  EXPECT_EQ(body["gpu_name"], json({{"eq", "RTX 4090"}}));
  EXPECT_EQ(body["limit"], 50);  // explicit fields override the query's keys
  EXPECT_EQ(body["type"], "on-demand");
  EXPECT_EQ(body["order"], json::parse(R"([["dph_total","asc"],["reliability2","desc"]])"));
  EXPECT_DOUBLE_EQ(body["allocated_storage"].get<double>(), 150);
}

TEST_F(VastMarketTest, AuthorizationHeaderCarriesTheKey) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != "Bearer k") {
      reply_json(res, {{"error", "auth"}, {"msg", "missing bearer"}}, 401);
      return;
    }
    reply_json(res, {{"offers", json::array()}});
  });
  VastConfig config = start();
  config.api_key = "k";
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(requests().at(0).authorization, "Bearer k");
}

TEST_F(VastMarketTest, SearchWithoutKeySendsNoAuthorization) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"offers", json::array({offer(1)})}});
  });
  VastConfig config = start();
  config.api_key.clear();
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->offers.size(), 1u);
  EXPECT_EQ(requests().at(0).authorization, "");
}

TEST_F(VastMarketTest, SearchReplyWithoutOffersArrayIsBadResponse) {
  std::atomic<int> calls{0};
  on("POST", "/api/v0/bundles/", [&](const httplib::Request&, httplib::Response& res) {
    if (calls++ == 0) {
      reply_json(res, {{"success", true}});
    } else {
      reply_json(res, {{"offers", {{"id", 1}}}});
    }
  });
  VastMarket market(start());
  auto missing = market.search_offers({});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(missing.error().message, HasSubstr("offers"));
  auto not_array = market.search_offers({});
  ASSERT_FALSE(not_array);
  EXPECT_EQ(not_array.error().kind, ErrorKind::BadResponse);
}

TEST_F(VastMarketTest, SearchRejectsANonObjectQueryBeforeSending) {
  VastMarket market(start());
  SearchRequest req;
  req.query = json::array({1, 2});
  auto found = market.search_offers(req);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::InvalidArgument);
  EXPECT_TRUE(requests().empty());
}

// ---- retries and error mapping ------------------------------------------------------------

TEST_F(VastMarketTest, RateLimitStormThenSuccessIsRetried) {
  std::atomic<int> calls{0};
  on("POST", "/api/v0/bundles/", [&](const httplib::Request&, httplib::Response& res) {
    if (++calls <= 3) {
      res.status = 429;
      res.set_content("API requests too frequent endpoint threshold=10", "text/plain");
      return;
    }
    reply_json(res, {{"offers", json::array({offer(5)})}});
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_TRUE(found) << found.error().message;
  EXPECT_EQ(found->offers.size(), 1u);
  EXPECT_EQ(calls.load(), 4);
}

TEST_F(VastMarketTest, Persistent503GivesUpAfterMaxAttempts) {
  std::atomic<int> calls{0};
  on("GET", R"(/api/v0/instances/(\d+)/)", [&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    reply_json(res, {{"success", false}, {"error", "unavailable"}, {"msg", "try later"}}, 503);
  });
  VastConfig config = start();
  config.max_attempts = 4;
  VastMarket market(config);
  auto shown = market.show_instance(12);
  ASSERT_FALSE(shown);
  EXPECT_EQ(shown.error().kind, ErrorKind::Transport);
  EXPECT_EQ(shown.error().http_status, 503);
  EXPECT_THAT(shown.error().message, HasSubstr("HTTP 503"));
  EXPECT_THAT(shown.error().message, HasSubstr("try later"));
  EXPECT_THAT(shown.error().message, HasSubstr("4 attempts"));
  EXPECT_EQ(calls.load(), 4);
}

TEST_F(VastMarketTest, Persistent429IsRateLimited) {
  std::atomic<int> calls{0};
  on("POST", "/api/v0/bundles/", [&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    res.status = 429;
    res.set_content("API requests too frequent", "text/plain");
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::RateLimited);
  EXPECT_EQ(found.error().http_status, 429);
  EXPECT_THAT(found.error().message, HasSubstr("API requests too frequent"));
  EXPECT_EQ(calls.load(), 5);
}

TEST_F(VastMarketTest, OtherClientErrorsAreNotRetried) {
  std::atomic<int> calls{0};
  on("POST", "/api/v0/bundles/", [&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    reply_json(res,
               {{"success", false},
                {"error", "invalid_args"},
                {"msg", "error 400/3467: Invalid args: dph_total is not filterable"}},
               400);
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::InvalidArgument);
  EXPECT_EQ(found.error().code, "invalid_args");
  EXPECT_EQ(found.error().http_status, 400);
  EXPECT_THAT(found.error().message, HasSubstr("dph_total is not filterable"));
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(VastMarketTest, UnauthorizedFromStatusOrInvalidUserKey) {
  std::atomic<int> calls{0};
  on("GET", R"(/api/v0/instances/(\d+)/)", [&](const httplib::Request&, httplib::Response& res) {
    if (calls++ == 0) {
      reply_json(res, {{"detail", "Authentication credentials were not provided."}}, 401);
    } else {
      reply_json(res, {{"success", false}, {"error", "not_found"}, {"msg", "Invalid user key"}},
                 404);
    }
  });
  on("DELETE", R"(/api/v0/instances/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"success", false}, {"error", "not_found"}, {"msg", "Invalid user key"}}, 404);
  });
  VastMarket market(start());
  auto first = market.show_instance(1);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().kind, ErrorKind::Unauthorized);
  EXPECT_THAT(first.error().message, HasSubstr("credentials were not provided"));
  auto second = market.show_instance(1);
  ASSERT_FALSE(second);
  EXPECT_EQ(second.error().kind, ErrorKind::Unauthorized);
  EXPECT_EQ(calls.load(), 2);
  // The same reply to a destroy must not pass for "already gone".
  auto destroyed = market.destroy_instance(1);
  ASSERT_FALSE(destroyed);
  EXPECT_EQ(destroyed.error().kind, ErrorKind::Unauthorized);
}

TEST_F(VastMarketTest, NonJsonBodyIsBadResponseWithASnippet) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("<html><body>Bad gateway\x1b[31m page</body></html>", "text/html");
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(found.error().message, HasSubstr("not JSON"));
  EXPECT_THAT(found.error().message, HasSubstr("<html><body>Bad gateway"));
  EXPECT_THAT(found.error().message, Not(HasSubstr("\x1b")));  // control chars are neutralised
}

TEST_F(VastMarketTest, LongNonJsonBodyIsCutInTheMessage) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(5000, 'x'), "text/plain");
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::BadResponse);
  EXPECT_LT(found.error().message.size(), 400u);
}

TEST_F(VastMarketTest, TruncatedBodyIsBadResponse) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    reply_truncated(res, R"({"offers":[{"id":1,)", 500);
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(found.error().message, HasSubstr("truncated"));
}

TEST_F(VastMarketTest, OversizedBodyWithDeclaredLengthIsBadResponse) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    json offers = json::array();
    for (int i = 1; i <= 200; ++i) offers.push_back(offer(i));
    reply_json(res, {{"offers", offers}});
  });
  VastConfig config = start();
  config.max_body_bytes = 4096;
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(found.error().message, HasSubstr("larger than 4096 bytes"));
}

TEST_F(VastMarketTest, OversizedChunkedBodyIsAbortedInTheWriteCallback) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    res.set_chunked_content_provider(
        "application/json", [](std::size_t offset, httplib::DataSink& sink) {
          // A body without a declared length that only the client's limit ends (the guard
          // stops it should the client never give up).
          if (offset > (64u << 20)) return false;
          const std::string chunk = offset == 0 ? R"({"offers":[)" : std::string(1024, ' ');
          return sink.write(chunk.data(), chunk.size());
        });
  });
  VastConfig config = start();
  config.max_body_bytes = 8192;
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(found.error().message, HasSubstr("larger than 8192 bytes"));
}

TEST_F(VastMarketTest, ConnectionRefusedIsTransportAfterRetries) {
  // A port nobody listens on (nor is handed out by the kernel to anyone meanwhile).
  const int free_port = pf::test::free_port();
  VastConfig config = start();
  config.base_url = "http://127.0.0.1:" + std::to_string(free_port);
  config.max_attempts = 3;
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::Transport);
  EXPECT_EQ(found.error().http_status, 0);
  EXPECT_THAT(found.error().message, HasSubstr("could not connect"));
  EXPECT_THAT(found.error().message, HasSubstr("3 attempts"));
}

TEST_F(VastMarketTest, TimeoutIsRetriedThenTransport) {
  std::atomic<int> calls{0};
  on("POST", "/api/v0/bundles/", [&](const httplib::Request&, httplib::Response& res) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    reply_json(res, {{"offers", json::array()}});
  });
  VastConfig config = start();
  config.request_timeout_s = 0.05;
  config.max_attempts = 2;
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::Transport);
  EXPECT_THAT(found.error().message, HasSubstr("timed out"));
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(VastMarketTest, ConcurrentCallsOnOneMarketAreIndependent) {
  std::atomic<int> calls{0};
  on("POST", "/api/v0/bundles/", [&](const httplib::Request& req, httplib::Response& res) {
    // Every third request is rate limited, so retries (and the shared jitter RNG) interleave.
    if (++calls % 3 == 0) {
      res.status = 429;
      res.set_content("API requests too frequent", "text/plain");
      return;
    }
    const json query = json::parse(req.body);
    reply_json(res, {{"offers", json::array({offer(query["limit"].get<int>())})}});
  });
  VastConfig config = start();
  config.max_attempts = 10;
  VastMarket market(config);
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int t = 1; t <= 4; ++t) {
    threads.emplace_back([&market, &good, t] {
      for (int i = 0; i < 10; ++i) {
        SearchRequest req;
        req.limit = t * 100 + i;  // the reply echoes it as the offer id
        auto found = market.search_offers(req);
        if (found && found->offers.size() == 1 && found->offers[0].id == req.limit) ++good;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(good.load(), 40);
}

// ---- list / show / destroy / label --------------------------------------------------------

TEST_F(VastMarketTest, ListFollowsNextTokenOverThreePages) {
  on("GET", "/api/v1/instances/", [](const httplib::Request& req, httplib::Response& res) {
    const std::string token =
        req.has_param("after_token") ? req.get_param_value("after_token") : "";
    json page = json::array();
    std::string next;
    int first = 0;
    if (token.empty()) {
      first = 1;
      next = "tok-a";
    } else if (token == "tok-a") {
      first = 26;
      next = "tok-b";
    } else if (token == "tok-b") {
      first = 51;
    } else {
      reply_json(res, {{"error", "bad_token"}, {"msg", "unknown token " + token}}, 400);
      return;
    }
    const int n = first == 51 ? 3 : 25;
    for (int i = first; i < first + n; ++i)
      page.push_back(instance_record(i, "l" + std::to_string(i)));
    reply_json(res, {{"success", true},
                     {"instances_found", n},
                     {"instances", page},
                     {"next_token", next.empty() ? json(nullptr) : json(next)}});
  });
  VastMarket market(start());
  auto all = market.list_instances();
  ASSERT_TRUE(all) << all.error().message;
  ASSERT_EQ(all->size(), 53u);
  EXPECT_EQ(all->front().id, 1);
  EXPECT_EQ(all->back().id, 53);
  EXPECT_EQ(all->front().actual_status, "");  // null while provisioning
  EXPECT_EQ(all->front().intended_status, "running");
  EXPECT_EQ(all->front().machine_id, 77);
  EXPECT_EQ(all->front().num_gpus, 2);
  EXPECT_DOUBLE_EQ(all->front().dph_total, 0.8);
  EXPECT_DOUBLE_EQ(all->front().start_date, 1700000000.5);
  EXPECT_EQ(all->front().raw["extra_env"], json::array());

  auto sent = requests();
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].params.count("after_token"), 0u);
  EXPECT_EQ(sent[1].params.find("after_token")->second, "tok-a");
  EXPECT_EQ(sent[2].params.find("after_token")->second, "tok-b");
  for (const auto& r : sent) {
    EXPECT_EQ(r.params.find("limit")->second, "25");
    EXPECT_EQ(json::parse(r.params.find("select_filters")->second), json::object());
    EXPECT_EQ(r.authorization, std::string("Bearer ") + kKey);
  }
}

TEST_F(VastMarketTest, ListByLabelFiltersServerSideAndChecksAgain) {
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    // A server that ignores the filter.
    reply_json(res,
               {{"instances", json::array({instance_record(1, "other"), instance_record(2, "mine"),
                                           instance_record(3, "mine-too")})},
                {"next_token", nullptr}});
  });
  VastMarket market(start());
  auto mine = market.list_instances(std::string("mine"));
  ASSERT_TRUE(mine) << mine.error().message;
  ASSERT_EQ(mine->size(), 1u);
  EXPECT_EQ(mine->front().id, 2);
  const auto sent = requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(json::parse(sent[0].params.find("select_filters")->second),
            json::parse(R"({"label":{"eq":"mine"}})"));
}

TEST_F(VastMarketTest, ListStopsOnARepeatedToken) {
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"instances", json::array()}, {"next_token", "same"}});
  });
  VastMarket market(start());
  auto all = market.list_instances();
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(all.error().message, HasSubstr("repeated a paging token"));
  EXPECT_EQ(requests().size(), 2u);
}

TEST_F(VastMarketTest, ListStopsAfterThePageCap) {
  std::atomic<int> calls{0};
  on("GET", "/api/v1/instances/", [&](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"instances", json::array()}, {"next_token", "t" + std::to_string(++calls)}});
  });
  VastMarket market(start());
  auto all = market.list_instances();
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(all.error().message, HasSubstr("pages"));
  EXPECT_EQ(calls.load(), VastMarket::kMaxListPages);
}

TEST_F(VastMarketTest, ListRecordWithoutIdIsBadResponse) {
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"instances", json::array({{{"label", "x"}}})}, {"next_token", nullptr}});
  });
  VastMarket market(start());
  auto all = market.list_instances();
  ASSERT_FALSE(all);
  EXPECT_EQ(all.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(all.error().message, HasSubstr("id"));
}

TEST_F(VastMarketTest, ShowParsesRecordNullAndMissing) {
  on("GET", R"(/api/v0/instances/(\d+)/)", [](const httplib::Request& req, httplib::Response& res) {
    const std::string id = req.matches[1];
    if (id == "5") {
      reply_json(res, {{"instances", instance_record(5, "five")}});
    } else if (id == "6") {
      reply_json(res, {{"instances", nullptr}});
    } else {
      reply_json(res, {{"success", false}, {"error", "no_such_instance"}, {"msg", "gone"}}, 404);
    }
  });
  VastMarket market(start());
  auto five = market.show_instance(5);
  ASSERT_TRUE(five) << five.error().message;
  ASSERT_TRUE(five->has_value());
  EXPECT_EQ((*five)->label, "five");
  EXPECT_EQ((*five)->status_msg, "loading");
  auto six = market.show_instance(6);
  ASSERT_TRUE(six) << six.error().message;
  EXPECT_FALSE(six->has_value());
  auto seven = market.show_instance(7);
  ASSERT_TRUE(seven) << seven.error().message;
  EXPECT_FALSE(seven->has_value());
}

TEST_F(VastMarketTest, DestroySendsEmptyObjectAndTreatsNoSuchInstanceAsSuccess) {
  std::atomic<int> calls{0};
  on("DELETE", R"(/api/v0/instances/(\d+)/)",
     [&](const httplib::Request& req, httplib::Response& res) {
       ++calls;
       if (req.matches[1] == "1") {
         reply_json(res, {{"success", true}});
       } else if (req.matches[1] == "2") {
         reply_json(res, {{"success", false}, {"error", "no_such_instance"}, {"msg", "gone"}}, 404);
       } else {
         reply_json(res, {{"success", false}, {"error", "no_such_instance"}, {"msg", "gone"}}, 200);
       }
     });
  VastMarket market(start());
  auto one = market.destroy_instance(1);
  EXPECT_TRUE(one) << one.error().message;
  auto two = market.destroy_instance(2);
  EXPECT_TRUE(two) << two.error().message;
  auto three = market.destroy_instance(3);
  EXPECT_TRUE(three) << three.error().message;
  EXPECT_EQ(calls.load(), 3);
  const auto sent = requests();
  EXPECT_EQ(sent[0].method, "DELETE");
  EXPECT_EQ(json::parse(sent[0].body), json::object());
  EXPECT_EQ(sent[0].content_type, "application/json");
}

TEST_F(VastMarketTest, DestroyIsRetriedOnRateLimit) {
  std::atomic<int> calls{0};
  on("DELETE", R"(/api/v0/instances/(\d+)/)", [&](const httplib::Request&, httplib::Response& res) {
    if (++calls < 3) {
      res.status = 429;
      res.set_content("API requests too frequent", "text/plain");
      return;
    }
    reply_json(res, {{"success", true}});
  });
  VastMarket market(start());
  auto done = market.destroy_instance(9);
  EXPECT_TRUE(done) << done.error().message;
  EXPECT_EQ(calls.load(), 3);
}

TEST_F(VastMarketTest, MutationsWithoutKeyFailBeforeSending) {
  VastConfig config = start();
  config.api_key.clear();
  VastMarket market(config);
  auto destroyed = market.destroy_instance(1);
  ASSERT_FALSE(destroyed);
  EXPECT_EQ(destroyed.error().kind, ErrorKind::Unauthorized);
  auto labelled = market.set_label(1, "x");
  ASSERT_FALSE(labelled);
  EXPECT_EQ(labelled.error().kind, ErrorKind::Unauthorized);
  auto bid = market.change_bid(1, 0.2);
  ASSERT_FALSE(bid);
  EXPECT_EQ(bid.error().kind, ErrorKind::Unauthorized);
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::Unauthorized);
  EXPECT_TRUE(requests().empty());
}

TEST_F(VastMarketTest, KeyThatCouldBreakTheHeaderIsRefusedBeforeSending) {
  VastConfig config = start();
  config.api_key = "abc\r\nX-Injected: 1";
  VastMarket market(config);
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::Unauthorized);
  EXPECT_THAT(found.error().message, Not(HasSubstr("X-Injected")));
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::Unauthorized);
  EXPECT_TRUE(requests().empty());
}

TEST_F(VastMarketTest, SetLabelSendsTheLabel) {
  on("PUT", R"(/api/v0/instances/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"success", true}});
  });
  VastMarket market(start());
  auto done = market.set_label(31, "pf-keep");
  ASSERT_TRUE(done) << done.error().message;
  const auto sent = requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].path, "/api/v0/instances/31/");
  EXPECT_EQ(json::parse(sent[0].body), json({{"label", "pf-keep"}}));
}

// ---- create -------------------------------------------------------------------------------

TEST_F(VastMarketTest, CreateSendsTheDocumentedBody) {
  on("PUT", R"(/api/v0/asks/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"success", true}, {"new_contract", 555}, {"instance_api_key", "x"}});
  });
  VastMarket market(start());
  auto created = market.create_instance(create_request());
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->instance_id, 555);
  EXPECT_FALSE(created->reconciled);
  EXPECT_TRUE(created->also_found.empty());
  const auto sent = requests();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].path, "/api/v0/asks/4242/");
  EXPECT_EQ(sent[0].authorization, std::string("Bearer ") + kKey);
  EXPECT_EQ(sent[0].content_type, "application/json");
  const json body = json::parse(sent[0].body);
  EXPECT_EQ(body["client_id"], "me");
  EXPECT_EQ(body["image"], "ghcr.io/example/prover:1");
  EXPECT_DOUBLE_EQ(body["disk"].get<double>(), 120);
  EXPECT_EQ(body["label"], "pf-test-1");
  EXPECT_EQ(body["env"], json({{"PF_TOKEN", "abc"}, {"-p 8080:8080", "1"}}));
  EXPECT_EQ(body["onstart"], "echo hi");
  EXPECT_EQ(body["runtype"], "args");
  // On-demand: no price (its presence alone would make the rental interruptible).
  EXPECT_FALSE(body.contains("price"));
}

// An interruptible rental: the bid goes as `price` (vast-cli `create instance --bid_price`), and
// a bid is changed with PUT /api/v0/instances/bid_price/{id}/ (vast-cli `change bid`).
TEST_F(VastMarketTest, ABidIsSentAsThePriceAndChangedAtTheBidPriceEndpoint) {
  on("PUT", R"(/api/v0/asks/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"success", true}, {"new_contract", 556}});
  });
  on("PUT", R"(/api/v0/instances/bid_price/(\d+)/)",
     [](const httplib::Request&, httplib::Response& res) {
       reply_json(res, {{"success", true}});
     });
  VastMarket market(start());
  auto request = create_request();
  request.bid_price = 0.25;
  auto created = market.create_instance(request);
  ASSERT_TRUE(created) << created.error().message;
  auto changed = market.change_bid(556, 0.31);
  ASSERT_TRUE(changed) << changed.error().message;
  const auto sent = requests();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_DOUBLE_EQ(json::parse(sent[0].body)["price"].get<double>(), 0.25);
  EXPECT_EQ(sent[1].method, "PUT");
  EXPECT_EQ(sent[1].path, "/api/v0/instances/bid_price/556/");
  EXPECT_EQ(json::parse(sent[1].body), json({{"client_id", "me"}, {"price", 0.31}}));
  // Out of vast's range: refused before anything is sent.
  request.bid_price = 0;
  EXPECT_EQ(market.create_instance(request).error().kind, ErrorKind::InvalidArgument);
  EXPECT_EQ(market.change_bid(556, 500).error().kind, ErrorKind::InvalidArgument);
  EXPECT_EQ(requests().size(), 2u);
}

TEST_F(VastMarketTest, CreateNoSuchAskIsOfferGoneAfterOneRequest) {
  on("PUT", R"(/api/v0/asks/(\d+)/)", [](const httplib::Request& req, httplib::Response& res) {
    reply_json(res,
               {{"success", false},
                {"error", "no_such_ask"},
                {"msg", "error 404/3603: no_such_ask Instance type by id " +
                            std::string(req.matches[1]) + " is not available."}},
               req.matches[1] == "4242" ? 404 : 410);
  });
  VastMarket market(start());
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::OfferGone);
  EXPECT_EQ(created.error().code, "no_such_ask");
  EXPECT_EQ(created.error().http_status, 404);
  EXPECT_THAT(created.error().message, HasSubstr("is not available"));
  EXPECT_EQ(requests().size(), 1u);  // no resend, no reconciliation

  auto req = create_request();
  req.offer_id = 9;
  auto gone = market.create_instance(req);
  ASSERT_FALSE(gone);
  EXPECT_EQ(gone.error().kind, ErrorKind::OfferGone);
  EXPECT_EQ(gone.error().http_status, 410);
  EXPECT_EQ(requests().size(), 2u);
}

TEST_F(VastMarketTest, CreateRejectsBadRequestsBeforeSending) {
  VastMarket market(start());
  auto no_label = create_request("");
  auto created = market.create_instance(no_label);
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::InvalidArgument);
  EXPECT_THAT(created.error().message, HasSubstr("label"));
  auto no_offer = create_request();
  no_offer.offer_id = 0;
  EXPECT_EQ(market.create_instance(no_offer).error().kind, ErrorKind::InvalidArgument);
  auto no_image = create_request();
  no_image.image.clear();
  EXPECT_EQ(market.create_instance(no_image).error().kind, ErrorKind::InvalidArgument);
  EXPECT_EQ(market.create_instance(create_request(std::string(300, 'x'))).error().kind,
            ErrorKind::InvalidArgument);
  EXPECT_TRUE(requests().empty());
}

TEST_F(VastMarketTest, CreateClientErrorIsFinalWithoutReconciliation) {
  on("PUT", R"(/api/v0/asks/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"success", false}, {"error", "invalid_args"}, {"msg", "disk must be >= 8"}},
               400);
  });
  VastMarket market(start());
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::InvalidArgument);
  EXPECT_THAT(created.error().message, HasSubstr("disk must be >= 8"));
  EXPECT_EQ(requests().size(), 1u);
}

// Shared by the lost-reply tests: the create is recorded, then its reply is spoiled by `spoil`;
// the list endpoint shows what the server created.
class LostCreateReply : public VastMarketTest {
 protected:
  void serve(std::function<void(httplib::Response&)> spoil) {
    on("PUT", R"(/api/v0/asks/(\d+)/)",
       [this, spoil](const httplib::Request& req, httplib::Response& res) {
         {
           std::lock_guard lock(state_);
           created_labels_.push_back(json::parse(req.body)["label"].get<std::string>());
         }
         spoil(res);
       });
    on("GET", "/api/v1/instances/", [this](const httplib::Request& req, httplib::Response& res) {
      const json filters = json::parse(req.get_param_value("select_filters"));
      json page = json::array();
      std::lock_guard lock(state_);
      for (std::size_t i = 0; i < created_labels_.size(); ++i) {
        if (filters.contains("label") && filters["label"]["eq"] != created_labels_[i]) continue;
        page.push_back(instance_record(900 + static_cast<int>(i), created_labels_[i]));
      }
      reply_json(res, {{"instances", page}, {"next_token", nullptr}});
    });
  }

  std::mutex state_;
  std::vector<std::string> created_labels_;
};

TEST_F(LostCreateReply, ConnectionDroppedAfterCreateIsReconciledByLabel) {
  serve([](httplib::Response& res) { reply_truncated(res, "", 64); });
  VastMarket market(start());
  auto created = market.create_instance(create_request("pf-lost-1"));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_TRUE(created->reconciled);
  EXPECT_EQ(created->instance_id, 900);
  EXPECT_TRUE(created->also_found.empty());
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);  // never re-sent
  EXPECT_GE(count("GET", "/api/v1/instances/"), 1u);
  const auto sent = requests();
  EXPECT_EQ(json::parse(sent.back().params.find("select_filters")->second),
            json::parse(R"({"label":{"eq":"pf-lost-1"}})"));
}

TEST_F(LostCreateReply, ServerErrorAfterCreateIsReconciledByLabel) {
  serve([](httplib::Response& res) {
    reply_json(res, {{"success", false}, {"error", "server_error"}, {"msg", "oops"}}, 500);
  });
  VastMarket market(start());
  auto created = market.create_instance(create_request("pf-lost-2"));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_TRUE(created->reconciled);
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);
}

TEST_F(LostCreateReply, NonJsonSuccessIsReconciledByLabel) {
  serve([](httplib::Response& res) { res.set_content("OK", "text/plain"); });
  VastMarket market(start());
  auto created = market.create_instance(create_request("pf-lost-3"));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_TRUE(created->reconciled);
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);
}

TEST_F(LostCreateReply, TimeoutAfterCreateIsReconciledByLabel) {
  serve([](httplib::Response& res) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    reply_json(res, {{"success", true}, {"new_contract", 900}});
  });
  VastConfig config = start();
  config.request_timeout_s = 0.1;
  VastMarket market(config);
  auto created = market.create_instance(create_request("pf-lost-4"));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_TRUE(created->reconciled);
  EXPECT_EQ(created->instance_id, 900);
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);
}

TEST_F(LostCreateReply, SeveralMatchesReturnTheLowestAndDestroyNone) {
  serve([](httplib::Response& res) { reply_truncated(res, "", 64); });
  {
    std::lock_guard lock(state_);
    created_labels_ = {"pf-dup", "pf-other"};  // ids 900 and 901 exist before the create
  }
  VastMarket market(start());
  auto created = market.create_instance(create_request("pf-dup"));
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_TRUE(created->reconciled);
  EXPECT_EQ(created->instance_id, 900);
  EXPECT_THAT(created->also_found, ElementsAre(902));
  EXPECT_EQ(count("DELETE", "/"), 0u);
}

TEST_F(VastMarketTest, AmbiguousCreateWithNothingFoundIsCreateUnknown) {
  on("PUT", R"(/api/v0/asks/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 502;
    res.set_content("<html>bad gateway</html>", "text/html");
  });
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"instances", json::array()}, {"next_token", nullptr}});
  });
  VastConfig config = start();
  config.create_reconcile_reads = 3;
  VastMarket market(config);
  auto created = market.create_instance(create_request("pf-unknown"));
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::CreateUnknown);
  EXPECT_THAT(created.error().message, HasSubstr("pf-unknown"));
  EXPECT_THAT(created.error().message, HasSubstr("HTTP 502"));
  EXPECT_THAT(created.error().message, HasSubstr("3 reads"));
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);
  EXPECT_EQ(count("GET", "/api/v1/instances/"), 3u);
}

TEST_F(VastMarketTest, AmbiguousCreateWhoseReconciliationFailsIsCreateUnknown) {
  on("PUT", R"(/api/v0/asks/(\d+)/)",
     [](const httplib::Request&, httplib::Response& res) { reply_truncated(res, "", 64); });
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"error", "boom"}, {"msg", "list is down"}}, 400);
  });
  VastConfig config = start();
  config.create_reconcile_reads = 2;
  VastMarket market(config);
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::CreateUnknown);
  EXPECT_THAT(created.error().message, HasSubstr("list is down"));
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);
}

TEST_F(VastMarketTest, RateLimitedCreateIsResentOnceWhenNothingWasCreated) {
  std::atomic<int> puts{0};
  on("PUT", R"(/api/v0/asks/(\d+)/)", [&](const httplib::Request&, httplib::Response& res) {
    if (++puts == 1) {
      res.status = 429;
      res.set_content("API requests too frequent endpoint threshold=4.5", "text/plain");
      return;
    }
    reply_json(res, {{"success", true}, {"new_contract", 321}});
  });
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"instances", json::array()}, {"next_token", nullptr}});
  });
  VastConfig config = start();
  config.create_reconcile_reads = 2;
  VastMarket market(config);
  auto created = market.create_instance(create_request());
  ASSERT_TRUE(created) << created.error().message;
  EXPECT_EQ(created->instance_id, 321);
  EXPECT_FALSE(created->reconciled);
  EXPECT_EQ(puts.load(), 2);
  EXPECT_EQ(count("GET", "/api/v1/instances/"), 2u);
}

TEST_F(VastMarketTest, RateLimitedCreateIsResentAtMostOnce) {
  std::atomic<int> puts{0};
  on("PUT", R"(/api/v0/asks/(\d+)/)", [&](const httplib::Request&, httplib::Response& res) {
    ++puts;
    res.status = 429;
    res.set_content("API requests too frequent", "text/plain");
  });
  on("GET", "/api/v1/instances/", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"instances", json::array()}, {"next_token", nullptr}});
  });
  VastConfig config = start();
  config.create_reconcile_reads = 1;
  VastMarket market(config);
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::RateLimited);
  EXPECT_THAT(created.error().message, HasSubstr("no instance was created"));
  EXPECT_EQ(puts.load(), 2);
}

TEST_F(VastMarketTest, FailedCreateThatStillMadeAnInstanceDestroysIt) {
  on("PUT", R"(/api/v0/asks/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res,
               {{"success", false},
                {"error", "invalid_price"},
                {"msg", "bid below minimum; instance created stopped"},
                {"new_contract", 777}},
               400);
  });
  on("DELETE", R"(/api/v0/instances/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    reply_json(res, {{"success", true}});
  });
  VastMarket market(start());
  auto created = market.create_instance(create_request());
  ASSERT_FALSE(created);
  EXPECT_EQ(created.error().kind, ErrorKind::MarketError);
  EXPECT_THAT(created.error().message, HasSubstr("bid below minimum"));
  EXPECT_THAT(created.error().message, HasSubstr("777"));
  EXPECT_THAT(created.error().message, HasSubstr("destroyed"));
  EXPECT_EQ(count("DELETE", "/api/v0/instances/777/"), 1u);
  EXPECT_EQ(count("PUT", "/api/v0/asks/"), 1u);
}

// ---- key hygiene --------------------------------------------------------------------------

TEST_F(VastMarketTest, KeyNeverAppearsInErrorMessages) {
  // A hostile server echoes the Authorization header into every error body.
  auto echo = [](const httplib::Request& req, httplib::Response& res) {
    res.status = 500;
    res.set_content("failed for " + req.get_header_value("Authorization"), "text/plain");
  };
  on("POST", "/api/v0/bundles/", echo);
  on("GET", "/api/v1/instances/", [](const httplib::Request& req, httplib::Response& res) {
    reply_json(res,
               {{"error", req.get_header_value("Authorization")},
                {"msg", "Invalid user key " + req.get_header_value("Authorization")}},
               403);
  });
  on("GET", R"(/api/v0/instances/(\d+)/)", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("not json", "text/plain");
  });
  on("DELETE", R"(/api/v0/instances/(\d+)/)", echo);
  on("PUT", R"(/api/v0/instances/(\d+)/)",
     [](const httplib::Request&, httplib::Response& res) { reply_truncated(res, "{", 10); });
  on("PUT", R"(/api/v0/asks/(\d+)/)", echo);
  VastConfig config = start();
  config.max_attempts = 2;
  config.create_reconcile_reads = 1;
  VastMarket market(config);

  std::vector<MarketError> errors;
  auto collect = [&](const auto& result) {
    ASSERT_FALSE(result);
    errors.push_back(result.error());
  };
  collect(market.search_offers({}));
  collect(market.list_instances());
  collect(market.show_instance(1));
  collect(market.destroy_instance(1));
  collect(market.set_label(1, "x"));
  collect(market.create_instance(create_request()));
  VastConfig unreachable = config;
  unreachable.base_url = "http://127.0.0.1:1";  // privileged port: nothing listens
  unreachable.connect_timeout_s = 2;
  VastMarket nowhere(unreachable);
  collect(nowhere.search_offers({}));

  ASSERT_EQ(errors.size(), 7u);
  for (const auto& e : errors) {
    EXPECT_THAT(e.message, Not(HasSubstr(kKey))) << to_string(e.kind);
    EXPECT_THAT(e.code, Not(HasSubstr(kKey)));
    EXPECT_FALSE(e.message.empty());
  }
  EXPECT_EQ(errors[1].kind, ErrorKind::Unauthorized);
  EXPECT_EQ(errors[5].kind, ErrorKind::CreateUnknown);
}

// ---- configuration ------------------------------------------------------------------------

// Sets or clears environment variables for one test and restores them afterwards.
class EnvGuard {
 public:
  void set(const char* name, const std::optional<std::string>& value) {
    if (!saved_.count(name)) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
    }
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~EnvGuard() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

class VastConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    home_ = std::filesystem::temp_directory_path() /
            ("pf-vast-config-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(home_);
    std::filesystem::create_directories(home_);
    env_.set("HOME", home_.string());
    env_.set("VAST_API_KEY", std::nullopt);
    env_.set("PROVERFLEET_VAST_URL", std::nullopt);
  }
  void TearDown() override { std::filesystem::remove_all(home_); }

  std::string write(const std::string& relative, const std::string& content) {
    const auto path = home_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << content;
    return path.string();
  }

  std::filesystem::path home_;
  EnvGuard env_;
};

TEST_F(VastConfigTest, DefaultsWithNothingConfigured) {
  auto config = vast_config_from_env(std::nullopt, std::nullopt);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->base_url, "https://console.vast.ai");
  EXPECT_EQ(config->api_key, "");
}

TEST_F(VastConfigTest, UrlFromFlagThenEnvAndTrailingSlashDropped) {
  env_.set("PROVERFLEET_VAST_URL", "http://127.0.0.1:8080/");
  auto from_env = vast_config_from_env(std::nullopt, std::nullopt);
  ASSERT_TRUE(from_env) << from_env.error();
  EXPECT_EQ(from_env->base_url, "http://127.0.0.1:8080");
  auto from_flag = vast_config_from_env(std::string("https://example.test/prefix//"), std::nullopt);
  ASSERT_TRUE(from_flag) << from_flag.error();
  EXPECT_EQ(from_flag->base_url, "https://example.test/prefix");
}

TEST_F(VastConfigTest, MalformedUrlsAreNamed) {
  const std::vector<std::string> malformed = {"ftp://example.test",
                                              "not a url",
                                              "http://",
                                              "example.test:80",
                                              "http://user:pw@example.test",
                                              "http://h.test/?api_key=s3cr3t",
                                              ""};
  for (const auto& bad : malformed) {
    auto config = vast_config_from_env(bad, std::nullopt);
    ASSERT_FALSE(config) << bad;
    EXPECT_THAT(config.error(), HasSubstr("URL")) << bad;
    EXPECT_THAT(config.error(), Not(HasSubstr("s3cr3t")));
    EXPECT_THAT(config.error(), Not(HasSubstr(":pw")));
  }
}

TEST_F(VastConfigTest, KeyFromEnvIsTrimmedAndBeatsTheKeyFile) {
  const std::string file = write("flag-key", "from-file-key\n");
  env_.set("VAST_API_KEY", "  from-env-key \n");
  auto config = vast_config_from_env(std::nullopt, file);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->api_key, "from-env-key");
}

TEST_F(VastConfigTest, KeyFileFlagIsReadAndTrimmed) {
  write(".vast_api_key", "home-key");
  const std::string file = write("flag-key", "\n  flag-key-value\r\n");
  auto config = vast_config_from_env(std::nullopt, file);
  ASSERT_TRUE(config) << config.error();
  EXPECT_EQ(config->api_key, "flag-key-value");
}

TEST_F(VastConfigTest, KeyFileProblemsAreNamedWithoutTheKey) {
  const std::string missing = (home_ / "no-such-file").string();
  auto absent = vast_config_from_env(std::nullopt, missing);
  ASSERT_FALSE(absent);
  EXPECT_THAT(absent.error(), HasSubstr(missing));
  EXPECT_THAT(absent.error(), HasSubstr("cannot read"));

  auto empty = vast_config_from_env(std::nullopt, write("empty-key", " \n"));
  ASSERT_FALSE(empty);
  EXPECT_THAT(empty.error(), HasSubstr("empty"));

  auto directory = vast_config_from_env(std::nullopt, home_.string());
  ASSERT_FALSE(directory);
  EXPECT_THAT(directory.error(), HasSubstr("directory"));

  auto two_tokens = vast_config_from_env(std::nullopt, write("two", "secret-part-one second\n"));
  ASSERT_FALSE(two_tokens);
  EXPECT_THAT(two_tokens.error(), HasSubstr("whitespace"));
  EXPECT_THAT(two_tokens.error(), Not(HasSubstr("secret-part-one")));

  if (::geteuid() != 0) {  // root reads any file
    const std::string locked = write("locked", "locked-key");
    ::chmod(locked.c_str(), 0);
    auto unreadable = vast_config_from_env(std::nullopt, locked);
    ASSERT_FALSE(unreadable);
    EXPECT_THAT(unreadable.error(), HasSubstr(locked));
    EXPECT_THAT(unreadable.error(), Not(HasSubstr("locked-key")));
  }
}

TEST_F(VastConfigTest, VastCliKeyPlacesInOrder) {
  write(".vast_api_key", "legacy-key");
  auto legacy = vast_config_from_env(std::nullopt, std::nullopt);
  ASSERT_TRUE(legacy) << legacy.error();
  EXPECT_EQ(legacy->api_key, "legacy-key");

  write(".config/vastai/vast_api_key", "xdg-key\n");
  auto xdg = vast_config_from_env(std::nullopt, std::nullopt);
  ASSERT_TRUE(xdg) << xdg.error();
  EXPECT_EQ(xdg->api_key, "xdg-key");
}

// Issue 10: a reply nested past the limit, or with a number that overflows, is a bad response,
// not a crash or an infinity; a filter that is not finite is never sent (JSON would say null).
TEST(VastReply, DeepAndOverflowingRepliesAreRefused) {
  auto deep = parse_vast_reply(std::string(100'000, '[') + std::string(100'000, ']'));
  ASSERT_FALSE(deep);
  EXPECT_EQ(deep.error(), "nesting deeper than 32 at byte 33");
  auto overflow = parse_vast_reply(R"({"offers": [{"id": 1, "dph_total": 1e400}]})");
  ASSERT_FALSE(overflow);
  EXPECT_THAT(overflow.error(), HasSubstr("number out of range"));
  EXPECT_TRUE(parse_vast_reply(R"({"offers": []})"));
}

TEST_F(VastMarketTest, DeeplyNestedReplyIsBadResponse) {
  on("POST", "/api/v0/bundles/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"offers\": " + std::string(100'000, '[') + std::string(100'000, ']') + "}",
                    "application/json");
  });
  VastMarket market(start());
  auto found = market.search_offers({});
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::BadResponse);
  EXPECT_THAT(found.error().message, HasSubstr("nesting deeper than 32"));
}

TEST_F(VastMarketTest, NonFiniteFilterIsRefusedBeforeSending) {
  VastMarket market(start());
  SearchRequest request;
  request.query = {{"cpu_ram", {{"gte", std::numeric_limits<double>::infinity()}}}};
  auto found = market.search_offers(request);
  ASSERT_FALSE(found);
  EXPECT_EQ(found.error().kind, ErrorKind::InvalidArgument);
  EXPECT_THAT(found.error().message, HasSubstr("not finite"));
}

}  // namespace
}  // namespace pf::market
