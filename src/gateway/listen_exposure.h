// Where the gateway may listen. The cuzk protocol carries no credentials, so whoever reaches the
// port can queue proofs on the operator's rented fleet: a listen address other than loopback
// needs a client allow-list or TLS, or the operator's explicit word (--grpc-allow-any, for a
// port a firewall already guards).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

namespace pf::gateway {

// Why serving `host` as configured is refused (a message that says what to do), or nullopt.
std::optional<std::string> exposure_refusal(const std::string& host, bool has_allow, bool has_tls,
                                            bool allow_any);
// "localhost", 127.0.0.0/8, ::1.
bool is_loopback_host(const std::string& host);

// The host part of "HOST:PORT" / "[v6]:PORT", or nullopt when it is not of that form.
std::optional<std::string> listen_host(const std::string& listen);

// [gateway] local_cuzk (gateway/local_cuzk.h): "HOST:PORT", "[IPv6]:PORT" or "unix:///path"
// (unix:/path too, as Curio's client and the daemon take them); the error says what is wrong.
tl::expected<void, std::string> check_local_cuzk_address(std::string_view address);

}  // namespace pf::gateway
