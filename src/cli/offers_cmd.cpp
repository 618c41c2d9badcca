// `proverfleet offers`: offers ranked by expected $/proof, with the break-even verdicts use and,
// through a running manager (--manager), each machine's history.
#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/config.h"
#include "cli/flag_checks.h"
#include "cli/manager_client.h"
#include "cli/offers_table.h"
#include "cli/secrets.h"
#include "core/ranking.h"
#include "core/text.h"
#include "manager/views.h"
#include "market/http_client.h"
#include "market/query.h"
#include "market/vast_market.h"

namespace pf::cli {
namespace {

struct OffersOptions {
  std::vector<std::string> query;
  std::string sort = "cost";
  int limit = 50;
  std::optional<double> revenue;
  std::optional<double> target;
  bool json = false;
  std::optional<std::string> config_path;
  std::optional<std::string> vast_url;
  std::optional<std::string> key_file;
  std::string type = "on-demand";
  int search_limit = 1000;
  bool no_default_filters = false;
  // A running manager to rank with (its fleet's history); nullopt: search the market here.
  std::optional<std::string> manager;
  RefusedSecretFlag token_flag{"--token", "$PROVERFLEET_TOKEN or --token-file PATH", std::nullopt};
  std::string token_file = "operator.token";
};

void print_footer(const core::RankConfig& cfg, std::size_t shown, std::size_t total) {
  const auto& e = cfg.economics;
  std::cout << "\n"
            << shown << " of " << total << " offers; revenue $"
            << core::fixed(e.revenue_per_proof_usd, 4) << "/proof, target $"
            << core::fixed(e.target_cost_per_proof_usd, 4) << "/proof; break-even against "
            << (cfg.profit_objective ? "revenue" : "the target")
            << " (as verdicts, deadlines and the autopilot); setup amortised over "
            << core::fixed(cfg.setup.expected_lifetime_h, 0) << " h. Rates are predictions.\n";
  std::cout << "No machine history here: with --manager URL (or $PROVERFLEET_MANAGER) a running "
               "manager ranks with its fleet's measurements and shows each machine's history.\n";
}

// Ranked by a running manager: its fleet's runs, verdicts and bad hosts are in every row.
void run_offers_via_manager(const OffersOptions& opt) {
  if (opt.revenue || opt.target || opt.no_default_filters || opt.type != "on-demand" ||
      opt.search_limit != 1000) {
    throw CommandFailed(
        "--revenue, --target, --type, --search-limit and --no-default-filters apply to a local "
        "search only; the manager ranks with its own configuration",
        2);
  }
  check_refused_secret_flag(opt.token_flag);
  auto token = resolve_operator_token(secret_from_env("PROVERFLEET_TOKEN"), opt.token_file);
  if (!token) throw CommandFailed(token.error());
  auto client = ManagerClient::create(ManagerEndpoint{*opt.manager, *token});
  if (!client) throw CommandFailed(client.error());
  std::string text;
  for (const auto& q : opt.query) text += (text.empty() ? "" : " ") + q;
  std::string path = "/api/v1/offers?sort=" + opt.sort;
  if (!text.empty()) path += "&q=" + market::url_encode(text);
  // The API caps a page; 0 (all) asks for its maximum.
  path += "&limit=" + std::to_string(opt.limit > 0 ? std::min(opt.limit, 1000) : 1000);
  auto rows = client->get(path);
  if (!rows) throw CommandFailed(rows.error());
  if (!rows->is_array()) throw CommandFailed("the manager's offers reply is not a list");
  if (opt.json) {
    std::cout << rows->dump(2) << "\n";
    return;
  }
  print_offers_table(*rows, std::cout);
  std::cout << "\n"
            << rows->size() << " offers ranked by the manager at " << client->base_url()
            << " (its prediction, break-even and each machine's history).\n";
}

void run_offers(const OffersOptions& opt) {
  if (opt.manager) return run_offers_via_manager(opt);
  auto cfg = load_config(opt.config_path);
  if (!cfg) throw CommandFailed(cfg.error());
  core::RankConfig rank = cfg->rank;
  if (opt.revenue) rank.economics.revenue_per_proof_usd = *opt.revenue;
  if (opt.target) rank.economics.target_cost_per_proof_usd = *opt.target;

  std::string text;
  for (const auto& q : opt.query) text += (text.empty() ? "" : " ") + q;
  auto parsed = market::parse_query(text, !opt.no_default_filters);
  if (!parsed) throw CommandFailed(parsed.error(), 2);
  for (const auto& w : parsed->warnings) std::cerr << "warning: " << w << "\n";

  auto vast_cfg = market::vast_config_from_env(opt.vast_url ? opt.vast_url : cfg->market.vast_url,
                                               opt.key_file ? opt.key_file : cfg->market.key_file);
  if (!vast_cfg) throw CommandFailed(vast_cfg.error());
  vast_cfg->pacing = cfg->market.rate_limits;
  market::VastMarket vast(*vast_cfg);

  market::SearchRequest req;
  req.query = parsed->filters;
  req.type = opt.type;
  req.limit = opt.search_limit;
  req.allocated_storage_gb = cfg->deploy.disk_gb;  // dph_total as a deploy would pay it
  auto found = vast.search_offers(req);
  if (!found) {
    throw CommandFailed("offer search at " + vast_cfg->base_url + " failed (" +
                        market::to_string(found.error().kind) + "): " + found.error().message);
  }
  for (const auto& w : found->warnings) std::cerr << "warning: " << w << "\n";

  std::size_t total = found->offers.size();
  // No fleet here, but the time: an offer's contract end (end_date) bounds what it is worth.
  core::RankHistory history;
  history.now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto ranked = core::rank_offers(
      std::move(found->offers), rank,
      opt.sort == "profit" ? core::RankOrder::Profit : core::RankOrder::Cost, history);
  if (opt.limit > 0 && ranked.size() > static_cast<std::size_t>(opt.limit)) {
    ranked.resize(static_cast<std::size_t>(opt.limit));
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : ranked) rows.push_back(manager::to_json(r));
  if (opt.json) {
    std::cout << rows.dump(2) << "\n";
  } else {
    print_offers_table(rows, std::cout);
    print_footer(rank, ranked.size(), total);
  }
}

}  // namespace

void register_offers(CLI::App& app) {
  auto opt = std::make_shared<OffersOptions>();
  auto* cmd = app.add_subcommand(
      "offers",
      "Search the market and rank offers by expected $/proof (or profit/hour).\n"
      "QUERY uses the vast CLI language, e.g. 'gpu_name=RTX_4090 num_gpus>=2 cpu_ram>=240'.\n"
      "Market: --vast-url, $PROVERFLEET_VAST_URL or https://console.vast.ai; key from\n"
      "$VAST_API_KEY or --vast-key-file (search works without one).");
  cmd->add_option("query", opt->query, "Filter terms (vast CLI query language)");
  cmd->add_option("--sort", opt->sort, "Order: cost ($/proof ascending) or profit (desc)")
      ->check(CLI::IsMember({"cost", "profit"}))
      ->capture_default_str();
  cmd->add_option("--limit", opt->limit, "Show at most N offers (0 = all)")
      ->check(finite_range(0, 1e6))
      ->capture_default_str();
  cmd->add_option("--revenue", opt->revenue, "Revenue per proof, USD (overrides config)")
      ->check(finite_positive(1e6));
  cmd->add_option("--target", opt->target, "Target cost per proof, USD: sets break-even")
      ->check(finite_positive(1e6));
  cmd->add_flag("--json", opt->json, "Print a JSON array instead of a table");
  cmd->add_option("--config", opt->config_path, "Config file (default: ./proverfleet.toml)");
  cmd->add_option("--vast-url", opt->vast_url, "Market API base URL");
  cmd->add_option("--vast-key-file", opt->key_file, "File holding the vast.ai API key");
  cmd->add_option("--type", opt->type, "Pricing: on-demand, bid or reserved")
      ->check(CLI::IsMember({"on-demand", "bid", "reserved"}))
      ->capture_default_str();
  cmd->add_option("--search-limit", opt->search_limit, "Offers asked of the market")
      ->check(finite_range(1, 1e5))
      ->capture_default_str();
  cmd->add_option("--manager", opt->manager,
                  "Rank through a running manager (GET /api/v1/offers): its learned predictions "
                  "and each machine's history (runs, median rate, last verdict, bad-host entry)")
      ->envname("PROVERFLEET_MANAGER");
  add_refused_secret_flag(cmd, opt->token_flag);
  cmd->add_option("--token-file", opt->token_file,
                  "With --manager: file holding the operator token (or $PROVERFLEET_TOKEN)")
      ->envname("PROVERFLEET_TOKEN_FILE")
      ->capture_default_str();
  cmd->add_flag("--no-default-filters", opt->no_default_filters,
                "Drop the CLI defaults verified=true rentable=true rented=false external=false");
  cmd->callback([opt] { run_offers(*opt); });
}

}  // namespace pf::cli
