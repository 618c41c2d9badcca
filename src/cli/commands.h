// Every subcommand registers itself on the root app here. A command reports failure by
// throwing CommandFailed (message goes to stderr, exit code 1) or CLI::Error.
#pragma once

#include <CLI/CLI.hpp>
#include <stdexcept>
#include <string>

namespace pf::cli {

struct CommandFailed : std::runtime_error {
  explicit CommandFailed(const std::string& message, int exit_code = 1)
      : std::runtime_error(message), code(exit_code) {}
  int code;
};

void register_offers(CLI::App& app);
void register_market_sim(CLI::App& app);
void register_sim(CLI::App& app);
void register_serve(CLI::App& app);
void register_agent(CLI::App& app);
void register_plan(CLI::App& app);
// deploy, destroy, instances, hosts, bad-hosts, status, jobs, autopilot: clients of a running
// manager.
void register_fleet_commands(CLI::App& app);
// market-sim + serve with the autopilot, for trying the system locally.
void register_demo(CLI::App& app);
// One proof through the gateway's gRPC API, like Curio.
void register_prove(CLI::App& app);
// Copies a fleet's history into an empty database (e.g. SQLite → PostgreSQL).
void register_migrate(CLI::App& app);
// scenario generate: new /2 scenarios drawn from the bundled ones' families.
void register_scenario(CLI::App& app);

}  // namespace pf::cli
