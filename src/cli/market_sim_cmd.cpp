#include "cli/commands.h"

namespace pf::cli {
// Filled in by the market-sim work; registered so the CLI links.
void register_market_sim(CLI::App& app) {
  app.add_subcommand("market-sim", "Serve a scenario's offers over the vast.ai API (test double)");
}
}  // namespace pf::cli
