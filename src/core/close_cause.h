// Why an instance was closed: typed where the close is decided and stored with the row, so
// whoever reads it later (the host blame, the operator cooldown in core::decide, the reports)
// never recovers it from the human-readable reason.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pf::core {

enum class CloseCause {
  Rejected,      // the acceptance test said no
  Deadline,      // lifecycle: a state deadline passed
  MarketExited,  // lifecycle: market says exited (prover crash)
  // lifecycle: the market stopped it (its contract ended, it was outbid, the account's credit ran
  // out) and it did not resume: never the host's fault
  MarketStopped,
  HostOffline,     // lifecycle: market offline / heartbeat lost
  OtherLifecycle,  // lifecycle: anything else (repeated prover crashes, never registered, ...)
  Dropped,         // the policy asked (its action carries its own strike, if any)
  Operator,        // the operator asked
  Horizon,         // still rented when the simulation ended
  Vanished,        // the market no longer lists it
  NotRented,       // the create failed or was never confirmed: nothing was rented
  Orphan,          // our label on the market, unknown to the store
};

const char* to_string(CloseCause cause);
std::optional<CloseCause> parse_close_cause(std::string_view text);

// A close decided with its cause and the reason shown to people.
struct Closing {
  CloseCause cause = CloseCause::OtherLifecycle;
  std::string reason;
};

}  // namespace pf::core
