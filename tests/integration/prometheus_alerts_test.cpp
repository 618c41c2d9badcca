// A real Prometheus (Debian's `prometheus`, from scripts/install-deps) scrapes a live serve with
// deploy/prometheus/proverfleet.rules.yml and pages: what promtool's unit tests
// (tests/deploy/prometheus_rules_test.sh) cannot show — that serve's /metrics, scraped as it
// is, makes the rules' expressions true, and that a healthy serve raises none of the others.
// The rules are loaded as shipped, except that the spend alert's `for: 1m` is cut to 0s (its
// waiting is promtool's to check; here the expression on real series is what is tested).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "support/eventually.h"
#include "support/free_port.h"
#include "support/proverfleet_cli.h"
#include "support/serve_process.h"
#include "support/subprocess.h"

namespace {

using nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kPrometheusVastKey = "prometheus-e2e-vast-key";

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Firing alerts' names, from Prometheus' own API (empty when it does not answer yet).
std::set<std::string> firing_alerts(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  const auto reply = client.Get("/api/v1/alerts");
  std::set<std::string> names;
  if (!reply || reply->status != 200) return names;
  const json body = json::parse(reply->body, nullptr, false);
  if (!body.is_object() || !body.contains("data")) return names;
  for (const auto& alert : body["data"].value("alerts", json::array())) {
    if (alert.value("state", "") == "firing") {
      names.insert(alert["labels"].value("alertname", ""));
    }
  }
  return names;
}

TEST(PrometheusAlerts, ARealPrometheusScrapingServePagesOnSpendOverBudgetAndOnNothingElse) {
  pf::test::ServeDatabase db(pf::testing::Backend::Sqlite);
  const fs::path dir = db.dir();
  // Any live rental is over a budget of a cent an hour; the watch looks every second.
  std::ofstream(dir / "proverfleet.toml") << R"(
[alerts]
interval_s = 1
budget_dollars_per_hour = 0.01
)";
  auto sim = pf::test::start_market_sim(kPrometheusVastKey);
  auto serve = pf::test::start_serve({.db = &db,
                                      .config = dir / "proverfleet.toml",
                                      .vast_url = sim.url,
                                      .vast_key = kPrometheusVastKey,
                                      .wait_leading = true});
  const std::string token = pf::test::read_operator_token(dir);
  ASSERT_FALSE(token.empty());

  // The rules as shipped, the spend alert's `for:` cut to 0s.
  std::string rules =
      read_file(fs::path(PF_SOURCE_DIR) / "deploy/prometheus/proverfleet.rules.yml");
  const auto spend = rules.find("alert: ProverfleetSpendOverBudget");
  ASSERT_NE(spend, std::string::npos);
  const auto wait = rules.find("for: ", spend);
  ASSERT_NE(wait, std::string::npos);
  rules.replace(wait, rules.find('\n', wait) - wait, "for: 0s");
  std::ofstream(dir / "rules.yml") << rules;
  const int port = pf::test::free_port();
  std::ofstream(dir / "prometheus.yml")
      << "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
      << "rule_files: [" << (dir / "rules.yml").string() << "]\n"
      << "scrape_configs:\n"
      << "  - job_name: proverfleet\n"
      << "    static_configs: [{targets: ['" << serve.url.host << ":" << serve.url.port << "']}]\n";
  auto prometheus = pf::test::Subprocess::spawn(
      {"prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
       "--storage.tsdb.path=" + (dir / "tsdb").string(),
       "--web.listen-address=127.0.0.1:" + std::to_string(port)});

  // Healthy and renting nothing: Prometheus scrapes, evaluates, and nothing fires.
  ASSERT_TRUE(pf::test::eventually(
      [&] {
        if (!prometheus.running()) return true;  // reported below
        httplib::Client client("127.0.0.1", port);
        const auto up = client.Get("/api/v1/query?query=up%7Bjob%3D%22proverfleet%22%7D%3D%3D1");
        return up && up->status == 200 && up->body.find("\"value\"") != std::string::npos;
      },
      60s))
      << "Prometheus never scraped serve: " << prometheus.stderr_text();
  ASSERT_TRUE(prometheus.running()) << "Prometheus exited: " << prometheus.stderr_text();
  // Two evaluations after the first scrape (interval 1 s).
  ASSERT_TRUE(pf::test::eventually(
      [&] {
        httplib::Client client("127.0.0.1", port);
        const auto rules_reply = client.Get("/api/v1/rules");
        return rules_reply && rules_reply->status == 200 &&
               rules_reply->body.find("\"health\":\"ok\"") != std::string::npos &&
               rules_reply->body.find("\"lastEvaluation\":\"0001") == std::string::npos;
      },
      30s));
  EXPECT_EQ(firing_alerts(port), std::set<std::string>{}) << "serve paged while it rents nothing";

  // One rental: over the budget, so serve's watch raises its spend alert and Prometheus pages.
  const json offers = pf::test::operator_api(serve.url, token, "GET", "/api/v1/offers?limit=5");
  ASSERT_TRUE(offers.is_array() && !offers.empty()) << offers.dump();
  const auto run = pf::test::run_cli(
      {"deploy", std::to_string(offers.at(0)["id"].get<std::int64_t>()), "--json"}, serve.url,
      token);
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  std::set<std::string> firing;
  ASSERT_TRUE(pf::test::eventually(
      [&] {
        firing = firing_alerts(port);
        return firing.count("ProverfleetSpendOverBudget") == 1;
      },
      60s))
      << "no page for spend over budget; firing: " << json(firing).dump();
  // Nothing else: the rental is booting, the leader leads, the market lists (the alerts with a
  // `for:` of minutes could only be pending by now; LeaderFlapping has none and must not fire).
  EXPECT_EQ(firing, std::set<std::string>{"ProverfleetSpendOverBudget"});
}

}  // namespace
