#include "manager/leadership.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "manager/tokens.h"
#include "store/lease_store.h"

namespace pf::manager {

std::string replica_id_for_this_process() {
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, 5, "host");
  return std::string(host) + "-" + std::to_string(::getpid()) + "-" + random_token().substr(0, 6);
}

namespace {

std::string first_line_of(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "BOOT_ID/PID_NAMESPACE/": what two processes must share for one to judge the other's pid.
std::string machine_prefix() {
  const std::string boot = first_line_of("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  if (boot.empty() || n <= 0) return "";
  return boot + "/" + std::string(ns, static_cast<std::size_t>(n)) + "/";
}

}  // namespace

std::string process_identity() {
  const std::string prefix = machine_prefix();
  if (prefix.empty()) return "";
  return prefix + std::to_string(::getpid());
}

bool holder_process_gone(const core::LeaseRow& row) {
  const std::string prefix = machine_prefix();
  if (prefix.empty() || row.holder_process.size() <= prefix.size() ||
      row.holder_process.compare(0, prefix.size(), prefix) != 0) {
    return false;
  }
  const std::string pid_text = row.holder_process.substr(prefix.size());
  if (pid_text.empty() || pid_text.size() > 9 ||
      pid_text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
  if (pid <= 0 || pid == ::getpid()) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // A zombie (killed, not yet reaped by its parent) holds its pid but serves nothing.
  const std::string stat = first_line_of(("/proc/" + pid_text + "/stat").c_str());
  const auto close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z';
}

nlohmann::json leader_json(const LeaderView& v, bool with_ages) {
  nlohmann::json out = {
      {"replica_id", v.replica_id}, {"grpc", v.grpc},   {"role", v.leading ? "leader" : "follower"},
      {"leading", v.leading},       {"ttl_s", v.ttl_s}, {"failover_bound_s", v.failover_bound_s}};
  if (with_ages) {
    out["reason"] = v.reason;
    out["terms_taken"] = v.terms_taken;
  }
  const bool live = core::has_live_leader(v.lease, v.now);
  if (live) {
    const auto& row = *v.lease;
    out["leader"] = {{"replica_id", row.holder},
                     {"url", row.holder_url},
                     {"grpc", row.holder_grpc},
                     {"epoch", row.epoch},
                     {"taken_at", row.taken_at}};
    if (with_ages) {
      out["leader"]["lease_age_s"] = v.now - row.taken_at;
      out["leader"]["renewed_ago_s"] = v.now - row.renewed_at;
      out["leader"]["expires_in_s"] = row.expires_at - v.now;
    }
  } else {
    out["leader"] = nullptr;  // nobody leads now: a failover is in progress
  }
  return out;
}

std::string leader_prometheus(const LeaderView& v) {
  std::string out;
  out += "# HELP proverfleet_leader 1 while this replica leads (runs the loops, rents, destroys)\n";
  out += "# TYPE proverfleet_leader gauge\n";
  out += fmt::format("proverfleet_leader {}\n", v.leading ? 1 : 0);
  out += "# HELP proverfleet_leader_epoch The lease's fencing counter as last read\n";
  out += "# TYPE proverfleet_leader_epoch gauge\n";
  out += fmt::format("proverfleet_leader_epoch {}\n", v.lease ? v.lease->epoch : 0);
  const bool live = core::has_live_leader(v.lease, v.now);
  out += "# HELP proverfleet_leader_lease_age_seconds Since the current leader took its term\n";
  out += "# TYPE proverfleet_leader_lease_age_seconds gauge\n";
  out += fmt::format("proverfleet_leader_lease_age_seconds {:.3f}\n",
                     live ? v.now - v.lease->taken_at : 0.0);
  out +=
      "# HELP proverfleet_leader_lease_expires_in_seconds Until the lease lapses (<= 0: no "
      "leader)\n";
  out += "# TYPE proverfleet_leader_lease_expires_in_seconds gauge\n";
  out += fmt::format("proverfleet_leader_lease_expires_in_seconds {:.3f}\n",
                     v.lease ? v.lease->expires_at - v.now : 0.0);
  out += "# HELP proverfleet_leader_terms_taken_total Terms this replica took since it started\n";
  out += "# TYPE proverfleet_leader_terms_taken_total counter\n";
  out += fmt::format("proverfleet_leader_terms_taken_total {}\n", v.terms_taken);
  return out;
}

Leadership::Leadership(store::LeaseStore& store, LeadershipConfig config, Clock clock)
    : store_(store), config_(std::move(config)), clock_(std::move(clock)) {}

void Leadership::set_hooks(Hooks hooks) {
  std::lock_guard lock(mu_);
  hooks_ = std::move(hooks);
}

void Leadership::end_term(const std::string& reason) {
  Hooks hooks;
  {
    std::lock_guard lock(mu_);
    if (!epoch_) return;
    if (config_.log) {
      config_.log(true,
                  fmt::format("leadership: stepping down from epoch {}: {}", *epoch_, reason));
    }
    epoch_.reset();
    expires_at_ = 0;
    reason_ = reason;
    hooks = hooks_;
  }
  if (hooks.stepped_down) hooks.stepped_down(reason);
}

void Leadership::step() {
  if (retired_) {
    // A successor leads: read the row (who leads, for relaying), compete for nothing.
    try {
      auto row = store_.leader_lease(config_.lease_name);
      std::lock_guard lock(mu_);
      last_row_ = std::move(row);
    } catch (const std::exception&) {
      // The next read tries again; view() reads afresh anyway.
    }
    return;
  }
  double now = clock_();
  {
    std::unique_lock lock(mu_);
    if (epoch_ && !(now < expires_at_)) {
      lock.unlock();
      end_term("our lease ran out before it was renewed");
    }
  }
  std::optional<core::LeaseRow> row;
  core::LeaseDecision decision;
  bool written = false;
  try {
    row = store_.leader_lease(config_.lease_name);
    now = clock_();
    decision = core::decide_lease(row, config_.replica_id, config_.url, term(), now, config_.timing,
                                  config_.process, row && holder_process_gone(*row));
    decision.row.name = config_.lease_name;
    if (decision.action == core::LeaseAction::Take || decision.action == core::LeaseAction::Renew) {
      {
        std::lock_guard lock(mu_);
        decision.row.holder_grpc = grpc_address_;
      }
      written = store_.write_leader_lease(decision.row, row.value_or(core::LeaseRow{}));
    }
  } catch (const std::exception& e) {
    std::lock_guard lock(mu_);
    reason_ = std::string("store: ") + e.what();
    if (config_.log) config_.log(true, "leadership: " + reason_);
    return;
  }
  switch (decision.action) {
    case core::LeaseAction::StepDown: {
      std::lock_guard lock(mu_);
      last_row_ = row;
    }
      end_term(decision.reason);
      return;
    case core::LeaseAction::Follow: {
      std::lock_guard lock(mu_);
      last_row_ = row;
      reason_ = decision.reason;
    }
      return;
    case core::LeaseAction::Renew:
      if (!written) {
        end_term("our renewal did not land: the lease changed under us");
        std::lock_guard lock(mu_);
        last_row_ = row;
        return;
      }
      {
        std::lock_guard lock(mu_);
        expires_at_ = decision.row.expires_at;
        last_row_ = decision.row;
        reason_ = decision.reason;
      }
      return;
    case core::LeaseAction::Take:
      break;
  }
  if (!written) {
    std::lock_guard lock(mu_);
    reason_ = "another replica took the lease first";
    return;
  }
  Hooks hooks;
  {
    std::lock_guard lock(mu_);
    epoch_ = decision.row.epoch;
    expires_at_ = decision.row.expires_at;
    last_row_ = decision.row;
    reason_ = decision.reason;
    ++terms_taken_;
    hooks = hooks_;
  }
  if (config_.log)
    config_.log(false, "leadership: " + config_.replica_id + " leads: " + decision.reason);
  if (hooks.elected) hooks.elected(decision.row.epoch);
}

void Leadership::retire() {
  retired_ = true;
  {
    std::lock_guard lock(mu_);
    reason_ = "retired: a successor process takes over";
  }
  resign();
}

void Leadership::rejoin() {
  retired_ = false;
}

void Leadership::resign() {
  std::optional<std::int64_t> held = term();
  if (!held) return;
  const double now = clock_();
  try {
    auto row = store_.leader_lease(config_.lease_name);
    if (row && row->holder == config_.replica_id && row->epoch == *held) {
      core::LeaseRow ended = *row;
      ended.expires_at = now;
      ended.renewed_at = now;
      store_.write_leader_lease(ended, *row);
    }
  } catch (const std::exception& e) {
    if (config_.log) config_.log(true, std::string("leadership: resigning: ") + e.what());
  }
  end_term(retired_ ? "resigned: a successor process takes over" : "resigned (stopping)");
}

bool Leadership::leading() {
  std::lock_guard lock(mu_);
  return epoch_.has_value() && clock_() < expires_at_;
}

std::optional<std::int64_t> Leadership::term() {
  std::lock_guard lock(mu_);
  return epoch_;
}

std::optional<std::string> Leadership::fence_refusal() {
  const auto held = term();
  if (!held) return "this replica (" + config_.replica_id + ") does not lead";
  const auto row = store_.leader_lease(config_.lease_name);
  return core::fence_refusal(row, config_.replica_id, *held, clock_(), config_.timing);
}

std::optional<std::string> Leadership::fence_refusal_in_transaction() {
  const auto held = term();
  if (!held) return "this replica (" + config_.replica_id + ") does not lead";
  const auto row = store_.lock_leader_lease(config_.lease_name, config_.timing.ttl_s);
  return core::fence_refusal(row, config_.replica_id, *held, clock_(), config_.timing);
}

void Leadership::advertise_grpc(std::string address) {
  std::lock_guard lock(mu_);
  grpc_address_ = std::move(address);
}

std::optional<core::LeaseRow> Leadership::read_lease() {
  return store_.leader_lease(config_.lease_name);
}

LeaderView Leadership::view() {
  LeaderView v;
  v.replica_id = config_.replica_id;
  v.now = clock_();
  v.ttl_s = config_.timing.ttl_s;
  v.failover_bound_s = config_.timing.failover_bound_s();
  std::optional<core::LeaseRow> fresh;
  try {
    fresh = read_lease();
  } catch (const std::exception&) {
    // Shown from the last row read; step() logs store failures.
  }
  std::lock_guard lock(mu_);
  v.leading = epoch_.has_value() && v.now < expires_at_;
  v.grpc = grpc_address_;
  v.epoch = epoch_;
  v.lease = fresh ? fresh : last_row_;
  v.reason = reason_;
  v.terms_taken = terms_taken_;
  return v;
}

}  // namespace pf::manager
