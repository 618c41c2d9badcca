// `proverfleet scenario generate`: a new /2 scenario drawn from the bundled ones' families with
// a chosen demand shape (scenario/generate.h), for scoring policies on markets they were not
// tuned on.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "scenario/generate.h"

namespace pf::cli {
namespace {

struct GenerateCliOptions {
  int format = 2;
  std::uint64_t seed = 1;
  std::string shape = "steady";
  double hours = 72;
  int machines = 60;
  std::string out;
};

void run_generate(const GenerateCliOptions& o) {
  if (o.format != 2) {
    throw CommandFailed("--format: only 2 (proverfleet-scenario/2) is generated, got " +
                        std::to_string(o.format));
  }
  const auto shape = scenario::parse_demand_shape(o.shape);
  if (!shape) {
    throw CommandFailed("--shape: '" + o.shape + "' is not one of " +
                        scenario::demand_shape_names());
  }
  scenario::GenerateOptions options;
  options.seed = o.seed;
  options.shape = *shape;
  options.hours = o.hours;
  options.machines = o.machines;
  auto doc = scenario::generate_scenario(options, scenario::bundled_family_texts());
  if (!doc) throw CommandFailed(doc.error());
  const std::string text = doc->dump(1) + "\n";
  if (o.out.empty()) {
    std::cout << text;
    return;
  }
  // Written beside and renamed over: a reader never sees half a scenario.
  const std::filesystem::path target(o.out);
  const std::filesystem::path partial = target.string() + ".partial";
  {
    std::ofstream file(partial, std::ios::binary | std::ios::trunc);
    file << text;
    file.flush();
    if (!file) throw CommandFailed("--out: cannot write " + partial.string());
  }
  std::error_code ec;
  std::filesystem::rename(partial, target, ec);
  if (ec) {
    std::filesystem::remove(partial, ec);
    throw CommandFailed("--out: cannot write " + target.string());
  }
  std::cerr << "wrote " << target.string() << " (" << doc->at("offers").size() << " offers, "
            << doc->at("demand").at("arrivals").size() << " demand blocks)\n";
}

}  // namespace

void register_scenario(CLI::App& app) {
  auto* group = app.add_subcommand("scenario", "Work with market scenario files");
  group->require_subcommand(1);
  auto options = std::make_shared<GenerateCliOptions>();
  auto* cmd = group->add_subcommand(
      "generate", "Draw a new scenario from the bundled scenarios' families (JSON to stdout)");
  cmd->footer(
      "Machines are drawn from the bundled /2 scenarios (demo-small-v2, market-72h-v2) with\n"
      "their offers and hidden truth, each with its own price, rate and setup-time draws, a\n"
      "listing window and maybe a price change; demand is 2-hour blocks of Poisson arrivals at\n"
      "the bundled files' share of the listed capacity, shaped: steady, diurnal (a 24 h cycle),\n"
      "bursty (bursts of 2.5x over a low base) or trending (up or down by 3x over the horizon).\n"
      "Same options, same file. Example:\n"
      "  proverfleet scenario generate --seed 7 --shape diurnal --out /tmp/d7.json\n"
      "  proverfleet sim --scenario /tmp/d7.json --compare");
  cmd->add_option("--format", options->format, "Scenario format to write (only 2)")->default_val(2);
  cmd->add_option("--seed", options->seed, "Seed of every draw; also the scenario's seed")
      ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{1} << 53))
      ->default_val(1);
  cmd->add_option("--shape", options->shape, "Demand shape: " + scenario::demand_shape_names())
      ->default_val("steady");
  cmd->add_option("--hours", options->hours, "Horizon, hours")
      ->check(finite_range(1, scenario::kMaxGeneratedHours))
      ->default_val(72);
  cmd->add_option("--machines", options->machines, "Machines to draw (each with its offers)")
      ->check(CLI::Range(1, scenario::kMaxGeneratedMachines))
      ->default_val(60);
  cmd->add_option("--out", options->out, "Write the scenario to this file instead of stdout");
  cmd->callback([options] { run_generate(*options); });
}

}  // namespace pf::cli
