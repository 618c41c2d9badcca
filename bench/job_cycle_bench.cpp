// jobs_per_s (SQLite) and jobs_per_s_pg (PostgreSQL): proof jobs carried through the real
// JobQueue (src/jobs) per second, one after another: submit (the input file written and the row
// stored) → lease to an accepted instance → started → proof reported → awaited by the client.
// Each store is the one serve opens for its --db: a file SQLite database, and a PostgreSQL
// database on a local server this bench starts (tests/support/pg_server.h: initdb in a temp
// dir, fsync off). Target for PostgreSQL ≥ 200. Best of 3 rounds of 2 s each.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "jobs/job_queue.h"
#include "store/store.h"
#include "support/accepted_instance.h"
#include "support/pg_server.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr int kRounds = 3;
constexpr double kRoundSeconds = 2;

double epoch_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Cycles per second through a JobQueue over the store at `db` (best round), or -1 when a cycle
// failed (the reason on stderr).
double jobs_per_s(const std::string& db, const fs::path& data_dir, const std::string& label) {
  auto store = pf::store::open_store(db);
  const auto instance = pf::testing::insert_accepted_instance(*store, "bench-jobs", epoch_now());
  pf::jobs::JobQueueConfig config;
  config.data_dir = data_dir.string();
  pf::jobs::JobQueueHooks hooks;
  hooks.workers = [&] {
    return std::vector<pf::core::WorkerView>{pf::core::WorkerView{instance.id, 60, 1, 0, -1}};
  };
  hooks.strike = [](std::int64_t, const pf::core::Strike&) {};
  hooks.event = [](std::int64_t, const std::string&) {};
  pf::jobs::JobQueue queue(*store, config, hooks, epoch_now);

  std::int64_t serial = 0;
  auto cycle = [&]() -> bool {
    const std::string id = label + "-" + std::to_string(serial++);
    pf::jobs::SubmitRequest request;
    request.request_id = id;
    request.input = "input of " + id;
    auto submitted = queue.submit(request);
    if (!submitted) {
      std::fprintf(stderr, "# %s: submit: %s\n", label.c_str(), submitted.error().message.c_str());
      return false;
    }
    auto leased = queue.lease(instance.id, 1, 0ms);
    if (!leased || leased->size() != 1) {
      std::fprintf(stderr, "# %s: lease: %s\n", label.c_str(),
                   leased ? "no job leased" : leased.error().message.c_str());
      return false;
    }
    const auto& job = (*leased)[0].job;
    auto started = queue.started(instance.id, job.id, job.attempts);
    pf::jobs::ProofReport report;
    report.job_id = job.id;
    report.attempt = job.attempts;
    report.ok = true;
    report.proof = "proof of " + id;
    report.prove_ms = 1;
    auto ack = queue.report(instance.id, report);
    if (!started || !ack || !ack->applied) {
      std::fprintf(stderr, "# %s: report not applied\n", label.c_str());
      return false;
    }
    auto finished = queue.await(submitted->job.id, 10s);
    if (!finished || !*finished || (*finished)->proof != report.proof) {
      std::fprintf(stderr, "# %s: await did not return the proof\n", label.c_str());
      return false;
    }
    return true;
  };

  for (int i = 0; i < 20; ++i) {
    if (!cycle()) return -1;  // warm-up: statements prepared, files created
  }
  double best = 0;
  for (int round = 0; round < kRounds; ++round) {
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(kRoundSeconds);
    int done = 0;
    while (Clock::now() < end) {
      if (!cycle()) return -1;
      ++done;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    best = std::max(best, done / seconds);
  }
  queue.shutdown();
  return best;
}

}  // namespace

int main() {
  const fs::path dir =
      fs::temp_directory_path() / ("pf-job-cycle-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  double sqlite = -1;
  double pg = -1;
  try {
    sqlite = jobs_per_s((dir / "bench.db").string(), dir / "sqlite-data", "sqlite");
    pf::test::PgServer server;
    pg = jobs_per_s(server.url("postgres"), dir / "pg-data", "pg");
  } catch (const std::exception& error) {
    std::fprintf(stderr, "job_cycle_bench: %s\n", error.what());
  }
  fs::remove_all(dir);
  std::printf("jobs_per_s: %.0f\n", sqlite);
  std::printf("jobs_per_s_pg: %.0f\n", pg);
  std::printf(
      "# sequential submit → lease → started → report → await through JobQueue; best of %d "
      "rounds of %.0f s\n",
      kRounds, kRoundSeconds);
  return sqlite > 0 && pg > 0 ? 0 : 1;
}
