// A rent whose create never got a definite answer (the market answered 500, the reply was
// lost): the row waits in renting without a market id, and counts against the autopilot's caps
// while it waits. Nothing is ever re-created for it; this decides when waiting is over.
#pragma once

#include <optional>
#include <string>

#include "core/fleet.h"

namespace pf::core {

struct UnconfirmedCreate {
  bool create_in_flight = false;  // our create call for it has not returned yet
  // A complete market list holds an instance with its label (reconcile then adopts it).
  bool label_listed = false;
  double vanish_grace_s = 120;  // how long market reads may lag a create
  double renting_max_s = 600;   // the hard limit, whatever the lists said
};

// Why a renting row without a market id can be closed as "nothing was rented" at `now`, after a
// complete market list was read, or nullopt to keep waiting. Young rows and rows whose create
// is still running wait (reads lag creates), up to renting_max_s. Once the grace has passed,
// the create has returned and the list shows no instance with its label, nothing was rented (should
// one appear later all the same, reconcile destroys it as a destroyed row that is still listed).
std::optional<std::string> unconfirmed_create_close_reason(const InstanceRecord& rec, double now,
                                                           const UnconfirmedCreate& seen);

}  // namespace pf::core
