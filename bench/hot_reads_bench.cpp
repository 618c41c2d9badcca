// The hot read paths at scale (issue 14): the fleet summary (GET /api/v1/fleet, what
// `proverfleet status` and /metrics build on) and the dashboard snapshot (each `fleet` event of
// GET /api/v1/stream), timed on a store holding 1,000 live instances, then again once 100,000
// destroyed ones (with their events, proof samples and bench runs) sit beside them. Want each
// ≤ 50 ms at 100,000 destroyed: neither path may read the fleet's whole history.
//
// Prints, with <s> = "sqlite" or "pg" from the store URL:
//   hot_summary_ms_<s>, hot_dashboard_ms_<s>: medians at --live live + --destroyed destroyed
//   hot_summary_ratio_<s>, hot_dashboard_ratio_<s>: those ÷ the same median at 0 destroyed
//
// Usage: hot_reads_bench [--db URL] [--live N] [--destroyed N] [--runs N]
//   --db: an empty store (default: a SQLite file in a temporary directory). The 0-destroyed
//   figure is taken on the same store before the history is added.
#include <httplib.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jobs/job_queue.h"
#include "manager/dashboard.h"
#include "manager/http_api.h"
#include "manager/jobs_report.h"
#include "manager/manager.h"
#include "manager/views.h"
#include "net/http_server.h"
#include "store/store.h"
#include "support/temp_dir.h"
#include "support/unreachable_market.h"

namespace {

using nlohmann::json;
using pf::core::InstanceState;
using SteadyClock = std::chrono::steady_clock;

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Options {
  std::string db;
  int live = 1000;
  int destroyed = 100000;
  int runs = 9;
};

bool parse_int(const char* text, int& out) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0 || v > 10'000'000) return false;
  out = static_cast<int>(v);
  return true;
}

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

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
}

// Medians over `runs` calls of fn, after one untimed call: wall milliseconds (the figure), and
// the process's CPU milliseconds (what the call costs on a machine busy with other work).
struct Timing {
  double wall_ms = 0, cpu_ms = 0;
};
Timing time_calls(int runs, const std::function<void()>& fn) {
  fn();
  std::vector<double> wall, cpu;
  for (int i = 0; i < runs; ++i) {
    const double cpu0 = process_cpu_ms();
    const auto t0 = SteadyClock::now();
    fn();
    wall.push_back(std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count());
    cpu.push_back(process_cpu_ms() - cpu0);
  }
  return {median(std::move(wall)), median(std::move(cpu))};
}

std::string suffix_of(const std::string& url) {
  return url.rfind("postgres://", 0) == 0 || url.rfind("postgresql://", 0) == 0 ? "pg" : "sqlite";
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--db" && has_value) {
      opt.db = argv[++i];
    } else if (arg == "--live" && has_value && parse_int(argv[i + 1], opt.live)) {
      ++i;
    } else if (arg == "--destroyed" && has_value && parse_int(argv[i + 1], opt.destroyed)) {
      ++i;
    } else if (arg == "--runs" && has_value && parse_int(argv[i + 1], opt.runs) && opt.runs > 0) {
      ++i;
    } else {
      std::fprintf(stderr,
                   "usage: hot_reads_bench [--db URL] [--live N] [--destroyed N] [--runs N]\n");
      return 2;
    }
  }
  try {
    pf::testing::TempDir dir("pf-hot-reads-bench");
    if (opt.db.empty()) opt.db = dir.file("bench.db");
    const std::string suffix = suffix_of(opt.db);
    auto store = pf::store::open_store(opt.db);
    if (!store->instances(true).empty()) {
      std::fprintf(stderr, "hot_reads_bench: the store at --db must be empty\n");
      return 2;
    }
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
    qc.data_dir = dir.file("data");
    pf::jobs::JobQueueHooks hooks;
    hooks.workers = [] { return std::vector<pf::core::WorkerView>{}; };
    hooks.strike = [](std::int64_t, const pf::core::Strike&) {};
    hooks.event = [](std::int64_t, const std::string&) {};
    pf::jobs::JobQueue queue(*store, qc, hooks, epoch_now);
    manager.attach_jobs(queue);

    // The fleet summary through its route, as `proverfleet status` asks for it.
    pf::net::HttpServer server;
    pf::manager::ApiOptions api_options;
    api_options.operator_token_hash = pf::manager::hash_token("bench-operator");
    api_options.jobs = &queue;
    pf::manager::HttpApi api(manager, api_options);
    api.mount(server);
    auto bound = server.bind("127.0.0.1", 0);
    if (!bound) {
      std::fprintf(stderr, "cannot listen on 127.0.0.1: %s\n", bound.error().c_str());
      return 2;
    }
    server.start();
    httplib::Client client("127.0.0.1", *bound);
    client.set_read_timeout(60, 0);
    const httplib::Headers auth{{"Authorization", "Bearer bench-operator"}};
    auto summary = [&] {
      auto reply = client.Get("/api/v1/fleet", auth);
      if (!reply || reply->status != 200) throw std::runtime_error("GET /api/v1/fleet failed");
    };
    // The dashboard's snapshot with the summary HttpApi gives it (http_api.cpp fleet_json).
    pf::manager::DashboardOptions dash_options;
    dash_options.summary = [&] {
      auto fleet = manager.summary();
      auto report =
          pf::manager::build_jobs_report(manager, queue, api_options.jobs_report, epoch_now());
      pf::manager::apply_profit_basis(fleet, &report, cfg.rank.economics.revenue_per_proof_usd);
      json out = pf::manager::to_json(fleet);
      out["jobs"] = pf::manager::to_json(report);
      return out;
    };
    pf::manager::Dashboard dashboard(manager, dash_options);
    std::size_t snapshot_bytes = 0;
    auto snapshot = [&] {
      snapshot_bytes =
          dashboard.snapshot().dump(-1, ' ', false, json::error_handler_t::replace).size();
    };

    const Timing summary_bare = time_calls(opt.runs, summary);
    const Timing dashboard_bare = time_calls(opt.runs, snapshot);

    const auto fill_start = SteadyClock::now();
    add_instances(
        *store, opt.live, opt.destroyed, [](int) { return InstanceState::Destroyed; }, now);
    const double fill_s = std::chrono::duration<double>(SteadyClock::now() - fill_start).count();

    const Timing summary_full = time_calls(opt.runs, summary);
    const Timing dashboard_full = time_calls(opt.runs, snapshot);
    server.stop();

    const char* s = suffix.c_str();
    std::printf("hot_summary_ms_%s: %.1f\n", s, summary_full.wall_ms);
    std::printf("hot_dashboard_ms_%s: %.1f\n", s, dashboard_full.wall_ms);
    std::printf("hot_summary_ratio_%s: %.2f\n", s, summary_full.wall_ms / summary_bare.wall_ms);
    std::printf("hot_dashboard_ratio_%s: %.2f\n", s,
                dashboard_full.wall_ms / dashboard_bare.wall_ms);
    std::printf(
        "# %d live + %d destroyed instances (%d events, %d samples each), %d jobs; medians of %d; "
        "want each <= 50 ms\n"
        "# at 0 destroyed: summary %.1f ms, dashboard %.1f ms; CPU ms (process) summary %.1f -> "
        "%.1f, dashboard %.1f -> %.1f; snapshot %zu bytes; history filled in %.1f s\n",
        opt.live, opt.destroyed, kEventsPerInstance, kSamplesPerInstance, kJobs, opt.runs,
        summary_bare.wall_ms, dashboard_bare.wall_ms, summary_bare.cpu_ms, summary_full.cpu_ms,
        dashboard_bare.cpu_ms, dashboard_full.cpu_ms, snapshot_bytes, fill_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hot_reads_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
