// What every part of the Store shares: transactions. Each aggregate's interface (instance_store.h,
// job_store.h, ...) derives from it virtually, so the one Store that implements them all has
// one transaction, and code that needs one aggregate can run a transaction through it.
#pragma once

#include <functional>

#include "store/confirm.h"

namespace pf::store {

class Transactions {
 public:
  virtual ~Transactions() = default;

  // Runs fn atomically: all its writes land or none do. Nested calls join the outer one.
  virtual void transaction(const std::function<void()>& fn) = 0;
  // transaction(), except that the commit may still be on its way when it returns: wait for the
  // returned Confirm, or hand it what to do then, with the caller's own locks released, before
  // relying on the writes. Other transactions run meanwhile and are applied after it. For a
  // caller holding a lock others queue on (the Manager's agent path): its round trip to the
  // database no longer holds them, and a reply that waits with then() holds no thread either.
  // Inside another transaction it joins that one (confirmed by its commit).
  virtual Confirm transaction_sent(const std::function<void()>& fn) = 0;
};

}  // namespace pf::store
