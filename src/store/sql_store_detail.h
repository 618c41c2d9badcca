// Internal to src/store: helpers the SqlStore files share, each written once for every dialect.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "store/sql_connection.h"

namespace pf::store::sql {

inline std::string dump_json(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    throw StoreError(std::string(what) + ": " + e.what());
  }
}

// "No limit" for a LIMIT parameter: PostgreSQL refuses SQLite's negative one.
inline constexpr std::int64_t kNoLimit = std::numeric_limits<std::int64_t>::max();

inline std::int64_t limit_or_all(std::size_t limit) {
  constexpr auto kMax = static_cast<std::size_t>(kNoLimit);
  return limit == 0 ? kNoLimit : static_cast<std::int64_t>(limit < kMax ? limit : kMax);
}

// Runs an `INSERT ... RETURNING id` and returns the id.
inline std::int64_t inserted_id(Statement& s) {
  if (!s.next()) throw StoreError(s.doing() + ": the insert returned no id");
  const std::int64_t id = s.integer("id");
  s.run();
  return id;
}

// Any bytes into and out of a column meant for them (agent_logs.text, settings.value): SQLite
// keeps them in TEXT as given (its schema predates PostgreSQL), PostgreSQL in BYTEA, since its
// TEXT refuses NUL bytes and invalid UTF-8.
inline void bind_bytes(Dialect dialect, Statement& s, const char* name, std::string_view bytes) {
  if (dialect == Dialect::Postgres)
    s.bind_blob(name, bytes);
  else
    s.bind_text(name, bytes);
}

inline std::string read_bytes(Dialect dialect, const Statement& s, const char* col) {
  return dialect == Dialect::Postgres ? s.blob(col) : s.text(col);
}

// The digests of the job inputs some job still needs (store/job_store.h job_inputs_in_use):
// open jobs', and those of jobs finished or delivered at or after :since. One rule, read by the
// listing and by the input sweep's NOT IN (sql_store_inputs.cpp).
inline constexpr const char* kJobInputsInUseSql =
    "SELECT input_digest FROM jobs WHERE state IN ('queued', 'assigned', 'proving') OR "
    "finished_at >= :since OR delivered_at >= :since";

// A list of ids as one parameter (a JSON array in :name), and the SQL that reads it back as a
// one-column table: a heartbeat renews all its leases in one statement whatever their number.
inline std::string id_list_sql(Dialect dialect, std::string_view name) {
  if (dialect == Dialect::Postgres) {
    return "SELECT CAST(value AS BIGINT) FROM jsonb_array_elements_text(CAST(" + std::string(name) +
           " AS jsonb)) AS value";
  }
  return "SELECT value FROM json_each(" + std::string(name) + ")";
}

// The columns the store's statements name for `table` (sql_columns.h), id and columns written on
// their own (jobs.proof) apart; empty for a table without a description. StoreSchema checks them
// against both dialects' migrated schema.
std::vector<std::string> described_columns(std::string_view table);
// Each aggregate's file answers for its own tables (empty for another's).
std::vector<std::string> instance_tables_columns(
    std::string_view table);                                            // instances, proof_samples
std::vector<std::string> event_tables_columns(std::string_view table);  // instance_events
std::vector<std::string> host_tables_columns(std::string_view table);   // bench_runs, bad_hosts,
                                                                        // memory_observations
std::vector<std::string> job_tables_columns(std::string_view table);    // jobs
std::vector<std::string> lease_tables_columns(std::string_view table);  // leader_lease

}  // namespace pf::store::sql
