// The dashboard's jobs pages at scale (issue 36): what the server spends answering the calls
// that paint #/jobs (its newest page, each filter the form offers, a page deep in the past) and
// #/jobs/ID (one job with its timeline), on a store holding 1,000 jobs and then 100,000 (each
// with a five-step timeline, 200 rentals over 100 machines). Want every call ≤ 300 ms at 100,000
// jobs on both stores.
//
// Prints, for <s> = "sqlite" (a file database) and "pg" (a local PostgreSQL server this bench
// starts), or only for the store --db names:
//   jobs_page_<call>_ms_<s>: the median wall time of each call at --jobs jobs
//   jobs_page_worst_ms_<s>: the slowest of them (the figure the target is about)
//   jobs_page_worst_ratio_<s>: that ÷ the same call's median at 1,000 jobs
//
// Usage: jobs_page_bench [--db URL] [--jobs N] [--runs N]
#include <httplib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "jobs/job_queue.h"
#include "manager/manager.h"
#include "store/sql_connection.h"
#include "store/sql_store.h"
#include "support/bench_args.h"
#include "support/bench_stores.h"
#include "support/served_api.h"
#include "support/temp_dir.h"
#include "support/timing.h"
#include "support/unreachable_market.h"

namespace {

using pf::bench::epoch_now;
using pf::bench::print_figure;
using pf::bench::ServedApi;
using pf::bench::time_calls;

struct Options {
  std::string db;
  int jobs = 100000;
  int runs = 7;
};

constexpr int kBaselineJobs = 1000;
constexpr int kRentals = 200;   // instances, over kMachines machines
constexpr int kMachines = 100;  // machine ids 5000..5099

void add_rentals(pf::store::Store& store) {
  store.transaction([&] {
    for (int n = 0; n < kRentals; ++n) {
      pf::core::InstanceRecord r;
      r.deployment_id = "bench-" + std::to_string(n);
      r.market_id = 9'000'000 + n;
      r.offer.id = 100000 + n;
      r.offer.machine_id = 5000 + n % kMachines;
      r.offer.gpu_name = "RTX 4090";
      r.offer.num_gpus = 1;
      r.offer.dph_total = 0.4;
      r.state =
          n < kRentals - 20 ? pf::core::InstanceState::Destroyed : pf::core::InstanceState::Proving;
      r.secret_hash = std::string(64, 'a');
      r.token_hash = pf::manager::hash_token("bench-token-" + std::to_string(n));
      store.insert_instance(r);
    }
  });
}

// Jobs numbered [first, first + count) of `total` (job n gets id n), made by the database (a
// recursive CTE): submitted every 30 s, job `total` at `now`, most done and delivered (a few late),
// some queued, failed or cancelled, every fifth a SnapDeals proof, eight clients, held by the 200
// rentals in turn. Each done job gets a timeline of five steps.
void add_jobs(pf::store::SqlStore& store, int first, int count, int total, double now) {
  if (count <= 0) return;
  const auto number = [](double v) {
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  const std::string at = "(" + number(now) + " - (" + std::to_string(total) + " - n) * 30.0)";
  const std::string state =
      "CASE WHEN n % 50 = 0 THEN 'queued' WHEN n % 97 = 0 THEN 'failed' WHEN n % 89 = 0 THEN "
      "'cancelled' ELSE 'done' END";
  const std::string done = "(n % 50 <> 0 AND n % 97 <> 0 AND n % 89 <> 0)";
  const std::string sql =
      "WITH RECURSIVE numbers(n) AS (SELECT " + std::to_string(first) +
      " UNION ALL SELECT n + 1 FROM numbers WHERE n < " + std::to_string(first + count - 1) +
      ") INSERT INTO jobs (request_id, kind, priority, state, input_digest, input_bytes, "
      "attempts, failures, instance_id, lease_expires_at, submitted_at, deadline_at, "
      "assigned_at, started_at, finished_at, delivered_at, proof_digest, error, "
      "avoid_instances, rejections, prove_ms, gpu_ms, queue_ms, client) "
      "SELECT 'bench-' || n, CASE WHEN n % 5 = 0 THEN 'snap-update' ELSE 'porep-c2' END, 0, " +
      state + ", '" + std::string(64, 'b') + "', 30000, CASE WHEN n % 50 = 0 THEN 0 ELSE 1 END, " +
      "0, CASE WHEN n % 50 = 0 THEN NULL ELSE 1 + n % " + std::to_string(kRentals) + " END, 0, " +
      at + ", " + at + " + 1800, " + at + " + 60, " + at + " + 61, CASE WHEN " + done + " THEN " +
      at + " + 60 + (n % 40) * 50 ELSE 0 END, CASE WHEN " + done + " THEN " + at +
      " + 61 + (n % 40) * 50 ELSE 0 END, '', CASE WHEN n % 97 = 0 THEN 'prover failed' ELSE '' "
      "END, '[]', 0, 90000, 40000, 100, '10.0.0.' || (n % 8) FROM numbers";
  store.transaction([&] {
    auto& conn = store.connection();
    conn.exec(sql, "adding jobs");
    // Ids follow n: the CTE inserts in order into a table that had ids 1..first-1.
    const std::string of_new = " FROM jobs WHERE id >= " + std::to_string(first);
    for (const auto& [kind, when] :
         std::vector<std::pair<const char*, const char*>>{{"recorded", "submitted_at"},
                                                          {"leased", "assigned_at"},
                                                          {"proving", "started_at"},
                                                          {"proved", "finished_at"},
                                                          {"delivered", "delivered_at"}}) {
      conn.exec(std::string("INSERT INTO job_events (job_id, at, kind, attempt, instance_id, "
                            "detail) SELECT id, ") +
                    when + ", '" + kind + "', attempts, instance_id, 'bench step'" + of_new +
                    " AND state = 'done'",
                "adding timelines");
    }
  });
}

struct Call {
  std::string name;
  std::string path;
};

std::vector<Call> calls(int total) {
  const int middle = total / 2;
  return {
      {"newest", "/api/v1/jobs?limit=50"},
      {"done", "/api/v1/jobs?limit=50&state=done"},
      {"snap", "/api/v1/jobs?limit=50&kind=snap-update&client=10.0.0.3"},
      {"late", "/api/v1/jobs?limit=50&late=1"},
      {"at_risk", "/api/v1/jobs?limit=50&at_risk=1"},
      {"failed", "/api/v1/jobs?limit=50&state=failed"},
      {"machine", "/api/v1/jobs?limit=50&machine=5042"},
      {"instance", "/api/v1/jobs?limit=50&instance=77"},
      {"request", "/api/v1/jobs?limit=50&request=bench-" + std::to_string(middle)},
      {"deep_page", "/api/v1/jobs?limit=50&cursor=" + std::to_string(middle)},
      {"job", "/api/v1/jobs/" + std::to_string(kBaselineJobs / 2)},  // in both runs
      {"index", "/"},
  };
}

std::map<std::string, double> time_page(ServedApi& served, int total, int runs) {
  httplib::Client client("127.0.0.1", served.port());
  const httplib::Headers auth{
      {"Authorization", std::string("Bearer ") + ServedApi::kOperatorToken}};
  std::map<std::string, double> out;
  for (const auto& call : calls(total)) {
    const auto t = time_calls(runs, [&] {
      auto r = client.Get(call.path.c_str(), auth);
      if (!r || r->status != 200) {
        throw std::runtime_error(call.path + ": " +
                                 (r ? std::to_string(r->status) + " " + r->body : "no reply"));
      }
    });
    out[call.name] = t.wall_ms;
  }
  return out;
}

void measure(const Options& opt, const std::string& suffix, const std::string& db,
             const std::string& data_dir) {
  auto store = pf::store::open_sql_store(db);
  const double now = epoch_now();
  add_rentals(*store);
  const int baseline = std::min(kBaselineJobs, opt.jobs);
  add_jobs(*store, 1, baseline, opt.jobs, now);

  pf::testing::UnreachableMarket market;
  pf::manager::ManagerConfig cfg;
  pf::manager::Manager manager(*store, market, cfg, epoch_now);
  pf::jobs::JobQueueConfig qc;
  qc.data_dir = data_dir;
  pf::jobs::JobQueueHooks hooks;
  hooks.workers = [] { return std::vector<pf::core::WorkerView>{}; };
  hooks.strike = [](std::int64_t, const pf::core::Strike&) {};
  hooks.event = [](std::int64_t, const std::string&) {};
  pf::jobs::JobQueue queue(*store, qc, hooks, epoch_now);
  auto served = ServedApi::start(manager, &queue);
  if (!served) throw std::runtime_error(served.error());

  const auto bare = time_page(**served, opt.jobs, opt.runs);
  add_jobs(*store, baseline + 1, opt.jobs - baseline, opt.jobs, now);
  if (store->connection().dialect() == pf::store::sql::Dialect::Postgres) {
    store->connection().exec("VACUUM ANALYZE", "analyzing after the bulk load");
  }
  const auto full = time_page(**served, opt.jobs, opt.runs);

  std::string worst = full.begin()->first;
  for (const auto& [name, ms] : full) {
    print_figure("jobs_page_" + name + "_ms_" + suffix, ms, 2);
    if (ms > full.at(worst)) worst = name;
  }
  print_figure("jobs_page_worst_ms_" + suffix, full.at(worst), 2);
  std::printf("jobs_page_worst_call_%s: %s\n", suffix.c_str(), worst.c_str());
  print_figure("jobs_page_worst_ratio_" + suffix, full.at(worst) / std::max(bare.at(worst), 1e-3),
               2);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--db" && has_value) {
      opt.db = argv[++i];
    } else if (arg == "--jobs" && has_value && pf::bench::parse_count(argv[i + 1], opt.jobs) &&
               opt.jobs >= 1) {
      ++i;
    } else if (arg == "--runs" && has_value && pf::bench::parse_count(argv[i + 1], opt.runs) &&
               opt.runs >= 1) {
      ++i;
    } else {
      std::fprintf(stderr, "usage: jobs_page_bench [--db URL] [--jobs N>=1] [--runs N>=1]\n");
      return 2;
    }
  }
  pf::testing::TempDir dir("pf_jobs_page_bench");
  return pf::bench::on_bench_stores("jobs_page_bench", opt.db, dir,
                                    [&](const std::string& suffix, const std::string& url) {
                                      measure(opt, suffix, url, dir.file("job-inputs-" + suffix));
                                    });
}
