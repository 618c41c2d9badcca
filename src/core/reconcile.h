// Reconciliation as a plan: the store's rows against one complete market instance list, at
// `now`, give the actions the manager then only executes, each with its reason.
//
//   listed, our label, no row            → RecordOrphan (row it, then close it: cause Orphan)
//   listed, its row destroyed            → DestroyListed (it may still bill)
//   listed, its row has another market id → DestroyListed (a duplicate create)
//   listed, its row has no market id     → Adopt
//   listed, status differs from the row  → RecordStatus (bill the old status up to now first)
//   listed, its row renting              → ConfirmCreate (→ booting)
//   row unlisted, no market id           → Close with cause NotRented once
//                                          core::unconfirmed_create_close_reason says so
//   row unlisted, market id, past grace  → Close with cause Vanished
// Rows being destroyed are the tick's; listed instances without our label are not ours.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/close_cause.h"
#include "core/fleet.h"
#include "core/market_stop.h"

namespace pf::core {

// A market instance as the list gave it (the fields reconciliation reads).
struct ListedInstance {
  std::int64_t id = 0;
  std::int64_t machine_id = 0;
  std::string label;
  std::string actual_status;
  std::string status_msg;
  std::string gpu_name;
  int num_gpus = 0;
  double dph_total = 0;
  // Why a stopped instance is stopped (core/market_stop.h).
  std::string intended_status;
  std::string cur_state;
  std::string next_state;
  double end_date = 0;  // the host's contract end, epoch s; 0: not said
  bool is_bid = false;
};

struct ReconcileConfig {
  double vanish_grace_s = 120;  // reads can lag a create
  double renting_max_s = 600;   // an unconfirmed create waits at most this long
};

struct ReconcileAction {
  enum class Kind { RecordOrphan, DestroyListed, Adopt, RecordStatus, ConfirmCreate, Close };
  Kind kind = Kind::Adopt;
  std::int64_t instance_id = 0;          // the row concerned (0 for RecordOrphan)
  std::optional<ListedInstance> listed;  // the market's entry concerned, if any
  std::string deployment_id;             // RecordOrphan: from the label
  std::optional<Closing> close;          // Close (and RecordOrphan): cause and reason
  std::string reason;                    // for the audit trail
};
const char* to_string(ReconcileAction::Kind kind);

// A listed instance's status fields, as core::explain_market_stop reads them.
MarketStatus market_status_of(const ListedInstance& listed);

// `rows`: every live row plus the rows of listed deployments (destroyed ones included).
// `creates_in_flight`: rows whose create call has not returned.
std::vector<ReconcileAction> plan_reconcile(const std::vector<InstanceRecord>& rows,
                                            const std::vector<ListedInstance>& listed, double now,
                                            const std::set<std::int64_t>& creates_in_flight,
                                            const ReconcileConfig& config);

// The deployment id in one of our labels, or nullopt when the label is not ours.
std::optional<std::string> deployment_of_label(const std::string& label);

}  // namespace pf::core
