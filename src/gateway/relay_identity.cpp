#include "gateway/relay_identity.h"

#include <openssl/crypto.h>

#include <optional>

#include "gateway/client_allow.h"

namespace pf::gateway {
namespace {

std::optional<std::string_view> metadata_value(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata, const char* key) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

bool tokens_match(std::string_view presented, std::string_view expected) {
  return !expected.empty() && presented.size() == expected.size() &&
         CRYPTO_memcmp(presented.data(), expected.data(), expected.size()) == 0;
}

// A client identity a replica names: what direct_client makes (printable ASCII, bounded).
bool valid_client(std::string_view client) {
  if (client.empty() || client.size() > kMaxClientIdentityBytes) return false;
  for (unsigned char c : client) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

std::string direct_client(std::string_view peer) {
  if (const auto ip = peer_ip(peer)) return to_string(*ip);
  std::string out(peer.substr(0, kMaxClientIdentityBytes));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x21 || static_cast<unsigned char>(c) > 0x7e) c = '?';
  }
  return out.empty() ? std::string("unknown") : out;
}

tl::expected<Caller, std::string> identify_caller(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    std::string_view replica_token, const ClientAuth& auth) {
  const auto token = metadata_value(metadata, kReplicaTokenMetadata);
  const auto client = metadata_value(metadata, kRelayedClientMetadata);
  if (!token && !client) {
    if (const auto authorization = metadata_value(metadata, kClientTokenMetadata)) {
      if (auto named = client_of_authorization(auth.tokens, *authorization)) {
        return Caller{std::move(*named), false};
      }
      return tl::unexpected(
          std::string("the client token (authorization: Bearer ...) is not one of this gateway's "
                      "([gateway] client_tokens_file)"));
    }
    if (auth.require_token) {
      return tl::unexpected(std::string(
          "this gateway takes only calls with a client token (authorization: Bearer TOKEN; "
          "[gateway] require_client_token)"));
    }
    return Caller{kDefaultClient, false};
  }
  if (!token) {
    return tl::unexpected(std::string(
        "the call names a client (x-proverfleet-client) without a replica's token: only a "
        "replica relaying a call may"));
  }
  if (replica_token.empty()) {
    return tl::unexpected(
        std::string("this gateway runs without replicas and takes no relayed calls"));
  }
  if (!tokens_match(*token, replica_token)) {
    return tl::unexpected(std::string(
        "the replica token does not match this fleet's (a replica of another database?)"));
  }
  if (!client || !valid_client(*client)) {
    return tl::unexpected(std::string(
        "a relayed call must name its client (x-proverfleet-client: 1 to 256 printable bytes)"));
  }
  return Caller{std::string(*client), true};
}

}  // namespace pf::gateway
