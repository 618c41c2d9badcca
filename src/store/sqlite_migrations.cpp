// SQLite's migrations. Same versions as pg_migrations.cpp: a step here and its namesake there
// leave the same tables, columns and indexes.
#include <array>

#include "store/sql_migrations.h"

namespace pf::store::sql {
namespace {

// --- migrations ------------------------------------------------------------------------------
// Append-only: a released step is never edited, a change is a new step. Each step runs in its
// own transaction together with the user_version bump, so a crash leaves either all of it or
// none. Tables are created without IF NOT EXISTS so that applying a step twice fails loudly.
constexpr std::array kMigrations{
    Migration{1, "initial schema", R"sql(
CREATE TABLE instances (
  id INTEGER PRIMARY KEY,
  deployment_id TEXT NOT NULL UNIQUE,
  market_id INTEGER,
  -- The offer in vast's own form (market::offer_to_vast_json) plus what that form cannot
  -- carry exactly: derived fields and data flags.
  offer_json TEXT NOT NULL,
  offer_extra_json TEXT NOT NULL,
  state TEXT NOT NULL,
  created_at REAL NOT NULL,
  state_since REAL NOT NULL,
  deadline_at REAL NOT NULL,
  destroy_reason TEXT NOT NULL,
  destroyed_at REAL,
  secret_hash TEXT NOT NULL,
  token_hash TEXT NOT NULL,
  last_heartbeat_at REAL NOT NULL,
  market_status TEXT NOT NULL,
  market_status_since REAL NOT NULL,
  params_done_bytes REAL NOT NULL,
  params_total_bytes REAL NOT NULL,
  params_rate_bps REAL NOT NULL,
  prover_crashes INTEGER NOT NULL,
  ooms INTEGER NOT NULL,
  proofs_benchmark INTEGER NOT NULL,
  proofs_production INTEGER NOT NULL,
  gpu_util REAL NOT NULL,
  peak_memory_gib REAL NOT NULL,
  spend_usd REAL NOT NULL,
  billed_until REAL NOT NULL,
  verdict_decision TEXT,  -- NULL: no verdict yet; the other verdict_* columns are then NULL
  verdict_rate REAL,
  verdict_low REAL,
  verdict_high REAL,
  verdict_samples INTEGER,
  verdict_break_even_rate REAL,
  verdict_reason TEXT,
  plan_json TEXT NOT NULL,
  origin TEXT NOT NULL
) STRICT;
CREATE INDEX instances_market_id ON instances(market_id);
CREATE INDEX instances_state ON instances(state);
CREATE INDEX instances_token_hash ON instances(token_hash);

CREATE TABLE instance_events (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  at REAL NOT NULL,
  kind TEXT NOT NULL,
  message TEXT NOT NULL,
  data_json TEXT NOT NULL
) STRICT;
CREATE INDEX instance_events_instance ON instance_events(instance_id, at, id);

CREATE TABLE agent_seqs (
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  seq INTEGER NOT NULL,
  PRIMARY KEY (instance_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE proof_samples (
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  seq INTEGER NOT NULL,
  at REAL NOT NULL,
  seconds REAL NOT NULL,
  gpu_ms REAL NOT NULL,
  queue_ms REAL NOT NULL,
  phase TEXT NOT NULL,
  PRIMARY KEY (instance_id, seq)
) STRICT, WITHOUT ROWID;

-- Host history outlives instances and may be imported, so instance_id is informational.
CREATE TABLE bench_runs (
  id INTEGER PRIMARY KEY,
  machine_id INTEGER NOT NULL,
  gpu_name TEXT NOT NULL,
  num_gpus INTEGER NOT NULL,
  instance_id INTEGER NOT NULL,
  at REAL NOT NULL,
  rate REAL NOT NULL,
  low REAL NOT NULL,
  high REAL NOT NULL,
  samples INTEGER NOT NULL,
  kind TEXT NOT NULL,
  contended INTEGER NOT NULL CHECK (contended IN (0, 1)),
  throttled INTEGER NOT NULL CHECK (throttled IN (0, 1)),
  plan_json TEXT NOT NULL
) STRICT;
CREATE INDEX bench_runs_host ON bench_runs(machine_id, gpu_name, num_gpus, at);

CREATE TABLE bad_hosts (
  machine_id INTEGER NOT NULL,
  source TEXT NOT NULL,
  reason TEXT NOT NULL,
  evidence_json TEXT NOT NULL,
  added_at REAL NOT NULL,
  expires_at REAL,  -- NULL: until removed
  strikes INTEGER NOT NULL,
  PRIMARY KEY (machine_id, source)
) STRICT;

CREATE TABLE settings (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
)sql"},
    // One lifecycle (issue 11): the close cause is typed and stored, and what the manager
    // needs after a restart (the benchmark clock, a reported throttle, the production windows
    // recorded) lives on the row. Rows closed before keep an empty cause, except the
    // operator's destroys, whose reason was always exactly "operator request": their
    // cooldown keeps working across the upgrade.
    Migration{2, "typed close cause and restart state on instances", R"sql(
ALTER TABLE instances ADD COLUMN close_cause TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN bench_since REAL NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN gpu_throttled INTEGER NOT NULL DEFAULT 0
  CHECK (gpu_throttled IN (0, 1));
ALTER TABLE instances ADD COLUMN production_windows INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN oom_partitions INTEGER NOT NULL DEFAULT 0
  CHECK (oom_partitions >= 0);
UPDATE instances SET close_cause = 'operator'
  WHERE destroy_reason = 'operator request' AND state IN ('destroying', 'destroyed');
UPDATE instances SET production_windows =
  (SELECT COUNT(*) FROM bench_runs
   WHERE bench_runs.instance_id = instances.id AND bench_runs.kind = 'production');
UPDATE instances SET bench_since =
  (SELECT COALESCE(MAX(at), 0) FROM proof_samples
   WHERE proof_samples.instance_id = instances.id AND proof_samples.phase = 'warmup');
)sql"},
    // Real work (issue 12): the gateway's proof jobs. The proof bytes live in the row (a few
    // KiB: a PoRep C2 proof is 1,920 bytes), so "done" and its proof commit together; inputs
    // (up to hundreds of MiB) live content-addressed in the data directory (jobs/input_store.h).
    // instance_id names the holder without a foreign key: a job outlives any one instance row.
    Migration{3, "proof jobs", R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  request_id TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  priority INTEGER NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'assigned', 'proving', 'done', 'failed', 'cancelled')),
  input_digest TEXT NOT NULL,
  input_bytes INTEGER NOT NULL CHECK (input_bytes >= 0),
  attempts INTEGER NOT NULL CHECK (attempts >= 0),
  failures INTEGER NOT NULL CHECK (failures >= 0),
  instance_id INTEGER,
  lease_expires_at REAL NOT NULL,
  submitted_at REAL NOT NULL,
  deadline_at REAL NOT NULL,
  assigned_at REAL NOT NULL,
  started_at REAL NOT NULL,
  finished_at REAL NOT NULL,
  delivered_at REAL NOT NULL,
  proof_digest TEXT NOT NULL,
  proof BLOB,
  error TEXT NOT NULL,
  avoid_instances TEXT NOT NULL,
  rejections INTEGER NOT NULL CHECK (rejections >= 0),
  prove_ms REAL NOT NULL,
  gpu_ms REAL NOT NULL,
  queue_ms REAL NOT NULL
) STRICT;
CREATE INDEX jobs_state ON jobs(state, id);
CREATE INDEX jobs_submitted_at ON jobs(submitted_at);
CREATE INDEX jobs_finished_at ON jobs(finished_at);
)sql"},
    // The agents' logs (issue 13): kept per instance, bounded (append_agent_log drops the
    // oldest chunks), so a manager restart does not lose what an instance said.
    Migration{4, "agent logs", R"sql(
CREATE TABLE agent_logs (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL REFERENCES instances(id),
  at REAL NOT NULL,
  bytes INTEGER NOT NULL CHECK (bytes >= 0),
  text TEXT NOT NULL
) STRICT;
CREATE INDEX agent_logs_instance ON agent_logs(instance_id, id);
)sql"},
    // Restart state of the job queue (issue 12): a lease's renewals are written to the job's
    // row (lease_expires_at, no schema change), and each instance's run of failed proofs lives
    // here, so a restarted manager still strikes a host that keeps failing. A row exists only
    // while its streak is running (> 0).
    Migration{5, "job failure streaks per instance", R"sql(
CREATE TABLE job_failure_streaks (
  instance_id INTEGER PRIMARY KEY,
  failures_in_a_row INTEGER NOT NULL CHECK (failures_in_a_row > 0)
) STRICT;
)sql"},
    // What agents saw of the prover's memory (issue 13): the plan and the peak after warm-up
    // (memory_check) or an OOM kill at a plan. core::learned_memory_model reads them back per
    // machine and GPU model, so a restart keeps what was learned.
    Migration{6, "memory observations", R"sql(
CREATE TABLE memory_observations (
  id INTEGER PRIMARY KEY,
  instance_id INTEGER NOT NULL,
  machine_id INTEGER NOT NULL,
  gpu_name TEXT NOT NULL,
  num_gpus INTEGER NOT NULL,
  at REAL NOT NULL,
  partitions INTEGER NOT NULL CHECK (partitions > 0),
  observed_peak_gib REAL NOT NULL CHECK (observed_peak_gib >= 0),
  model_peak_gib REAL NOT NULL CHECK (model_peak_gib >= 0),
  usable_ram_gib REAL NOT NULL CHECK (usable_ram_gib >= 0),
  oom INTEGER NOT NULL CHECK (oom IN (0, 1))
) STRICT;
CREATE INDEX memory_observations_machine ON memory_observations(machine_id, at);
CREATE INDEX memory_observations_gpu ON memory_observations(gpu_name COLLATE NOCASE, at);
)sql"},
    // One SQL for SQLite and PostgreSQL (issue 14): GPU models are matched case-insensitively
    // by lower(gpu_name) = lower(:gpu_name), which an index on the same expression serves on
    // both (COLLATE NOCASE is SQLite's alone).
    Migration{7, "case-insensitive GPU index by lower()", R"sql(
DROP INDEX memory_observations_gpu;
CREATE INDEX memory_observations_gpu_lower ON memory_observations(lower(gpu_name), at);
)sql"},
    // The hot reads (issue 14): the fleet summary, the jobs report and the dashboard read the
    // live rows, the history's totals and its recent rows, never every row
    // (sql_store_summary.cpp). Partial indexes keep the live rows apart from the history, and
    // the destroyed rows' totals come from an index, not from their wide rows. Queries name
    // 'destroyed' literally: a bound value cannot select a partial index. instances_state goes:
    // no query wants it any more, and the planner, ordering a GROUP BY state with it, walked
    // every row's entry instead of the few live ones.
    Migration{8, "indexes for the hot reads", R"sql(
DROP INDEX instances_state;
CREATE INDEX instances_live ON instances(id) WHERE state <> 'destroyed';
CREATE INDEX instances_destroyed ON instances(state, destroyed_at, spend_usd, proofs_production)
  WHERE state = 'destroyed';
CREATE INDEX instances_destroyed_billed ON instances(state, billed_until)
  WHERE state = 'destroyed';
CREATE INDEX bench_runs_instance ON bench_runs(instance_id, at);
)sql"},
    // Replicas (issue 14, core/leader_lease.h): one row per lease; the leader renews it, a
    // follower takes it once it lapsed. Written only by conditional UPDATEs on the epoch read.
    Migration{9, "leader lease", R"sql(
CREATE TABLE leader_lease (
  name TEXT PRIMARY KEY,
  holder TEXT NOT NULL,
  holder_url TEXT NOT NULL,
  holder_process TEXT NOT NULL,
  epoch INTEGER NOT NULL CHECK (epoch >= 0),
  expires_at REAL NOT NULL,
  taken_at REAL NOT NULL,
  renewed_at REAL NOT NULL
) STRICT;
)sql"},
    // Replicas' gRPC (issue 14): where the holder's gateway listens, so a follower's gateway
    // relays Curio's calls to it. Empty: the holder serves no gRPC.
    Migration{10, "leader lease gRPC address", R"sql(
ALTER TABLE leader_lease ADD COLUMN holder_grpc TEXT NOT NULL DEFAULT '';
)sql"},
    // The hot reads (issue 14): the destroyed rows' all-time totals (count, spend, production
    // proofs) as running totals in one row, kept by triggers in the same transaction as every
    // change to a destroyed row, so the fleet summary reads one row instead of the whole
    // history. Backfilled from the rows there are. Deltas are exact zeros when a rewrite of a
    // destroyed row leaves its figures alone (x - x == 0), so such rewrites neither drift the
    // sum nor write the row. A live row (every heartbeat) never fires a trigger's body.
    Migration{11, "running totals of the destroyed instances", R"sql(
CREATE TABLE destroyed_totals (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  instances INTEGER NOT NULL,
  spend_usd REAL NOT NULL,
  proofs_production INTEGER NOT NULL
) STRICT;
INSERT INTO destroyed_totals (id, instances, spend_usd, proofs_production)
  SELECT 1, COUNT(*), COALESCE(SUM(spend_usd), 0.0), COALESCE(SUM(proofs_production), 0)
  FROM instances WHERE state = 'destroyed';
CREATE TRIGGER destroyed_totals_insert AFTER INSERT ON instances
WHEN NEW.state = 'destroyed' BEGIN
  UPDATE destroyed_totals SET instances = instances + 1, spend_usd = spend_usd + NEW.spend_usd,
    proofs_production = proofs_production + NEW.proofs_production WHERE id = 1;
END;
CREATE TRIGGER destroyed_totals_update AFTER UPDATE OF state, spend_usd, proofs_production
ON instances
WHEN (OLD.state = 'destroyed') <> (NEW.state = 'destroyed') OR (NEW.state = 'destroyed' AND
  (OLD.spend_usd <> NEW.spend_usd OR OLD.proofs_production <> NEW.proofs_production)) BEGIN
  UPDATE destroyed_totals SET
    instances = instances + (NEW.state = 'destroyed') - (OLD.state = 'destroyed'),
    spend_usd = spend_usd + ((CASE WHEN NEW.state = 'destroyed' THEN NEW.spend_usd ELSE 0.0 END)
      - (CASE WHEN OLD.state = 'destroyed' THEN OLD.spend_usd ELSE 0.0 END)),
    proofs_production = proofs_production
      + (CASE WHEN NEW.state = 'destroyed' THEN NEW.proofs_production ELSE 0 END)
      - (CASE WHEN OLD.state = 'destroyed' THEN OLD.proofs_production ELSE 0 END)
  WHERE id = 1;
END;
CREATE TRIGGER destroyed_totals_delete AFTER DELETE ON instances
WHEN OLD.state = 'destroyed' BEGIN
  UPDATE destroyed_totals SET instances = instances - 1, spend_usd = spend_usd - OLD.spend_usd,
    proofs_production = proofs_production - OLD.proofs_production WHERE id = 1;
END;
)sql"},
    // Request ids per client, and machines by id (issue 14). A request_id is its client's
    // idempotency key (the gateway's client: docs/gateway.md), so the key is (client,
    // request_id): two clients' equal ids are two jobs, and a call a follower relays is the
    // job of the client that sent it. SQLite cannot drop the column's UNIQUE, so the table is
    // rebuilt; rows from before have client '' (not recorded). instances.machine_id is the
    // offer's machine (until now only inside offer_json), indexed so that registration finds
    // a machine's earlier rentals without reading every row; backfilled from the snapshots.
    Migration{12, "jobs keyed by client and request_id; instances' machine_id", R"sql(
CREATE TABLE jobs_v12 (
  id INTEGER PRIMARY KEY,
  request_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  priority INTEGER NOT NULL,
  state TEXT NOT NULL
    CHECK (state IN ('queued', 'assigned', 'proving', 'done', 'failed', 'cancelled')),
  input_digest TEXT NOT NULL,
  input_bytes INTEGER NOT NULL CHECK (input_bytes >= 0),
  attempts INTEGER NOT NULL CHECK (attempts >= 0),
  failures INTEGER NOT NULL CHECK (failures >= 0),
  instance_id INTEGER,
  lease_expires_at REAL NOT NULL,
  submitted_at REAL NOT NULL,
  deadline_at REAL NOT NULL,
  assigned_at REAL NOT NULL,
  started_at REAL NOT NULL,
  finished_at REAL NOT NULL,
  delivered_at REAL NOT NULL,
  proof_digest TEXT NOT NULL,
  proof BLOB,
  error TEXT NOT NULL,
  avoid_instances TEXT NOT NULL,
  rejections INTEGER NOT NULL CHECK (rejections >= 0),
  prove_ms REAL NOT NULL,
  gpu_ms REAL NOT NULL,
  queue_ms REAL NOT NULL,
  client TEXT NOT NULL DEFAULT ''
) STRICT;
INSERT INTO jobs_v12 (id, request_id, kind, priority, state, input_digest, input_bytes, attempts, failures,
  instance_id, lease_expires_at, submitted_at, deadline_at, assigned_at, started_at, finished_at,
  delivered_at, proof_digest, proof, error, avoid_instances, rejections, prove_ms, gpu_ms,
  queue_ms, client)
SELECT id, request_id, kind, priority, state, input_digest, input_bytes, attempts, failures,
  instance_id, lease_expires_at, submitted_at, deadline_at, assigned_at, started_at, finished_at,
  delivered_at, proof_digest, proof, error, avoid_instances, rejections, prove_ms, gpu_ms,
  queue_ms, '' FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v12 RENAME TO jobs;
CREATE INDEX jobs_state ON jobs(state, id);
CREATE INDEX jobs_submitted_at ON jobs(submitted_at);
CREATE INDEX jobs_finished_at ON jobs(finished_at);
CREATE UNIQUE INDEX jobs_client_request ON jobs(client, request_id);
CREATE INDEX jobs_request_id ON jobs(request_id, id);
ALTER TABLE instances ADD COLUMN machine_id INTEGER NOT NULL DEFAULT 0;
UPDATE instances SET machine_id = COALESCE(json_extract(offer_json, '$.machine_id'), 0)
  WHERE json_valid(offer_json);
CREATE INDEX instances_machine ON instances(machine_id);
)sql"},
    Migration{13, "instances' storage and bandwidth spend and rented disk", R"sql(
ALTER TABLE instances ADD COLUMN storage_spend_usd REAL NOT NULL DEFAULT 0.0
  CHECK (storage_spend_usd >= 0);
ALTER TABLE instances ADD COLUMN bandwidth_spend_usd REAL NOT NULL DEFAULT 0.0
  CHECK (bandwidth_spend_usd >= 0);
ALTER TABLE instances ADD COLUMN disk_gb REAL NOT NULL DEFAULT 0.0 CHECK (disk_gb >= 0);
)sql"},
    Migration{14, "instances' time stopped by the market in their state", R"sql(
ALTER TABLE instances ADD COLUMN market_stopped_s REAL NOT NULL DEFAULT 0.0
  CHECK (market_stopped_s >= 0);
)sql"},
    Migration{15, "instances' bid and market stops", R"sql(
ALTER TABLE instances ADD COLUMN bid_price REAL CHECK (bid_price IS NULL OR bid_price > 0);
ALTER TABLE instances ADD COLUMN market_stops INTEGER NOT NULL DEFAULT 0 CHECK (market_stops >= 0);
)sql"},
    // Each job's timeline (issue 36, core/job_event.h): written with the job's row. No foreign
    // key to jobs: a store copy (store_copy.cpp) loads tables by name after instances, and
    // job_events sorts before jobs; the queue writes both in one transaction.
    Migration{16, "job timelines", R"sql(
CREATE TABLE job_events (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL,
  at REAL NOT NULL,
  kind TEXT NOT NULL,
  attempt INTEGER NOT NULL CHECK (attempt >= 0),
  instance_id INTEGER,
  detail TEXT NOT NULL
) STRICT;
CREATE INDEX job_events_job ON job_events(job_id, id);
CREATE INDEX job_events_instance ON job_events(instance_id, job_id) WHERE instance_id IS NOT NULL;
)sql"},
    // The timeline's retention sweep deletes by age (JobStore::drop_job_events): an index on
    // `at` keeps a sweep that finds nothing old from reading the table.
    Migration{17, "job timelines by age", R"sql(
CREATE INDEX job_events_at ON job_events(at);
)sql"},
    // Job inputs in the database (issue 29, store/job_input_store.h): any replica reads what any
    // replica wrote. Chunks first, the header once they are all there; both carry written_at
    // for the sweep's grace. Inputs written before this version are files in the data
    // directory, imported at the next term's start (jobs/input_store.h).
    Migration{18, "job inputs in the database", R"sql(
CREATE TABLE job_input_chunks (
  digest TEXT NOT NULL,
  seq INTEGER NOT NULL CHECK (seq >= 0),
  data BLOB NOT NULL,
  written_at REAL NOT NULL,
  PRIMARY KEY (digest, seq)
);
CREATE INDEX job_input_chunks_written_at ON job_input_chunks(written_at);
CREATE TABLE job_inputs (
  digest TEXT PRIMARY KEY,
  size_bytes INTEGER NOT NULL CHECK (size_bytes >= 0),
  chunk_bytes INTEGER NOT NULL CHECK (chunk_bytes > 0),
  chunks INTEGER NOT NULL CHECK (chunks >= 0),
  written_at REAL NOT NULL
);
CREATE INDEX job_inputs_written_at ON job_inputs(written_at);
)sql"},
    Migration{19, "hedged proving: a second holder per job", R"sql(
ALTER TABLE jobs ADD COLUMN hedge_instance_id INTEGER;
ALTER TABLE jobs ADD COLUMN hedge_assigned_at REAL NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN hedge_lease_expires_at REAL NOT NULL DEFAULT 0;
)sql"},
};

static_assert(versions_are_consecutive(kMigrations),
              "migration versions must be 1, 2, 3, ... in order, up to kLatestSchemaVersion");

}  // namespace

std::span<const Migration> sqlite_migrations() {
  return kMigrations;
}

}  // namespace pf::store::sql
