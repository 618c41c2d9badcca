// Fault injection for market-sim: the failures a vast.ai client must survive (rate limits,
// server errors, slow replies, a create whose reply is lost), drawn from a seeded generator so
// a failing test can be replayed with the same --fault-seed.
#pragma once

#include <cstdint>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::market_sim {

struct FaultSpec {
  double rate_limit_p = 0;         // "429": reply 429 before processing
  double server_error_p = 0;       // "500": reply 500 before processing
  double drop_create_reply_p = 0;  // "drop_create_reply": create executes, reply is cut
  int slow_ms = 0;                 // "slow_ms": delay before every reply

  bool any() const {
    return rate_limit_p > 0 || server_error_p > 0 || drop_create_reply_p > 0 || slow_ms > 0;
  }
  // The spec in --faults syntax, only the non-zero entries; "none" when there are none.
  std::string to_string() const;
};

inline constexpr int kMaxSlowMs = 60'000;

// Parses "429=0.2,500=0.05,drop_create_reply=0.1,slow_ms=300". Empty text: no faults.
// Unknown names, repeated names, probabilities outside [0, 1] and slow_ms outside
// [0, 60000] are errors naming the entry.
tl::expected<FaultSpec, std::string> parse_fault_spec(std::string_view text);

enum class FaultAction { None, RateLimit, ServerError };

// Thread-safe: the HTTP server draws from it on every request.
class FaultInjector {
 public:
  FaultInjector(FaultSpec spec, std::uint64_t seed) : spec_(spec), rng_(seed) {}

  FaultSpec spec() const;
  // Replaces the faults from the next request on (a test's run quiets them for a phase that
  // tests something else); the generator goes on, so a seed still replays the run.
  void set_spec(const FaultSpec& spec);
  // How long to hold the next reply (slow_ms).
  int slow_ms() const;
  // What to do with the next request before it is processed.
  FaultAction before_request();
  // Whether to cut the reply of a create that has just been executed.
  bool drop_create_reply();

 private:
  // One draw of the chance `chance_of` reads from the spec, both under the lock.
  bool draw(double FaultSpec::*chance_of);

  FaultSpec spec_;
  mutable std::mutex mutex_;
  std::mt19937_64 rng_;
};

}  // namespace pf::market_sim
