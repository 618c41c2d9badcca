#include "core/market_stop.h"

#include <algorithm>

#include "core/text.h"

namespace pf::core {

const char* to_string(StopCause cause) {
  switch (cause) {
    case StopCause::ContractEnded:
      return "contract_ended";
    case StopCause::Outbid:
      return "outbid";
    case StopCause::StoppedByAccount:
      return "stopped_by_account";
    case StopCause::Held:
      return "held";
  }
  return "held";
}

std::optional<MarketStop> explain_market_stop(const MarketStatus& s, double now) {
  if (s.actual_status != "stopped") return std::nullopt;
  const std::string said = s.status_msg.empty() ? "" : " (market: \"" + s.status_msg + "\")";
  if (s.end_date > 0 && s.end_date <= now) {
    return MarketStop{StopCause::ContractEnded, false,
                      "its host's contract ended " + fixed((now - s.end_date) / 60, 0) +
                          " min ago: vast stopped it and it cannot restart" + said};
  }
  const bool all_stopped =
      s.intended_status == "stopped" && s.cur_state == "stopped" && s.next_state == "stopped";
  if (s.is_bid && (all_stopped || s.intended_status == "stopped")) {
    return MarketStop{StopCause::Outbid, true,
                      "outbid: an interruptible rental stops while a higher bid has the machine "
                      "and resumes when its bid is top again" +
                          said};
  }
  if (s.intended_status == "stopped") {
    return MarketStop{StopCause::StoppedByAccount, true,
                      "the account stopped it (credit run out, or stopped from the console); it "
                      "resumes if started again" +
                          said};
  }
  return MarketStop{StopCause::Held, true,
                    "stopped while the market means it to run (the host restarting it, or "
                    "waiting for its GPUs)" +
                        said};
}

namespace {
// The part of the stop going on now that fell in the current state (a stop may have begun
// before the state did).
double current_stop_in_state_s(const InstanceRecord& rec, double now) {
  if (rec.market_status != "stopped" || rec.market_status_since <= 0) return 0;
  return std::max(0.0, now - std::max(rec.market_status_since, rec.state_since));
}
}  // namespace

void record_market_status(InstanceRecord& rec, const std::string& status, double now) {
  if (rec.market_status == "stopped" && status != "stopped" && rec.market_status_since > 0) {
    const double stood = std::max(0.0, now - rec.market_status_since);
    if (rec.deadline_at > 0) rec.deadline_at += stood;
    rec.market_stopped_s += current_stop_in_state_s(rec, now);
  }
  if (status == "stopped" && rec.market_status != "stopped") ++rec.market_stops;
  rec.market_status = status;
  rec.market_status_since = now;
}

double running_seconds_in_state(const InstanceRecord& rec, double now) {
  const double in_state = std::max(0.0, now - rec.state_since);
  return std::max(0.0, in_state - rec.market_stopped_s - current_stop_in_state_s(rec, now));
}

}  // namespace pf::core
