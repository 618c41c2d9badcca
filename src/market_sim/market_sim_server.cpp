// The only translation unit of pf_sim that includes httplib (it is heavy to compile).
#include "market_sim/market_sim_server.h"

#include <httplib.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "market/http_listener.h"
#include "util/bounded_json.h"
#include "util/exception_message.h"
#include "util/steady_clock.h"

namespace pf::market_sim {
namespace {

using nlohmann::json;

constexpr const char* kJson = "application/json";
// What vast sends on a create that hits its rate limit (vast-api.md §1, §4).
constexpr const char* kRateLimitBody = "API requests too frequent endpoint threshold=4.5";

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), kJson);
}

void send_error(httplib::Response& res, const ApiError& error) {
  send_json(res, error.http_status, error.body());
}

template <typename T>
void send_result(httplib::Response& res, const ApiResult<T>& result) {
  if (result) {
    send_json(res, 200, *result);
  } else {
    send_error(res, result.error());
  }
}

std::optional<std::int64_t> path_id(const httplib::Request& req) {
  if (req.matches.size() < 2) return std::nullopt;
  const std::string text = req.matches[1].str();
  std::int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return id;
}

// An empty body counts as {} (vast's DELETE takes "{}" and clients often send nothing).
std::optional<json> parse_body(const httplib::Request& req, httplib::Response& res) {
  if (req.body.empty()) return json::object();
  auto body = util::parse_json(req.body);
  if (!body) {
    send_error(res, ApiError{400, "invalid_args",
                             "Invalid args: the request body is not valid JSON: " + body.error()});
    return std::nullopt;
  }
  return std::move(*body);
}

// Compares without stopping at the first differing byte (the length may leak; a test double
// does not need more).
bool same_secret(const std::string& given, const std::string& expected) {
  if (expected.empty() || given.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  }
  return diff == 0;
}

}  // namespace

struct MarketSimServer::Impl {
  Impl(MarketSim market, MarketSimServerOptions opts)
      : sim(std::move(market)),
        options(std::move(opts)),
        faults(options.faults, options.fault_seed) {}

  enum class Access { Public, KeyRequired };
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

  bool authorized(const httplib::Request& req) const {
    if (!options.api_key) return true;
    const std::string header = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (header.compare(0, prefix.size(), prefix) != 0) return false;
    return same_secret(header.substr(prefix.size()), *options.api_key);
  }

  // Every API endpoint goes through here: delay, injected failures (before anything changes),
  // then auth, then the endpoint itself.
  httplib::Server::Handler endpoint(Access access, Handler handler) {
    return [this, access, handler = std::move(handler)](const httplib::Request& req,
                                                        httplib::Response& res) {
      if (const int slow_ms = faults.slow_ms(); slow_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
      }
      if (auto refused = over_rate_limit(req)) {
        res.status = 429;
        res.set_content(*refused, "text/plain");
        return;
      }
      switch (faults.before_request()) {
        case FaultAction::RateLimit:
          res.status = 429;
          res.set_content(kRateLimitBody, "text/plain");
          return;
        case FaultAction::ServerError:
          send_error(res, ApiError{500, "server_error",
                                   "market-sim injected fault: internal server error"});
          return;
        case FaultAction::None:
          break;
      }
      if (access == Access::KeyRequired && !authorized(req)) {
        send_error(res, ApiError{401, "unauthorized",
                                 "missing or invalid API key (send Authorization: Bearer <key>)"});
        return;
      }
      handler(req, res);
    };
  }

  // The 429 body when `req` breaks its endpoint's limit for its caller (vast's words: "API
  // requests too frequent", with the endpoint's threshold for an interval); nullopt: it may go,
  // and is counted.
  std::optional<std::string> over_rate_limit(const httplib::Request& req) {
    if (!options.rate_limits.any()) return std::nullopt;
    const auto endpoint = market::vast_endpoint_of(req.method, req.path);
    if (!endpoint) return std::nullopt;
    const market::RateRule& rule = options.rate_limits[*endpoint];
    if (!rule.limits()) return std::nullopt;
    const double now = util::steady_seconds();  // vast's limits are wall-clock, not scenario time
    const std::string caller = req.get_header_value("Authorization") + "\n" + req.remote_addr;
    std::lock_guard lock(rate_mutex);
    if (callers.size() >= kMaxCallers && callers.find(caller) == callers.end()) callers.clear();
    auto [it, fresh] = callers.try_emplace(caller);
    if (fresh) {
      for (std::size_t i = 0; i < market::kVastEndpointCount; ++i) {
        it->second[i] = market::RateWindow(options.rate_limits.rules[i]);
      }
    }
    market::RateWindow& window = it->second[static_cast<std::size_t>(*endpoint)];
    if (window.earliest(now) > now) {
      if (rule.calls > 1) return std::string("API requests too frequent");
      char body[96];
      std::snprintf(body, sizeof body, "API requests too frequent endpoint threshold=%g",
                    rule.window_s);
      return std::string(body);
    }
    window.record(now);
    return std::nullopt;
  }

  // Runs f(sim, now_h) under the state lock; reading the clock inside the lock keeps the
  // times MarketSim sees non-decreasing across threads.
  template <typename F>
  auto locked(F&& f) {
    std::lock_guard lock(mutex);
    return f(sim, options.clock_h());
  }

  // The create was executed; the client must not learn its result. Half the body goes out,
  // then the connection is cut: the client sees a truncated reply (curl: "transfer closed
  // with N bytes remaining"), the case a client has to reconcile by label.
  static void cut_reply(httplib::Response& res, const json& reply) {
    auto body = std::make_shared<std::string>(reply.dump());
    const std::size_t half = body->size() / 2;
    res.status = 200;
    res.set_content_provider(
        body->size(), kJson,
        [body, half](std::size_t offset, std::size_t length, httplib::DataSink& sink) {
          if (offset >= half) return false;
          sink.write(body->data() + offset, std::min(length, half - offset));
          return true;
        });
  }

  void install_routes() {
    server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });

    auto search = [this](const json& query, httplib::Response& res) {
      send_result(res, locked([&](MarketSim& s, double t) { return s.search_offers(query, t); }));
    };
    server.Post(
        R"(/api/v0/bundles/?)",
        endpoint(Access::Public, [search](const httplib::Request& req, httplib::Response& res) {
          if (auto body = parse_body(req, res)) search(*body, res);
        }));
    // The older GET form carries the query URL-encoded in ?q=.
    server.Get(
        R"(/api/v0/bundles/?)",
        endpoint(Access::Public, [search](const httplib::Request& req, httplib::Response& res) {
          json query = json::object();
          if (req.has_param("q")) {
            auto parsed = util::parse_json(req.get_param_value("q"));
            if (!parsed) {
              send_error(res, ApiError{400, "invalid_args",
                                       "Invalid args: q is not valid JSON: " + parsed.error()});
              return;
            }
            query = std::move(*parsed);
          }
          search(query, res);
        }));

    server.Put(
        R"(/api/v0/asks/(\d{1,18})/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request& req, httplib::Response& res) {
          auto body = parse_body(req, res);
          if (!body) return;
          auto id = path_id(req);
          if (!id) {
            send_error(res, ApiError{404, "no_such_ask",
                                     "error 404/3603: no_such_ask Instance type by id " +
                                         req.matches[1].str() + " is not available."});
            return;
          }
          auto result = locked([&](MarketSim& s, double t) {
            auto created = s.create_instance(*id, *body, t);
            if (created && options.on_created) {
              if (auto launch = s.launch((*created)["new_contract"].get<std::int64_t>())) {
                options.on_created(*launch, s.scenario().offers[launch->offer_index]);
              }
            }
            return created;
          });
          if (result && faults.drop_create_reply()) {
            if (options.log) options.log("  (create reply dropped by fault injection)");
            cut_reply(res, *result);
            return;
          }
          send_result(res, result);
        }));

    server.Get(
        R"(/api/v1/instances/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request& req, httplib::Response& res) {
          std::map<std::string, std::string> params;
          for (const auto& [key, value] : req.params) params.emplace(key, value);
          send_result(res,
                      locked([&](MarketSim& s, double t) { return s.list_instances(params, t); }));
        }));

    server.Get(R"(/api/v0/instances/?)",
               endpoint(Access::KeyRequired, [](const httplib::Request&, httplib::Response& res) {
                 send_error(res, ApiError{410, "gone",
                                          "GET /api/v0/instances/ is deprecated. Use "
                                          "/api/v1/instances/ instead"});
               }));

    server.Get(
        R"(/api/v0/instances/(\d{1,18})/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request& req, httplib::Response& res) {
          auto id = path_id(req);
          if (!id) {
            send_json(res, 200, json{{"instances", nullptr}});
            return;
          }
          send_json(res, 200,
                    locked([&](MarketSim& s, double t) { return s.show_instance(*id, t); }));
        }));

    server.Put(
        R"(/api/v0/instances/bid_price/(\d{1,18})/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request& req, httplib::Response& res) {
          auto body = parse_body(req, res);
          if (!body) return;
          auto id = path_id(req).value_or(-1);
          send_result(res,
                      locked([&](MarketSim& s, double t) { return s.change_bid(id, *body, t); }));
        }));

    server.Put(
        R"(/api/v0/instances/(\d{1,18})/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request& req, httplib::Response& res) {
          auto body = parse_body(req, res);
          if (!body) return;
          auto id = path_id(req).value_or(-1);
          send_result(
              res, locked([&](MarketSim& s, double t) { return s.update_instance(id, *body, t); }));
        }));

    server.Delete(
        R"(/api/v0/instances/(\d{1,18})/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request& req, httplib::Response& res) {
          auto id = path_id(req).value_or(-1);
          send_result(res, locked([&](MarketSim& s, double t) {
                        auto destroyed = s.destroy_instance(id, t);
                        if (destroyed && options.on_destroyed) options.on_destroyed(id);
                        return destroyed;
                      }));
        }));

    server.Get(
        R"(/api/v0/users/current/?)",
        endpoint(Access::KeyRequired, [this](const httplib::Request&, httplib::Response& res) {
          send_json(res, 200, locked([&](MarketSim& s, double t) { return s.current_user(t); }));
        }));

    if (options.params) install_param_routes();
    install_control_routes();

    // Unrouted paths (httplib's bare 404) get vast's error shape too.
    server.set_error_handler(httplib::Server::HandlerWithResponse(
        [](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          send_json(res, res.status,
                    json{{"success", false},
                         {"error", res.status == 404 ? "not_found" : "error"},
                         {"msg", "market-sim: no endpoint " + req.method + " " + req.path}});
          return httplib::Server::HandlerResponse::Handled;
        }));
    server.set_exception_handler(
        [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
          send_error(res, ApiError{500, "server_error",
                                   "market-sim internal error: " + util::exception_message(ep)});
        });
    server.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      if (options.log)
        options.log(req.method + " " + req.path + " -> " + std::to_string(res.status));
    });
  }

  // market-sim's own controls, not part of the vast API: no faults or rate limits apply, the key
  // does. PUT /proverfleet-sim/faults with a --faults spec as the body ("none" or empty: no
  // faults) replaces the injected faults from the next request on, so a test run can quiet the
  // market for a phase that tests something else; the reply is the spec now in force.
  void install_control_routes() {
    server.Put("/proverfleet-sim/faults", [this](const httplib::Request& req,
                                                 httplib::Response& res) {
      if (!authorized(req)) {
        send_error(res, ApiError{401, "unauthorized",
                                 "missing or invalid API key (send Authorization: Bearer <key>)"});
        return;
      }
      constexpr std::size_t kMaxSpecBytes = 256;
      if (req.body.size() > kMaxSpecBytes) {
        send_error(res, ApiError{400, "invalid_args",
                                 "fault spec is " + std::to_string(req.body.size()) +
                                     " bytes; at most " + std::to_string(kMaxSpecBytes)});
        return;
      }
      const std::string text = req.body == "none" ? std::string() : req.body;
      auto spec = parse_fault_spec(text);
      if (!spec) {
        send_error(res, ApiError{400, "invalid_args", "fault spec: " + spec.error()});
        return;
      }
      faults.set_spec(*spec);
      if (options.log) options.log("faults now: " + spec->to_string());
      send_json(res, 200, json{{"success", true}, {"faults", spec->to_string()}});
    });
  }

  // Parameter stand-ins: not part of the vast API, so neither faults nor auth apply.
  void install_param_routes() {
    // Throttled downloads hold a worker each for as long as they last; the API must not
    // queue behind them (httplib's default pool is 8 threads).
    server.new_task_queue = [] { return new httplib::ThreadPool(kParamServerThreads); };
    server.Get(
        "/proverfleet-sim/params.json", [this](const httplib::Request&, httplib::Response& res) {
          send_json(res, 200, options.params->manifest(own_url() + "/proverfleet-sim/params/"));
        });
    server.Get(R"(/proverfleet-sim/params/([^/]+))", [this](const httplib::Request& req,
                                                            httplib::Response& res) {
      std::shared_ptr<const ParamStandIns> params = options.params;
      const ParamStandIn* file = params->find(req.matches[1].str());
      if (file == nullptr) {
        send_error(res,
                   ApiError{404, "not_found",
                            "market-sim: no parameter stand-in named " + req.matches[1].str()});
        return;
      }
      const double rate = params->bytes_per_s(download_mbps_now());
      const auto start = std::chrono::steady_clock::now();
      auto sent = std::make_shared<std::size_t>(0);
      // httplib answers a Range request with 206 and calls this for the ranged bytes only.
      res.set_content_provider(
          file->content.size(), "application/octet-stream",
          [params, file, rate, start, sent](std::size_t offset, std::size_t length,
                                            httplib::DataSink& sink) {
            constexpr std::size_t kPiece = 16 * 1024;
            const std::size_t n = std::min(kPiece, length);
            if (!sink.write(file->content.data() + offset, n)) return false;
            *sent += n;
            std::this_thread::sleep_until(
                start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(static_cast<double>(*sent) / rate)));
            return true;
          });
    });
  }

  // Downloads are anonymous: the median truth download speed of the live instances stands for
  // the downloader's (of every offer when none is live).
  double download_mbps_now() {
    std::lock_guard lock(mutex);
    std::vector<double> live, all;
    for (std::size_t i : sim.rented_offer_indices()) {
      live.push_back(sim.scenario().offers[i].truth.download_mbps);
    }
    for (const auto& o : sim.scenario().offers) all.push_back(o.truth.download_mbps);
    return median(live).value_or(median(all).value_or(0));
  }

  std::string own_url() const {
    std::string host = bound_host;
    if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
    if (host == "::") host = "::1";
    if (host.find(':') != std::string::npos) host = "[" + host + "]";
    return "http://" + host + ":" + std::to_string(bound_port);
  }

  static constexpr int kParamServerThreads = 32;

  MarketSim sim;
  MarketSimServerOptions options;
  std::string bound_host;
  int bound_port = 0;
  FaultInjector faults;
  mutable std::mutex mutex;
  // Each caller's recent calls per endpoint; forgotten all at once past kMaxCallers (a client
  // inventing keys gets no more than a fresh start).
  static constexpr std::size_t kMaxCallers = 4096;
  std::mutex rate_mutex;
  std::map<std::string, std::array<market::RateWindow, market::kVastEndpointCount>> callers;
  httplib::Server server;
  market::HttpListener listener{server};  // after `server`: destroyed (so stopped) before it
};

MarketSimServer::MarketSimServer(MarketSim sim, MarketSimServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(sim), std::move(options))) {
  if (!impl_->options.clock_h) {
    throw std::invalid_argument("MarketSimServer needs a clock (options.clock_h)");
  }
  impl_->install_routes();
}

MarketSimServer::~MarketSimServer() {
  stop();
}

tl::expected<int, std::string> MarketSimServer::bind(const std::string& host, int port) {
  auto bound = impl_->listener.bind(host, port);
  if (!bound) return bound;
  impl_->bound_host = host;
  impl_->bound_port = *bound;
  return bound;
}

bool MarketSimServer::serve() {
  return impl_->listener.serve();
}

void MarketSimServer::stop() {
  impl_->listener.stop();
}

MarketSimServer::Status MarketSimServer::status() const {
  std::lock_guard lock(impl_->mutex);
  const double t = impl_->options.clock_h();
  const MarketSim& s = impl_->sim;
  return Status{t,
                s.listed_offers(t).size(),
                s.instances_created(),
                s.live_instances(),
                s.spent_usd(t),
                s.balance_usd(t)};
}

bool MarketSimServer::container_stopped(std::int64_t id) const {
  std::lock_guard lock(impl_->mutex);
  return impl_->sim.container_stopped(id, impl_->options.clock_h());
}

}  // namespace pf::market_sim
