// What the manager's HTTP front allows a client, and the pure decisions made from it: whether a
// new connection is admitted, and how long a request head, a request body and a reply write may
// take in all. Deadlines bound a whole phase, never a single read: a client that trickles one
// byte at a time gets no more time than one that sends nothing.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

namespace pf::core {

struct HttpLimits {
  // From accept (or, on a kept-alive connection, from the first byte of the next request) to
  // the end of the request head; a TLS handshake counts towards it.
  std::chrono::milliseconds head_timeout{10'000};
  // For a body: this, plus its declared size at min_transfer_bytes_per_s.
  std::chrono::milliseconds body_timeout{10'000};
  // For writing a reply (or one chunk of a stream): this, plus its size at the same rate.
  std::chrono::milliseconds write_timeout{10'000};
  std::size_t min_transfer_bytes_per_s = 64u << 10;
  // A kept-alive connection with no next request for this long is closed.
  std::chrono::milliseconds keep_alive_timeout{5'000};
  std::size_t max_head_bytes = 16u << 10;  // request line + headers: 431 above
  std::size_t max_header_count = 100;      // 431 above
  std::size_t max_body_bytes = 1u << 20;   // declared Content-Length: 413 above, body unread
  // Open connections in all, and from one client address. Several rented machines behind one
  // NAT address are normal, so the per-address cap must not be tight.
  std::size_t max_connections = 1024;
  std::size_t max_connections_per_address = 32;
};

enum class ConnectionRefusal {
  TooManyConnections,  // max_connections reached
  TooManyFromAddress,  // max_connections_per_address reached
};
const char* to_string(ConnectionRefusal refusal);

// Whether one more connection may be admitted, given those open now: nullopt = yes.
std::optional<ConnectionRefusal> refuse_connection(const HttpLimits& limits, std::size_t open_total,
                                                   std::size_t open_from_address);

// How long a transfer of `bytes` may take in all: `base` plus the bytes at the minimum rate.
std::chrono::milliseconds transfer_allowance(const HttpLimits& limits,
                                             std::chrono::milliseconds base, std::size_t bytes);

}  // namespace pf::core
