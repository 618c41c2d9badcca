// Reading an HTTP exchange that did not succeed, the same way at every caller: a status that
// refuses the request for good (sending it again will not help) against one worth retrying,
// and one text for a request that got no reply.
#pragma once

#include <string>

#include "market/http_client.h"

namespace pf::market {

// A 4xx other than 408 (request timeout) and 429 (too many requests).
inline bool refused_for_good(int status) {
  return status >= 400 && status < 500 && status != 408 && status != 429;
}

// "<failure>: <libcurl's message>".
inline std::string describe(const HttpError& error) {
  return std::string(to_string(error.failure)) + ": " + error.message;
}

}  // namespace pf::market
