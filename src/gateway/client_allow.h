// Which clients may call the gateway: an allow-list of IP addresses and CIDR blocks, IPv4 and
// IPv6. The cuzk protocol carries no credentials, so the client's address is the only thing the
// gateway can judge a caller by (besides TLS on the transport).
//
// Rules: an empty list allows every client that reaches the port (the listen address is then
// the only guard: see gateway_server.h). An IPv4 client seen through an IPv6 socket
// (::ffff:a.b.c.d) is matched as the IPv4 address. A peer that is not an IP address (a Unix
// socket) matches no entry.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace pf::gateway {

struct IpAddress {
  bool v6 = false;
  std::array<std::uint8_t, 16> bytes{};  // IPv4 uses the first 4

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

struct AddressBlock {
  IpAddress base;  // host bits cleared
  int prefix = 0;  // leading bits that must match: 0..32 (IPv4), 0..128 (IPv6)
};

// "a.b.c.d", "a.b.c.d/n", "::1", "fd00::/8" (IPv4-mapped IPv6 is taken as the IPv4 address).
// The error names the entry and what is wrong with it.
tl::expected<AddressBlock, std::string> parse_address_block(std::string_view text);
tl::expected<std::vector<AddressBlock>, std::string> parse_allow_list(
    const std::vector<std::string>& entries);

// The client address in a gRPC peer string: "ipv4:127.0.0.1:5432", "ipv6:[::1]:5432" (also
// percent-encoded: "ipv6:%5B::1%5D:5432"). nullopt for anything else ("unix:/path").
std::optional<IpAddress> peer_ip(std::string_view peer);

bool allowed(const std::vector<AddressBlock>& allow, const std::optional<IpAddress>& client);

std::string to_string(const IpAddress& address);

}  // namespace pf::gateway
