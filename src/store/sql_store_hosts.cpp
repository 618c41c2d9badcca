// SqlStore's host history (HostStore, store/host_store.h): bench runs (never overwritten), bad
// hosts (per machine and source) and memory observations (issue 13: what agents saw of the
// prover's memory; core/memory_model.h learns the per-partition figure from them).
#include <algorithm>
#include <limits>
#include <string_view>
#include <vector>

#include "store/sql_columns.h"
#include "store/sql_store.h"
#include "store/sql_store_detail.h"

namespace pf::store {
namespace {

using sql::RowRead;
using sql::Statement;

// The host a bench run measured, as three columns of the run.
template <class T, class Bind, class Read>
sql::Column<core::BenchRun, RowRead> host_column(std::string name, T core::HostKey::*m, Bind bind,
                                                 Read read) {
  return {
      std::move(name),
      [m, bind](Statement& s, const char* p, const core::BenchRun& r) { bind(s, p, r.host.*m); },
      [m, read](const Statement& s, const char* n, core::BenchRun& r, RowRead&) {
        r.host.*m = read(s, n);
      },
      [m](const core::BenchRun& from, core::BenchRun& to) { to.host.*m = from.host.*m; }};
}

const sql::Columns<core::BenchRun, RowRead>& bench_run_columns() {
  using B = sql::ColumnsOf<core::BenchRun, RowRead>;
  static const sql::Columns<core::BenchRun, RowRead> columns{
      host_column(
          "machine_id", &core::HostKey::machine_id,
          [](Statement& s, const char* p, std::int64_t v) { s.bind_int(p, v); },
          [](const Statement& s, const char* n) { return s.integer(n); }),
      host_column(
          "gpu_name", &core::HostKey::gpu_name,
          [](Statement& s, const char* p, const std::string& v) { s.bind_text(p, v); },
          [](const Statement& s, const char* n) { return s.text(n); }),
      host_column(
          "num_gpus", &core::HostKey::num_gpus,
          [](Statement& s, const char* p, int v) { s.bind_int(p, v); },
          [](const Statement& s, const char* n) { return s.int32(n); }),
      B::int64("instance_id", &core::BenchRun::instance_id),
      B::real("at", &core::BenchRun::at),
      B::real("rate", &core::BenchRun::rate),
      B::real("low", &core::BenchRun::low),
      B::real("high", &core::BenchRun::high),
      B::int32("samples", &core::BenchRun::samples),
      B::text("kind", &core::BenchRun::kind),
      B::flag("contended", &core::BenchRun::contended),
      B::flag("throttled", &core::BenchRun::throttled),
      B::text("plan_json", &core::BenchRun::plan_json),
  };
  return columns;
}

core::BenchRun read_bench_run(const Statement& s) {
  core::BenchRun b;
  b.id = s.integer("id");
  RowRead context{"bench run " + std::to_string(b.id)};
  bench_run_columns().read(s, b, context);
  return b;
}

// The bad_hosts table (keyed by machine_id and source; no id).
const sql::Columns<core::BadHost, RowRead>& bad_host_columns() {
  using H = sql::ColumnsOf<core::BadHost, RowRead>;
  static const sql::Columns<core::BadHost, RowRead> columns{
      H::int64("machine_id", &core::BadHost::machine_id),
      H::text("source", &core::BadHost::source),
      H::text("reason", &core::BadHost::reason),
      H::text("evidence_json", &core::BadHost::evidence_json),
      H::real("added_at", &core::BadHost::added_at),
      H::opt_real("expires_at", &core::BadHost::expires_at),
      H::int32("strikes", &core::BadHost::strikes),
  };
  return columns;
}

core::BadHost read_bad_host(const Statement& s) {
  core::BadHost b;
  RowRead context{"bad host " + std::to_string(s.integer("machine_id"))};
  bad_host_columns().read(s, b, context);
  return b;
}

// What an agent saw of the prover's memory (issue 13); the id is the table's own.
const sql::Columns<core::MemoryObservation, RowRead>& memory_observation_columns() {
  using M = sql::ColumnsOf<core::MemoryObservation, RowRead>;
  static const sql::Columns<core::MemoryObservation, RowRead> columns{
      M::int64("instance_id", &core::MemoryObservation::instance_id),
      M::int64("machine_id", &core::MemoryObservation::machine_id),
      M::text("gpu_name", &core::MemoryObservation::gpu_name),
      M::int32("num_gpus", &core::MemoryObservation::num_gpus),
      M::real("at", &core::MemoryObservation::at),
      M::int32("partitions", &core::MemoryObservation::partitions),
      M::real("observed_peak_gib", &core::MemoryObservation::observed_peak_gib),
      M::real("model_peak_gib", &core::MemoryObservation::model_peak_gib),
      M::real("usable_ram_gib", &core::MemoryObservation::usable_ram_gib),
      M::flag("oom", &core::MemoryObservation::oom),
  };
  return columns;
}

}  // namespace

std::vector<std::string> sql::host_tables_columns(std::string_view table) {
  if (table == "bench_runs") return bench_run_columns().names();
  if (table == "bad_hosts") return bad_host_columns().names();
  if (table == "memory_observations") return memory_observation_columns().names();
  return {};
}

// --- host history --------------------------------------------------------------------------------

std::int64_t SqlStore::insert_bench_run(const core::BenchRun& run) {
  std::lock_guard lock(mutex_);
  static const std::string sql = "INSERT INTO bench_runs (" + bench_run_columns().list() +
                                 ") VALUES (" + bench_run_columns().placeholders() +
                                 ") RETURNING id";
  Statement s(*conn_, sql,
              "inserting bench run for machine " + std::to_string(run.host.machine_id));
  bench_run_columns().bind(s, run);
  return sql::inserted_id(s);
}

std::vector<core::BenchRun> SqlStore::bench_runs(const core::HostKey& host) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_,
              "SELECT * FROM bench_runs WHERE machine_id = :machine_id AND gpu_name = :gpu_name "
              "AND num_gpus = :num_gpus ORDER BY at, id",
              "reading bench runs of machine " + std::to_string(host.machine_id));
  s.bind_int(":machine_id", host.machine_id);
  s.bind_text(":gpu_name", host.gpu_name);
  s.bind_int(":num_gpus", host.num_gpus);
  return read_bench_runs(s);
}

std::vector<core::BenchRun> SqlStore::all_bench_runs() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM bench_runs ORDER BY at, id", "reading bench runs");
  return read_bench_runs(s);
}

// --- bad hosts -----------------------------------------------------------------------------------

void SqlStore::put_bad_host(const core::BadHost& entry) {
  std::lock_guard lock(mutex_);
  // The key's columns come first: every other one is replaced on conflict.
  static const std::string sql = [] {
    const auto& columns = bad_host_columns();
    std::string update;
    for (const auto& name : columns.names()) {
      if (name == "machine_id" || name == "source") continue;
      update += (update.empty() ? "" : ", ") + name + " = excluded." + name;
    }
    return "INSERT INTO bad_hosts (" + columns.list() + ") VALUES (" + columns.placeholders() +
           ") ON CONFLICT (machine_id, source) DO UPDATE SET " + update;
  }();
  Statement s(*conn_, sql,
              "putting bad host " + std::to_string(entry.machine_id) + " (" + entry.source + ")");
  bad_host_columns().bind(s, entry);
  s.run();
}

bool SqlStore::remove_bad_host(std::int64_t machine_id, const std::string& source) {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "DELETE FROM bad_hosts WHERE machine_id = :machine_id AND source = :source",
              "removing bad host " + std::to_string(machine_id) + " (" + source + ")");
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":source", source);
  s.run();
  return s.changes() > 0;
}

std::vector<core::BadHost> SqlStore::bad_hosts() {
  std::lock_guard lock(mutex_);
  Statement s(*conn_, "SELECT * FROM bad_hosts ORDER BY machine_id, source", "reading bad hosts");
  std::vector<core::BadHost> out;
  while (s.next()) out.push_back(read_bad_host(s));
  return out;
}

std::vector<core::BenchRun> SqlStore::read_bench_runs(Statement& s) {
  std::vector<core::BenchRun> out;
  while (s.next()) out.push_back(read_bench_run(s));
  return out;
}

// --- memory observations -------------------------------------------------------------------------

void SqlStore::insert_memory_observation(const core::MemoryObservation& o) {
  std::lock_guard lock(mutex_);
  static const std::string sql = "INSERT INTO memory_observations (" +
                                 memory_observation_columns().list() + ") VALUES (" +
                                 memory_observation_columns().placeholders() + ")";
  Statement s(*conn_, sql,
              "inserting memory observation of instance " + std::to_string(o.instance_id));
  memory_observation_columns().bind(s, o);
  s.run();
}

std::vector<core::MemoryObservation> SqlStore::memory_observations(std::int64_t machine_id,
                                                                   const std::string& gpu_name,
                                                                   std::size_t limit) {
  std::lock_guard lock(mutex_);
  Statement s(
      *conn_,
      "SELECT * FROM memory_observations WHERE machine_id = :machine_id OR lower(gpu_name) = "
      "lower(:gpu_name) ORDER BY at DESC, id DESC LIMIT :limit",
      "reading memory observations of machine " + std::to_string(machine_id));
  s.bind_int(":machine_id", machine_id);
  s.bind_text(":gpu_name", gpu_name);
  s.bind_int(":limit", static_cast<std::int64_t>(
                           std::min<std::size_t>(limit, std::numeric_limits<std::int32_t>::max())));
  std::vector<core::MemoryObservation> out;
  while (s.next()) {
    core::MemoryObservation o;
    RowRead context{"memory observation " + std::to_string(s.integer("id"))};
    memory_observation_columns().read(s, o, context);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace pf::store
