// Who a gateway call is for (issues 14, 25): the client that sent it, even when a follower
// replica relayed it to the leader. Request ids are idempotency keys per client
// (jobs/job_queue.h), so a job must carry the client that asked, never the replica that passed
// the call on.
//
//  - A direct caller is the client its token names (gateway/client_tokens.h), or, without a
//    token, the operator's own cluster (kDefaultClient): every Curio node, whatever its address,
//    since a Curio task's retry may run on any node. Its address decides only the allow-list.
//  - A relayed call carries the relaying replica's token (kReplicaTokenMetadata) and the client
//    it relays for (kRelayedClientMetadata). The token is the replicas' shared secret: a random
//    value each replica reads from the store they share (cli/serve_leader_term.cpp), so only a
//    process that can read the fleet's database holds it. The leader takes the named client only
//    when the token matches (compared in constant time); a client that names a client, or
//    presents a token that does not match, is refused (PERMISSION_DENIED), never believed. The
//    follower checked its own allow-list before relaying, so a replica's call is not held to the
//    leader's list.
//  - The token travels in the call's metadata: serve the gateway over TLS ([gateway] tls_cert)
//    where the network between replicas is not trusted.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <tl/expected.hpp>

#include "gateway/client_tokens.h"

namespace pf::gateway {

inline constexpr const char* kReplicaTokenMetadata = "x-proverfleet-replica-token";
inline constexpr const char* kRelayedClientMetadata = "x-proverfleet-client";
inline constexpr std::size_t kMaxClientIdentityBytes = 256;

// A caller's address from its gRPC peer string, for logs and refusals ("ipv4:10.0.0.7:51234" →
// "10.0.0.7", "ipv6:[::ffff:10.0.0.7]:1" → "10.0.0.7", "ipv6:[fd00::7]:1" → "fd00::7";
// anything else as given, cut to kMaxClientIdentityBytes).
std::string direct_client(std::string_view peer);

struct Caller {
  std::string client;    // who the call is for
  bool relayed = false;  // a replica relayed it (and authenticated as one)
};

// Who a call with this metadata is for; `replica_token` is this gateway's copy of
// the replicas' secret ("" when it runs alone: relayed calls are refused); `auth` the client
// tokens the operator issued. The error says why the call is refused (never the token).
tl::expected<Caller, std::string> identify_caller(
    const std::multimap<grpc::string_ref, grpc::string_ref>& metadata,
    std::string_view replica_token, const ClientAuth& auth = {});

}  // namespace pf::gateway
