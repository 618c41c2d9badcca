// Closing an instance, for the manager's every destroy path and the simulator alike: the move
// to destroying with its typed cause stored on the record, and the strike its host earns.
#pragma once

#include <optional>
#include <string>

#include "core/blocklist.h"
#include "core/close_cause.h"
#include "core/fleet.h"
#include "core/lifecycle.h"

namespace pf::core {

struct CloseStep {
  InstanceState state_before = InstanceState::Renting;
  std::string message;           // the transition, for the audit trail
  std::optional<Strike> strike;  // blame for the host, if the close earns any
};

// Moves `rec` to destroying at `now` for `closing` (reason and cause stored on the record).
// The strike is `asked` when the caller's policy brought its own (a drop with a reason to
// blame), else what core::strike_for_close gives the cause. nullopt (record unchanged) when
// the instance is already being destroyed or gone.
std::optional<CloseStep> close_instance(InstanceRecord& rec, const Closing& closing, double now,
                                        int our_others_on_machine,
                                        const std::optional<Strike>& asked,
                                        const LifecycleConfig& cfg);

}  // namespace pf::core
