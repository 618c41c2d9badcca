// One accepted (Proving) instance written straight to the store with a fresh agent token: what
// benches of the agent-facing job paths start from, without a market or a benchmark run.
#pragma once

#include <cstdint>
#include <string>

#include "core/fleet.h"
#include "manager/manager.h"
#include "store/store.h"

namespace pf::testing {

struct AcceptedInstance {
  std::int64_t id = 0;
  std::string token;  // the agent's bearer token (the store keeps only its hash)
};

inline AcceptedInstance insert_accepted_instance(store::Store& store,
                                                 const std::string& deployment_id, double now) {
  core::InstanceRecord r;
  r.deployment_id = deployment_id;
  r.offer.id = 1001;
  r.offer.machine_id = 5001;
  r.offer.gpu_name = "RTX 4090";
  r.offer.num_gpus = 1;
  r.offer.dph_total = 0.4;
  r.state = core::InstanceState::Proving;
  r.created_at = r.state_since = r.last_heartbeat_at = now;
  AcceptedInstance out;
  out.token = manager::random_token();
  r.token_hash = manager::hash_token(out.token);
  out.id = store.insert_instance(r);
  return out;
}

}  // namespace pf::testing
