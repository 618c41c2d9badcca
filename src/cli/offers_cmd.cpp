// `proverfleet offers`: search the market and print offers ranked by expected $/proof.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/config.h"
#include "cli/flag_checks.h"
#include "cli/table.h"
#include "core/ranking.h"
#include "core/text.h"
#include "manager/views.h"
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
};

// The reasons worth a table cell: adjustments and risks, not the prior's provenance.
std::string short_reasons(const core::RankedOffer& r) {
  std::string out;
  auto add = [&](const std::string& s) {
    if (!out.empty()) out += "; ";
    out += s;
  };
  for (std::size_t i = 1; i < r.prediction.reasons.size(); ++i) add(r.prediction.reasons[i]);
  for (const auto& s : r.valuation.reasons) {
    if (s.rfind("setup ~", 0) != 0) add(s);
  }
  return out.empty() ? "-" : out;
}

void print_table(const std::vector<core::RankedOffer>& ranked, const core::RankConfig& cfg,
                 std::size_t total) {
  using A = Table::Align;
  Table t({{"ID"},
           {"GPU"},
           {"$/HR", A::Right},
           {"RATE/HR (BAND)", A::Right},
           {"MIN", A::Right},
           {"$/PROOF", A::Right},
           {"PROFIT/HR", A::Right},
           {"WHY", A::Left, 90}});
  for (const auto& r : ranked) {
    const auto& v = r.valuation;
    t.add_row({std::to_string(r.offer.id),
               r.offer.gpu_name + " x" + std::to_string(r.offer.num_gpus),
               core::fixed(r.offer.dph_total, 3),
               core::fixed(r.prediction.rate, 1) + " (" + core::fixed(r.prediction.low, 0) + "-" +
                   core::fixed(r.prediction.high, 0) + ")",
               core::fixed(v.min_rate, 1),
               v.expected_cost_per_proof ? core::fixed(*v.expected_cost_per_proof, 4) : "-",
               core::fixed(v.expected_profit_per_hour, 3), short_reasons(r)});
  }
  t.print(std::cout);
  std::cout << "\n"
            << ranked.size() << " of " << total << " offers; revenue $"
            << core::fixed(cfg.economics.revenue_per_proof_usd, 4) << "/proof, target $"
            << core::fixed(cfg.economics.target_cost_per_proof_usd, 4)
            << "/proof; setup amortised over " << core::fixed(cfg.setup.expected_lifetime_h, 0)
            << " h. Rates are predictions (source: prior), not measurements.\n";
}

void run_offers(const OffersOptions& opt) {
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
  market::VastMarket vast(*vast_cfg);

  market::SearchRequest req;
  req.query = parsed->filters;
  req.type = opt.type;
  req.limit = opt.search_limit;
  auto found = vast.search_offers(req);
  if (!found) {
    throw CommandFailed("offer search at " + vast_cfg->base_url + " failed (" +
                        market::to_string(found.error().kind) + "): " + found.error().message);
  }
  for (const auto& w : found->warnings) std::cerr << "warning: " << w << "\n";

  std::size_t total = found->offers.size();
  auto ranked =
      core::rank_offers(std::move(found->offers), rank,
                        opt.sort == "profit" ? core::RankOrder::Profit : core::RankOrder::Cost);
  if (opt.limit > 0 && ranked.size() > static_cast<std::size_t>(opt.limit)) {
    ranked.resize(static_cast<std::size_t>(opt.limit));
  }
  if (opt.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : ranked) out.push_back(manager::to_json(r));
    std::cout << out.dump(2) << "\n";
  } else {
    print_table(ranked, rank, total);
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
  cmd->add_flag("--no-default-filters", opt->no_default_filters,
                "Drop the CLI defaults verified=true rentable=true rented=false external=false");
  cmd->callback([opt] { run_offers(*opt); });
}

}  // namespace pf::cli
