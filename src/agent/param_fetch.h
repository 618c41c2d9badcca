// Getting the prover's inputs onto the machine: the parameter files the manager listed
// (resumable, verified; agent/params.h), then its benchmark input when it offers one. Progress
// is kept for the heartbeat and, when asked, drawn as a bar on stderr.
#pragma once

#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <tl/expected.hpp>
#include <vector>

#include "agent/agent.h"
#include "agent/agent_log.h"
#include "agent/clock.h"
#include "agent/manager_client.h"
#include "agent/params.h"

namespace pf::agent {

struct FetchedInputs {
  std::size_t files = 0;
  FetchSummary params;
  std::string benchmark_input_path;  // empty: none offered
  double seconds = 0;                // simulated, from the first byte to the last check
};

class ParameterFetch {
 public:
  // `options`, `log` and `clock` must outlive this object.
  ParameterFetch(const AgentOptions& options, AgentLog& log, const AgentClock& clock)
      : options_(options), log_(log), clock_(clock) {}

  // Fetches and verifies `files` into the options' param_dir, then the benchmark input the
  // register reply offered (`offer`, null: none) from `manager`. `cancelled` is polled.
  tl::expected<FetchedInputs, std::string> fetch(const std::vector<ParamFile>& files,
                                                 const nlohmann::json& offer,
                                                 const ManagerClient& manager,
                                                 std::function<bool()> cancelled);
  // The heartbeat's "params" object ({done, total, bytes_per_s, files_done, files_total,
  // eta_s}); null before fetching started. Any thread.
  nlohmann::json heartbeat_json();

 private:
  void draw_progress_bar();
  tl::expected<std::string, std::string> fetch_benchmark_input_offered(const nlohmann::json& offer,
                                                                       const ManagerClient& manager,
                                                                       FetchOptions fo);

  const AgentOptions& options_;
  AgentLog& log_;
  const AgentClock& clock_;
  FetchProgress progress_;
  std::atomic<bool> started_{false};
};

}  // namespace pf::agent
