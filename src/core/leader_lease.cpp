#include "core/leader_lease.h"

#include "core/text.h"

namespace pf::core {

const char* to_string(LeaseAction action) {
  switch (action) {
    case LeaseAction::Take:
      return "take";
    case LeaseAction::Renew:
      return "renew";
    case LeaseAction::Follow:
      return "follow";
    case LeaseAction::StepDown:
      return "step_down";
  }
  return "follow";
}

namespace {

std::string holder_name(const LeaseRow& row) {
  return row.holder.empty() ? std::string("nobody") : row.holder;
}

}  // namespace

LeaseDecision decide_lease(const std::optional<LeaseRow>& row, const std::string& me,
                           const std::string& my_url, std::optional<std::int64_t> held_epoch,
                           double now, const LeaseTiming& timing, const std::string& my_process,
                           bool holder_gone) {
  LeaseDecision d;
  const LeaseRow seen = row.value_or(LeaseRow{});
  d.row = seen;
  const bool ours = !seen.holder.empty() && seen.holder == me;
  const bool lapsed = seen.holder.empty() || !(now < seen.expires_at);
  const bool expired = lapsed || (holder_gone && !ours);
  if (held_epoch) {
    if (!ours || seen.epoch != *held_epoch) {
      d.action = LeaseAction::StepDown;
      d.reason = "lease " + seen.name + " is now held by " + holder_name(seen) + " (epoch " +
                 std::to_string(seen.epoch) + "), not by us (epoch " + std::to_string(*held_epoch) +
                 ")";
      return d;
    }
    if (lapsed) {
      d.action = LeaseAction::StepDown;
      d.reason = "our lease (epoch " + std::to_string(seen.epoch) + ") lapsed " +
                 fixed(now - seen.expires_at, 1) + " s ago without a renewal";
      return d;
    }
    d.action = LeaseAction::Renew;
    d.row.holder_url = my_url;
    d.row.holder_process = my_process;
    d.row.expires_at = now + timing.ttl_s;
    d.row.renewed_at = now;
    d.reason = "renewing our lease (epoch " + std::to_string(seen.epoch) + ") until +" +
               fixed(timing.ttl_s, 1) + " s";
    return d;
  }
  if (!expired) {
    d.action = LeaseAction::Follow;
    d.reason = ours ? "the lease names us but we hold no term (a stale write of ours): following "
                      "until it lapses"
                    : "following " + seen.holder + " (epoch " + std::to_string(seen.epoch) +
                          "), lease valid for " + fixed(seen.expires_at - now, 1) + " s more";
    return d;
  }
  d.action = LeaseAction::Take;
  d.row.holder = me;
  d.row.holder_url = my_url;
  d.row.holder_process = my_process;
  d.row.epoch = seen.epoch + 1;
  d.row.expires_at = now + timing.ttl_s;
  d.row.taken_at = now;
  d.row.renewed_at = now;
  const std::string epoch_taken = "(epoch " + std::to_string(d.row.epoch) + ")";
  if (seen.holder.empty()) {
    d.reason = "nobody leads: taking the lease " + epoch_taken;
  } else if (lapsed) {
    d.reason = "the lease of " + seen.holder + " (epoch " + std::to_string(seen.epoch) +
               ") expired " + fixed(now - seen.expires_at, 1) + " s ago: taking it " + epoch_taken;
  } else {
    d.reason = "the process of " + seen.holder + " (epoch " + std::to_string(seen.epoch) +
               ") is gone from this machine: taking its lease " + epoch_taken;
  }
  return d;
}

std::optional<std::string> fence_refusal(const std::optional<LeaseRow>& row, const std::string& me,
                                         std::int64_t epoch, double now,
                                         const LeaseTiming& timing) {
  if (!row) return "no leader lease is recorded";
  if (row->holder != me) {
    return "the lease is held by " + holder_name(*row) + " (epoch " + std::to_string(row->epoch) +
           "), not by this replica";
  }
  if (row->epoch != epoch) {
    return "our term (epoch " + std::to_string(epoch) + ") ended; the lease is at epoch " +
           std::to_string(row->epoch);
  }
  if (!(now + timing.guard_s < row->expires_at)) {
    return "our lease (epoch " + std::to_string(epoch) + ") expires in " +
           fixed(row->expires_at - now, 1) + " s, under the " + fixed(timing.guard_s, 1) +
           " s guard";
  }
  return std::nullopt;
}

bool has_live_leader(const std::optional<LeaseRow>& row, double now) {
  return row && !row->holder.empty() && now < row->expires_at;
}

bool served_by_leader(std::string_view method, std::string_view route) {
  if (route.rfind("/api/v1/agent/", 0) == 0) return true;
  if (route == "/api/v1/jobs" || route.rfind("/api/v1/jobs/", 0) == 0) return true;
  if (route.rfind("/api/v1/", 0) != 0) return false;  // /healthz, /metrics, the dashboard
  if (route == "/api/v1/stream") return false;        // a read, however long
  return method != "GET" && method != "HEAD";
}

}  // namespace pf::core
