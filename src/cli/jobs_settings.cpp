#include "cli/jobs_settings.h"

#include <filesystem>
#include <string_view>

#include "store/store_url.h"

namespace pf::cli {
namespace {

// The database file's directory, from a store URL as store::open_store reads it; the working
// directory for a server database. Nothing there is shared between replicas (job inputs are in
// the database): it holds the takeover socket and, after an upgrade, the input files to import.
std::string database_directory(std::string_view db) {
  if (store::is_postgres_url(db)) return ".";
  constexpr std::string_view kScheme = "sqlite:";
  if (db.starts_with(kScheme)) {
    db.remove_prefix(kScheme.size());
    if (db.starts_with("//")) db.remove_prefix(2);
  }
  if (db.empty() || db == ":memory:") return ".";
  const auto dir = std::filesystem::path(db).parent_path();
  return dir.empty() ? "." : dir.string();
}

}  // namespace

jobs::JobQueueConfig job_queue_config(const JobsSettings& s, const std::string& db) {
  jobs::JobQueueConfig c;
  c.data_dir = s.data_dir.empty() ? database_directory(db) : s.data_dir;
  c.max_input_bytes = static_cast<std::int64_t>(s.max_input_mib) * 1024 * 1024;
  c.max_open_jobs = s.max_open_jobs;
  c.default_deadline_s = s.default_deadline_min * 60;
  c.lease_s = s.lease_s;
  c.max_attempts = s.max_attempts;
  c.strike_after_failures = s.strike_after_failures;
  c.retention_s = s.retention_h * 3600;
  c.timeline_retention_s = s.timeline_retention_days * 86400;
  // Checked when the config is read (config.cpp): one of the three names.
  c.proof_check = jobs::parse_proof_check(s.proof_check).value_or(jobs::ProofCheck::Groth16);
  c.hedging = s.hedging;
  return c;
}

}  // namespace pf::cli
