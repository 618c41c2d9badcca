// SqlStore's proof jobs (issue 12): the `jobs` table.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "store/sql_store.h"
#include "store/sql_store_detail.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;
using sql::dump_json;
using sql::Statement;

constexpr const char* kJobColumns =
    "request_id, kind, priority, state, input_digest, input_bytes, attempts, failures, "
    "instance_id, lease_expires_at, submitted_at, deadline_at, assigned_at, started_at, "
    "finished_at, delivered_at, proof_digest, error, avoid_instances, rejections, prove_ms, "
    "gpu_ms, queue_ms, client";

void bind_job(Statement& s, const core::Job& j) {
  s.bind_text(":client", j.client);
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
  j.client = s.text("client");
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

std::int64_t SqlStore::insert_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              std::string("INSERT INTO jobs (") + kJobColumns +
                  ") VALUES (:request_id, :kind, :priority, :state, :input_digest, "
                  ":input_bytes, :attempts, :failures, :instance_id, :lease_expires_at, "
                  ":submitted_at, :deadline_at, :assigned_at, :started_at, :finished_at, "
                  ":delivered_at, :proof_digest, :error, :avoid_instances, :rejections, "
                  ":prove_ms, :gpu_ms, :queue_ms, :client) RETURNING id",
              "inserting job with request_id '" + job.request_id + "' from '" + job.client + "'");
  bind_job(s, job);
  return sql::inserted_id(s);
}

void SqlStore::update_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating job " + std::to_string(job.id);
  Statement s(*conn_,
              "UPDATE jobs SET request_id = :request_id, kind = :kind, priority = :priority, "
              "state = :state, input_digest = :input_digest, input_bytes = :input_bytes, "
              "attempts = :attempts, failures = :failures, instance_id = :instance_id, "
              "lease_expires_at = :lease_expires_at, submitted_at = :submitted_at, "
              "deadline_at = :deadline_at, assigned_at = :assigned_at, "
              "started_at = :started_at, finished_at = :finished_at, "
              "delivered_at = :delivered_at, proof_digest = :proof_digest, error = :error, "
              "avoid_instances = :avoid_instances, rejections = :rejections, "
              "prove_ms = :prove_ms, gpu_ms = :gpu_ms, queue_ms = :queue_ms, client = :client "
              "WHERE id = :id",
              doing);
  bind_job(s, job);
  s.bind_int(":id", job.id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such job");
}

std::optional<core::Job> SqlStore::job(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, job_select("WHERE id = :id"), "reading job " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::optional<core::Job> SqlStore::job_by_request(const std::string& request_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, job_select("WHERE request_id = :request_id ORDER BY id DESC LIMIT 1"),
              "reading job with request_id '" + request_id + "'");
  s.bind_text(":request_id", request_id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::optional<core::Job> SqlStore::client_job(const std::string& client,
                                              const std::string& request_id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, job_select("WHERE client = :client AND request_id = :request_id"),
              "reading job with request_id '" + request_id + "' from '" + client + "'");
  s.bind_text(":client", client);
  s.bind_text(":request_id", request_id);
  if (!s.next()) return std::nullopt;
  return read_job(s);
}

std::vector<core::Job> SqlStore::open_jobs() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, job_select("WHERE state IN ('queued', 'assigned', 'proving') ORDER BY id"),
              "reading open jobs");
  std::vector<core::Job> out;
  while (s.next()) out.push_back(read_job(s));
  return out;
}

std::vector<core::Job> SqlStore::jobs(const std::vector<core::JobState>& states, std::size_t limit,
                                      std::int64_t before_id) {
  std::lock_guard lock(mutex_);
  // One statement for every filter: a slot per state there is, unused ones NULL (which IN
  // never matches).
  static constexpr const char* kSlots[] = {":s0", ":s1", ":s2", ":s3", ":s4", ":s5"};
  static_assert(std::size(kSlots) == static_cast<std::size_t>(core::JobState::Cancelled) + 1,
                "one slot per job state");
  Statement s(*conn_,
              job_select("WHERE (:all = 1 OR state IN (:s0, :s1, :s2, :s3, :s4, :s5)) "
                         "AND (:before = 0 OR id < :before) ORDER BY id DESC LIMIT :limit"),
              "listing jobs");
  s.bind_bool(":all", states.empty());
  s.bind_int(":before", std::max<std::int64_t>(before_id, 0));
  bool wanted[std::size(kSlots)] = {};
  for (auto st : states) wanted[static_cast<std::size_t>(st)] = true;
  for (std::size_t i = 0; i < std::size(kSlots); ++i) {
    if (wanted[i])
      s.bind_text(kSlots[i], core::to_string(static_cast<core::JobState>(i)));
    else
      s.bind_null(kSlots[i]);
  }
  s.bind_int(":limit", sql::limit_or_all(limit));
  std::vector<core::Job> out;
  while (s.next()) out.push_back(read_job(s));
  return out;
}

std::vector<double> SqlStore::job_arrivals_since(double since) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT submitted_at FROM jobs WHERE submitted_at >= :since",
              "reading job arrivals");
  s.bind_real(":since", since);
  std::vector<double> out;
  while (s.next()) out.push_back(s.real("submitted_at"));
  return out;
}

std::map<core::JobState, std::int64_t> SqlStore::job_counts() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state", "counting jobs");
  std::map<core::JobState, std::int64_t> out;
  while (s.next()) {
    const std::string state = s.text("state");
    auto parsed = core::parse_job_state(state);
    if (!parsed) throw StoreError("counting jobs: unknown state '" + state + "'");
    out[*parsed] = s.integer("n");
  }
  return out;
}

void SqlStore::put_job_proof(std::int64_t id, const std::string& proof) {
  std::lock_guard lock(mutex_);
  const std::string doing = "storing the proof of job " + std::to_string(id);
  Statement s(*conn_, "UPDATE jobs SET proof = :proof WHERE id = :id", doing);
  s.bind_blob(":proof", proof);
  s.bind_int(":id", id);
  s.run();
  if (s.changes() == 0) throw StoreError(doing + ": no such job");
}

std::optional<std::string> SqlStore::job_proof(std::int64_t id) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT proof FROM jobs WHERE id = :id",
              "reading the proof of job " + std::to_string(id));
  s.bind_int(":id", id);
  if (!s.next() || s.is_null("proof")) return std::nullopt;
  return s.blob("proof");
}

int SqlStore::drop_job_proofs(double before) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "UPDATE jobs SET proof = NULL WHERE proof IS NOT NULL AND finished_at > 0 AND "
              "finished_at < :before AND delivered_at < :before",
              "removing old proofs");
  s.bind_real(":before", before);
  s.run();
  return static_cast<int>(s.changes());
}

std::vector<std::string> SqlStore::job_inputs_in_use(double since) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT DISTINCT input_digest FROM jobs WHERE state IN ('queued', 'assigned', "
              "'proving') OR finished_at >= :since OR delivered_at >= :since",
              "reading the job inputs in use");
  s.bind_real(":since", since);
  std::vector<std::string> out;
  while (s.next()) out.push_back(s.text("input_digest"));
  return out;
}

int SqlStore::renew_job_leases(std::int64_t instance_id, const std::vector<std::int64_t>& job_ids,
                               double lease_expires_at) {
  if (job_ids.empty()) return 0;
  std::lock_guard lock(mutex_);
  // One statement for the whole heartbeat: the ids travel as a JSON list. It is its own
  // check: a lease another replica has taken back meanwhile (state or holder changed) is not
  // renewed, whatever this one read before.
  Statement s(*conn_,
              "UPDATE jobs SET lease_expires_at = :expires WHERE instance_id = :instance AND "
              "state IN ('assigned', 'proving') AND id IN (" +
                  sql::id_list_sql(conn_->dialect(), ":ids") + ")",
              "renewing the job leases of instance " + std::to_string(instance_id));
  s.bind_real(":expires", lease_expires_at);
  s.bind_int(":instance", instance_id);
  s.bind_text(":ids", json(job_ids).dump());
  s.run();
  return static_cast<int>(s.changes());
}

std::map<std::int64_t, int> SqlStore::job_failure_streaks() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT instance_id, failures_in_a_row FROM job_failure_streaks",
              "reading job failure streaks");
  std::map<std::int64_t, int> out;
  while (s.next()) out[s.integer("instance_id")] = s.int32("failures_in_a_row");
  return out;
}

void SqlStore::put_job_failure_streak(std::int64_t instance_id, int failures_in_a_row) {
  std::lock_guard lock(mutex_);
  const std::string doing =
      "writing the job failure streak of instance " + std::to_string(instance_id);
  if (failures_in_a_row < 0) throw StoreError(doing + ": negative streak");
  if (failures_in_a_row == 0) {
    Statement s(*conn_, "DELETE FROM job_failure_streaks WHERE instance_id = :instance", doing);
    s.bind_int(":instance", instance_id);
    s.run();
    return;
  }
  Statement s(
      *conn_,
      "INSERT INTO job_failure_streaks (instance_id, failures_in_a_row) "
      "VALUES (:instance, :n) "
      "ON CONFLICT (instance_id) DO UPDATE SET failures_in_a_row = excluded.failures_in_a_row",
      doing);
  s.bind_int(":instance", instance_id);
  s.bind_int(":n", failures_in_a_row);
  s.run();
}

}  // namespace pf::store
