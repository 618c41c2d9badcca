// Bearer tokens and what the manager keeps of them: a random token (hex of 32 bytes from the
// OS), its SHA-256 hex (what the store holds: a leaked database does not leak a token), a
// constant-time comparison of two hashes. Used for agents' tokens and deployment secrets, the
// operator's token, replica tokens, webhook delivery ids.
#pragma once

#include <cstddef>
#include <string>

namespace pf::manager {

// Length of an agent-chosen token: 32 random bytes in hex, as random_token() makes.
inline constexpr std::size_t kAgentTokenHexChars = 64;

std::string random_token();
std::string hash_token(const std::string& token);
// Constant-time; false when either is empty.
bool tokens_equal(const std::string& a_hash, const std::string& b_hash);
// True for a well-formed agent-chosen token (kAgentTokenHexChars lowercase hex digits).
bool is_agent_token(const std::string& token);

}  // namespace pf::manager
