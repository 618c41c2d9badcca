// `proverfleet plan`: the prover plan for a machine, and why. The same planner the agent runs
// on the instance (core/planner.h), fed by hand instead of by the probe.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "agent/plan_json.h"
#include "cli/commands.h"
#include "core/planner.h"
#include "core/text.h"

namespace pf::cli {
namespace {

struct PlanCliOptions {
  std::string ram;
  double cores = 0;
  int gpus = 1;
  bool json = false;
  bool toml = false;
  bool no_pce = false;
  int partitions = 0;
};

void run_plan(const PlanCliOptions& o) {
  auto ram = core::parse_gib(o.ram);
  if (!ram) throw CommandFailed("--ram: " + ram.error());
  // Bounded here, before anything is sized from them, with the flag named.
  if (!std::isfinite(*ram) || *ram <= 0 || *ram > core::kMaxPlanRamGib) {
    throw CommandFailed("--ram must be in (0, " + core::fixed(core::kMaxPlanRamGib, 0) +
                        "] GiB, got " + o.ram);
  }
  if (!std::isfinite(o.cores) || o.cores <= 0 || o.cores > core::kMaxPlanCores) {
    throw CommandFailed("--cores must be a positive number up to " +
                        core::fixed(core::kMaxPlanCores, 0) + ", got " + core::fixed(o.cores, 1));
  }
  if (o.gpus < 1 || o.gpus > core::kMaxPlanGpus) {
    throw CommandFailed("--gpus must be in [1, " + std::to_string(core::kMaxPlanGpus) + "], got " +
                        std::to_string(o.gpus));
  }
  if (o.partitions < 0 || o.partitions > core::kMaxPlanGpus * 1000) {
    throw CommandFailed("--partitions must be in [1, " + std::to_string(core::kMaxPlanGpus * 1000) +
                        "] when given, got " + std::to_string(o.partitions));
  }
  core::PlanInput in;
  in.ram_gib = *ram;
  in.cores = o.cores;
  in.gpus = o.gpus;
  in.pce_cached = !o.no_pce;
  core::PlanLimits limits;
  limits.partition_cap = o.partitions;
  auto plan = core::plan_prover(in, limits);
  if (!plan) throw CommandFailed("no plan: " + plan.error());

  core::CuzkEndpoints endpoints;
  if (o.toml) {
    std::cout << core::cuzk_config_toml(*plan, o.no_pce, endpoints);
    return;
  }
  if (o.json) {
    auto j = agent::plan_to_json(*plan);
    j["cuzk_toml"] = core::cuzk_config_toml(*plan, false, endpoints);
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::cout << "plan for " << core::fixed(*ram, 1) << " GiB, " << core::fixed(o.cores, 0)
            << " cores, " << o.gpus << (o.gpus == 1 ? " GPU" : " GPUs") << ":\n";
  auto row = [](const char* key, const std::string& value) {
    std::cout << "  " << key << std::string(24 - std::string(key).size(), ' ') << value << "\n";
  };
  row("partitions", std::to_string(plan->partitions));
  row("total_budget_gib", core::fixed(plan->total_budget_gib, 0));
  row("expected_peak_gib", core::fixed(plan->expected_peak_gib, 0));
  row("gpu_workers_per_device", std::to_string(plan->gpu_workers_per_device));
  row("synthesis_threads", std::to_string(plan->synthesis_threads));
  row("gpu_threads", std::to_string(plan->gpu_threads));
  row("proofs_in_flight", std::to_string(plan->proofs_in_flight));
  row("warm-up (no PCE file)", std::to_string(plan->warmup_partitions) + " partitions, " +
                                   core::fixed(plan->warmup_budget_gib, 0) + " GiB budget");
  std::cout << "why:\n";
  for (const auto& r : plan->reasons) std::cout << "  - " << r << "\n";
}

}  // namespace

void register_plan(CLI::App& app) {
  auto options = std::make_shared<PlanCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Show the prover plan (partitions, cuzk memory budget, threads) for a machine");
  cmd->footer(
      "The plan the agent makes on an instance from its probed limits. Memory decides the\n"
      "partitions: peak ~ 70 + 14*p GiB with 5 GiB kept free. --json prints an object with\n"
      "partitions, total_budget_gib, gpu_workers_per_device, synthesis_threads, gpu_threads,\n"
      "reasons (and more, including the generated cuzk TOML); --toml prints only the TOML.\n"
      "Example: proverfleet plan --ram 256G --cores 32 --gpus 1");
  cmd->add_option("--ram", options->ram,
                  "Usable memory: 256G, 256GiB, 240GB, 1T (a bare number is GiB)")
      ->required();
  cmd->add_option("--cores", options->cores, "Usable CPU cores")->required();
  cmd->add_option("--gpus", options->gpus, "GPUs")->capture_default_str();
  cmd->add_option("--partitions", options->partitions,
                  "Upper bound on concurrent partitions (e.g. after an OOM)");
  cmd->add_flag("--no-pce", options->no_pce,
                "Plan as if the PCE file did not exist yet (--toml then prints the warm-up "
                "configuration)");
  auto* json_flag = cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("--toml", options->toml, "Print the cuzk daemon's TOML configuration")
      ->excludes(json_flag);
  cmd->callback([options] { run_plan(*options); });
}

}  // namespace pf::cli
