// The dashboard over loopback: the embedded web files behind GET / and /assets/<file>, and the
// server-sent event stream GET /api/v1/stream — through HttpApi (as `proverfleet serve` mounts
// it) and on its own with small timings. Streams are read with a raw socket so a test decides
// exactly when a client goes away.
#include "manager/dashboard.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "manager/http_api.h"
#include "manager/views.h"
#include "support/fake_market.h"
#include "support/front_serving.h"
#include "support/manager_fixture.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Deadline = std::chrono::steady_clock::time_point;

constexpr const char* kOperatorToken = "operator-token-dashboard-5e1d";

Deadline in_seconds(int seconds) {
  return std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
}

struct SseEvent {
  std::string name;
  std::string data;
};

// A client of one event stream over a raw socket: sends the request, decodes the chunked body,
// splits it into events. Every read has a deadline, so a missing event fails the test instead
// of hanging it.
class SseConnection {
 public:
  SseConnection(int port, const std::string& authorization) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      close();
      return;
    }
    std::string request =
        "GET /api/v1/stream HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n";
    if (!authorization.empty()) request += "Authorization: " + authorization + "\r\n";
    request += "\r\n";
    if (::send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      close();
    }
  }
  ~SseConnection() { close(); }
  SseConnection(const SseConnection&) = delete;
  SseConnection& operator=(const SseConnection&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // The status code of the reply (0 when none came), reading the head once.
  int status(Deadline deadline = in_seconds(20)) {
    while (head_.empty()) {
      const auto end = raw_.find("\r\n\r\n");
      if (end != std::string::npos) {
        head_ = raw_.substr(0, end + 2);
        raw_.erase(0, end + 4);
        break;
      }
      if (!read_more(deadline)) return 0;
    }
    std::smatch m;
    if (!std::regex_search(head_, m, std::regex(R"(^HTTP/1\.1 (\d{3}))"))) return 0;
    return std::stoi(m[1].str());
  }

  // The value of a header of the reply ("" when absent); status() first.
  std::string header(const std::string& name) const {
    std::istringstream lines(head_);
    std::string line;
    while (std::getline(lines, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      const auto colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string key = line.substr(0, colon);
      for (auto& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string wanted = name;
      for (auto& c : wanted) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (key == wanted) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
    return "";
  }

  // The body of a non-streaming reply (Content-Length), e.g. a 401's JSON.
  std::string body(Deadline deadline = in_seconds(20)) {
    const std::string length = header("Content-Length");
    const std::size_t want = length.empty() ? 0 : std::stoul(length);
    while (raw_.size() < want && read_more(deadline)) {
    }
    return raw_.substr(0, want);
  }

  // The next event (comments are counted, not returned); nullopt at the deadline or when the
  // server closed the stream.
  std::optional<SseEvent> next_event(Deadline deadline = in_seconds(20)) {
    if (status(deadline) == 0) return std::nullopt;
    while (true) {
      decode_chunks();
      std::size_t end;
      while ((end = text_.find("\n\n")) != std::string::npos) {
        const std::string block = text_.substr(0, end);
        text_.erase(0, end + 2);
        SseEvent event;
        bool comment_only = true;
        std::istringstream lines(block);
        std::string line;
        while (std::getline(lines, line)) {
          if (line.rfind(':', 0) == 0) {
            comments_.push_back(line);
          } else if (line.rfind("event: ", 0) == 0) {
            event.name = line.substr(7);
            comment_only = false;
          } else if (line.rfind("data: ", 0) == 0) {
            event.data += line.substr(6);
            comment_only = false;
          }
        }
        if (!comment_only) return event;
      }
      if (!read_more(deadline)) return std::nullopt;
    }
  }

  // The next `fleet` event's JSON (discarded JSON when none came).
  json next_fleet(Deadline deadline = in_seconds(20)) {
    while (auto event = next_event(deadline)) {
      if (event->name == "fleet") return json::parse(event->data, nullptr, false);
    }
    return json(json::value_t::discarded);
  }

  // Reads until a comment line arrives; true when one did.
  bool wait_for_comment(const std::string& prefix, Deadline deadline = in_seconds(20)) {
    while (true) {
      for (const auto& c : comments_) {
        if (c.rfind(prefix, 0) == 0) return true;
      }
      if (status(deadline) == 0) return false;
      decode_chunks();
      std::size_t end;
      while ((end = text_.find("\n\n")) != std::string::npos) {
        std::istringstream lines(text_.substr(0, end));
        text_.erase(0, end + 2);
        std::string line;
        while (std::getline(lines, line)) {
          if (line.rfind(':', 0) == 0) comments_.push_back(line);
        }
      }
      for (const auto& c : comments_) {
        if (c.rfind(prefix, 0) == 0) return true;
      }
      if (!read_more(deadline)) return false;
    }
  }

 private:
  bool read_more(Deadline deadline) {
    if (fd_ < 0) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buffer[8192];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n <= 0) return false;
    raw_.append(buffer, static_cast<std::size_t>(n));
    return true;
  }

  // Moves complete chunks of the chunked body from raw_ to text_.
  void decode_chunks() {
    while (true) {
      const auto line_end = raw_.find("\r\n");
      if (line_end == std::string::npos) return;
      const std::size_t size = std::stoul(raw_.substr(0, line_end), nullptr, 16);
      if (raw_.size() < line_end + 2 + size + 2) return;
      text_ += raw_.substr(line_end + 2, size);
      raw_.erase(0, line_end + 2 + size + 2);
    }
  }

  int fd_ = -1;
  std::string raw_;
  std::string head_;
  std::string text_;
  std::vector<std::string> comments_;
};

std::string read_source_file(const std::string& relative) {
  std::ifstream file(std::string(PF_SOURCE_DIR) + "/" + relative, std::ios::binary);
  std::ostringstream out;
  out << file.rdbuf();
  return out.str();
}

using pf::test::ManagerFixture;

// ---- through HttpApi, as `proverfleet serve` serves it ------------------------------------

class DashboardApiTest : public ManagerFixture {
 protected:
  void SetUp() override {
    ManagerFixture::SetUp();
    ApiOptions options;
    options.operator_token_hash = hash_token(kOperatorToken);
    options.clock = [this] { return now_.load(); };
    api_ = std::make_unique<HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    port_ = serving_->port();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
  }

  void TearDown() override {
    // Open streams must not keep the server from stopping.
    serving_.reset();
  }

  static std::string op() { return std::string("Bearer ") + kOperatorToken; }
  // GET /api/v1/fleet without "autopilot": what a stream's "summary" carries.
  json fleet_summary() {
    auto r = client_->Get("/api/v1/fleet", {{"Authorization", op()}});
    EXPECT_TRUE(r && r->status == 200);
    if (!r) return nullptr;
    json fleet = json::parse(r->body, nullptr, false);
    // The stream carries these two beside the summary, not in it.
    fleet.erase("autopilot");
    fleet.erase("alerts");
    return fleet;
  }

  std::unique_ptr<HttpApi> api_;
  net::HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(DashboardApiTest, RootServesTheAppWithoutAToken) {
  auto r = client_->Get("/");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_THAT(r->body, StartsWith("<!doctype html>"));
  EXPECT_THAT(r->body, HasSubstr(R"(<script type="module" src="/assets/app.js">)"));
  EXPECT_THAT(r->body, HasSubstr(R"(data-testid="sign-in-form")"));
  EXPECT_THAT(r->body, HasSubstr(R"(data-testid="token-input")"));
  EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("script-src 'self'"));
  EXPECT_THAT(r->get_header_value("Content-Security-Policy"), HasSubstr("connect-src 'self'"));
}

TEST_F(DashboardApiTest, EveryEmbeddedFileIsServedWithItsTypeAndExactBytes) {
  ASSERT_GE(web_assets().size(), 5u);
  for (const auto& asset : web_assets()) {
    SCOPED_TRACE(std::string(asset.name));
    auto r = client_->Get(("/assets/" + std::string(asset.name)).c_str());
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->get_header_value("Content-Type"), web_content_type(asset.name));
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(r->get_header_value("Cache-Control"), "no-cache");
    EXPECT_FALSE(r->get_header_value("ETag").empty());
    EXPECT_EQ(r->body, asset.bytes);
    // Built from the files in the tree (a stale embed would show here).
    EXPECT_EQ(r->body, read_source_file("web/" + std::string(asset.name)));
  }
  EXPECT_EQ(web_content_type("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(web_content_type("style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(web_content_type("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(web_content_type("blob.bin"), "application/octet-stream");
}

TEST_F(DashboardApiTest, UnchangedAssetRevalidatesWith304) {
  auto first = client_->Get("/assets/app.js");
  ASSERT_TRUE(first);
  const std::string etag = first->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());
  auto again = client_->Get("/assets/app.js", {{"If-None-Match", etag}});
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 304);
  EXPECT_TRUE(again->body.empty());
  auto other = client_->Get("/assets/app.js", {{"If-None-Match", "\"0000\""}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 200);
  EXPECT_EQ(other->body, first->body);
}

TEST_F(DashboardApiTest, UnknownAssetIs404WithAJsonError) {
  for (const char* path : {"/assets/nope.js", "/assets/index.htm", "/assets/", "/assets/web/app.js",
                           "/assets/..%2Fembed.cmake", "/assets/embed.cmake"}) {
    SCOPED_TRACE(path);
    auto r = client_->Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    json body = json::parse(r->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << r->body;
    EXPECT_TRUE(body.contains("error")) << r->body;
  }
  auto r = client_->Get("/assets/nope.js");
  ASSERT_TRUE(r);
  EXPECT_THAT(r->body, HasSubstr("nope.js"));
}

// Everything the page loads comes from the binary: every /assets/ reference in the HTML and
// every relative module import resolves to an embedded file.
TEST_F(DashboardApiTest, EveryReferencedFileIsEmbedded) {
  std::set<std::string> names;
  for (const auto& asset : web_assets()) names.insert(std::string(asset.name));
  const WebAsset* index = find_web_asset("index.html");
  ASSERT_NE(index, nullptr);
  const std::string html(index->bytes);
  const std::regex asset_ref(R"(/assets/([A-Za-z0-9._-]+))");
  int refs = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), asset_ref);
       it != std::sregex_iterator(); ++it, ++refs) {
    EXPECT_TRUE(names.count((*it)[1].str())) << "index.html refers to " << (*it)[0].str();
  }
  EXPECT_GE(refs, 2);
  const std::regex import_ref(R"(from\s+['"]\./([A-Za-z0-9._-]+)['"])");
  for (const auto& asset : web_assets()) {
    if (web_content_type(asset.name).find("javascript") == std::string_view::npos) continue;
    const std::string code(asset.bytes);
    for (auto it = std::sregex_iterator(code.begin(), code.end(), import_ref);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(names.count((*it)[1].str())) << asset.name << " imports " << (*it)[1].str();
    }
  }
  // No file is fetched from anywhere else.
  for (const auto& asset : web_assets()) {
    EXPECT_THAT(std::string(asset.bytes), ::testing::Not(HasSubstr("https://"))) << asset.name;
    EXPECT_THAT(std::string(asset.bytes), ::testing::Not(HasSubstr("http://"))) << asset.name;
  }
}

TEST_F(DashboardApiTest, AddressableElementsForTheBrowserTestExist) {
  std::string all;
  for (const auto& asset : web_assets()) all += std::string(asset.bytes);
  for (const char* id :
       {"sign-in-form", "token-input", "instance-row", "destroy-button", "deploy-button",
        "instance-link", "confirm-ok", "confirm-cancel", "sign-out", "autopilot-toggle"}) {
    EXPECT_THAT(all, HasSubstr(std::string("data-testid=\"") + id + "\"")) << id;
  }
  EXPECT_THAT(all, HasSubstr("data-state=\""));
}

TEST_F(DashboardApiTest, StreamRequiresTheOperatorToken) {
  for (const std::string& auth :
       {std::string(), std::string("Bearer wrong-token"), std::string("Basic ") + kOperatorToken}) {
    SCOPED_TRACE(auth);
    SseConnection stream(port_, auth);
    ASSERT_EQ(stream.status(), 401);
    EXPECT_EQ(stream.header("WWW-Authenticate"), "Bearer");
    EXPECT_THAT(stream.header("Content-Type"), HasSubstr("application/json"));
    json body = json::parse(stream.body(), nullptr, false);
    ASSERT_TRUE(body.is_object());
    EXPECT_THAT(body.value("error", ""),
                HasSubstr(auth.empty() ? "missing bearer token" : "operator token"));
  }
}

TEST_F(DashboardApiTest, StreamSendsTheFleetSnapshotFirst) {
  SseConnection stream(port_, op());
  ASSERT_EQ(stream.status(), 200);
  EXPECT_THAT(stream.header("Content-Type"), StartsWith("text/event-stream"));
  EXPECT_EQ(stream.header("Cache-Control"), "no-store");
  auto event = stream.next_event();
  ASSERT_TRUE(event);
  EXPECT_EQ(event->name, "fleet");
  json snapshot = json::parse(event->data, nullptr, false);
  ASSERT_TRUE(snapshot.is_object()) << event->data;
  EXPECT_EQ(snapshot["summary"], fleet_summary());
  EXPECT_EQ(snapshot["summary"]["by_state"]["proving"], 0);
  EXPECT_EQ(snapshot["instances"], json::array());
  EXPECT_DOUBLE_EQ(snapshot["at"].get<double>(), now_.load());
  // Without an autopilot the API reports it disabled rather than leaving it out.
  ASSERT_TRUE(snapshot["autopilot"].is_object()) << snapshot.dump();
  EXPECT_EQ(snapshot["autopilot"]["enabled"], false);
  // The fleet watch's alerts, as GET /api/v1/alerts has them (none looked for yet).
  ASSERT_TRUE(snapshot["alerts"].is_object()) << snapshot.dump();
  EXPECT_EQ(snapshot["alerts"]["instances"], json::array());
  EXPECT_EQ(snapshot["alerts"]["checked_at"], 0.0);
}

TEST_F(DashboardApiTest, ADeployProducesANewEvent) {
  SseConnection stream(port_, op());
  json first = stream.next_fleet();
  ASSERT_TRUE(first.is_object());
  ASSERT_TRUE(first["instances"].empty());

  auto deployed = client_->Post("/api/v1/instances", {{"Authorization", op()}},
                                json{{"offer_id", 101}}.dump(), "application/json");
  ASSERT_TRUE(deployed);
  ASSERT_EQ(deployed->status, 201) << deployed->body;
  const std::int64_t id = json::parse(deployed->body)["id"];

  json next = stream.next_fleet();
  ASSERT_TRUE(next.is_object()) << "no event after the deploy";
  ASSERT_EQ(next["instances"].size(), 1u) << next.dump();
  const json& row = next["instances"][0];
  EXPECT_EQ(row["id"], id);
  EXPECT_EQ(row["offer"]["id"], 101);
  EXPECT_EQ(row["offer"]["machine_id"], 11);
  EXPECT_EQ(row["offer"]["dph_total"], 0.40);
  EXPECT_FALSE(row.contains("plan"));
  EXPECT_FALSE(row.contains("secret_hash"));
  EXPECT_FALSE(row.contains("token_hash"));
  EXPECT_EQ(next["summary"], fleet_summary());
}

TEST_F(DashboardApiTest, StreamsAreCappedWith503) {
  const std::size_t cap = default_max_streams();
  ASSERT_GE(cap, 1u);
  ASSERT_LE(cap, 8u);
  std::vector<std::unique_ptr<SseConnection>> open;
  for (std::size_t i = 0; i < cap; ++i) {
    open.push_back(std::make_unique<SseConnection>(port_, op()));
    ASSERT_TRUE(open.back()->next_fleet().is_object()) << "stream " << i;
  }
  SseConnection refused(port_, op());
  ASSERT_EQ(refused.status(), 503);
  EXPECT_EQ(refused.header("Retry-After"), "5");
  json body = json::parse(refused.body(), nullptr, false);
  ASSERT_TRUE(body.is_object());
  EXPECT_THAT(body.value("error", ""), HasSubstr("too many dashboard streams"));
  // The agent API keeps answering while every stream slot is taken.
  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(DashboardApiTest, DashboardRoutesHaveTheirOwnRequestLabels) {
  EXPECT_EQ(api_->route_of("GET", "/"), "/");
  EXPECT_EQ(api_->route_of("GET", "/assets/app.js"), "/assets/{file}");
  EXPECT_EQ(api_->route_of("GET", "/api/v1/stream"), "/api/v1/stream");
  EXPECT_EQ(api_->route_of("POST", "/"), "unmatched");
  EXPECT_EQ(api_->route_of("GET", "/assets/a/b.js"), "unmatched");
  EXPECT_EQ(api_->route_of("GET", "/api/v1/fleet"), "/api/v1/fleet");
}

// ---- on its own, with small timings ---------------------------------------------------------

class DashboardStreamTest : public ManagerFixture {
 protected:
  void start(DashboardOptions options) {
    options.clock = [this] { return now_.load(); };
    dashboard_ = std::make_unique<Dashboard>(*manager_, options);
    dashboard_->mount(server_, [](const net::HttpRequest& req) -> std::optional<std::string> {
      if (req.get_header_value("Authorization") == std::string("Bearer ") + kOperatorToken) {
        return std::nullopt;
      }
      return "invalid operator token";
    });
    serve();
  }

  void serve() {
    serving_.emplace(server_);
    port_ = serving_->port();
  }

  void TearDown() override { serving_.reset(); }

  std::unique_ptr<Dashboard> dashboard_;
  net::HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;
  int port_ = 0;
};

TEST_F(DashboardStreamTest, IdleStreamSendsKeepAliveComments) {
  DashboardOptions options;
  options.keep_alive_interval = std::chrono::milliseconds(50);
  options.wake_interval = std::chrono::milliseconds(20);
  start(options);
  SseConnection stream(port_, std::string("Bearer ") + kOperatorToken);
  ASSERT_TRUE(stream.next_fleet().is_object());
  EXPECT_TRUE(stream.wait_for_comment(": keep-alive"));
}

TEST_F(DashboardStreamTest, ASlotFreedByAClientThatLeftIsReused) {
  DashboardOptions options;
  options.max_streams = 1;
  options.keep_alive_interval = std::chrono::hours(1);  // only the cap's probe can find it
  start(options);
  const std::string auth = std::string("Bearer ") + kOperatorToken;
  {
    SseConnection first(port_, auth);
    ASSERT_TRUE(first.next_fleet().is_object());
    SseConnection second(port_, auth);
    EXPECT_EQ(second.status(), 503);
    EXPECT_EQ(dashboard_->open_streams(), 1u);
  }  // the first client goes away without a word
  SseConnection third(port_, auth);
  ASSERT_EQ(third.status(), 200);
  EXPECT_TRUE(third.next_fleet().is_object());
}

TEST_F(DashboardStreamTest, UnchangedFleetSendsNoNewEvent) {
  DashboardOptions options;
  options.poll_interval = std::chrono::milliseconds(10);
  options.wake_interval = std::chrono::milliseconds(10);
  options.keep_alive_interval = std::chrono::milliseconds(200);
  start(options);
  SseConnection stream(port_, std::string("Bearer ") + kOperatorToken);
  json first = stream.next_fleet();
  ASSERT_TRUE(first.is_object());
  now_ = now_ + 30;  // only the clock moves: "at" is not a change
  // Many polls and at least one keep-alive later, still no second event.
  ASSERT_TRUE(stream.wait_for_comment(": keep-alive"));
  json none = stream.next_fleet(std::chrono::steady_clock::now() + std::chrono::milliseconds(300));
  EXPECT_TRUE(none.is_discarded()) << none.dump();
  // A change does come through. Another part of the snapshot may change first (the summary's
  // hearing, e.g. when a self-check of the manager's own front is slow on a loaded machine:
  // seen once in a full ctest run), so events are read until the deployed instance is in one.
  ASSERT_EQ(manager_->deploy(102, "deploy").has_value(), true);
  json changed = stream.next_fleet();
  while (changed.is_object() && changed["instances"].empty()) changed = stream.next_fleet();
  ASSERT_TRUE(changed.is_object());
  EXPECT_EQ(changed["instances"].size(), 1u);
  EXPECT_DOUBLE_EQ(changed["at"].get<double>(), now_.load());
}

TEST_F(DashboardStreamTest, SnapshotKeepsDestroyedInstancesForAnHour) {
  start(DashboardOptions{});
  auto live = manager_->deploy(101, "deploy");
  ASSERT_TRUE(live);
  auto old = manager_->deploy(102, "deploy");
  ASSERT_TRUE(old);
  core::InstanceRecord gone = *store_->instance(old->id);
  gone.state = core::InstanceState::Destroyed;
  gone.destroyed_at = now_ - 2 * 3600;
  store_->update_instance(gone);

  json snapshot = dashboard_->snapshot();
  ASSERT_EQ(snapshot["instances"].size(), 1u) << snapshot.dump();
  EXPECT_EQ(snapshot["instances"][0]["id"], live->id);

  gone.destroyed_at = now_ - 600;
  store_->update_instance(gone);
  snapshot = dashboard_->snapshot();
  ASSERT_EQ(snapshot["instances"].size(), 2u);
  EXPECT_EQ(snapshot["instances"][1]["state"], "destroyed");
  EXPECT_TRUE(snapshot["autopilot"].is_null());
}

TEST_F(DashboardStreamTest, StreamWithoutOperatorCheckIsRefused) {
  dashboard_ = std::make_unique<Dashboard>(*manager_, DashboardOptions{});
  dashboard_->mount(server_, nullptr);
  serve();
  SseConnection stream(port_, std::string("Bearer ") + kOperatorToken);
  EXPECT_EQ(stream.status(), 401);
}

TEST(DashboardRoutes, LabelsOnlyTheDashboardsOwnPaths) {
  EXPECT_EQ(Dashboard::route_of("GET", "/"), "/");
  EXPECT_EQ(Dashboard::route_of("GET", "/assets/style.css"), "/assets/{file}");
  EXPECT_EQ(Dashboard::route_of("GET", "/api/v1/stream"), "/api/v1/stream");
  EXPECT_EQ(Dashboard::route_of("GET", "/assets/"), std::nullopt);
  EXPECT_EQ(Dashboard::route_of("GET", "/api/v1/fleet"), std::nullopt);
  EXPECT_EQ(Dashboard::route_of("DELETE", "/api/v1/stream"), std::nullopt);
}

}  // namespace
}  // namespace pf::manager
