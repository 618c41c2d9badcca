// SqliteStore's proof jobs (issue 12): the `jobs` table.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "store/sqlite_statement.h"
#include "store/sqlite_store.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;
using sqlite_detail::dump_json;
using sqlite_detail::Statement;

constexpr const char* kJobColumns =
    "request_id, kind, priority, state, input_digest, input_bytes, attempts, failures, "
    "instance_id, lease_expires_at, submitted_at, deadline_at, assigned_at, started_at, "
    "finished_at, delivered_at, proof_digest, error, avoid_instances, rejections, prove_ms, "
    "gpu_ms, queue_ms";

void bind_job(Statement& s, const core::Job& j) {
  s.bind_text(":request_id", j.request_id);
  s.bind_text(":kind", core::to_string(j.kind));
  s.bind_int(":priority", j.priority);
  s.bind_text(":state", core::to_string(j.state));
  s.bind_text(":input_digest", j.input_digest);
  s.bind_int(":input_bytes", j.input_bytes);
  s.bind_int(":attempts", j.attempts);
  s.bind_int(":failures", j.failures);
  s.bind_opt_int(":instance_id", j.instance_id);
  s.bind_real(":lease_expires_at", j.lease_expires_at);
  s.bind_real(":submitted_at", j.submitted_at);
  s.bind_real(":deadline_at", j.deadline_at);
  s.bind_real(":assigned_at", j.assigned_at);
  s.bind_real(":started_at", j.started_at);
  s.bind_real(":finished_at", j.finished_at);
  s.bind_real(":delivered_at", j.delivered_at);
  s.bind_text(":proof_digest", j.proof_digest);
  s.bind_text(":error", j.error);
  s.bind_text(":avoid_instances",
              dump_json(json(j.avoid_instances), s.doing() + ": encoding avoid_instances"));
  s.bind_int(":rejections", j.rejections);
  s.bind_real(":prove_ms", j.prove_ms);
  s.bind_real(":gpu_ms", j.gpu_ms);
  s.bind_real(":queue_ms", j.queue_ms);
}

core::Job read_job(const Statement& s) {
  core::Job j;
  j.id = s.integer("id");
  const std::string what = "job " + std::to_string(j.id);
  j.request_id = s.text("request_id");
  const std::string kind = s.text("kind");
  auto parsed_kind = core::parse_job_kind(kind);
  if (!parsed_kind) throw StoreError(what + " has unknown kind '" + kind + "'");
  j.kind = *parsed_kind;
  j.priority = s.int32("priority");
  const std::string state = s.text("state");
  auto parsed_state = core::parse_job_state(state);
  if (!parsed_state) throw StoreError(what + " has unknown state '" + state + "'");
  j.state = *parsed_state;
  j.input_digest = s.text("input_digest");
  j.input_bytes = s.integer("input_bytes");
  j.attempts = s.int32("attempts");
  j.failures = s.int32("failures");
  j.instance_id = s.opt_integer("instance_id");
  j.lease_expires_at = s.real("lease_expires_at");
  j.submitted_at = s.real("submitted_at");
  j.deadline_at = s.real("deadline_at");
  j.assigned_at = s.real("assigned_at");
  j.started_at = s.real("started_at");
  j.finished_at = s.real("finished_at");
  j.delivered_at = s.real("delivered_at");
  j.proof_digest = s.text("proof_digest");
  j.error = s.text("error");
  auto avoid = util::parse_json(s.text_view("avoid_instances"));
  if (!avoid || !avoid->is_array()) throw StoreError(what + " has a corrupt avoid_instances list");
  for (const auto& id : *avoid) {
    if (!id.is_number_integer()) throw StoreError(what + " has a corrupt avoid_instances list");
    j.avoid_instances.push_back(id.get<std::int64_t>());
  }
  j.rejections = s.int32("rejections");
  j.prove_ms = s.real("prove_ms");
  j.gpu_ms = s.real("gpu_ms");
  j.queue_ms = s.real("queue_ms");
  return j;
}

std::string job_select(std::string_view where) {
  return std::string("SELECT id, ") + kJobColumns + " FROM jobs " + std::string(where);
}

}  // namespace

// --- proof jobs ----------------------------------------------------------------------------------

std::int64_t SqliteStore::insert_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              std::string("INSERT INTO jobs (") + kJobColumns +
                  ") VALUES (:request_id, :kind, :priority, :state, :input_digest, "
                  ":input_bytes, :attempts, :failures, :instance_id, :lease_expires_at, "
                  ":submitted_at, :deadline_at, :assigned_at, :started_at, :finished_at, "
                  ":delivered_at, :proof_digest, :error, :avoid_instances, :rejections, "
                  ":prove_ms, :gpu_ms, :queue_ms)",
              "inserting job with request_id '" + job.request_id + "'");
  bind_job(s, job);
  s.run();
  return sqlite3_last_insert_rowid(db_.get());
}

void SqliteStore::update_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating job " + std::to_string(job.id);
  Statement s(*statements_, db_.get(),
              "UPDATE jobs SET request_id = :request_id, kind = :kind, priority = :priority, "
              "state = :state, input_digest = :input_digest, input_bytes = :input_bytes, "
              "attempts = :attempts, failures = :failures, instance_id = :instance_id, "
              "lease_expires_at = :lease_expires_at, submitted_at = :submitted_at, "
              "deadline_at = :deadline_at, assigned_at = :assigned_at, "
              "started_at = :started_at, finished_at = :finished_at, "
              "delivered_at = :delivered_at, proof_digest = :proof_digest, error = :error, "
              "avoid_instances = :avoid_instances, rejections = :rejections, "
              "prove_ms = :prove_ms, gpu_ms = :gpu_ms, queue_ms = :queue_ms WHERE id = :id",
              doing);
  bind_job(s, job);
  s.bind_int(":id", job.id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such job");
}

std::optional<core::Job> SqliteStore::job(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), job_select("WHERE id = :id"),
              "reading job " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::optional<core::Job> SqliteStore::job_by_request(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), job_select("WHERE request_id = :request_id"),
              "reading job with request_id '" + request_id + "'");
  s.bind_text(":request_id", request_id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::vector<core::Job> SqliteStore::open_jobs() {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              job_select("WHERE state IN ('queued', 'assigned', 'proving') ORDER BY id"),
              "reading open jobs");
  std::vector<core::Job> out;
  while (s.next()) out.push_back(read_job(s));
  return out;
}

std::vector<core::Job> SqliteStore::jobs(const std::vector<core::JobState>& states,
                                         std::size_t limit) {
  std::lock_guard lock(mutex_);
  // One statement for every filter: the states travel as a JSON list.
  json names = json::array();
  for (auto st : states) names.push_back(core::to_string(st));
  Statement s(*statements_, db_.get(),
              job_select("WHERE :all OR state IN (SELECT value FROM json_each(:states)) "
                         "ORDER BY id DESC LIMIT :limit"),
              "listing jobs");
  s.bind_bool(":all", states.empty());
  s.bind_text(":states", names.dump());
  constexpr auto kMax = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
  s.bind_int(":limit", limit == 0 ? -1 : static_cast<std::int64_t>(std::min(limit, kMax)));
  std::vector<core::Job> out;
  while (s.next()) out.push_back(read_job(s));
  return out;
}

std::vector<double> SqliteStore::job_arrivals_since(double since) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT submitted_at FROM jobs WHERE submitted_at >= :since",
              "reading job arrivals");
  s.bind_real(":since", since);
  std::vector<double> out;
  while (s.next()) out.push_back(s.real("submitted_at"));
  return out;
}

std::map<core::JobState, std::int64_t> SqliteStore::job_counts() {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state",
              "counting jobs");
  std::map<core::JobState, std::int64_t> out;
  while (s.next()) {
    const std::string state = s.text("state");
    auto parsed = core::parse_job_state(state);
    if (!parsed) throw StoreError("counting jobs: unknown state '" + state + "'");
    out[*parsed] = s.integer("n");
  }
  return out;
}

void SqliteStore::put_job_proof(std::int64_t id, const std::string& proof) {
  std::lock_guard lock(mutex_);
  const std::string doing = "storing the proof of job " + std::to_string(id);
  Statement s(*statements_, db_.get(), "UPDATE jobs SET proof = :proof WHERE id = :id", doing);
  s.bind_blob(":proof", proof);
  s.bind_int(":id", id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such job");
}

std::optional<std::string> SqliteStore::job_proof(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(), "SELECT proof FROM jobs WHERE id = :id",
              "reading the proof of job " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next() || s.is_null("proof")) return std::nullopt;
  return s.blob("proof");
}

int SqliteStore::drop_job_proofs(double before) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              "UPDATE jobs SET proof = NULL WHERE proof IS NOT NULL AND finished_at > 0 AND "
              "finished_at < :before AND delivered_at < :before",
              "removing old proofs");
  s.bind_real(":before", before);
  s.run();
  return s.changes();
}

std::vector<std::string> SqliteStore::job_inputs_in_use(double since) {
  std::lock_guard lock(mutex_);
  Statement s(*statements_, db_.get(),
              "SELECT DISTINCT input_digest FROM jobs WHERE state IN ('queued', 'assigned', "
              "'proving') OR finished_at >= :since OR delivered_at >= :since",
              "reading the job inputs in use");
  s.bind_real(":since", since);
  std::vector<std::string> out;
  while (s.next()) out.push_back(s.text("input_digest"));
  return out;
}

}  // namespace pf::store
