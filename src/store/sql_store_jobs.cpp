// SqlStore's proof jobs (issue 12): the `jobs` table.
#include <algorithm>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "core/text.h"
#include "store/sql_columns.h"
#include "store/sql_store.h"
#include "store/sql_store_detail.h"
#include "util/bounded_json.h"

namespace pf::store {
namespace {

using nlohmann::json;
using sql::dump_json;
using sql::Statement;

using JobColumns = sql::Columns<core::Job, sql::RowRead>;
using J = sql::ColumnsOf<core::Job, sql::RowRead>;

// The instances this job must not run on again, as a JSON array of ids.
sql::Column<core::Job, sql::RowRead> avoid_instances_column() {
  return {"avoid_instances",
          [](Statement& s, const char* p, const core::Job& j) {
            s.bind_text(
                p, dump_json(json(j.avoid_instances), s.doing() + ": encoding avoid_instances"));
          },
          [](const Statement& s, const char* n, core::Job& j, sql::RowRead& c) {
            auto avoid = util::parse_json(s.text_view(n));
            if (!avoid || !avoid->is_array()) {
              throw StoreError(c.what + " has a corrupt avoid_instances list");
            }
            j.avoid_instances.clear();
            for (const auto& id : *avoid) {
              if (!id.is_number_integer()) {
                throw StoreError(c.what + " has a corrupt avoid_instances list");
              }
              j.avoid_instances.push_back(id.get<std::int64_t>());
            }
          },
          [](const core::Job& from, core::Job& to) { to.avoid_instances = from.avoid_instances; }};
}

// The jobs table but id and the proof's bytes (written and read on their own: a proof is
// fetched once, not with every listing), in the order the migrations added them.
const JobColumns& job_columns() {
  static const JobColumns columns{
      J::text("request_id", &core::Job::request_id),
      J::named("kind", &core::Job::kind, core::parse_job_kind),
      J::int32("priority", &core::Job::priority),
      J::named("state", &core::Job::state, core::parse_job_state),
      J::text("input_digest", &core::Job::input_digest),
      J::int64("input_bytes", &core::Job::input_bytes),
      J::int32("attempts", &core::Job::attempts),
      J::int32("failures", &core::Job::failures),
      J::opt_int64("instance_id", &core::Job::instance_id),
      J::real("lease_expires_at", &core::Job::lease_expires_at),
      J::real("submitted_at", &core::Job::submitted_at),
      J::real("deadline_at", &core::Job::deadline_at),
      J::real("assigned_at", &core::Job::assigned_at),
      J::real("started_at", &core::Job::started_at),
      J::real("finished_at", &core::Job::finished_at),
      J::real("delivered_at", &core::Job::delivered_at),
      J::text("proof_digest", &core::Job::proof_digest),
      J::text("error", &core::Job::error),
      avoid_instances_column(),
      J::int32("rejections", &core::Job::rejections),
      J::real("prove_ms", &core::Job::prove_ms),
      J::real("gpu_ms", &core::Job::gpu_ms),
      J::real("queue_ms", &core::Job::queue_ms),
      J::text("client", &core::Job::client),
      J::opt_int64("hedge_instance_id", &core::Job::hedge_instance_id),
      J::real("hedge_assigned_at", &core::Job::hedge_assigned_at),
      J::real("hedge_lease_expires_at", &core::Job::hedge_lease_expires_at),
  };
  return columns;
}

core::Job read_job(const Statement& s) {
  core::Job j;
  j.id = s.integer("id");
  sql::RowRead context{"job " + std::to_string(j.id)};
  job_columns().read(s, j, context);
  return j;
}

std::string job_select(std::string_view where) {
  static const std::string select = "SELECT id, " + job_columns().list() + " FROM jobs ";
  return select + std::string(where);
}

using EventColumns = sql::Columns<core::JobEvent, sql::RowRead>;
using E = sql::ColumnsOf<core::JobEvent, sql::RowRead>;

const EventColumns& job_event_columns() {
  static const EventColumns columns{
      E::int64("job_id", &core::JobEvent::job_id),
      E::real("at", &core::JobEvent::at),
      E::named("kind", &core::JobEvent::kind, core::parse_job_event_kind),
      E::int32("attempt", &core::JobEvent::attempt),
      E::opt_int64("instance_id", &core::JobEvent::instance_id),
      E::text("detail", &core::JobEvent::detail),
  };
  return columns;
}

}  // namespace

std::vector<std::string> sql::job_tables_columns(std::string_view table) {
  if (table == "jobs") return job_columns().names();
  if (table == "job_events") return job_event_columns().names();
  return {};
}

// --- proof jobs ----------------------------------------------------------------------------------

std::int64_t SqlStore::insert_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  static const std::string sql = "INSERT INTO jobs (" + job_columns().list() + ") VALUES (" +
                                 job_columns().placeholders() + ") RETURNING id";
  Statement s(*conn_, sql,
              "inserting job with request_id '" + job.request_id + "' from '" + job.client + "'");
  job_columns().bind(s, job);
  return sql::inserted_id(s);
}

void SqlStore::update_job(const core::Job& job) {
  std::lock_guard lock(mutex_);
  const std::string doing = "updating job " + std::to_string(job.id);
  static const std::string sql =
      "UPDATE jobs SET " + job_columns().assignments() + " WHERE id = :id";
  Statement s(*conn_, sql, doing);
  job_columns().bind(s, job);
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

std::vector<core::Job> SqlStore::jobs(const JobFilter& filter, std::size_t limit,
                                      std::int64_t before_id) {
  std::lock_guard lock(mutex_);
  // The WHERE clause holds only the filters set, so each combination is its own prepared
  // statement with its own plan (at most one per combination: a few dozen in practice).
  std::string where = "WHERE 1 = 1";
  std::vector<std::function<void(Statement&)>> binds;
  const auto any_of = [&](const char* column, const char* prefix, const auto& values) {
    if (values.empty()) return;
    std::string slots;
    std::size_t i = 0;
    for (const auto& value : values) {
      const std::string name = std::string(":") + prefix + std::to_string(i++);
      slots += (slots.empty() ? "" : ", ") + name;
      binds.push_back([name, text = std::string(core::to_string(value))](Statement& st) {
        st.bind_text(name.c_str(), text);
      });
    }
    where += std::string(" AND ") + column + " IN (" + slots + ")";
  };
  any_of("state", "s", filter.states);
  any_of("kind", "k", filter.kinds);
  if (filter.client) {
    where += " AND client = :client";
    binds.push_back([&](Statement& st) { st.bind_text(":client", *filter.client); });
  }
  // A job's instance_id is its last holder; the timeline's leases name every earlier one.
  if (filter.instance_id) {
    where +=
        " AND (instance_id = :instance OR id IN (SELECT job_id FROM job_events WHERE "
        "instance_id = :instance AND kind = 'leased'))";
    binds.push_back([&](Statement& st) { st.bind_int(":instance", *filter.instance_id); });
  }
  if (filter.machine_id) {
    where +=
        " AND (instance_id IN (SELECT id FROM instances WHERE machine_id = :machine) OR id IN "
        "(SELECT e.job_id FROM job_events e JOIN instances i ON i.id = e.instance_id WHERE "
        "i.machine_id = :machine AND e.kind = 'leased'))";
    binds.push_back([&](Statement& st) { st.bind_int(":machine", *filter.machine_id); });
  }
  if (!filter.request_id_prefix.empty()) {
    // Request ids are printable ASCII (jobs/job_queue.cpp check_request): characters are bytes.
    where += " AND substr(request_id, 1, :prefix_len) = :prefix";
    binds.push_back([&](Statement& st) {
      st.bind_int(":prefix_len", static_cast<std::int64_t>(filter.request_id_prefix.size()));
      st.bind_text(":prefix", filter.request_id_prefix);
    });
  }
  if (filter.submitted_since) {
    where += " AND submitted_at >= :since";
    binds.push_back([&](Statement& st) { st.bind_real(":since", *filter.submitted_since); });
  }
  if (filter.submitted_until) {
    where += " AND submitted_at < :until";
    binds.push_back([&](Statement& st) { st.bind_real(":until", *filter.submitted_until); });
  }
  if (filter.late) {
    // core::job_timeliness's Late: delivered after the deadline, or undelivered past it (open,
    // or done and not yet handed over). Failed and cancelled jobs are missed or withdrawn.
    where +=
        " AND deadline_at > 0 AND state IN ('queued', 'assigned', 'proving', 'done') AND "
        "(CASE WHEN state = 'done' AND delivered_at > 0 THEN delivered_at ELSE :late_now END) > "
        "deadline_at";
    binds.push_back([&](Statement& st) { st.bind_real(":late_now", filter.now); });
  }
  if (filter.at_risk_typical_s) {
    // core::is_at_risk, in the same arithmetic (left = deadline - now; 0 < left < typical).
    where +=
        " AND state = 'queued' AND deadline_at > 0 AND deadline_at - :risk_now > 0 AND "
        "deadline_at - :risk_now < :typical";
    binds.push_back([&](Statement& st) {
      st.bind_real(":risk_now", filter.now);
      st.bind_real(":typical", *filter.at_risk_typical_s);
    });
  }
  if (before_id > 0) {
    where += " AND id < :before";
    binds.push_back([&](Statement& st) { st.bind_int(":before", before_id); });
  }
  Statement s(*conn_, job_select(where + " ORDER BY id DESC LIMIT :limit"), "listing jobs");
  for (const auto& bind : binds) bind(s);
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
  Statement s(
      *conn_,
      std::string("SELECT DISTINCT input_digest FROM (") + sql::kJobInputsInUseSql + ") AS in_use",
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
  // renewed, whatever this one read before. The instance renews the jobs it holds and the
  // hedge copies it runs (jobs.hedge_instance_id), each its own expiry.
  Statement s(*conn_,
              "UPDATE jobs SET lease_expires_at = CASE WHEN instance_id = :instance THEN :expires "
              "ELSE lease_expires_at END, hedge_lease_expires_at = CASE WHEN hedge_instance_id = "
              ":instance THEN :expires ELSE hedge_lease_expires_at END WHERE (instance_id = "
              ":instance OR hedge_instance_id = :instance) AND state IN ('assigned', 'proving') "
              "AND id IN (" +
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

std::vector<core::DeliveryCount> SqlStore::delivery_counts(double since, double until,
                                                           double bucket_s) {
  std::lock_guard lock(mutex_);
  const std::string doing = "counting the jobs delivered in a range";
  if (!(bucket_s > 0)) throw StoreError(doing + ": the bucket must be positive");
  // The bucket index rounded down (SQLite's CAST truncates, which is the same for the range's
  // non-negative offsets; PostgreSQL's rounds, hence FLOOR). On time as core::job_timeliness
  // judges a delivered job: no deadline, or delivered by it.
  const std::string bucket = conn_->dialect() == sql::Dialect::Postgres
                                 ? "CAST(FLOOR((delivered_at - :since) / :bucket) AS BIGINT)"
                                 : "CAST((delivered_at - :since) / :bucket AS INTEGER)";
  Statement s(*conn_,
              "SELECT " + bucket +
                  " AS bucket, instance_id, kind, CASE WHEN deadline_at <= 0 OR delivered_at <= "
                  "deadline_at THEN 1 ELSE 0 END AS on_time, COUNT(*) AS n FROM jobs WHERE "
                  "state = 'done' AND delivered_at > 0 AND delivered_at >= :since AND "
                  "delivered_at <= :until GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
              doing);
  s.bind_real(":since", since);
  s.bind_real(":until", until);
  s.bind_real(":bucket", bucket_s);
  std::vector<core::DeliveryCount> out;
  while (s.next()) {
    core::DeliveryCount d;
    d.bucket = s.integer("bucket");
    if (!s.is_null("instance_id")) d.instance_id = s.integer("instance_id");
    const std::string kind = s.text("kind");
    const auto parsed = core::parse_job_kind(kind);
    if (!parsed) throw StoreError(doing + ": unknown kind '" + kind + "'");
    d.kind = *parsed;
    d.on_time = s.integer("on_time") != 0;
    d.jobs = s.integer("n");
    out.push_back(d);
  }
  return out;
}

// --- job timelines
// --------------------------------------------------------------------------------

void SqlStore::add_job_events(const std::vector<core::JobEvent>& events) {
  if (events.empty()) return;
  std::lock_guard lock(mutex_);
  static const std::string sql = "INSERT INTO job_events (" + job_event_columns().list() +
                                 ") VALUES (" + job_event_columns().placeholders() + ")";
  for (const auto& event : events) {
    Statement s(*conn_, sql,
                "recording '" + std::string(core::to_string(event.kind)) + "' of job " +
                    std::to_string(event.job_id));
    if (event.detail.size() > core::kMaxJobEventDetailBytes) {
      core::JobEvent cut = event;
      cut.detail = std::string(core::utf8_prefix(event.detail, core::kMaxJobEventDetailBytes));
      job_event_columns().bind(s, cut);
    } else {
      job_event_columns().bind(s, event);
    }
    s.run();
  }
}

std::vector<core::JobEvent> SqlStore::job_events(std::int64_t job_id, std::size_t limit) {
  std::lock_guard lock(mutex_);
  const std::string doing = "reading the timeline of job " + std::to_string(job_id);
  Statement s(*conn_,
              "SELECT * FROM (SELECT id, " + job_event_columns().list() +
                  " FROM job_events WHERE job_id = :job ORDER BY id DESC LIMIT :limit) AS recent "
                  "ORDER BY id",
              doing);
  s.bind_int(":job", job_id);
  s.bind_int(":limit", sql::limit_or_all(limit));
  std::vector<core::JobEvent> out;
  while (s.next()) {
    core::JobEvent e;
    sql::RowRead context{"event " + std::to_string(s.integer("id")) + " of job " +
                         std::to_string(job_id)};
    job_event_columns().read(s, e, context);
    out.push_back(std::move(e));
  }
  return out;
}

int SqlStore::drop_job_events(double before) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "DELETE FROM job_events WHERE at < :before", "removing old job timelines");
  s.bind_real(":before", before);
  s.run();
  return static_cast<int>(s.changes());
}

}  // namespace pf::store
