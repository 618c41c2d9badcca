// The chaos run: market-sim with injected faults and spawned agents, `serve` with the
// autopilot on, a SIGKILL of serve mid-run and a restart on the same database, then a SIGKILL
// of market-sim with agents alive.
#pragma once

#include <string>

#include "reliability/figures.h"

namespace pf::reliability {

struct ChaosOptions {
  std::string binary;
  std::string source_dir;
  std::string
      scenario;  // default: tests/fixtures/scenarios/chaos-healthy.json (every host healthy)
  std::string faults = "429=0.3,500=0.1,drop_create_reply=0.2,slow_ms=200";
  double time_scale = 60;
  int before_kill_s = 50;       // autopilot running before serve is SIGKILLed
  int serve_down_s = 25;        // serve stays dead this long (longer than heartbeat_timeout_s)
  int after_restart_s = 40;     // running again before the cleanup
  int cleanup_timeout_s = 120;  // for every instance to be gone after the operator destroys all
  int heartbeat_timeout_s = 20;
  bool keep_dir = false;
};

Figures run_chaos(const ChaosOptions& options);

}  // namespace pf::reliability
