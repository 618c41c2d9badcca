#pragma once

namespace pf::cli {

// Parses argv, runs the chosen subcommand, returns the process exit code.
int run(int argc, char** argv);

}  // namespace pf::cli
