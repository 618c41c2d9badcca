// Why the market stopped an instance the manager never asked to stop (the manager stops nothing:
// it destroys), read from what vast reports of the instance. None of these is the host's fault;
// they differ in whether the instance can come back:
//  - its host's contract ended (`end_date` passed; vast-cli 5567983 vast.py:1855 reads an
//    instance's end_date as its contract's end): vast stops it and it cannot restart; it may be
//    deleted 48 h later (docs.vast.ai, Instances / contract end);
//  - an interruptible (bid) rental was outbid: stopped, it resumes when its bid is top again;
//    all three of `cur_state`, `intended_status` and `next_state` read "stopped" (how dstack's
//    vastai backend detects it: github.com/dstackai/dstack/pull/4037, issue #4026; vast docs,
//    "Interruptible instances");
//  - the account stopped it: `intended_status` "stopped" on an on-demand rental, when the credit
//    ran out (vast stops every instance at a zero balance: docs.vast.ai/billing-help) or someone
//    stopped it from the console; it resumes if started again;
//  - held: stopped while the market still intends it to run (the host is restarting it, or is
//    waiting for its GPUs, "Scheduling").
// Pure; the reconcile plan (core/reconcile.h) and the lifecycle (core/lifecycle.h) act on it.
#pragma once

#include <optional>
#include <string>

#include "core/fleet.h"

namespace pf::core {

// What the market says of one instance (vast's instance fields of the same names).
struct MarketStatus {
  std::string actual_status;  // "stopped", "running", ... ("" while null)
  std::string intended_status;
  std::string cur_state;
  std::string next_state;
  std::string status_msg;
  double end_date = 0;  // the host's contract end, epoch s; 0: not said
  bool is_bid = false;  // an interruptible rental
};

enum class StopCause { ContractEnded, Outbid, StoppedByAccount, Held };
const char* to_string(StopCause cause);

struct MarketStop {
  StopCause cause = StopCause::Held;
  bool may_resume = true;  // false: it will never run again (destroy it now)
  std::string reason;
};

// nullopt unless actual_status is "stopped". `now`: epoch s.
std::optional<MarketStop> explain_market_stop(const MarketStatus& status, double now);

// The row's market status becomes `status` at `now` (the caller bills the old one up to now
// first: core::accrue_rental_spend). Leaving "stopped", the time the instance stood stopped was
// not its own: the state's deadline moves on by it, so a download or a benchmark the market cut
// short does not miss its deadline for it (a stop is not the host's fault).
// The stopped time also counts on the row (market_stopped_s), for the state's own clocks, and
// each stop in market_stops.
void record_market_status(InstanceRecord& rec, const std::string& status, double now);

// Seconds rec has been in its state at `now` less the time the market held it stopped meanwhile
// (ended stops and one still going on): what a benchmark's time cap and a download's judgement
// measure, so a preemption or a contract pause is not counted as the host's slowness.
double running_seconds_in_state(const InstanceRecord& rec, double now);

}  // namespace pf::core
