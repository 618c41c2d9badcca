// The agent's line to the manager while it runs. One thread sends heartbeats every
// heartbeat_s (and at once after a phase change), the journaled events in batches and the
// log in chunks, each with its own jittered backoff while the manager is unreachable; when a
// heartbeat gets through again, what waited goes at once. It decides nothing about the
// prover: what a heartbeat says and what its reply does are the hooks'.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "agent/agent_log.h"
#include "agent/clock.h"
#include "agent/manager_client.h"
#include "agent/outbox.h"

namespace pf::agent {

class Reporter {
 public:
  struct Hooks {
    std::function<nlohmann::json()> heartbeat_body;
    std::function<void(const HeartbeatReply&)> on_reply;
    std::function<void(const CallError&)> on_unauthorized;        // a 401 on any call
    std::function<void(const std::string& reason)> request_stop;  // a 410 on any call
  };
  // `log` and `clock` must outlive this object.
  Reporter(AgentLog& log, const AgentClock& clock, Hooks hooks)
      : log_(log), clock_(clock), hooks_(std::move(hooks)) {}
  ~Reporter() { stop(); }
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // The manager and the event journal, once the agent has them (before start() and emit()).
  void attach(ManagerClient& manager, EventOutbox& outbox) {
    manager_ = &manager;
    outbox_ = &outbox;
  }
  // Journals `event` with "at" = now (simulated) and wakes the thread to send it.
  void emit(nlohmann::json event);
  void emit_simple(const std::string& type, const std::string& message,
                   nlohmann::json data = nlohmann::json::object());

  // The next heartbeat goes out at once (`wake`: now; else at the thread's next wake-up).
  void heartbeat_soon(bool wake = true);
  void wake();

  void start(double heartbeat_s);
  // Stops the thread and joins it. Idempotent; safe before start().
  void stop();
  // After stop(): tries for up to `seconds` (real) to deliver every event and the log tail.
  // Whatever is left stays journaled for the next run.
  void drain(double seconds);

 private:
  bool send_heartbeat();
  // Sends one batch; true when the manager took it (or it can never be taken).
  bool flush_events();
  bool push_logs();
  void loop(double heartbeat_s);

  AgentLog& log_;
  const AgentClock& clock_;
  Hooks hooks_;
  ManagerClient* manager_ = nullptr;
  EventOutbox* outbox_ = nullptr;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                      // guarded by mu_
  bool wake_ = false;                      // guarded by mu_
  std::atomic<bool> heartbeat_due_{true};  // the first phase is reported at once
  std::thread thread_;
};

}  // namespace pf::agent
