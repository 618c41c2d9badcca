// Small key/value settings shared by every process on the database. Part of the Store
// (store.h).
#pragma once

#include <optional>
#include <string>

#include "store/transactions.h"

namespace pf::store {

class SettingsStore : public virtual Transactions {
 public:
  ~SettingsStore() override = default;

  // --- settings (small key/value: operator token hash, autopilot pause, ...) -----------------
  virtual std::optional<std::string> setting(const std::string& key) = 0;
  virtual void put_setting(const std::string& key, const std::string& value) = 0;
  // The setting `key`, stored as `value` first when there is none. Callers racing on a new key
  // (replicas starting together) all get the one value that was stored. Not inside transaction().
  virtual std::string setting_or_put(const std::string& key, const std::string& value) = 0;
};

}  // namespace pf::store
