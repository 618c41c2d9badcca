#include "core/close.h"

namespace pf::core {

std::optional<CloseStep> close_instance(InstanceRecord& rec, const Closing& closing, double now,
                                        int our_others_on_machine,
                                        const std::optional<Strike>& asked,
                                        const LifecycleConfig& cfg) {
  CloseStep step;
  step.state_before = rec.state;
  // Destroying has no deadline, so no break-even enters it.
  auto message = apply_transition(rec, InstanceState::Destroying, now, closing.reason, 0, cfg);
  if (!message) return std::nullopt;
  rec.close_cause = closing.cause;
  step.message = std::move(*message);
  step.strike = asked ? asked
                      : strike_for_close(rec, step.state_before, closing.cause, closing.reason, now,
                                         our_others_on_machine);
  return step;
}

}  // namespace pf::core
