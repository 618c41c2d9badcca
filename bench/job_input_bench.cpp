// job_input_mb_per_s: input bytes per second the manager serves to an agent over loopback (GET
// /api/v1/agent/jobs/{id}/input, bearer-authenticated, Range-resumed until the whole input
// arrived, as the agent fetches it), for a 50 MB job input; job_input_vs_copy_ratio: that rate
// over a plain file copy of the same bytes on the same disk (std::filesystem::copy_file).
// Best of 5 each; the manager's stack is the one serve runs (file-backed SQLite store, the
// HTTP front, the JobQueue's content-addressed input file).
#include <httplib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include "jobs/job_queue.h"
#include "manager/manager.h"
#include "store/store.h"
#include "support/accepted_instance.h"
#include "support/served_api.h"
#include "support/timing.h"
#include "support/unreachable_market.h"

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kInputBytes = 50'000'000;
constexpr int kRounds = 5;

using pf::testing::UnreachableMarket;

using pf::bench::epoch_now;

std::string random_bytes(std::size_t n) {
  std::mt19937_64 rng(5);
  std::string s(n, '\0');
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

// Fetches the whole input as the agent does: Range from what has arrived until all of it has.
// Returns the bytes received (0 on a failed reply).
std::size_t fetch_input(int port, const std::string& token, std::int64_t job, int attempt) {
  httplib::Client c("127.0.0.1", port);
  c.set_bearer_token_auth(token.c_str());
  c.set_read_timeout(60);
  const std::string path =
      "/api/v1/agent/jobs/" + std::to_string(job) + "/input?attempt=" + std::to_string(attempt);
  std::size_t got = 0;
  while (got < kInputBytes) {
    httplib::Headers h = {{"Range", "bytes=" + std::to_string(got) + "-"}};
    std::size_t this_reply = 0;
    auto r = c.Get(path, h, [&](const char*, std::size_t n) {
      this_reply += n;
      return true;
    });
    if (!r || (r->status != 200 && r->status != 206) || this_reply == 0) {
      std::fprintf(stderr, "input GET at %zu: %s\n", got,
                   r ? std::to_string(r->status).c_str() : httplib::to_string(r.error()).c_str());
      return 0;
    }
    got += this_reply;
  }
  return got;
}

}  // namespace

int main() {
  const fs::path dir = fs::temp_directory_path() / ("pf-input-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  int status = 0;
  {
    auto store = pf::store::open_store((dir / "bench.db").string());
    UnreachableMarket market;
    pf::manager::ManagerConfig cfg;
    pf::manager::Manager manager(*store, market, cfg, epoch_now);

    // One accepted instance, registered with its token.
    const auto accepted = pf::testing::insert_accepted_instance(*store, "bench-input", epoch_now());
    const std::int64_t instance = accepted.id;
    const std::string& token = accepted.token;

    pf::jobs::JobQueueConfig qc;
    qc.data_dir = (dir / "data").string();
    pf::jobs::JobQueueHooks hooks;
    hooks.workers = [instance] {
      pf::core::WorkerView w;
      w.instance_id = instance;
      w.seconds_per_proof = 60;
      w.slots = 1;
      return std::vector<pf::core::WorkerView>{w};
    };
    hooks.strike = [](std::int64_t, const pf::core::Strike&) {};
    hooks.event = [](std::int64_t, const std::string&) {};
    pf::jobs::JobQueue queue(*store, qc, hooks, epoch_now);

    pf::jobs::SubmitRequest req;
    req.request_id = "porep-1000-1";
    req.input = random_bytes(kInputBytes);
    auto submitted = queue.submit(req);
    if (!submitted) {
      std::fprintf(stderr, "submit: %s\n", submitted.error().message.c_str());
      return 2;
    }
    auto leased = queue.lease(instance, 1, std::chrono::milliseconds(1000));
    if (!leased || leased->size() != 1) {
      std::fprintf(stderr, "the job was not leased\n");
      return 2;
    }
    const std::int64_t job = leased->front().job.id;
    const int attempt = leased->front().job.attempts;

    auto served = pf::bench::ServedApi::start(manager, &queue);
    if (!served) {
      std::fprintf(stderr, "%s\n", served.error().c_str());
      return 2;
    }

    // The same bytes as a file on the same disk, for the plain copy.
    const fs::path source = dir / "input.bin";
    { std::ofstream(source, std::ios::binary) << req.input; }
    double best_http = 1e9, best_copy = 1e9;
    for (int round = 0; round < kRounds; ++round) {
      std::size_t got = 0;
      const double http_s =
          pf::bench::seconds_of([&] { got = fetch_input((*served)->port(), token, job, attempt); });
      if (got != kInputBytes) {
        status = 1;
        break;
      }
      best_http = std::min(best_http, http_s);

      const fs::path copy = dir / "copy.bin";
      fs::remove(copy);
      best_copy = std::min(best_copy, pf::bench::seconds_of([&] { fs::copy_file(source, copy); }));
    }
    queue.shutdown();
    (*served)->stop();
    if (status == 0) {
      const double mb = kInputBytes / 1e6;
      pf::bench::print_figure("job_input_mb_per_s", mb / best_http, 0);
      pf::bench::print_figure("job_input_vs_copy_ratio", best_copy / best_http, 3);
      std::printf("# %.0f MB input, best of %d: manager over loopback %.3f s, file copy %.3f s\n",
                  mb, kRounds, best_http, best_copy);
    }
  }
  fs::remove_all(dir);
  return status;
}
