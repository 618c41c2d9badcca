// gateway_vs_direct_ratio: proof jobs per hour through the fleet's path — a Curio-like client →
// serve's gateway (gRPC) → the job queue (input on disk) → an agent (lease, input download with
// digest check, its cuzk prover) → a fake cuzk — over the same fake cuzk called directly, with
// 50 MB inputs and a fixed proof time. Want ≥ 0.95.
//
// The fake cuzk proves in kProofMs and holds any number of proofs; the agent keeps kSlots in
// flight (its plan), and the direct client calls it from kSlots threads, so both paths see the
// same daemon capacity. One round of kSlots jobs: every byte of the gateway path (upload to the
// gateway, input on disk, download by the agent, digest checks, the call to cuzk, the proof's
// way back) adds to the proof time, none hidden behind another job's proof.
// gateway_added_s_per_job: that addition, so the ratio at another proof time T is T / (T + it).
// Everything runs in this process over loopback (the manager's HTTP front and store, the gateway,
// the agent's WorkLoop and CuzkProver), so on a small machine the gateway path also pays for CPU
// the real deployment spends elsewhere.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gateway/gateway_server.h"
#include "jobs/job_queue.h"
#include "support/fake_cuzk.h"
#include "support/in_process_fleet.h"
#include "support/porep_calls.h"
#include "support/timing.h"

namespace {

namespace fs = std::filesystem;

constexpr std::size_t kInputBytes = 50'000'000;
// A real PoRep C2 takes ~70 s on a fast GPU (cuzk.md: synthesis ~35 s + GPU ~37 s); 20 s keeps
// the bench short while the proof still dominates, as it does in production.
constexpr int kProofMs = 20000;
constexpr int kSlots = 2;
constexpr int kJobs = 2;

using pf::bench::epoch_now;

// Runs kJobs Prove calls against `address` from `threads` threads; seconds, or < 0 on a failure.
double run_jobs(const std::string& address, int threads, int first_job,
                const std::vector<cuzk::v1::ProveRequest>& requests) {
  auto stub = pf::bench::proving_stub(address, 256 << 20);
  std::atomic<int> next{0}, failed{0};
  const auto start = pf::bench::SteadyClock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < kJobs; i = next++) {
        cuzk::v1::ProveRequest req = requests[static_cast<std::size_t>(i)];
        req.mutable_submit()->set_request_id("porep-1000-" + std::to_string(first_job + i));
        grpc::ClientContext ctx;
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(2));
        cuzk::v1::ProveResponse resp;
        const auto st = stub->Prove(&ctx, req, &resp);
        if (!st.ok() || resp.result().status() != cuzk::v1::AwaitProofResponse::COMPLETED ||
            resp.result().proof().size() != 1920) {
          std::fprintf(stderr, "job %d: %s %s\n", first_job + i, st.error_message().c_str(),
                       resp.result().error_message().c_str());
          ++failed;
        }
      }
    });
  }
  for (auto& t : pool) t.join();
  const double s = pf::bench::seconds_since(start);
  return failed.load() == 0 ? s : -1;
}

}  // namespace

int main() {
  spdlog::set_level(spdlog::level::warn);  // the figures alone on stdout
  const fs::path dir =
      fs::temp_directory_path() / ("pf-gateway-bench-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  int status = 0;
  {
    std::vector<cuzk::v1::ProveRequest> requests;
    for (int j = 0; j < kJobs; ++j)
      requests.push_back(pf::bench::porep_prove_request(j, kInputBytes, 1));

    pf::test::FakeCuzk cuzk;
    cuzk.delay_ms = kProofMs;

    // --- direct: the daemon's own capacity (kSlots proofs at once) ----------------------------
    const double direct_s = run_jobs(cuzk.address(), kSlots, 0, requests);

    // --- through the fleet ---------------------------------------------------------------------
    auto fleet = pf::bench::InProcessFleet::start(
        {(dir / "bench.db").string(), dir, cuzk.address(), kSlots, kProofMs / 1000.0});
    if (!fleet) {
      std::fprintf(stderr, "%s\n", fleet.error().c_str());
      return 2;
    }
    auto& queue = (*fleet)->queue();

    pf::gateway::GatewayConfig gc;
    gc.listen = "127.0.0.1:0";
    gc.max_input_bytes = 64 << 20;
    auto gateway = pf::gateway::start_gateway(queue, gc);
    if (!gateway) {
      std::fprintf(stderr, "gateway: %s\n", gateway.error().c_str());
      return 2;
    }

    const double calls_at = epoch_now();
    const double gateway_s =
        run_jobs("127.0.0.1:" + std::to_string((*gateway)->port()), kJobs, kJobs, requests);
    const double replied_at = epoch_now();
    // Where the path's time went, from the jobs' own timings (means over the jobs): the call
    // until the job was recorded (upload to the gateway, checks, input durable), until the
    // agent leased it, until its input was fetched and checked (the agent's `started`), until
    // its result arrived (the call to cuzk, the proof, the result's upload), until the reply.
    double phase[5] = {0, 0, 0, 0, 0};
    pf::store::JobFilter done_filter;
    done_filter.states = {pf::core::JobState::Done};
    const auto done_jobs = queue.list(done_filter, kJobs);
    for (const auto& j : done_jobs) {
      phase[0] += j.submitted_at - calls_at;
      phase[1] += j.assigned_at - j.submitted_at;
      phase[2] += j.started_at - j.assigned_at;
      phase[3] += j.finished_at - j.started_at;
      phase[4] += replied_at - j.finished_at;
    }
    for (double& p : phase) p /= std::max<double>(1, static_cast<double>(done_jobs.size()));

    (*gateway)->shutdown();
    (*fleet)->stop();

    if (direct_s <= 0 || gateway_s <= 0) {
      status = 1;
    } else {
      const double direct_per_h = kJobs / direct_s * 3600;
      const double gateway_per_h = kJobs / gateway_s * 3600;
      pf::bench::print_figure("gateway_vs_direct_ratio", gateway_per_h / direct_per_h, 3);
      pf::bench::print_figure("gateway_added_s_per_job", (gateway_s - direct_s) * kSlots / kJobs,
                              2);
      std::printf(
          "# %d jobs of %.0f MB, proof %.1f s, %d in flight: direct %.0f jobs/h (%.2f s), "
          "through the gateway %.0f jobs/h (%.2f s)\n",
          kJobs, kInputBytes / 1e6, kProofMs / 1000.0, kSlots, direct_per_h, direct_s,
          gateway_per_h, gateway_s);
      std::printf(
          "# per job through the gateway: recorded %.2f s, leased %.2f s, input fetched %.2f s, "
          "proved and reported %.2f s, answered %.2f s (the last one's reply)\n",
          phase[0], phase[1], phase[2], phase[3], phase[4]);
    }
  }
  fs::remove_all(dir);
  return status;
}
