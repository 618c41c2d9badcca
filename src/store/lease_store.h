// The replicas' leader lease (core/leader_lease.h), read and compare-and-set. Part of the Store
// (store.h).
#pragma once

#include <optional>
#include <string>

#include "core/leader_lease.h"
#include "store/transactions.h"

namespace pf::store {

class LeaseStore : public virtual Transactions {
 public:
  ~LeaseStore() override = default;

  // --- leader lease (replicas: core/leader_lease.h) -------------------------------------------
  // The lease row `name`; nullopt when none was ever written.
  virtual std::optional<core::LeaseRow> leader_lease(const std::string& name) = 0;
  // The same, read inside the caller's transaction so that no lease write commits before that
  // transaction ends (a fence: what it checks holds until its writes commit). PostgreSQL: FOR
  // SHARE, and the session is ended should it sit idle in the transaction past idle_limit_s (a
  // paused leader must not hold the lease row past its own term); SQLite's write transactions
  // exclude every other writer already.
  virtual std::optional<core::LeaseRow> lock_leader_lease(const std::string& name,
                                                          double idle_limit_s) = 0;
  // Compare-and-set of a take or renewal decided by core::decide_lease on the row `read`: writes
  // `row` only if the stored row still has read's holder, epoch and expiry (the empty row,
  // holder "", epoch 0, expiry 0, is created first when there is none; pass a default LeaseRow
  // for it). True when `row` was written.
  virtual bool write_leader_lease(const core::LeaseRow& row, const core::LeaseRow& read) = 0;
};

}  // namespace pf::store
