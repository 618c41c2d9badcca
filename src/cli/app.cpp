#include "cli/app.h"

#include <iostream>

#include "cli/commands.h"

namespace pf::cli {

int run(int argc, char** argv) {
  CLI::App app{
      "proverfleet: rent GPUs on vast.ai, prove Filecoin PoRep C2, keep what pays.\n"
      "Run 'proverfleet COMMAND --help' for a command's options."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "proverfleet 0.1.0");
  register_offers(app);
  register_market_sim(app);
  register_sim(app);
  register_serve(app);
  register_agent(app);
  register_plan(app);
  register_fleet_commands(app);
  register_demo(app);
  register_prove(app);
  register_migrate(app);
  register_scenario(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const CommandFailed& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.code;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace pf::cli
