// Retry delays for calls to a rate-limited market. vast.ai sends no Retry-After header, so
// the client spaces its retries itself: exponential growth with "full jitter" (the whole delay
// is drawn at random) keeps many clients from retrying in lockstep.
#pragma once

#include <random>

namespace pf::market {

// Delay before retry number `retry` (0 = the first retry): uniform in [0, ceiling] where
// ceiling = min(cap_s, base_s * 2^retry). Negative or non-finite inputs count as 0.
// Pure apart from drawing from `rng`, so a seeded generator makes it reproducible.
double full_jitter_delay_s(int retry, double base_s, double cap_s, std::mt19937_64& rng);

// The ceiling above, exposed for tests and for callers that want the worst case.
double backoff_ceiling_s(int retry, double base_s, double cap_s);

}  // namespace pf::market
