// The hot read paths at scale (issue 14): the fleet summary (GET /api/v1/fleet, what
// `proverfleet status` and /metrics build on) and the dashboard snapshot (each `fleet` event of
// GET /api/v1/stream), timed on a store holding 1,000 live instances, then again once 100,000
// destroyed ones (with their events, proof samples and bench runs) sit beside them. Want each
// ≤ 50 ms at 100,000 destroyed, on both stores: neither path may read the fleet's whole history.
//
// Prints, for <s> = "sqlite" (a file database) and "pg" (a local PostgreSQL server this bench
// starts, tests/support/pg_server.h), or only for the store --db names:
//   hot_summary_ms_<s>, hot_dashboard_ms_<s>: medians at --live live + --destroyed destroyed
//   hot_summary_ratio_<s>, hot_dashboard_ratio_<s>: those ÷ the same median at 0 destroyed
//
// Usage: hot_reads_bench [--db URL] [--live N] [--destroyed N] [--runs N]
//   --db: an empty store instead of the two above. The 0-destroyed figure is taken on the same
//   store before the history is added. On PostgreSQL the bench runs VACUUM ANALYZE after its
//   bulk load, as autovacuum would soon after (see measure()).
#include <httplib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "jobs/job_queue.h"
#include "manager/dashboard.h"
#include "manager/jobs_report.h"
#include "manager/manager.h"
#include "manager/views.h"
#include "store/pg_connection.h"
#include "store/sql_connection.h"
#include "store/sql_store.h"
#include "store/store.h"
#include "store/store_url.h"
#include "support/bench_args.h"
#include "support/bench_stores.h"
#include "support/served_api.h"
#include "support/temp_dir.h"
#include "support/timing.h"
#include "support/unreachable_market.h"

namespace {

using nlohmann::json;
using pf::bench::epoch_now;
using pf::bench::print_figure;
using pf::bench::seconds_since;
using pf::bench::ServedApi;
using pf::bench::SteadyClock;
using pf::bench::time_calls;
using pf::bench::Timing;
using pf::core::InstanceState;

struct Options {
  std::string db;
  int live = 1000;
  int destroyed = 100000;
  int runs = 9;
};

// Events, proof samples and bench runs per instance, in the proportion a rental leaves: a few
// lifecycle and agent events, a benchmark's samples, one verdict run.
constexpr int kEventsPerInstance = 8;
constexpr int kSamplesPerInstance = 6;
constexpr int kJobs = 2000;  // gateway jobs in the last hour: the jobs report lists them

pf::core::Offer offer_of(int n) {
  pf::core::Offer o;
  o.id = 100000 + n;
  o.machine_id = 5000 + n % 4000;
  o.host_id = 700 + n % 300;
  o.gpu_name = n % 3 == 0 ? "RTX 4090" : "RTX 3090";
  o.num_gpus = 1 + n % 4;
  o.gpu_ram_gib = 24;
  o.gpu_total_ram_gib = 24.0 * o.num_gpus;
  o.cpu_name = "AMD EPYC 7543 32-Core Processor";
  o.cpu_cores = 64;
  o.cpu_cores_effective = 16;
  o.cpu_ram_gib = 256;
  o.pcie_bw_gbs = 24.5;
  o.pci_gen = 4;
  o.inet_down_mbps = 900;
  o.inet_up_mbps = 700;
  o.inet_down_cost_per_gb = 0.002;
  o.disk_space_gb = 500;
  o.cuda_max_good = 12.4;
  o.compute_cap = 890;
  o.reliability = 0.995;
  o.verified = true;
  o.geolocation = "Norway, NO";
  o.dph_total = 0.3 + 0.05 * (n % 8);
  o.storage_cost_gb_month = 0.15;
  o.dlperf = 80.5;
  pf::core::derive_offer_fields(o);
  return o;
}

pf::core::InstanceRecord instance_of(int n, InstanceState state, double now) {
  pf::core::InstanceRecord r;
  r.deployment_id = "bench-" + std::to_string(n);
  r.market_id = 9'000'000 + n;
  r.offer = offer_of(n);
  r.state = state;
  r.origin = n % 5 == 0 ? "operator" : "autopilot";
  r.secret_hash = std::string(64, 'a');
  r.token_hash = pf::manager::hash_token("bench-token-" + std::to_string(n));
  r.params_total_bytes = r.params_done_bytes = 107e9;
  r.plan_json = R"({"partitions":8,"concurrency":2,"note":"bench"})";
  const bool accepted = n % 3 != 0;
  pf::core::Verdict v;
  v.decision = accepted ? pf::core::Verdict::Decision::Accept : pf::core::Verdict::Decision::Reject;
  v.rate = accepted ? 40 + n % 20 : 8;
  v.low = v.rate * 0.9;
  v.high = v.rate * 1.1;
  v.samples = kSamplesPerInstance;
  v.break_even_rate = 20;
  v.reason = accepted ? "rate above break-even" : "rate below break-even";
  if (state == InstanceState::Destroyed) {
    // Spread over the past year, the newest an hour or so ago.
    const double closed = now - 3000 - 300.0 * n;
    r.created_at = closed - 6 * 3600;
    r.state_since = r.destroyed_at.emplace(closed);
    r.billed_until = closed;
    r.last_heartbeat_at = closed - 30;
    r.close_cause = accepted ? pf::core::CloseCause::Operator : pf::core::CloseCause::Rejected;
    r.destroy_reason = accepted ? "operator request" : "benchmark rejected";
    r.verdict = v;
    r.proofs_benchmark = kSamplesPerInstance;
    r.proofs_production = accepted ? 200 : 0;
    r.spend_usd = r.offer.dph_total * 6;
  } else {
    r.created_at = now - 3600 - n % 7200;
    r.state_since = now - 600;
    r.billed_until = now - 10;
    r.last_heartbeat_at = now - n % 20;
    if (state == InstanceState::Proving) {
      r.verdict = v;
      r.verdict->decision = pf::core::Verdict::Decision::Accept;
      r.proofs_production = 50 + n % 100;
    }
    r.spend_usd = r.offer.dph_total * (now - r.created_at) / 3600;
  }
  return r;
}

// `count` instances numbered from `first`, with their events, samples and bench runs.
void add_instances(pf::store::Store& store, int first, int count,
                   const std::function<InstanceState(int)>& state_of, double now) {
  store.transaction([&] {
    for (int n = first; n < first + count; ++n) {
      const auto rec = instance_of(n, state_of(n), now);
      const std::int64_t id = store.insert_instance(rec);
      for (int e = 0; e < kEventsPerInstance; ++e) {
        store.append_event({0, id, rec.created_at + e * 60.0, e % 2 ? "state" : "agent",
                            "bench event " + std::to_string(e),
                            R"({"step":)" + std::to_string(e) + "}"});
      }
      for (int s = 0; s < kSamplesPerInstance; ++s) {
        store.insert_proof_sample({id, s + 1, rec.created_at + 600 + s * 90.0, 90, 80000, 500,
                                   pf::core::ProofPhase::Benchmark});
      }
      if (rec.verdict) {
        pf::core::BenchRun run;
        run.host = {rec.offer.machine_id, rec.offer.gpu_name, rec.offer.num_gpus};
        run.instance_id = id;
        run.at = rec.created_at + 1200;
        run.rate = rec.verdict->rate;
        run.low = rec.verdict->low;
        run.high = rec.verdict->high;
        run.samples = kSamplesPerInstance;
        store.insert_bench_run(run);
      }
    }
  });
}

// `count` destroyed instances numbered from `first`, as add_instances would write them (its
// rows, verdicts and times; their events, samples and bench runs), made by the database from
// one written through the store: a year of history over 1.6 million single-row round trips
// took PostgreSQL a quarter of an hour. The SQL is portable (a recursive CTE counts).
void add_destroyed_history(pf::store::SqlStore& store, int first, int count, double now) {
  if (count <= 0) return;
  add_instances(
      store, first, 1, [](int) { return InstanceState::Destroyed; }, now);
  if (count == 1) return;
  const std::int64_t model = store.instance_by_deployment("bench-" + std::to_string(first))->id;
  auto number = [](double v) {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  const std::string m = std::to_string(model);
  // n: the instance's number; closed = now - 3000 - 300 n (instance_of's times).
  const std::string closed = "(" + number(now - 3000) + " - 300.0 * n)";
  const std::string accepted = "(n % 3 <> 0)";
  const std::string dph = "(0.3 + 0.05 * (n % 8))";
  const std::string sql =
      "WITH RECURSIVE numbers(n) AS (SELECT " + std::to_string(first + 1) +
      " UNION ALL SELECT n + 1 FROM numbers WHERE n < " + std::to_string(first + count - 1) +
      ") INSERT INTO instances (deployment_id, market_id, offer_json, offer_extra_json, state, "
      "created_at, state_since, deadline_at, destroy_reason, destroyed_at, secret_hash, "
      "token_hash, last_heartbeat_at, market_status, market_status_since, params_done_bytes, "
      "params_total_bytes, params_rate_bps, prover_crashes, ooms, proofs_benchmark, "
      "proofs_production, gpu_util, peak_memory_gib, spend_usd, billed_until, verdict_decision, "
      "verdict_rate, verdict_low, verdict_high, verdict_samples, verdict_break_even_rate, "
      "verdict_reason, plan_json, origin, close_cause, bench_since, gpu_throttled, "
      "production_windows, oom_partitions) "
      "SELECT 'bench-' || n, 9000000 + n, t.offer_json, t.offer_extra_json, 'destroyed', " +
      closed + " - 21600, " + closed + ", t.deadline_at, CASE WHEN " + accepted +
      " THEN 'operator request' ELSE 'benchmark rejected' END, " + closed +
      ", t.secret_hash, t.token_hash, " + closed +
      " - 30, t.market_status, t.market_status_since, t.params_done_bytes, t.params_total_bytes, "
      "t.params_rate_bps, t.prover_crashes, t.ooms, t.proofs_benchmark, CASE WHEN " +
      accepted + " THEN 200 ELSE 0 END, t.gpu_util, t.peak_memory_gib, " + dph + " * 6, " + closed +
      ", CASE WHEN " + accepted + " THEN 'accept' ELSE 'reject' END, CASE WHEN " + accepted +
      " THEN 40 + n % 20 ELSE 8 END, CASE WHEN " + accepted +
      " THEN (40 + n % 20) * 0.9 ELSE 7.2 END, CASE WHEN " + accepted +
      " THEN (40 + n % 20) * 1.1 ELSE 8.8 END, t.verdict_samples, t.verdict_break_even_rate, "
      "CASE WHEN " +
      accepted +
      " THEN 'rate above break-even' ELSE 'rate below break-even' END, t.plan_json, CASE WHEN n "
      "% 5 = 0 THEN 'operator' ELSE 'autopilot' END, CASE WHEN " +
      accepted +
      " THEN 'operator' ELSE 'rejected' END, t.bench_since, t.gpu_throttled, "
      "t.production_windows, t.oom_partitions FROM numbers, instances t WHERE t.id = " +
      m;
  // The model's events, samples and bench run, for every copy, at the copy's times.
  const std::string copies = " FROM instances c, instances t, ";
  const std::string of_copies = " AND c.id > " + m + " AND c.state = 'destroyed'";
  store.transaction([&] {
    auto& conn = store.connection();
    conn.exec(sql, "copying the model instance");
    conn.exec(
        "INSERT INTO instance_events (instance_id, at, kind, message, data_json) "
        "SELECT c.id, c.created_at + (e.at - t.created_at), e.kind, e.message, e.data_json" +
            copies + "instance_events e WHERE t.id = " + m + " AND e.instance_id = t.id" +
            of_copies,
        "copying the model's events");
    conn.exec(
        "INSERT INTO proof_samples (instance_id, seq, at, seconds, gpu_ms, queue_ms, phase) "
        "SELECT c.id, p.seq, c.created_at + (p.at - t.created_at), p.seconds, p.gpu_ms, "
        "p.queue_ms, p.phase" +
            copies + "proof_samples p WHERE t.id = " + m + " AND p.instance_id = t.id" + of_copies,
        "copying the model's proof samples");
    conn.exec(
        "INSERT INTO bench_runs (machine_id, gpu_name, num_gpus, instance_id, at, rate, "
        "low, high, samples, kind, contended, throttled, plan_json) "
        "SELECT b.machine_id, b.gpu_name, b.num_gpus, c.id, c.created_at + 1200, "
        "c.verdict_rate, c.verdict_low, c.verdict_high, b.samples, b.kind, b.contended, "
        "b.throttled, b.plan_json" +
            copies + "bench_runs b WHERE t.id = " + m + " AND b.instance_id = t.id" + of_copies,
        "copying the model's bench run");
  });
}

void add_jobs(pf::store::Store& store, std::int64_t instance_id, double now) {
  store.transaction([&] {
    for (int j = 0; j < kJobs; ++j) {
      pf::core::Job job;
      job.request_id = "bench-job-" + std::to_string(j);
      job.input_digest = std::string(64, 'b');
      job.input_bytes = 1 << 20;
      job.submitted_at = now - 3500 + j;
      job.deadline_at = job.submitted_at + 600;
      job.attempts = 1;
      job.instance_id = instance_id;
      if (j < kJobs - 50) {
        job.state = pf::core::JobState::Done;
        job.assigned_at = job.submitted_at + 5;
        job.started_at = job.assigned_at + 1;
        job.finished_at = job.delivered_at = job.started_at + 90;
        job.proof_digest = std::string(64, 'c');
      }
      store.insert_job(job);
    }
  });
}

struct Figures {
  Timing summary_bare, dashboard_bare;  // at 0 destroyed
  Timing summary_full, dashboard_full;  // with the history
  double fill_s = 0;
  double vacuum_s = 0;  // PostgreSQL: VACUUM ANALYZE after the fill
  std::size_t snapshot_bytes = 0;
};

// Both paths timed on the (empty) store at `db`, before and after the history is added.
Figures measure(const Options& opt, const std::string& db, const std::string& data_dir) {
  auto store = pf::store::open_sql_store(db);
  if (!store->instances(true).empty()) throw std::runtime_error("the store at --db must be empty");
  const double now = epoch_now();

  // The live fleet: most proving, the rest spread over the other live states.
  constexpr std::array kLiveStates{InstanceState::Booting, InstanceState::Registered,
                                   InstanceState::WarmingUp, InstanceState::Benchmarking,
                                   InstanceState::Destroying};
  add_instances(
      *store, 0, opt.live,
      [&](int n) { return n % 10 < 8 ? InstanceState::Proving : kLiveStates[n % 5]; }, now);
  const auto busy = store->instances(false);
  add_jobs(*store, busy.empty() ? 1 : busy.front().id, now);

  pf::testing::UnreachableMarket market;
  pf::manager::ManagerConfig cfg;
  pf::manager::Manager manager(*store, market, cfg, epoch_now);
  // The gateway has been taking jobs for a month: the jobs report's window is a whole hour.
  store->put_setting("jobs.observed_since", std::to_string(now - 30 * 86400));
  pf::jobs::JobQueueConfig qc;
  qc.data_dir = data_dir;
  pf::jobs::JobQueueHooks hooks;
  hooks.workers = [] { return std::vector<pf::core::WorkerView>{}; };
  hooks.strike = [](std::int64_t, const pf::core::Strike&) {};
  hooks.event = [](std::int64_t, const std::string&) {};
  pf::jobs::JobQueue queue(*store, qc, hooks, epoch_now);
  manager.attach_jobs(queue);

  // The fleet summary through its route, as `proverfleet status` asks for it.
  auto served = ServedApi::start(manager, &queue);
  if (!served) throw std::runtime_error(served.error());
  httplib::Client client("127.0.0.1", (*served)->port());
  client.set_read_timeout(60, 0);
  const httplib::Headers auth{
      {"Authorization", std::string("Bearer ") + ServedApi::kOperatorToken}};
  auto summary = [&] {
    auto reply = client.Get("/api/v1/fleet", auth);
    if (!reply || reply->status != 200) throw std::runtime_error("GET /api/v1/fleet failed");
  };
  // The dashboard's snapshot with the summary HttpApi gives it (http_api.cpp fleet_json).
  pf::manager::DashboardOptions dash_options;
  dash_options.summary = [&](const std::vector<pf::core::InstanceRecord>& live) {
    auto fleet = manager.summary(live);
    auto report = pf::manager::build_jobs_report(manager, queue, (*served)->options().jobs_report,
                                                 epoch_now(), live);
    pf::manager::apply_profit_basis(fleet, &report, cfg.rank.economics.revenue_per_proof_usd);
    json out = pf::manager::to_json(fleet);
    out["jobs"] = pf::manager::to_json(report);
    return out;
  };
  auto dashboard = std::make_unique<pf::manager::Dashboard>(manager, dash_options);
  Figures f;
  auto snapshot = [&] { f.snapshot_bytes = dashboard->snapshot_text().size(); };

  // Between two snapshots (a second apart, the stream's poll interval) a tenth of the live
  // agents report: 1,000 agents at the default heartbeat_s of 10. Their rows change, so the
  // snapshot serialises them again.
  std::size_t next_agent = 0;
  auto heartbeats = [&] {
    auto live = store->instances(false);
    if (live.empty()) return;
    store->transaction([&] {
      for (std::size_t i = 0; i < std::max<std::size_t>(1, live.size() / 10); ++i) {
        auto& rec = live[next_agent++ % live.size()];
        rec.last_heartbeat_at = epoch_now();
        rec.spend_usd += 0.0001;
        store->update_agent_progress(rec);
      }
    });
  };

  f.summary_bare = time_calls(opt.runs, summary, heartbeats);
  f.dashboard_bare = time_calls(opt.runs, snapshot, heartbeats);

  const auto fill_start = SteadyClock::now();
  add_destroyed_history(*store, opt.live, opt.destroyed, now);
  if (pf::store::is_postgres_url(db)) {
    // A real fleet's history arrives over months and autovacuum keeps the statistics and the
    // visibility map current as it does; here a year's history lands in one transaction, so
    // the bench does at once what autovacuum would do within its next minute.
    f.fill_s = seconds_since(fill_start);
    const auto vacuum_start = SteadyClock::now();
    pf::store::PgConnection admin(db);
    admin.exec("VACUUM ANALYZE", "vacuuming after the bench's bulk load");
    f.vacuum_s = seconds_since(vacuum_start);
  } else {
    f.fill_s = seconds_since(fill_start);
  }

  // A new dashboard, whose first snapshot serialises every row (a restarted serve's).
  dashboard = std::make_unique<pf::manager::Dashboard>(manager, dash_options);
  f.summary_full = time_calls(opt.runs, summary, heartbeats);
  f.dashboard_full = time_calls(opt.runs, snapshot, heartbeats);
  (*served)->stop();
  queue.shutdown();
  return f;
}

void print(const Options& opt, const std::string& suffix, const Figures& f) {
  print_figure("hot_summary_ms_" + suffix, f.summary_full.wall_ms, 1);
  print_figure("hot_dashboard_ms_" + suffix, f.dashboard_full.wall_ms, 1);
  print_figure("hot_summary_ratio_" + suffix, f.summary_full.wall_ms / f.summary_bare.wall_ms, 2);
  print_figure("hot_dashboard_ratio_" + suffix, f.dashboard_full.wall_ms / f.dashboard_bare.wall_ms,
               2);
  std::printf(
      "# %s: %d live + %d destroyed instances (%d events, %d samples each), %d jobs; medians of "
      "%d; want each <= 50 ms\n"
      "# %s: at 0 destroyed: summary %.1f ms, dashboard %.1f ms; CPU ms (process) summary %.1f "
      "-> %.1f, dashboard %.1f -> %.1f; snapshot %zu bytes; history filled in %.1f s "
      "(VACUUM ANALYZE %.1f s)\n"
      "# %s: a tenth of the live rows changes between two calls (heartbeats); first call at "
      "100,000 destroyed (no row text kept yet): summary %.1f ms, dashboard %.1f ms\n",
      suffix.c_str(), opt.live, opt.destroyed, kEventsPerInstance, kSamplesPerInstance, kJobs,
      opt.runs, suffix.c_str(), f.summary_bare.wall_ms, f.dashboard_bare.wall_ms,
      f.summary_bare.cpu_ms, f.summary_full.cpu_ms, f.dashboard_bare.cpu_ms,
      f.dashboard_full.cpu_ms, f.snapshot_bytes, f.fill_s, f.vacuum_s, suffix.c_str(),
      f.summary_full.first_wall_ms, f.dashboard_full.first_wall_ms);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--db" && has_value) {
      opt.db = argv[++i];
    } else if (arg == "--live" && has_value && pf::bench::parse_count(argv[i + 1], opt.live)) {
      ++i;
    } else if (arg == "--destroyed" && has_value &&
               pf::bench::parse_count(argv[i + 1], opt.destroyed)) {
      ++i;
    } else if (arg == "--runs" && has_value && pf::bench::parse_count(argv[i + 1], opt.runs) &&
               opt.runs > 0) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: hot_reads_bench [--db URL] [--live N] [--destroyed N] [--runs N]\n");
      return 2;
    }
  }
  pf::testing::TempDir dir("pf-hot-reads-bench");
  return pf::bench::on_bench_stores(
      "hot_reads_bench", opt.db, dir, [&](const std::string& suffix, const std::string& url) {
        print(opt, suffix, measure(opt, url, dir.file("data-" + suffix)));
      });
}
