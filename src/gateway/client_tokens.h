// Who a direct gateway call is for (issue 25): request ids are idempotency keys per client, and a
// client is a *cluster*, not an address. Real Curio retries a failed Prove as a new harmony task
// that any Curio node may take (harmony/harmonytask/task_type_handler.go:359 at the pinned curio
// commit), sending the same request_id from another address, so an address-scoped key would
// prove the sector twice. docs/gateway.md, "Clients and request ids".
//
//  - A call without credentials is the operator's own cluster, kDefaultClient: every Curio node
//    shares its request ids. Curio sends no metadata at all (lib/cuzk/client.go:80-84, 123), so
//    this is what every real Curio node is.
//  - An operator may issue client tokens (a file of `CLIENT TOKEN` lines, [gateway]
//    client_tokens_file) to callers that can send gRPC metadata (`authorization: Bearer TOKEN`):
//    each client's request ids are then its own, isolated from the default cluster's and from
//    each other's. A token that matches no client is refused, never taken as the default.
//  - require_client_token refuses calls without a token (a gateway reachable by clients the
//    operator does not run; Curio itself cannot call it then).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

namespace pf::gateway {

inline constexpr const char* kDefaultClient = "default";
inline constexpr const char* kClientTokenMetadata = "authorization";  // "Bearer TOKEN"
inline constexpr std::size_t kMaxClientTokensFileBytes = 64 * 1024;
inline constexpr std::size_t kMaxClientTokens = 1000;
inline constexpr std::size_t kMinClientTokenBytes = 16;
inline constexpr std::size_t kMaxClientTokenBytes = 256;
inline constexpr std::size_t kMaxClientNameBytes = 64;

struct ClientToken {
  std::string client;  // [A-Za-z0-9._-], 1..64, not "default"
  std::string token;   // printable ASCII without spaces, 16..256 bytes
};

struct ClientAuth {
  std::vector<ClientToken> tokens;
  bool require_token = false;  // calls without a token are refused
};

// The text of a client tokens file: one `CLIENT TOKEN` pair a line; blank lines and lines
// starting with '#' are skipped. Client names and tokens are unique. The error names the line
// (never the token).
tl::expected<std::vector<ClientToken>, std::string> parse_client_tokens(std::string_view text);

// The client a presented `authorization` value ("Bearer TOKEN") names, compared in constant time
// against every token; nullopt when it names none.
std::optional<std::string> client_of_authorization(const std::vector<ClientToken>& tokens,
                                                   std::string_view authorization);

}  // namespace pf::gateway
