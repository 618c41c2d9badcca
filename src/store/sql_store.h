// The Store over SQL, written once for every database it runs on (src/store/sql_connection.h:
// SqliteConnection, PgConnection). One connection, serialised by a mutex so the HTTP server's
// threads can share it. Parsed offer snapshots are reused while their row's text is unchanged:
// agents call on every heartbeat. Several processes may share one database (replicas on
// PostgreSQL, CLI commands on SQLite): every read-modify-write is one statement or one
// transaction that locks what it reads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "store/connection_pool.h"
#include "store/store.h"
#include "store/written_copies.h"
#include "util/unique_fd.h"

namespace pf::store {

namespace sql {
class Connection;
class Statement;
struct SentCommit;
}  // namespace sql

// The schema version this build writes (the same on every database kind).
int latest_schema_version();

// Connections of a store's job input pool (SqlStore): PostgreSQL serves them in parallel;
// SQLite's readers run beside its one writer.
inline constexpr std::size_t kInputConnections = 4;
// Of them, how many one PostgreSQL input write uses at once (bench/input_store_bench.cpp: on two
// cores, two writers carry 1.3-1.5 times what one does; SQLite has one writer, so one).
inline constexpr std::size_t kInputWriters = 2;
// A pooled connection idle this long answers a health check before it is lent again.
inline constexpr double kInputConnectionCheckAfterS = 30;

class SqlStore final : public Store {
 public:
  // Applies pending migrations; refuses a database written by a newer proverfleet. `where`
  // names the database in errors (never with a password: store_url.h redacted_url).
  // `open_input_connection`, when given, opens more connections to the same database: job input
  // I/O (store/job_input_store.h) runs on a bounded pool of them (kInputConnections), so MiBs of
  // chunks never hold up the serialised connection every other call uses. Without it (an
  // in-memory database) inputs use that one connection.
  SqlStore(std::unique_ptr<sql::Connection> connection, std::string where,
           std::function<std::unique_ptr<sql::Connection>()> open_input_connection = {});
  ~SqlStore() override;
  SqlStore(const SqlStore&) = delete;
  SqlStore& operator=(const SqlStore&) = delete;

  // The database's schema version (SQLite: PRAGMA user_version; PostgreSQL: its
  // schema_version table).
  int schema_version();

  // The connection itself, for whole-database work outside the Store interface (proverfleet
  // migrate copies tables). Only while no other thread uses this store.
  sql::Connection& connection() { return *conn_; }
  // The job inputs' connection pool (nullopt: none, inputs share the one connection).
  std::optional<ConnectionPool::Stats> input_pool_stats() const;

  void transaction(const std::function<void()>& fn) override;
  Confirm transaction_sent(const std::function<void()>& fn) override;

  std::int64_t insert_instance(const core::InstanceRecord& record) override;
  void update_instance(const core::InstanceRecord& record) override;
  void update_agent_progress(const core::InstanceRecord& record) override;
  std::optional<core::InstanceRecord> instance(std::int64_t id) override;
  std::optional<core::InstanceRecord> instance_as_written(std::int64_t id) override;
  void forget_written_copies() override;
  std::optional<core::InstanceRecord> instance_by_deployment(const std::string& dep) override;
  // Market ids are not reused by vast; should two rows share one, the newest row wins.
  std::optional<core::InstanceRecord> instance_by_market_id(std::int64_t market_id) override;
  std::optional<core::InstanceRecord> instance_by_token_hash(const std::string& hash) override;
  std::vector<core::InstanceRecord> instances(bool include_destroyed) override;
  std::vector<core::InstanceRecord> instances_on_machine(std::int64_t machine_id) override;
  // In sql_store_summary.cpp.
  std::map<core::InstanceState, InstanceTotals> instance_totals() override;
  std::vector<core::InstanceRecord> destroyed_instances_since(double since) override;

  std::int64_t append_event(const core::InstanceEvent& event) override;
  std::vector<core::InstanceEvent> events(std::int64_t instance_id, std::size_t limit) override;
  void append_agent_log(std::int64_t instance_id, double at, std::string_view text,
                        std::size_t max_bytes) override;
  std::string agent_log(std::int64_t instance_id) override;
  std::int64_t drop_agent_logs(double destroyed_before) override;
  std::int64_t drop_events(double destroyed_before) override;

  bool mark_agent_seq(std::int64_t instance_id, std::int64_t seq) override;
  void insert_proof_sample(const core::ProofSample& sample) override;
  std::vector<core::ProofSample> proof_samples(std::int64_t instance_id) override;

  std::int64_t insert_bench_run(const core::BenchRun& run) override;
  std::vector<core::BenchRun> bench_runs(const core::HostKey& host) override;
  std::vector<core::BenchRun> all_bench_runs() override;
  std::vector<core::BenchRun> instance_bench_runs(std::int64_t instance_id) override;
  void insert_memory_observation(const core::MemoryObservation& observation) override;
  std::vector<core::MemoryObservation> memory_observations(std::int64_t machine_id,
                                                           const std::string& gpu_name,
                                                           std::size_t limit = 500) override;

  void put_bad_host(const core::BadHost& entry) override;
  bool remove_bad_host(std::int64_t machine_id, const std::string& source) override;
  std::vector<core::BadHost> bad_hosts() override;

  std::optional<std::string> setting(const std::string& key) override;
  void put_setting(const std::string& key, const std::string& value) override;
  std::string setting_or_put(const std::string& key, const std::string& value) override;

  std::int64_t insert_job(const core::Job& job) override;
  void update_job(const core::Job& job) override;
  std::optional<core::Job> job(std::int64_t id) override;
  std::optional<core::Job> job_by_request(const std::string& request_id) override;
  std::optional<core::Job> client_job(const std::string& client,
                                      const std::string& request_id) override;
  std::vector<core::Job> open_jobs() override;
  std::vector<core::Job> jobs(const JobFilter& filter, std::size_t limit,
                              std::int64_t before_id = 0) override;
  std::vector<double> job_arrivals_since(double since) override;
  std::map<core::JobState, std::int64_t> job_counts() override;
  void put_job_proof(std::int64_t id, const std::string& proof) override;
  std::optional<std::string> job_proof(std::int64_t id) override;
  int drop_job_proofs(double before) override;
  std::vector<std::string> job_inputs_in_use(double since) override;
  int renew_job_leases(std::int64_t instance_id, const std::vector<std::int64_t>& job_ids,
                       double lease_expires_at) override;
  std::map<std::int64_t, int> job_failure_streaks() override;
  void put_job_failure_streak(std::int64_t instance_id, int failures_in_a_row) override;
  std::vector<core::DeliveryCount> delivery_counts(double since, double until,
                                                   double bucket_s) override;
  void add_job_events(const std::vector<core::JobEvent>& events) override;
  std::vector<core::JobEvent> job_events(std::int64_t job_id, std::size_t limit) override;
  int drop_job_events(double before) override;
  // In sql_store_inputs.cpp.
  std::optional<StoredInput> job_input(const std::string& digest) override;
  bool claim_job_input(const std::string& digest, std::int64_t bytes, double now) override;
  void put_job_input_chunks(const std::string& digest, std::int64_t first_seq,
                            std::span<const std::string_view> chunks, double now) override;
  bool finish_job_input(const StoredInput& input, double now) override;
  std::vector<std::pair<std::int64_t, std::string>> job_input_chunks(const std::string& digest,
                                                                     std::int64_t first,
                                                                     std::int64_t last) override;
  InputsSwept drop_job_inputs(double finished_since, double written_before) override;
  std::vector<StoredInput> job_inputs() override;
  InputTotals job_input_totals() override;
  std::optional<core::LeaseRow> leader_lease(const std::string& name) override;
  std::optional<core::LeaseRow> lock_leader_lease(const std::string& name,
                                                  double idle_limit_s) override;
  bool write_leader_lease(const core::LeaseRow& row, const core::LeaseRow& read) override;

 private:
  struct Caches;  // parsed offer snapshots

  // The setting `key`; the caller holds mutex_.
  std::optional<std::string> read_setting(const std::string& key);
  // transaction() and transaction_sent(): runs fn in a transaction (joining an open one) and
  // commits it, or sends its commit when `send` (the outcome returned; null when joined).
  std::shared_ptr<sql::SentCommit> run_transaction(const std::function<void()>& fn, bool send);
  class SentConfirm;  // Confirm::Pending for a sent commit
  // Sent commits' outcomes (sql_store_commits.cpp). Waits for one without holding mutex_ while
  // its answer travels.
  void await_commit(const sql::SentCommit& sent);
  // Calls done(error) once `sent`'s outcome is known: at once when it is, else on the commit
  // reader's thread, started here when none runs yet.
  void when_committed(const std::shared_ptr<sql::SentCommit>& sent,
                      std::function<void(const std::string& error)> done);
  // The connection's hook (under mutex_): drops the copies a failure made untrue, and wakes the
  // commit reader when another thread read the outcomes it waits for.
  void on_sent_outcomes(bool failed);
  // The commit reader's thread: reads sent commits' answers as they arrive and runs the
  // when_committed callbacks of those known, outside mutex_.
  void read_commits();
  // Ends the reader's poll at once (under mutex_).
  void wake_commit_reader() noexcept;
  void stop_commit_reader() noexcept;
  // Writes the setting `key`: over a stored value when `replace`, else only when absent. The
  // caller holds mutex_.
  void write_setting(const std::string& key, const std::string& value, bool replace);
  // The rows a `SELECT * FROM instances|bench_runs` statement yields (the row mapping lives in
  // sql_store_instances.cpp and sql_store_hosts.cpp), for the other SqlStore files. The caller
  // holds mutex_.
  std::vector<core::InstanceRecord> read_instances(sql::Statement& s);
  std::vector<core::BenchRun> read_bench_runs(sql::Statement& s);
  // fn(connection) on a connection of the input pool (closed rather than lent again when fn
  // throws), or on the one connection under mutex_ without a pool. In sql_store_inputs.cpp.
  template <typename Fn>
  auto on_input_connection(Fn&& fn);

  std::recursive_mutex mutex_;  // held for every call and across a whole transaction
  std::unique_ptr<sql::Connection> conn_;
  std::string where_;  // the database, for errors
  std::unique_ptr<Caches> caches_;
  std::unique_ptr<ConnectionPool> input_pool_;  // null: inputs use conn_
  int depth_ = 0;          // transaction nesting; >0 means BEGIN has run on this connection
  WrittenCopies written_;  // what this process wrote (instance_as_written, mark_agent_seq)

  // when_committed callbacks whose commits' outcomes are not known yet (under mutex_).
  struct Waiting {
    std::shared_ptr<sql::SentCommit> sent;
    std::function<void(const std::string& error)> done;
  };
  std::vector<Waiting> waiting_;
  std::condition_variable_any reader_wake_;  // waiting_ gained one, or stopping
  util::UniqueFd reader_event_;              // eventfd: another thread read outcomes, or stopping
  bool reader_reading_ = false;              // the reader is reading outcomes itself (under mutex_)
  bool stopping_ = false;                    // (under mutex_)
  std::thread reader_;
};

// open_store, keeping the concrete type (tests read the schema version).
std::unique_ptr<SqlStore> open_sql_store(const std::string& url);

}  // namespace pf::store
