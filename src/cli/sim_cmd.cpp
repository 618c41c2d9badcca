// `proverfleet sim`: run fleet policies over a market scenario in virtual time and report what
// they earn (spec: docs/scenario-format.md, "The report").
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/sim_settings.h"
#include "scenario/scenario.h"
#include "sim/des_engine.h"
#include "sim/des_policies.h"
#include "sim/des_report.h"
#include "sim/profit_bound.h"

namespace pf::cli {
namespace {

struct SimCliOptions {
  std::string scenario_path;
  std::optional<std::string> config_path;
  std::string policy = "default";
  bool json = false;
  bool compare = false;
  bool details = false;
};

std::string joined_policy_names() {
  std::string out;
  for (const auto& n : sim::policy_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

void run_sim(const SimCliOptions& o) {
  auto scenario = scenario::load_scenario(o.scenario_path);
  if (!scenario) throw CommandFailed(scenario.error());
  auto live = load_sim_policy_config(o.config_path);
  if (!live) throw CommandFailed(live.error());
  const sim::ProfitBound bound = sim::profit_bound(*scenario);
  // What runs: every policy with --compare, else the one named. On a scenario whose market
  // takes bids (/3), --compare runs the default policy three ways, `[bids]` off, on (the
  // config's other [bids] settings kept), and on with hedged proving (core/job_hedge.h) turned
  // the other way, so one table says what interruptible rentals and hedges earn.
  struct Run {
    std::string policy;
    std::string label;
    sim::DefaultPolicyConfig config;
  };
  std::vector<Run> runs;
  const bool bid_market =
      std::any_of(scenario->offers.begin(), scenario->offers.end(),
                  [](const auto& offer) { return offer.bid_market.has_value(); });
  for (const auto& name : o.compare ? sim::policy_names() : std::vector<std::string>{o.policy}) {
    if (o.compare && bid_market && name == "default") {
      sim::DefaultPolicyConfig on_demand = *live;
      on_demand.bids.enabled = false;
      sim::DefaultPolicyConfig bidding = *live;
      bidding.bids.enabled = true;
      // The three the issue compares: on-demand only, bids allowed, bids + hedging; hedging
      // as configured in the first two, and the third turns it on (or, when the config hedges
      // already, off: the same comparison from the other side).
      sim::DefaultPolicyConfig other = bidding;
      other.hedging.enabled = !live->hedging.enabled;
      runs.push_back({name, "default (on-demand)", on_demand});
      runs.push_back({name, "default (bids)", bidding});
      runs.push_back(
          {name, other.hedging.enabled ? "default (bids + hedging)" : "default (bids, no hedging)",
           other});
    } else {
      runs.push_back({name, name, *live});
    }
  }
  sim::DesOptions options;
  options.details = o.details;
  options.disk_gb = live->disk_gb;  // the disk serve would rent: storage is billed for it
  std::vector<sim::DesReport> reports;
  for (const auto& run : runs) {
    std::unique_ptr<sim::DesPolicy> policy = sim::make_policy(run.policy, *scenario, run.config);
    if (!policy) {
      throw CommandFailed("--policy: unknown policy \"" + run.policy + "\" (one of " +
                          joined_policy_names() + ")");
    }
    reports.push_back(sim::run_des(*scenario, *policy, options));
    reports.back().policy = run.label;
    reports.back().bound_profit_usd = bound.profit_usd;
  }
  if (o.json) {
    if (o.compare) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& r : reports) all.push_back(sim::report_json(r, o.details));
      std::cout << nlohmann::json{{"reports", all}}.dump(2) << "\n";
    } else {
      std::cout << sim::report_json(reports.front(), o.details).dump(2) << "\n";
    }
    return;
  }
  if (o.compare) {
    std::cout << sim::compare_text(reports, "clairvoyant");
  } else {
    std::cout << sim::report_text(reports.front());
  }
  if (o.details) {
    for (const auto& r : reports) {
      std::cout << "\n" << r.policy << " instances:\n";
      for (const auto& i : r.instances) {
        std::cout << "  #" << i.instance_id << " offer " << i.offer_id << " " << i.gpu << " $"
                  << i.dph << "/hr: " << i.final_state << (i.accepted ? " (accepted)" : "")
                  << (i.close_reason.empty() ? "" : " — ") << i.close_reason << "\n";
      }
    }
  }
}

}  // namespace

void register_sim(CLI::App& app) {
  auto options = std::make_shared<SimCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sim", "Simulate fleet policies over a market scenario and report their economics");
  cmd->footer(
      "Policies: default (proverfleet's decision engine with the settings `serve` runs: --config,\n"
      "else serve's built-in defaults), classic (the earlier tool as it really ran, its operator\n"
      "choosing offers), clairvoyant (reads the scenario's hidden truth and plays it well).\n"
      "Every report carries the scenario's profit bound (no policy can expect more) and its\n"
      "share of it. On a /3 scenario (bid markets) --compare runs default three times: [bids]\n"
      "off, on, and on with [jobs] hedge turned the other way (hedged proving: a job whose proof\n"
      "is overdue starts on a spare prover too). Same scenario, config and seed give the same\n"
      "report.");
  cmd->add_option("--scenario", options->scenario_path,
                  "Scenario file (proverfleet-scenario/1, /2 or /3)")
      ->required();
  cmd->add_option("--config", options->config_path,
                  "proverfleet.toml to run the default policy with, as `serve` would (its\n"
                  "PROVERFLEET_* overrides apply); without it, serve's built-in defaults");
  cmd->add_option("--policy", options->policy, "Policy: " + joined_policy_names())
      ->default_val("default");
  cmd->add_flag(
      "--compare", options->compare,
      "Run every policy and print them side by side (profit vs the bound and vs clairvoyant)");
  cmd->add_flag("--json", options->json,
                "Print the report as JSON (--compare: {\"reports\": [...]})");
  cmd->add_flag("--details", options->details, "Include every rental's outcome");
  cmd->callback([options] { run_sim(*options); });
}

}  // namespace pf::cli
