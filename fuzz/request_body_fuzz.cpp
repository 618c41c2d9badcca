// Fuzz target: the manager's request bodies and query strings, sent over loopback to the real
// HTTP stack (ApiServer + HttpApi + Manager on an in-memory store and the FakeMarket), with
// valid credentials so the bytes reach the body validation and the Manager behind it.
// Input: byte 0 picks the route, byte 1 the framing (content type, method), the rest is the
// body (or the query string). A 5xx reply or no reply at all is a finding (abort): bad input
// must be answered with a 4xx, never an internal error. Repoint `send` at the new server when
// the HTTP layer changes; the routes table stays.
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "core/predictor.h"
#include "fuzz/fuzz_input.h"
#include "manager/http_api.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/fake_market.h"
#include "support/raw_http.h"

namespace {

constexpr const char* kOperatorToken = "fuzz-operator-token-7c1d";

enum class Auth { None, Operator, Agent };
struct Route {
  const char* method;
  const char* path;
  Auth auth;
  bool body_in_query;  // the input goes after '?' instead of into the body
};

constexpr std::array<Route, 11> kRoutes = {{
    {"POST", "/api/v1/agent/register", Auth::None, false},
    {"POST", "/api/v1/agent/heartbeat", Auth::Agent, false},
    {"POST", "/api/v1/agent/events", Auth::Agent, false},
    {"POST", "/api/v1/agent/logs", Auth::Agent, false},
    {"POST", "/api/v1/instances", Auth::Operator, false},
    {"POST", "/api/v1/bad-hosts", Auth::Operator, false},
    {"POST", "/api/v1/autopilot", Auth::Operator, false},
    {"GET", "/api/v1/offers?q=", Auth::Operator, true},
    {"GET", "/api/v1/offers?", Auth::Operator, true},
    {"GET", "/api/v1/instances?", Auth::Operator, true},
    {"GET", "/api/v1/hosts?", Auth::Operator, true},
}};

std::string percent_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
        c == '_' || c == '.' || c == '=' || c == '&' || c == '>' || c == '<') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

struct Harness {
  std::unique_ptr<pf::store::Store> store = pf::store::open_store(":memory:");
  pf::testing::FakeMarket market;
  std::unique_ptr<pf::manager::Manager> manager;
  std::unique_ptr<pf::manager::HttpApi> api;
  std::unique_ptr<pf::manager::ApiServer> server;
  std::thread serving;
  int port = 0;
  std::string agent_token;

  Harness() {
    market.add_offer(101, 11, 0.40);
    market.add_offer(102, 12, 0.20);
    pf::manager::ManagerConfig cfg;
    cfg.rank.predictor = pf::core::default_predictor_config();
    manager = std::make_unique<pf::manager::Manager>(*store, market, cfg, [] { return 1e6; });
    pf::manager::ApiOptions options;
    options.operator_token_hash = pf::manager::hash_token(kOperatorToken);
    options.clock = [] { return 1e6; };
    api = std::make_unique<pf::manager::HttpApi>(*manager, options);
    auto created = pf::manager::ApiServer::create(std::nullopt);
    if (!created) die("ApiServer::create: " + created.error());
    server = std::move(*created);
    auto bound = server->bind("127.0.0.1", 0);
    if (!bound) die("bind: " + bound.error());
    port = *bound;
    server->mount(*api);
    serving = std::thread([this] { server->serve(); });
    // An agent with a valid token, so agent routes reach their body validation.
    auto deployed = manager->deploy(102, "fuzz");
    if (!deployed) die("deploy failed");
    const auto& env = market.create_requests.back().env;
    pf::manager::RegisterRequest reg;
    reg.deployment = env.at("PROVERFLEET_DEPLOYMENT");
    reg.secret = env.at("PROVERFLEET_SECRET");
    auto registered = manager->agent_register(reg);
    if (!registered) die("register failed");
    agent_token = registered->token;
    wait_until_serving();
  }
  ~Harness() {
    server->stop();
    serving.join();
  }
  Harness(const Harness&) = delete;
  Harness& operator=(const Harness&) = delete;

  [[noreturn]] static void die(const std::string& why) {
    std::fprintf(stderr, "request_body_fuzz: %s\n", why.c_str());
    std::abort();
  }

  void wait_until_serving() const {
    for (int i = 0; i < 500; ++i) {
      auto r =
          pf::test::exchange(port, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                             std::chrono::seconds(5));
      if (r.status == 200) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    die("the server never answered /healthz");
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Harness h;
  if (size < 2) return 0;
  const Route& route = kRoutes[data[0] % kRoutes.size()];
  const std::uint8_t framing = data[1];
  const std::string_view input = pf::fuzz::as_text(data + 2, size - 2);

  std::string target = route.path;
  std::string body;
  if (route.body_in_query) {
    target += percent_encode(input);
  } else {
    body = input;
  }
  std::string request = std::string(route.method) + " " + target + " HTTP/1.1\r\nHost: fuzz\r\n";
  if (route.auth == Auth::Operator)
    request += std::string("Authorization: Bearer ") + kOperatorToken + "\r\n";
  if (route.auth == Auth::Agent) request += "Authorization: Bearer " + h.agent_token + "\r\n";
  if (!route.body_in_query) {
    switch (framing % 4) {
      case 0:
        request += "Content-Type: application/json\r\n";
        break;
      case 1:
        request += "Content-Type: application/json; charset=utf-8\r\n";
        break;
      case 2:
        request += "Content-Type: text/plain\r\n";
        break;
      default:
        break;  // none
    }
    request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "Connection: close\r\n\r\n" + body;

  const auto reply = pf::test::exchange(h.port, request, std::chrono::seconds(15));
  if (reply.status == 0 || reply.status >= 500) {
    std::fprintf(stderr, "request_body_fuzz: %s %s -> %s\n%s%s\n", route.method, route.path,
                 reply.status == 0 ? (reply.timed_out ? "no reply (hang)" : "connection dropped")
                                   : std::to_string(reply.status).c_str(),
                 reply.head.c_str(), reply.body.c_str());
    std::abort();
  }
  return 0;
}
