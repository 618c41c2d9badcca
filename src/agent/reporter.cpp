#include "agent/reporter.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "core/hearing.h"
#include "market/backoff.h"

namespace pf::agent {
namespace {

using nlohmann::json;

constexpr std::size_t kEventsPerPost = 100;
constexpr std::size_t kLogChunkBytes = 64u << 10;

}  // namespace

void Reporter::emit(json event) {
  event["at"] = clock_.now();
  auto r = outbox_->add(std::move(event));
  if (!r) log_.line("cannot record an event: " + r.error());
  wake();
}

void Reporter::emit_simple(const std::string& type, const std::string& message, json data) {
  json e = {{"type", type}, {"message", message.substr(0, 4000)}};
  if (!data.empty()) e["data"] = std::move(data);
  emit(std::move(e));
}

void Reporter::heartbeat_soon(bool wake_now) {
  heartbeat_due_ = true;
  if (wake_now) wake();
}

void Reporter::wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  cv_.notify_all();
}

bool Reporter::send_heartbeat() {
  auto r = manager_->heartbeat(hooks_.heartbeat_body());
  if (r) {
    hooks_.on_reply(*r);
    return true;
  }
  if (r.error().kind == CallError::Kind::Unauthorized) hooks_.on_unauthorized(r.error());
  if (r.error().kind == CallError::Kind::Gone) {
    hooks_.request_stop("the manager is destroying this instance");
  }
  return false;
}

bool Reporter::flush_events() {
  const auto batch = outbox_->pending(kEventsPerPost);
  if (batch.empty()) return true;
  auto r = manager_->send_events(json(batch));
  const std::int64_t last = batch.back()["seq"].get<std::int64_t>();
  if (r) {
    if (auto ack = outbox_->acknowledge(last); !ack) log_.line(ack.error());
    return true;
  }
  const CallError& e = r.error();
  if (e.kind == CallError::Kind::Unauthorized) {
    hooks_.on_unauthorized(e);
    return false;
  }
  if (e.kind == CallError::Kind::Rejected) {
    // The manager will never accept this batch; holding it would block every later event.
    log_.line("the manager rejected events " + batch.front()["seq"].dump() + ".." +
              std::to_string(last) + " (" + e.message + "); dropping them");
    if (auto ack = outbox_->acknowledge(last); !ack) log_.line(ack.error());
    return true;
  }
  if (e.kind == CallError::Kind::Gone) {
    hooks_.request_stop("the manager is destroying this instance");
  }
  return false;
}

bool Reporter::push_logs() {
  LogBuffer& logs = log_.buffer();
  const auto chunk = logs.peek(kLogChunkBytes);
  if (chunk.text.empty()) return true;
  auto r = manager_->send_logs(chunk.text);
  if (r) {
    logs.consume(chunk);
    return true;
  }
  if (r.error().kind == CallError::Kind::Rejected) {
    logs.consume(chunk);  // e.g. too large for this manager: never deliverable
    return true;
  }
  return false;
}

void Reporter::loop(double heartbeat_s) {
  const double period_s =
      std::clamp(heartbeat_s / clock_.scale(), 0.25, std::max(0.25, heartbeat_s));
  LogBuffer& logs = log_.buffer();
  double next_hb = 0, next_events = 0, next_logs = 0;
  int event_failures = 0, log_failures = 0;
  std::mt19937_64 jitter(std::random_device{}());
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (stop_) break;
    }
    const double now = steady_seconds();
    if (now >= next_hb || heartbeat_due_.exchange(false)) {
      if (send_heartbeat() && (event_failures > 0 || log_failures > 0)) {
        // The manager is back (a restart, say): what waited on it goes now, not after the
        // rest of a backoff that was meant for an unreachable manager.
        event_failures = log_failures = 0;
        next_events = next_logs = 0;
      }
      next_hb = now + period_s;
    }
    if (outbox_->pending_count() > 0 && steady_seconds() >= next_events) {
      if (flush_events()) {
        event_failures = 0;
        next_events = 0;
      } else {
        next_events =
            steady_seconds() + market::full_jitter_delay_s(std::min(event_failures, 6), 0.5,
                                                           core::kAgentRetryMaxS, jitter);
        ++event_failures;
      }
    }
    if (logs.size() > 0 && steady_seconds() >= next_logs) {
      if (push_logs()) {
        log_failures = 0;
        next_logs = logs.size() > kLogChunkBytes ? 0 : steady_seconds() + period_s;
      } else {
        next_logs = steady_seconds() + market::full_jitter_delay_s(std::min(log_failures, 6), 0.5,
                                                                   core::kAgentRetryMaxS, jitter);
        ++log_failures;
      }
    }
    double wake_at = next_hb;
    if (outbox_->pending_count() > 0) {
      wake_at = std::min(wake_at, std::max(next_events, steady_seconds()));
    }
    if (logs.size() > 0) wake_at = std::min(wake_at, std::max(next_logs, steady_seconds()));
    std::unique_lock lock(mu_);
    const double wait_s = std::max(0.0, wake_at - steady_seconds());
    cv_.wait_for(lock, std::chrono::duration<double>(wait_s),
                 [&] { return stop_ || wake_ || heartbeat_due_; });
    wake_ = false;
  }
}

void Reporter::start(double heartbeat_s) {
  thread_ = std::thread([this, heartbeat_s] { loop(heartbeat_s); });
}

void Reporter::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Reporter::drain(double seconds) {
  const double end = steady_seconds() + seconds;
  while (outbox_->pending_count() > 0 && steady_seconds() < end) {
    if (!flush_events()) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  for (int i = 0; i < 4 && log_.buffer().size() > 0 && steady_seconds() < end; ++i) {
    if (!push_logs()) break;
  }
}

}  // namespace pf::agent
