#include "core/unconfirmed_create.h"

#include "core/text.h"

namespace pf::core {

std::optional<std::string> unconfirmed_create_close_reason(const InstanceRecord& rec, double now,
                                                           const UnconfirmedCreate& seen) {
  if (rec.state != InstanceState::Renting || rec.market_id) return std::nullopt;
  if (seen.label_listed) return std::nullopt;
  const double age = now - rec.created_at;
  if (age >= seen.renting_max_s) return "create never appeared at the market";
  if (!seen.create_in_flight && age >= seen.vanish_grace_s) {
    return "create outcome unknown and no instance with its label listed after " +
           fixed(seen.vanish_grace_s, 0) + " s";
  }
  return std::nullopt;
}

}  // namespace pf::core
