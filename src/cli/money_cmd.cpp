// `proverfleet money`: revenue, spend (compute, storage, bandwidth) and profit over a range, from
// the operator API's GET /api/v1/money, as totals and per-bucket rows; --json prints the JSON.
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "cli/fleet_client.h"
#include "cli/table.h"

namespace pf::cli::fleet {
namespace {

using nlohmann::json;

void print_money(const json& m) {
  const json total = m.value("total", json::object());
  const json spend = total.value("spend", json::object());
  std::cout << "money over the last " << str(m, "range") << ": revenue "
            << money(num(total, "revenue_usd"), 2) << ", spend "
            << money(num(spend, "total_usd"), 2) << " (compute "
            << money(num(spend, "compute_usd"), 2) << ", storage "
            << money(num(spend, "storage_usd"), 2) << ", bandwidth "
            << money(num(spend, "bandwidth_usd"), 2) << "), profit "
            << money(num(total, "profit_usd"), 2) << "\n";
  std::cout << "jobs delivered on time " << integer(total, "delivered_on_time") << ", late "
            << integer(total, "delivered_late") << "; realised $/proof "
            << (opt_num(total, "cost_per_proof_usd") ? money(num(total, "cost_per_proof_usd"), 4)
                                                     : std::string("-"))
            << " (target " << money(num(m, "target_cost_per_proof_usd"), 4)
            << ", revenue per proof " << money(num(m, "revenue_per_proof_usd"), 4) << ")\n";
  using A = Table::Align;
  Table buckets({{"FROM", A::Right},
                 {"REVENUE", A::Right},
                 {"SPEND", A::Right},
                 {"PROFIT", A::Right},
                 {"ON TIME", A::Right},
                 {"LATE", A::Right}});
  for (const auto& b : m.value("buckets", json::array())) {
    buckets.add_row({ago(b, "from"), money(num(b, "revenue_usd"), 3),
                     money(num(b.value("spend", json::object()), "total_usd"), 3),
                     money(num(b, "profit_usd"), 3), integer(b, "delivered_on_time"),
                     integer(b, "delivered_late")});
  }
  buckets.print(std::cout);
  const json hosts = m.value("hosts", json::array());
  if (hosts.empty()) return;
  std::cout << "\nby machine, losing first:\n";
  std::vector<json> sorted(hosts.begin(), hosts.end());
  std::sort(sorted.begin(), sorted.end(), [](const json& a, const json& b) {
    return num(a, "profit_usd") < num(b, "profit_usd");
  });
  Table t({{"MACHINE", A::Right},
           {"RENTALS", A::Right},
           {"REVENUE", A::Right},
           {"SPEND", A::Right},
           {"PROFIT", A::Right},
           {"$/PROOF", A::Right}});
  for (const auto& h : sorted) {
    t.add_row({integer(h, "machine_id"), integer(h, "rentals"), money(num(h, "revenue_usd"), 3),
               money(num(h.value("spend", json::object()), "total_usd"), 3),
               money(num(h, "profit_usd"), 3),
               opt_num(h, "cost_per_proof_usd") ? money(num(h, "cost_per_proof_usd"), 4) : "-"});
  }
  t.print(std::cout);
}

}  // namespace

void register_money(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto range = std::make_shared<std::string>("day");
  auto bucket = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand(
      "money",
      "Revenue, spend by what vast.ai billed (compute, storage, bandwidth) and profit over a\n"
      "range (GET /api/v1/money): per hour or day, and per machine, losing first. The same\n"
      "rules as the jobs figures of 'status' and /metrics.");
  cmd->add_option("--range", *range, "hour, day, week or month")
      ->check(CLI::IsMember({"hour", "day", "week", "month"}))
      ->capture_default_str();
  cmd->add_option("--bucket", *bucket, "5m, hour or day (default: the range's own)")
      ->check(CLI::IsMember({"5m", "hour", "day"}));
  add_client_flags(cmd, *flags);
  cmd->callback([flags, range, bucket] {
    auto client = connect(*flags);
    std::string path = "/api/v1/money?range=" + *range;
    if (!bucket->empty()) path += "&bucket=" + *bucket;
    json m = ok_or_fail(client.get(path));
    if (flags->json) return print_json(m);
    print_money(m);
  });
}

}  // namespace pf::cli::fleet
