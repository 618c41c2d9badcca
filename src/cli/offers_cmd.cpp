#include "cli/commands.h"

namespace pf::cli {
void register_offers(CLI::App& app) {
  app.add_subcommand("offers", "Search the market and rank offers by expected $/proof");
}
}  // namespace pf::cli
