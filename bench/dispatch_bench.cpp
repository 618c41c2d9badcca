// gateway_dispatch_per_s: job assignments per second through the manager's JobQueue with 1,000
// simulated agents leasing at once (file-backed SQLite store, as serve runs it). Want ≥ 200.
//
// 2,000 jobs (distinct 1 KiB inputs, a backlog of two per agent) are queued first (not timed);
// then 16 threads, each acting for 1/16 of the 1,000 agents, call lease(agent, 1 job, no wait)
// round-robin until every job is assigned. Each lease records its assignment durably and carries
// out the queue's placement (core::plan_jobs over the whole queue and the 1,000 workers), made
// again whenever the queue or the fleet changed and at least every 2 s (jobs/lease_plan.h), so
// the figure is what one manager hands out. The plans made are printed with it.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/job_schedule.h"
#include "jobs/job_queue.h"
#include "store/store.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kAgents = 1000;
constexpr int kSlots = 2;  // each agent keeps up to 2 jobs: room for every job below
constexpr int kJobs = 2000;
constexpr int kThreads = 16;

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

int main() {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("pf-dispatch-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  int status = 0;
  {
    auto store = pf::store::open_store((dir / "bench.db").string());
    pf::jobs::JobQueueConfig cfg;
    cfg.data_dir = (dir / "data").string();
    cfg.max_open_jobs = kJobs * 2;
    pf::jobs::JobQueueHooks hooks;
    hooks.workers = [] {
      std::vector<pf::core::WorkerView> w(kAgents);
      for (int a = 0; a < kAgents; ++a) {
        w[a].instance_id = a + 1;
        w[a].seconds_per_proof = 60 + a % 37;  // unequal machines: placement has work to do
        w[a].slots = kSlots;
      }
      return w;
    };
    hooks.strike = [](std::int64_t, const pf::core::Strike&) {};
    hooks.event = [](std::int64_t, const std::string&) {};
    pf::jobs::JobQueue queue(*store, cfg, hooks, epoch_now);

    // Submitted from several threads: each submit syncs its input file and its row.
    std::atomic<int> next_job{0}, submit_errors{0};
    std::vector<std::thread> submitters;
    for (int t = 0; t < 8; ++t) {
      submitters.emplace_back([&] {
        for (int j = next_job++; j < kJobs; j = next_job++) {
          pf::jobs::SubmitRequest r;
          r.request_id = "porep-1000-" + std::to_string(j);
          r.input = std::string(1024, static_cast<char>('a' + j % 26)) + std::to_string(j);
          if (auto s = queue.submit(r); !s) {
            std::fprintf(stderr, "submit failed: %s\n", s.error().message.c_str());
            ++submit_errors;
          }
        }
      });
    }
    for (auto& th : submitters) th.join();
    if (submit_errors.load() != 0) return 2;

    std::atomic<int> assigned{0}, errors{0};
    const auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        int idle_rounds = 0;
        while (assigned.load() < kJobs && idle_rounds < 3) {
          int got_this_round = 0;
          for (int a = t; a < kAgents && assigned.load() < kJobs; a += kThreads) {
            auto leased = queue.lease(a + 1, 1, std::chrono::milliseconds(0));
            if (!leased) {
              ++errors;
              continue;
            }
            got_this_round += static_cast<int>(leased->size());
            assigned += static_cast<int>(leased->size());
          }
          idle_rounds = got_this_round == 0 ? idle_rounds + 1 : 0;
        }
      });
    }
    for (auto& th : threads) th.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    queue.shutdown();

    // What a plan itself costs (the queue makes one after every change of the queue or fleet).
    std::vector<pf::core::JobToPlace> queued(kJobs);
    for (int j = 0; j < kJobs; ++j) {
      queued[j].job_id = j + 1;
      queued[j].submitted_at = epoch_now();
      queued[j].deadline_at = queued[j].submitted_at + 1800;
    }
    const auto fleet = hooks.workers();
    const auto plan_start = Clock::now();
    const auto plan = pf::core::plan_jobs(epoch_now(), queued, fleet);
    const double plan_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - plan_start).count();

    std::printf("gateway_dispatch_per_s: %.0f\n", assigned.load() / seconds);
    std::printf(
        "# %d of %d jobs assigned to %d agents (%d threads) in %.2f s, %d lease errors, "
        "%llu placements planned\n",
        assigned.load(), kJobs, kAgents, kThreads, seconds, errors.load(),
        static_cast<unsigned long long>(queue.plans_made()));
    std::printf("# one plan of %d jobs on %d agents: %.1f ms (%zu placed)\n", kJobs, kAgents,
                plan_ms, plan.placements.size());
    if (assigned.load() != kJobs || errors.load() != 0) status = 1;
  }
  fs::remove_all(dir);
  return status;
}
