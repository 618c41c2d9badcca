// SqlStore's settings (SettingsStore, store/settings_store.h): one value per key, any bytes.
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {

using sql::Statement;

// --- settings ------------------------------------------------------------------------------------

std::optional<std::string> SqlStore::setting(const std::string& key) {
  std::lock_guard lock(mutex_);
  return read_setting(key);
}

std::optional<std::string> SqlStore::read_setting(const std::string& key) {
  Statement s(*conn_, "SELECT value FROM settings WHERE key = :key",
              "reading setting '" + key + "'");
  s.bind_text(":key", key);
  if (!s.next()) return std::nullopt;
  return sql::read_bytes(conn_->dialect(), s, "value");
}

void SqlStore::write_setting(const std::string& key, const std::string& value, bool replace) {
  Statement s(*conn_,
              replace ? "INSERT INTO settings (key, value) VALUES (:key, :value) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                      : "INSERT INTO settings (key, value) VALUES (:key, :value) "
                        "ON CONFLICT (key) DO NOTHING",
              "writing setting '" + key + "'" + (replace ? "" : " if absent"));
  s.bind_text(":key", key);
  sql::bind_bytes(conn_->dialect(), s, ":value", value);
  s.run();
}

std::string SqlStore::setting_or_put(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  // Two statements, each its own transaction: a racing insert of the same key waits for the
  // first to commit and then does nothing, and the read after it sees the row that won.
  write_setting(key, value, false);
  auto stored = read_setting(key);
  if (!stored) throw StoreError("setting '" + key + "' is missing right after it was written");
  return *stored;
}

void SqlStore::put_setting(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  write_setting(key, value, true);
}

}  // namespace pf::store
