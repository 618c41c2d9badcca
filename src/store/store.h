// The Store: every fact the manager must not lose. The manager writes an action's intent here
// before it acts, so a crash at any point leaves a record to resume or reconcile from.
// Implementation: SqlStore (src/store/sql_store.h), on SQLite or PostgreSQL. Failures throw
// StoreError.
#pragma once

#include <memory>
#include <string>

#include "store/event_store.h"
#include "store/host_store.h"
#include "store/instance_store.h"
#include "store/job_input_store.h"
#include "store/job_store.h"
#include "store/lease_store.h"
#include "store/settings_store.h"

namespace pf::store {

// Every aggregate in one database, one transaction across them. Code that needs one aggregate
// takes its interface (Leadership a LeaseStore, the operator token a SettingsStore), so that an
// edit of another aggregate's interface does not rebuild it.
class Store : public InstanceStore,
              public EventStore,
              public HostStore,
              public SettingsStore,
              public JobStore,
              public JobInputStore,
              public LeaseStore {
 public:
  ~Store() override = default;
};

// Opens the store named by `url`: a file path or "sqlite:PATH" (":memory:" for tests), or
// "postgres://..." / "postgresql://...". Applies pending migrations. Throws StoreError with a
// clear message (never showing a password from the URL).
std::unique_ptr<Store> open_store(const std::string& url);

}  // namespace pf::store
