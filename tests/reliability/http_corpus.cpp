// The bad-input HTTP corpus: well over 500 requests, written over raw TCP so that nothing a
// client library would refuse to send is left out, against a live `proverfleet serve` with
// market-sim behind it. While the complete requests run on a few workers, a handful of
// connections dribble their headers a byte at a time, a few requests promise more body than
// they send, and /healthz is probed twice a second.
//
// Counted: requests tried; 5xx replies; crashes (serve exited; it is restarted on the same
// database so the run goes on); hangs (a complete request with no status line within 15 s, an
// incomplete one whose connection is still held after 60 s, a /healthz miss); auth bypasses (a
// 2xx to a request without valid credentials, or a file from outside the dashboard served by
// a traversal path); secrets found (the operator token, the agent's token, deployment
// secrets and the market key in serve's and market-sim's output, the data directory's files
// and any process's command line).
#include "reliability/http_corpus.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "reliability/fleet.h"

namespace pf::reliability {
namespace {

enum class Expect {
  Any,            // any 2xx/4xx is fine
  Unauthorized,   // no valid credentials: a 2xx is an auth bypass
  NoForeignFile,  // traversal: a 2xx must not carry a file from outside the dashboard
};

struct Probe {
  std::string name;  // for findings: route and variant, never a secret
  std::string raw;   // the bytes sent
  Expect expect = Expect::Any;
};

// Slow and incomplete clients connect from here, the probe and the workers from 127.0.0.1: a
// server that caps connections per client address may refuse the attacker, not everyone.
constexpr const char* kAttackerAddress = "127.0.0.2";

std::string random_hex(std::mt19937_64& rng, int chars) {
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < chars; ++i) s += hex[rng() % 16];
  return s;
}

std::string request(const std::string& method, const std::string& target,
                    const std::vector<std::string>& headers, const std::string& body = "",
                    bool sized = true) {
  std::string r = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const auto& h : headers) r += h + "\r\n";
  if (sized && (!body.empty() || method == "POST")) {
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "Connection: close\r\n\r\n" + body;
  return r;
}

std::string bearer(const std::string& token) {
  return "Authorization: Bearer " + token;
}
const std::string kJsonType = "Content-Type: application/json";

struct Credentials {
  std::string operator_token;
  std::string agent_token;
  std::int64_t instance_id = 0;     // the registered agent's instance
  std::int64_t other_instance = 0;  // deployed, never registered
  std::string deployment;           // of instance_id
  std::string secret;               // of instance_id (used by the register)
  std::string other_deployment;
  std::string other_secret;  // of other_instance (unused: register must still need it)
  std::int64_t machine_id = 0;
};

struct Route {
  std::string method;
  std::string path;
  std::string good_body;  // a valid body (POST), so auth is the only thing wrong
};

std::vector<Route> operator_routes(const Credentials& c) {
  const std::string id = std::to_string(c.instance_id);
  return {
      {"GET", "/api/v1/offers?limit=3", ""},
      {"POST", "/api/v1/instances", R"({"offer_id": 1})"},
      {"GET", "/api/v1/instances", ""},
      {"GET", "/api/v1/instances?all=true", ""},
      {"GET", "/api/v1/instances/" + id, ""},
      {"DELETE", "/api/v1/instances/" + std::to_string(c.other_instance), ""},
      {"GET", "/api/v1/hosts", ""},
      {"GET", "/api/v1/bad-hosts", ""},
      {"POST", "/api/v1/bad-hosts", R"({"machine_id": 424242, "reason": "reliability"})"},
      {"DELETE", "/api/v1/bad-hosts/" + std::to_string(c.machine_id), ""},
      {"GET", "/api/v1/fleet", ""},
      {"GET", "/api/v1/autopilot", ""},
      {"POST", "/api/v1/autopilot", R"({"paused": true})"},
      {"GET", "/api/v1/stream", ""},
  };
}

std::vector<Route> agent_routes() {
  return {
      {"POST", "/api/v1/agent/heartbeat", R"({"phase": "fetching_params"})"},
      {"POST", "/api/v1/agent/events", R"({"events": []})"},
      {"POST", "/api/v1/agent/logs", R"({"text": "reliability"})"},
  };
}

// Authorization headers that carry no valid credential for `valid`.
std::vector<std::pair<std::string, std::vector<std::string>>> bad_auth(const std::string& valid,
                                                                       const std::string& other) {
  std::string flipped = valid;
  if (!flipped.empty()) flipped.back() = flipped.back() == 'a' ? 'b' : 'a';
  return {
      {"no header", {}},
      {"empty bearer", {"Authorization: Bearer "}},
      {"bearer only", {"Authorization: Bearer"}},
      {"garbage token", {bearer("garbage")}},
      {"one char off", {bearer(flipped)}},
      {"prefix of token", {bearer(valid.substr(0, valid.size() / 2))}},
      {"token plus suffix", {bearer(valid + "x")}},
      {"other credential", {bearer(other)}},
      {"basic scheme", {"Authorization: Basic " + valid}},
      {"token without scheme", {"Authorization: " + valid}},
      {"huge token", {bearer(std::string(60000, 'A'))}},
      {"token in query only", {}},
      {"two headers, first bad", {bearer("garbage"), bearer("garbage2")}},
      {"token with NUL", {bearer(std::string("abc\0def", 7))}},
  };
}

std::vector<std::string> nasty_json_bodies() {
  std::vector<std::string> b = {
      "",
      "{",
      "}",
      "[]",
      "null",
      "\"text\"",
      "12",
      "{\"a\":",
      "{\"a\": 1,}",
      "{'a': 1}",
      "{\"a\": NaN}",
      "{\"a\": Infinity}",
      "{\"a\": -Infinity}",
      "{\"a\": 1e400}",
      "{\"a\": -1e400}",
      "{\"a\": " + std::string(400, '9') + "}",
      "{\"a\": -" + std::string(400, '9') + "}",
      "{\"a\": 0x10}",
      "{\"a\": 01}",
      "{\"a\": \"\\ud800\"}",
      "{\"a\": \"\xff\xfe\xfd\"}",
      "{\"\xc3\x28\": 1}",
      "\xef\xbb\xbf{}",
      "{\"a\": \"\\u0000\"}",
      "{\"a\": 1, \"a\": 2}",
      std::string(5000, '[') + std::string(5000, ']'),
      std::string(100000, '[') + std::string(100000, ']'),
      "{\"a\":" + std::string(50000, '[') + std::string(50000, ']') + "}",
      "[" + std::string(200000, '1') + "]",
      "{\"a\": \"" + std::string(900000, 'x') + "\"}",
      "{\"a\": \"" + std::string(3 << 20, 'x') + "\"}",  // over any body limit: 413
      "{} trailing",
      "{}\x00",
      "\x00\x01\x02",
  };
  std::string wide = "{";
  for (int i = 0; i < 20000; ++i)
    wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  b.push_back(wide + "}");
  return b;
}

// Bodies of the right shape with wrong types and out-of-range numbers, per route.
std::vector<std::pair<std::string, std::string>> typed_bodies(const Credentials& c) {
  const std::string big = std::string(400, '9');
  std::vector<std::pair<std::string, std::string>> out;
  auto add = [&](const std::string& path, std::initializer_list<std::string> bodies) {
    for (const auto& b : bodies) out.emplace_back(path, b);
  };
  add("/api/v1/instances",
      {R"({"offer_id": "1"})", R"({"offer_id": 1.5})", R"({"offer_id": -1})", R"({"offer_id": 0})",
       R"({"offer_id": 1e400})", "{\"offer_id\": " + big + "}",
       R"({"offer_id": 9223372036854775808})", R"({"offer_id": 18446744073709551616})",
       R"({"offer_id": null})", R"({"offer_id": [1]})", R"({"offer_id": {"a": 1}})",
       R"({"offer_id": true})", R"({"offer_id": 1, "extra": 1})", R"({})"});
  add("/api/v1/bad-hosts",
      {R"({"machine_id": "x", "reason": "r"})", R"({"machine_id": 1e400, "reason": "r"})",
       "{\"machine_id\": " + big + ", \"reason\": \"r\"}", R"({"machine_id": 1, "reason": 5})",
       R"({"machine_id": 1, "reason": "r", "ttl_hours": -1})",
       R"({"machine_id": 1, "reason": "r", "ttl_hours": 1e400})",
       R"({"machine_id": 1, "reason": "r", "ttl_hours": "1"})",
       R"({"machine_id": 1, "reason": "r", "evidence": [1]})",
       "{\"machine_id\": 1, \"reason\": \"" + std::string(5000, 'r') + "\"}",
       R"({"machine_id": -5, "reason": "r"})"});
  add("/api/v1/autopilot",
      {R"({"paused": "yes"})", R"({"paused": 1})", R"({"paused": null})", R"({"other": true})"});
  add("/api/v1/agent/register",
      {R"({"deployment": 1, "secret": 2})", R"({"deployment": "", "secret": ""})",
       "{\"deployment\": \"" + c.deployment + "\", \"secret\": \"" + std::string(100000, 's') +
           "\"}",
       "{\"deployment\": \"" + c.deployment + "\", \"secret\": null}",
       "{\"deployment\": \"" + c.deployment + "\", \"secret\": \"x\", \"hardware\": " +
           std::string(2000, '[') + std::string(2000, ']') + "}",
       "{\"deployment\": \"" + c.deployment +
           "\", \"secret\": \"x\", \"hardware\": {\"gpus\": 1e400}}",
       R"({"deployment": "../../etc", "secret": "x"})"});
  add("/api/v1/agent/heartbeat",
      {R"({"phase": 1})", R"({"phase": "proving", "params": {"done": 1e400}})",
       R"({"phase": "proving", "params": {"done": -1, "total": "x"}})",
       "{\"phase\": \"proving\", \"prover\": {\"completed\": " + big + "}}",
       R"({"phase": "proving", "prover": {"completed": 2147483648}})",
       R"({"phase": "proving", "gpus": "x"})", R"({"phase": "proving", "gpus": [1, 2]})",
       R"({"phase": "proving", "gpus": [{"util": 1e400, "throttle": 5}]})",
       "{\"phase\": \"proving\", \"gpus\": [" +
           [] {
             std::string g;
             for (int i = 0; i < 500; ++i) g += (i ? "," : "") + std::string("{}");
             return g;
           }() +
           "]}",
       "{\"phase\": \"" + std::string(1000, 'p') + "\"}"});
  add("/api/v1/agent/events",
      {R"({"events": "x"})", R"({"events": [1]})", R"({"events": [{"seq": "1", "type": "x"}]})",
       R"({"events": [{"seq": -1, "type": "x"}]})",
       "{\"events\": [{\"seq\": " + big + ", \"type\": \"x\"}]}",
       R"({"events": [{"seq": 1e400, "type": "x"}]})",
       R"({"events": [{"seq": 1, "type": "proof_done", "seconds": 1e400, "phase": "measured"}]})",
       R"({"events": [{"seq": 2, "type": "proof_done", "seconds": -5, "phase": "measured"}]})",
       R"({"events": [{"seq": 3, "type": "proof_done", "seconds": 5, "phase": "bogus"}]})",
       R"({"events": [{"seq": 4, "type": "x", "at": -1e308}]})", "{\"events\": [" + [] {
         std::string e;
         for (int i = 0; i < 5000; ++i)
           e += (i ? "," : "") + std::string("{\"seq\":") + std::to_string(100000 + i) +
                ",\"type\":\"noop\"}";
         return e;
       }() + "]}"});
  add("/api/v1/agent/logs", {R"({"text": 5})", R"({"text": null})", "{\"text\": \"\xff\xfe\"}"});
  return out;
}

class CorpusRun {
 public:
  CorpusRun(const HttpCorpusOptions& options) : options_(options), dir_("http") {
    dir_.keep = options.keep_dir;
  }

  Figures run() {
    start_fleet();
    setup_credentials();
    std::vector<Probe> probes = build_probes();
    std::fprintf(stderr,
                 "http corpus: %zu requests on %d workers, %d slow clients, serve on port %d\n",
                 probes.size(), options_.workers, options_.slow_clients, port_.load());

    HealthProbe health(figures_);
    health.start(port_);
    health_ = &health;

    std::vector<std::thread> slow;
    for (int i = 0; i < options_.slow_clients; ++i)
      slow.emplace_back([this, i] { slow_client(i); });
    std::vector<std::thread> incomplete;
    for (const auto& p : incomplete_probes())
      incomplete.emplace_back([this, p] { run_incomplete(p); });

    std::deque<Probe> queue(probes.begin(), probes.end());
    std::mutex queue_mu;
    std::vector<std::thread> workers;
    std::atomic<int> done{0};
    for (int w = 0; w < options_.workers; ++w) {
      workers.emplace_back([&] {
        while (true) {
          Probe p;
          {
            std::lock_guard lock(queue_mu);
            if (queue.empty()) return;
            p = std::move(queue.front());
            queue.pop_front();
          }
          run_complete(p);
          ++done;
        }
      });
    }
    // The main thread watches serve (children must be started from it: PR_SET_PDEATHSIG).
    while (done < static_cast<int>(probes.size())) {
      check_serve_alive();
      std::this_thread::sleep_for(200ms);
    }
    for (auto& t : workers) t.join();
    for (auto& t : slow) t.join();
    for (auto& t : incomplete) t.join();
    // Room for the last probes, then serve must still be up.
    std::this_thread::sleep_for(1s);
    health.stop();
    check_serve_alive();
    health_ = nullptr;

    std::fprintf(stderr,
                 "http corpus: %d requests were answered by closing the connection (allowed)\n",
                 closed_without_reply_.load());
    std::fprintf(stderr, "http corpus: %d requests were answered 503 market busy (allowed)\n",
                 market_busy_.load());
    scan();
    serve_->process.terminate();
    sim_->process.terminate();
    return figures_;
  }

 private:
  void start_fleet() {
    std::mt19937_64 rng(std::random_device{}());
    market_key_ = "mkt-" + random_hex(rng, 32);
    std::ofstream(dir_.path() / "proverfleet.toml") << "[autopilot]\nenabled = false\n";
    std::vector<std::string> sim_args = {
        options_.binary, "market-sim",
        "--scenario",    options_.source_dir + "/scenarios/demo-small.json",
        "--listen",      "127.0.0.1:0",
        "--time-scale",  "60",
        "--quiet"};
    auto key = market_sim_key(options_.binary, market_key_, dir_.path());
    for (auto& a : key.args) sim_args.push_back(a);
    sim_.emplace(start_service(sim_args, key.spawn, "market-sim listening on"));
    start_serve();
  }

  void start_serve() {
    test::SpawnOptions opt;
    opt.env["VAST_API_KEY"] = market_key_;
    opt.env["PROVERFLEET_TOKEN"] = std::nullopt;
    if (serve_) serve_logs_ += all_output(serve_->process);
    serve_.reset();
    serve_.emplace(start_service(
        {options_.binary, "serve", "--config", (dir_.path() / "proverfleet.toml").string(),
         "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--db",
         (dir_.path() / "pf.db").string(), "--vast-url", sim_->url.str(), "--reconcile-interval",
         "1", "--tick-interval", "1"},
        opt, "proverfleet serve listening on"));
    port_ = serve_->url.port;
    if (health_) health_->set_port(port_);
  }

  void check_serve_alive() {
    std::lock_guard lock(serve_mu_);
    if (serve_->process.running()) return;
    const int status = serve_->process.wait_exit(1s).value_or(-1);
    std::string tail = serve_->process.stderr_text();
    if (tail.size() > 300) tail = tail.substr(tail.size() - 300);
    figures_.finding(Figure::Crashes, "serve exited with status " + std::to_string(status) +
                                          " during the corpus; stderr ends: " + tail);
    if (health_) health_->pause();
    start_serve();
    if (health_) health_->resume();
  }

  void setup_credentials() {
    OperatorApi api(figures_, serve_->url, read_operator_token(dir_.path()));
    creds_.operator_token = api.token();
    const json offers = api.get("/api/v1/offers?limit=10");
    std::vector<std::int64_t> ids;
    for (const auto& offer : offers.is_array() ? offers : json::array()) {
      ids.push_back(offer.value("id", std::int64_t{0}));
      if (!creds_.machine_id) creds_.machine_id = offer.value("machine_id", std::int64_t{0});
    }
    if (ids.size() < 2)
      throw std::runtime_error("market-sim offers fewer than 2 offers: " +
                               offers.dump().substr(0, 300));
    MarketView market(sim_->url, market_key_);
    auto deploy = [&](std::int64_t offer, std::string& deployment, std::string& secret) {
      auto r = api.call("POST", "/api/v1/instances", json{{"offer_id", offer}});
      if (!r || r->first != 201)
        throw std::runtime_error("deploy failed: " + (r ? r->second.dump() : "no reply"));
      const json& inst = r->second.contains("instance") ? r->second["instance"] : r->second;
      const std::int64_t id = inst.value("id", std::int64_t{0});
      // The create reached market-sim; its env carries the secret the agent would get.
      for (int i = 0; i < 100; ++i) {
        const json row = api.get("/api/v1/instances/" + std::to_string(id));
        const json& rec = row.contains("instance") ? row["instance"] : row;
        if (rec.value("market_id", json()).is_number_integer()) {
          const json mi = market.instance(rec["market_id"].get<std::int64_t>());
          auto env = env_of(mi);
          deployment = env["PROVERFLEET_DEPLOYMENT"];
          secret = env["PROVERFLEET_SECRET"];
          if (secret.empty())
            throw std::runtime_error("market-sim's record has no PROVERFLEET_SECRET: " +
                                     mi.dump().substr(0, 300));
          return id;
        }
        std::this_thread::sleep_for(100ms);
      }
      throw std::runtime_error("deployed instance never got a market id");
    };
    creds_.instance_id = deploy(ids[0], creds_.deployment, creds_.secret);
    creds_.other_instance = deploy(ids[1], creds_.other_deployment, creds_.other_secret);
    auto reg = api.call("POST", "/api/v1/agent/register",
                        json{{"deployment", creds_.deployment},
                             {"secret", creds_.secret},
                             {"hardware", {{"gpus", 1}}},
                             {"agent_version", "reliability"}});
    if (!reg || reg->first != 200)
      throw std::runtime_error("register failed: " + (reg ? reg->second.dump() : "no reply"));
    creds_.agent_token = reg->second.value("token", "");
    // A bad host to delete with wrong credentials.
    api.call("POST", "/api/v1/bad-hosts",
             json{{"machine_id", creds_.machine_id}, {"reason", "reliability"}});
  }

  std::vector<Probe> build_probes() {
    std::vector<Probe> probes;
    const Credentials& c = creds_;
    const std::vector<std::string> op = {bearer(c.operator_token)};
    const std::vector<std::string> agent = {bearer(c.agent_token)};

    // 1. Credentials: every operator and agent route with every kind of wrong token.
    for (const auto& r : operator_routes(c)) {
      for (const auto& [variant, headers] : bad_auth(c.operator_token, c.agent_token)) {
        std::string target = r.path;
        if (variant == "token in query only") {
          target += (target.find('?') == std::string::npos ? "?" : "&") + std::string("token=") +
                    c.operator_token;
        }
        auto h = headers;
        if (!r.good_body.empty()) h.push_back(kJsonType);
        probes.push_back({r.method + " " + r.path + " [" + variant + "]",
                          request(r.method, target, h, r.good_body), Expect::Unauthorized});
      }
    }
    for (const auto& r : agent_routes()) {
      for (const auto& [variant, headers] : bad_auth(c.agent_token, c.operator_token)) {
        auto h = headers;
        h.push_back(kJsonType);
        probes.push_back({r.method + " " + r.path + " [" + variant + "]",
                          request(r.method, r.path, h, r.good_body), Expect::Unauthorized});
      }
    }
    // Register without the right secret (the other deployment's secret included).
    for (const auto& [variant, body] : std::vector<std::pair<std::string, json>>{
             {"wrong secret", {{"deployment", c.deployment}, {"secret", "wrong"}}},
             {"empty secret", {{"deployment", c.deployment}, {"secret", ""}}},
             {"other deployment's secret",
              {{"deployment", c.deployment}, {"secret", c.other_secret}}},
             {"secret prefix",
              {{"deployment", c.deployment}, {"secret", c.secret.substr(0, c.secret.size() / 2)}}},
             {"secret plus suffix", {{"deployment", c.deployment}, {"secret", c.secret + "x"}}},
             {"operator token as secret",
              {{"deployment", c.other_deployment}, {"secret", c.operator_token}}},
             {"agent token as secret",
              {{"deployment", c.other_deployment}, {"secret", c.agent_token}}},
             {"unknown deployment", {{"deployment", "nope"}, {"secret", c.other_secret}}},
             {"secret hash",
              {{"deployment", c.other_deployment}, {"secret", "sha256:" + c.other_secret}}},
         }) {
      probes.push_back({"POST /api/v1/agent/register [" + variant + "]",
                        request("POST", "/api/v1/agent/register", {kJsonType}, body.dump()),
                        Expect::Unauthorized});
    }
    // An agent token used on operator routes, the operator token on agent routes, covered
    // above as "other credential".

    // 2. Malformed, huge and deep JSON on every POST route, with valid credentials.
    const std::vector<std::pair<std::string, std::vector<std::string>>> posts = {
        {"/api/v1/agent/register", {}},  {"/api/v1/agent/heartbeat", agent},
        {"/api/v1/agent/events", agent}, {"/api/v1/agent/logs", agent},
        {"/api/v1/instances", op},       {"/api/v1/bad-hosts", op},
        {"/api/v1/autopilot", op},
    };
    const auto nasty = nasty_json_bodies();
    for (const auto& [path, auth] : posts) {
      for (std::size_t i = 0; i < nasty.size(); ++i) {
        auto h = auth;
        h.push_back(kJsonType);
        probes.push_back({"POST " + path + " [malformed body #" + std::to_string(i) + "]",
                          request("POST", path, h, nasty[i])});
      }
    }
    // 3. Wrong types and overflowing numbers.
    for (const auto& [path, body] : typed_bodies(c)) {
      auto h =
          path.find("/agent/") != std::string::npos
              ? (path.find("register") != std::string::npos ? std::vector<std::string>{} : agent)
              : op;
      h.push_back(kJsonType);
      probes.push_back({"POST " + path + " [typed body]", request("POST", path, h, body)});
    }
    // 4. Framing: content types, chunked and unsized bodies, lying and odd lengths, headers.
    for (const auto& [path, auth] : posts) {
      const std::string body =
          path.find("instances") != std::string::npos ? R"({"offer_id": 1})" : "{}";
      auto with = [&](std::vector<std::string> extra) {
        auto h = auth;
        for (auto& e : extra) h.push_back(std::move(e));
        return h;
      };
      probes.push_back({"POST " + path + " [chunked]",
                        request("POST", path, with({kJsonType, "Transfer-Encoding: chunked"}),
                                "2\r\n{}\r\n0\r\n\r\n", false)});
      probes.push_back({"POST " + path + " [chunked, bad sizes]",
                        request("POST", path, with({kJsonType, "Transfer-Encoding: chunked"}),
                                "ffffffffffffffffff\r\n{}\r\n0\r\n\r\n", false)});
      probes.push_back(
          {"POST " + path + " [chunked and length]",
           request("POST", path,
                   with({kJsonType, "Transfer-Encoding: chunked", "Content-Length: 2"}),
                   "2\r\n{}\r\n0\r\n\r\n", false)});
      probes.push_back({"POST " + path + " [unsized body]",
                        request("POST", path, with({kJsonType}), body, false)});
      probes.push_back(
          {"POST " + path + " [form type]",
           request("POST", path, with({"Content-Type: application/x-www-form-urlencoded"}),
                   "a=1&b=2")});
      probes.push_back(
          {"POST " + path + " [multipart]",
           request("POST", path, with({"Content-Type: multipart/form-data; boundary=x"}),
                   "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n")});
      probes.push_back({"POST " + path + " [text type]",
                        request("POST", path, with({"Content-Type: text/plain"}), body)});
      probes.push_back(
          {"POST " + path + " [negative length]",
           request("POST", path, with({kJsonType, "Content-Length: -1"}), body, false)});
      probes.push_back(
          {"POST " + path + " [length not a number]",
           request("POST", path, with({kJsonType, "Content-Length: abc"}), body, false)});
      probes.push_back(
          {"POST " + path + " [two lengths]",
           request("POST", path, with({kJsonType, "Content-Length: 2", "Content-Length: 40"}), "{}",
                   false)});
      probes.push_back(
          {"POST " + path + " [length 10^20]",
           request("POST", path, with({kJsonType, "Content-Length: 100000000000000000000"}), body,
                   false)});
      probes.push_back(
          {"POST " + path + " [length 4 GiB]",
           request("POST", path, with({kJsonType, "Content-Length: 4294967298"}), body, false)});
      probes.push_back(
          {"POST " + path + " [expect 100-continue, huge]",
           request("POST", path,
                   with({kJsonType, "Expect: 100-continue", "Content-Length: 1073741824"}), "",
                   false)});
      probes.push_back({"POST " + path + " [gzip claimed]",
                        request("POST", path, with({kJsonType, "Content-Encoding: gzip"}), body)});
    }
    const std::vector<std::string> header_abuse = {
        "X-Big: " + std::string(200000, 'h'),
        "X-Bad-Header-No-Colon",
        " X-Leading-Space: 1",
        "X-Ctl: a\x01\x02"
        "b",
        "X-Utf8: \xff\xfe",
        "Host: a\r\nHost: b",
    };
    for (const auto& h : header_abuse) {
      probes.push_back({"GET /api/v1/fleet [header abuse]",
                        request("GET", "/api/v1/fleet", {bearer(c.operator_token), h})});
    }
    {
      std::vector<std::string> many;
      for (int i = 0; i < 3000; ++i) many.push_back("X-H" + std::to_string(i) + ": v");
      probes.push_back({"GET /healthz [3000 headers]", request("GET", "/healthz", many)});
    }
    // 5. Request lines and methods.
    for (const std::string& raw : std::vector<std::string>{
             "GET /healthz\r\n\r\n",
             "GET\r\n\r\n",
             "\r\n\r\n",
             "GARBAGE\r\n\r\n",
             "GET /healthz HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n",
             "GET /healthz HTTP/1.1 extra\r\nHost: x\r\nConnection: close\r\n\r\n",
             "GET  /healthz  HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
             "GET http://evil.example/api/v1/fleet HTTP/1.1\r\nHost: x\r\nConnection: "
             "close\r\n\r\n",
             "GET /" + std::string(100000, 'a') +
                 " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
             "GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n",
             "GET /heal%00thz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
             "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
             "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
             std::string(70000, 'G'),
         }) {
      probes.push_back({"raw request line", raw});
    }
    for (const std::string m :
         {"PUT", "PATCH", "OPTIONS", "TRACE", "CONNECT", "HEAD", "FOO", "get", "DELETE", "POST"}) {
      for (const std::string& path :
           {std::string("/api/v1/fleet"),
            std::string("/api/v1/instances/") + std::to_string(c.instance_id),
            std::string("/healthz"), std::string("/api/v1/agent/heartbeat")}) {
        const bool agent_path = path.find("/agent/") != std::string::npos;
        const bool operator_path = !agent_path && path != "/healthz";
        // Without credentials: must not succeed on a protected route.
        probes.push_back({m + " " + path + " [no credentials]", request(m, path, {}),
                          operator_path || agent_path ? Expect::Unauthorized : Expect::Any});
      }
    }
    // 6. Traversal: dashboard files and API paths.
    for (const std::string& path :
         std::vector<std::string>{"/assets/../../../../etc/passwd",
                                  "/assets/..%2f..%2f..%2f..%2fetc%2fpasswd",
                                  "/assets/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                                  "/assets/%252e%252e/%252e%252e/etc/passwd",
                                  "/assets/....//....//....//etc/passwd",
                                  "/assets/..\\..\\..\\etc\\passwd",
                                  "/../../../../etc/passwd",
                                  "/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                                  "/assets/%00",
                                  "/assets/index.html%00.js",
                                  "/assets/",
                                  "/assets/.",
                                  "/assets/..",
                                  "/assets//etc/passwd",
                                  "/assets/%2fetc%2fpasswd",
                                  "//etc/passwd",
                                  "/assets/app.js/../../../../etc/passwd",
                                  "/./././etc/passwd",
                                  "/assets/\xc0\xae\xc0\xae/etc/passwd",
                                  "/api/v1/instances/../../../../etc/passwd",
                                  "/api/v1/../../etc/passwd",
                                  "/assets/../../../../proc/self/environ",
                                  "/assets/../../../../proc/self/cmdline",
                                  "/assets/..%252f..%252fetc/passwd"}) {
      probes.push_back(
          {"GET " + path + " [traversal]", request("GET", path, {}), Expect::NoForeignFile});
      probes.push_back({"GET " + path + " [traversal, operator]", request("GET", path, op),
                        Expect::NoForeignFile});
    }
    // 7. Bad query strings and ids.
    for (const std::string& q : std::vector<std::string>{"q=cpu_ram>=1e308",
                                                         "q=cpu_ram>=1e400",
                                                         "q=num_gpus>=" + std::string(400, '9'),
                                                         "q=dph<nan",
                                                         "q=num_gpus>>1",
                                                         "q=geolocation%20in%20[US",
                                                         "q=%ff%fe",
                                                         "q=%zz",
                                                         "q=" + std::string(100000, 'x'),
                                                         "limit=-1",
                                                         "limit=0",
                                                         "limit=1e400",
                                                         "limit=" + std::string(30, '9'),
                                                         "limit=abc",
                                                         "limit=1&limit=2",
                                                         "order=nope",
                                                         "order=",
                                                         "nope=1",
                                                         "q=gpu_name=RTX_4090&q=num_gpus>=1",
                                                         "%",
                                                         "&&&",
                                                         "q",
                                                         "=x",
                                                         "q=" + std::string(5000, '%')}) {
      probes.push_back(
          {"GET /api/v1/offers?" + q.substr(0, 40), request("GET", "/api/v1/offers?" + q, op)});
    }
    for (const std::string& id :
         std::vector<std::string>{"0", "-1", std::string(30, '9'), "1e3", "abc", "%00", "1.5", " 1",
                                  "9223372036854775807", "9223372036854775808", "0x10", "%ff"}) {
      probes.push_back(
          {"GET /api/v1/instances/" + id, request("GET", "/api/v1/instances/" + id, op)});
      probes.push_back(
          {"DELETE /api/v1/instances/" + id, request("DELETE", "/api/v1/instances/" + id, op)});
      probes.push_back(
          {"DELETE /api/v1/bad-hosts/" + id, request("DELETE", "/api/v1/bad-hosts/" + id, op)});
    }
    for (const std::string q : {"all=maybe", "all=1", "all=", "x=1", "all=true&all=false"}) {
      probes.push_back({std::string("GET /api/v1/instances?") + q,
                        request("GET", std::string("/api/v1/instances?") + q, op)});
    }
    return probes;
  }

  // Requests that promise more body than they send: the server must give up and close.
  std::vector<Probe> incomplete_probes() const {
    std::vector<Probe> out;
    for (const std::string path :
         {"/api/v1/agent/heartbeat", "/api/v1/instances", "/api/v1/agent/register"}) {
      out.push_back(
          {"POST " + path + " [length larger than body]",
           "POST " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + creds_.agent_token +
               "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"a\":"});
    }
    out.push_back(
        {"GET /healthz [headers never end]", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n"});
    out.push_back({"POST chunked [last chunk never comes]",
                   "POST /api/v1/instances HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                       creds_.operator_token +
                       "\r\nContent-Type: application/json\r\nTransfer-Encoding: "
                       "chunked\r\n\r\n2\r\n{}\r\n"});
    out.push_back({"nothing sent", ""});
    return out;
  }

  void run_complete(const Probe& p) {
    figures_.add(Figure::RequestsTried);
    const auto reply = test::exchange(port_, p.raw, 15s);
    judge(p, reply);
  }

  void judge(const Probe& p, const test::RawReply& reply) {
    if (reply.status == 0 && !reply.timed_out) ++closed_without_reply_;
    if (reply.timed_out) {
      figures_.finding(Figure::Hangs, p.name + ": no reply within 15 s");
      return;
    }
    const bool market_busy = is_market_busy_reply(
        reply.status, test::header_of(reply.head, "retry-after").has_value(), reply.body);
    if (market_busy) ++market_busy_;
    if (reply.status >= 500 && !market_busy) {
      figures_.finding(Figure::ServerErrors, p.name + " -> " + std::to_string(reply.status) + " " +
                                                 reply.body.substr(0, 160));
    }
    const bool ok = reply.status >= 200 && reply.status < 300;
    if (ok && p.expect == Expect::Unauthorized) {
      figures_.finding(Figure::AuthBypasses, p.name + " -> " + std::to_string(reply.status));
    }
    if (ok && p.expect == Expect::NoForeignFile &&
        (reply.body.find("root:x:") != std::string::npos ||
         reply.body.find("PATH=") != std::string::npos ||
         reply.body.find("--vast-url") != std::string::npos)) {
      figures_.finding(Figure::AuthBypasses, p.name + " served a file from outside the dashboard");
    }
  }

  void run_incomplete(const Probe& p) {
    figures_.add(Figure::RequestsTried);
    test::Socket s = test::connect_loopback(port_, kAttackerAddress);
    if (!s.valid()) return;
    test::send_all(s, p.raw);
    // Not half-closed: the client keeps the connection open, as a stalled one would.
    const auto reply = test::read_reply(s, 60s);
    if (reply.timed_out)
      figures_.finding(Figure::Hangs, p.name + ": connection still held after 60 s");
  }

  // Sends a request's header lines a byte at a time (one every 0.9 s) for slow_seconds, then
  // completes it; the reply must come within 15 s of the last byte.
  void slow_client(int index) {
    figures_.add(Figure::RequestsTried);
    test::Socket s = test::connect_loopback(port_, kAttackerAddress);
    if (!s.valid()) return;
    const std::string head =
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow-" + std::to_string(index) + ": ";
    if (!test::send_all(s, head)) return;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(options_.slow_seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (!test::send_all(s, "a")) return;  // the server closed it: fine
      std::this_thread::sleep_for(900ms);
    }
    if (!test::send_all(s, "\r\nConnection: close\r\n\r\n")) return;
    const auto reply = test::read_reply(s, 15s);
    if (reply.timed_out)
      figures_.finding(Figure::Hangs, "slow client " + std::to_string(index) +
                                          ": no reply 15 s after its last byte");
  }

  void scan() {
    std::map<std::string, std::string> secrets = {
        {"operator token", creds_.operator_token},
        {"agent token", creds_.agent_token},
        {"deployment secret", creds_.secret},
        {"unused deployment secret", creds_.other_secret},
        {"market API key", market_key_},
    };
    std::map<std::string, std::string> logs = {
        {"serve's output", serve_logs_ + all_output(serve_->process)},
        {"market-sim's output", all_output(sim_->process)},
    };
    scan_command_lines(figures_, secrets);
    scan_secrets(figures_, secrets, logs, dir_.path(), {"operator.token", "market-sim.key"});
  }

  HttpCorpusOptions options_;
  RunDir dir_;
  Figures figures_;
  std::string market_key_;
  std::optional<Service> sim_;
  std::optional<Service> serve_;
  std::mutex serve_mu_;
  std::string serve_logs_;
  std::atomic<int> port_{0};
  HealthProbe* health_ = nullptr;
  Credentials creds_;
  std::atomic<int> closed_without_reply_{0};  // not a figure: closing on garbage is allowed
  std::atomic<int> market_busy_{0};           // not a figure: 503 + Retry-After, market busy
};

}  // namespace

Figures run_http_corpus(const HttpCorpusOptions& options) {
  CorpusRun run(options);
  return run.run();
}

}  // namespace pf::reliability
