#include "manager/agent_token_index.h"

#include "manager/tokens.h"
#include "store/instance_store.h"

namespace pf::manager {

std::optional<std::int64_t> AgentTokenIndex::instance_of(const std::string& token) {
  if (token.empty()) return std::nullopt;
  // The lookup is by SHA-256 of a 256-bit random token, so an index lookup reveals nothing a
  // timing attack could use; the final comparison is constant-time anyway.
  const std::string hash = hash_token(token);
  std::lock_guard lock(mu_);
  if (auto it = ids_.find(hash); it != ids_.end()) return it->second;
  auto rec = store_.instance_by_token_hash(hash);
  if (!rec || !tokens_equal(rec->token_hash, hash)) return std::nullopt;
  ids_[hash] = rec->id;
  return rec->id;
}

}  // namespace pf::manager
