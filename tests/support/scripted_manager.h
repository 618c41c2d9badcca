// Test double: the manager's agent API (design §7) served in-process by cpp-httplib, scripted
// by the test. Records every register, heartbeat, event (deduplicated by seq, as the real
// manager does) and log push; hands out queued commands; can refuse events (503) or go away
// entirely (stop) and come back on the same port (start). Header-only.
#pragma once

#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/eventually.h"
#include "support/free_port.h"

namespace pf::test {

class ScriptedManager {
 public:
  using json = nlohmann::json;

  explicit ScriptedManager(bool start_now = true) {
    port_ = free_port();  // fixed, so that stop/start come back at the same address
    if (start_now) start();
  }
  ~ScriptedManager() { stop(); }
  ScriptedManager(const ScriptedManager&) = delete;
  ScriptedManager& operator=(const ScriptedManager&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // --- script ------------------------------------------------------------------------------
  std::string deployment = "dep-1";
  std::string secret = "s3cret";
  std::int64_t instance_id = 42;
  double heartbeat_s = 1;
  json params = json::array();
  json prover = json::object();
  json benchmark = {
      {"min_samples", 3}, {"max_samples", 6}, {"max_seconds", 3600}, {"break_even_rate", 10}};
  json machine = json::object();         // e.g. {"oom_partitions": 12}: what earlier rentals taught
  std::atomic<bool> events_down{false};  // 503 to every events POST

  void push_command(json command) {
    std::lock_guard lock(mu_);
    commands_.push_back(std::move(command));
  }
  // Forgets the current token (a manager restored from before the registration): the agent's
  // next call gets 401, and its registration with the same token is taken again.
  void revoke_token() {
    std::lock_guard lock(mu_);
    token_.clear();
    bound_token_.clear();
  }
  // Someone else registered with the secret (it leaked): the agent's next call gets 401 and
  // its own registration is refused (409), as the real manager's single-use secret does.
  void hijack_registration() {
    std::lock_guard lock(mu_);
    token_ = bound_token_ = "hijacker";
  }

  void start() {
    std::lock_guard lock(server_mu_);
    if (server_) return;
    server_ = std::make_unique<httplib::Server>();
    install(*server_);
    if (!server_->bind_to_port("127.0.0.1", port_)) {
      throw std::runtime_error("ScriptedManager: cannot bind port " + std::to_string(port_));
    }
    thread_ = std::thread([s = server_.get()] { s->listen_after_bind(); });
    while (!server_->is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  void stop() {
    std::lock_guard lock(server_mu_);
    if (!server_) return;
    server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }

  // --- what happened -----------------------------------------------------------------------
  std::vector<json> events() const {
    std::lock_guard lock(mu_);
    return events_;
  }
  std::vector<json> events_of(const std::string& type) const {
    std::vector<json> out;
    for (const auto& e : events()) {
      if (e.value("type", "") == type) out.push_back(e);
    }
    return out;
  }
  std::vector<json> heartbeats() const {
    std::lock_guard lock(mu_);
    return heartbeats_;
  }
  std::vector<json> registrations() const {
    std::lock_guard lock(mu_);
    return registrations_;
  }
  int duplicates() const {
    std::lock_guard lock(mu_);
    return duplicates_;
  }
  std::string logs() const {
    std::lock_guard lock(mu_);
    return logs_;
  }
  int measured_proofs() const {
    int n = 0;
    for (const auto& e : events_of("proof_done")) n += e.value("phase", "") == "measured";
    return n;
  }

  // Polls `done` until it holds or `timeout` passes.
  bool wait_for(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = kEventuallyLimit) const {
    return eventually(done, timeout);
  }

 private:
  static void reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
  }

  bool authorized(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    return !token_.empty() && req.get_header_value("Authorization") == "Bearer " + token_;
  }

  void install(httplib::Server& s) {
    s.Post("/api/v1/agent/register", [this](const httplib::Request& req, httplib::Response& res) {
      const json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || body.value("deployment", "") != deployment ||
          body.value("secret", "") != secret) {
        return reply(res, 401, {{"error", "unknown deployment or wrong secret"}});
      }
      std::lock_guard lock(mu_);
      registrations_.push_back(body);
      // The secret is single-use: the first token binds it; only that token registers again.
      const std::string offered = body.value("token", "");
      if (!bound_token_.empty() && offered != bound_token_) {
        return reply(res, 409, {{"error", "the deployment secret was already used"}});
      }
      token_ = offered.empty() ? "tok-" + std::to_string(registrations_.size()) : offered;
      bound_token_ = token_;
      reply(res, 200,
            {{"instance_id", instance_id},
             {"token", token_},
             {"heartbeat_s", heartbeat_s},
             {"params", params},
             {"prover", prover},
             {"benchmark", benchmark},
             {"machine", machine},
             {"offer", {{"id", 1}}}});
    });
    s.Post("/api/v1/agent/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return reply(res, 401, {{"error", "invalid agent token"}});
      const json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || !body.contains("phase")) {
        return reply(res, 400, {{"error", "missing field 'phase'"}});
      }
      std::lock_guard lock(mu_);
      heartbeats_.push_back(body);
      json commands = json::array();
      while (!commands_.empty()) {
        commands.push_back(commands_.front());
        commands_.pop_front();
      }
      reply(res, 200, {{"commands", commands}});
    });
    s.Post("/api/v1/agent/events", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return reply(res, 401, {{"error", "invalid agent token"}});
      if (events_down) return reply(res, 503, {{"error", "store unavailable"}});
      const json body = json::parse(req.body, nullptr, false);
      if (!body.is_object() || !body.contains("events") || !body["events"].is_array()) {
        return reply(res, 400, {{"error", "missing field 'events'"}});
      }
      int accepted = 0, dup = 0;
      std::lock_guard lock(mu_);
      for (const auto& e : body["events"]) {
        if (!e.contains("seq") || !e["seq"].is_number_integer() || !e.contains("type")) {
          return reply(res, 400, {{"error", "bad event"}});
        }
        if (seqs_.insert(e["seq"].get<std::int64_t>()).second) {
          events_.push_back(e);
          ++accepted;
        } else {
          ++dup;
        }
      }
      duplicates_ += dup;
      reply(res, 200, {{"accepted", accepted}, {"duplicates", dup}});
    });
    s.Post("/api/v1/agent/logs", [this](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req)) return reply(res, 401, {{"error", "invalid agent token"}});
      std::lock_guard lock(mu_);
      logs_ += req.body;
      reply(res, 200, {{"accepted_bytes", req.body.size()}});
    });
  }

  int port_ = 0;
  std::mutex server_mu_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::string token_;
  std::string bound_token_;  // the token the secret was first used with
  std::deque<json> commands_;
  std::vector<json> registrations_;
  std::vector<json> heartbeats_;
  std::vector<json> events_;
  std::set<std::int64_t> seqs_;
  int duplicates_ = 0;
  std::string logs_;
};

}  // namespace pf::test
