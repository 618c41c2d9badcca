// `proverfleet migrate` as an operator runs it: a SQLite fleet moved into a new SQLite file and
// into a real PostgreSQL database, counts printed; refusals change nothing and show no password.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "store/sql_store.h"
#include "support/pg_server.h"
#include "support/subprocess.h"
#include "support/temp_dir.h"

namespace pf {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

struct Ran {
  int code;
  std::string out;
  std::string err;
};

Ran run(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PF_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  auto p = test::Subprocess::spawn(argv);
  auto code = p.wait_exit(120s);
  std::string out;
  for (const auto& l : p.stdout_lines()) out += l + "\n";
  return {code.value_or(-1), out, p.stderr_text()};
}

// A small fleet: two instances (one destroyed), events, a bad host, a job.
std::string make_fleet(const fs::path& dir) {
  const std::string path = (dir / "fleet.db").string();
  auto s = store::open_sql_store(path);
  for (int i = 0; i < 2; ++i) {
    core::InstanceRecord r;
    r.deployment_id = "dep-" + std::to_string(i);
    r.offer.id = 100 + i;
    r.offer.machine_id = 11 + i;
    r.state = i == 0 ? core::InstanceState::Proving : core::InstanceState::Destroyed;
    r.created_at = 1.7e9 + i;
    const auto id = s->insert_instance(r);
    core::InstanceEvent e;
    e.instance_id = id;
    e.at = 1.7e9 + i;
    e.kind = "state";
    e.message = "rented";
    s->append_event(e);
  }
  core::BadHost bad;
  bad.machine_id = 99;
  bad.reason = "slow";
  s->put_bad_host(bad);
  core::Job job;
  job.request_id = "porep-1-1";
  job.input_digest = std::string(64, 'c');
  s->insert_job(job);
  return path;
}

std::int64_t rows_of(const json& report, const std::string& table) {
  for (const auto& t : report.at("tables")) {
    if (t.at("table") == table) return t.at("target_rows").get<std::int64_t>();
  }
  return -1;
}

TEST(MigrateCli, AFleetMovesToANewSqliteFileAndToPostgresWithCountsChecked) {
  testing::TempDir dir("pf_migrate_cli");
  const std::string from = make_fleet(dir.path());

  const Ran to_file = run(
      {"migrate", "--from", from, "--to", (fs::path(dir.path()) / "copy.db").string(), "--json"});
  ASSERT_EQ(to_file.code, 0) << to_file.err;
  const json report = json::parse(to_file.out);
  EXPECT_EQ(rows_of(report, "instances"), 2);
  EXPECT_EQ(rows_of(report, "instance_events"), 2);
  EXPECT_EQ(rows_of(report, "bad_hosts"), 1);
  EXPECT_EQ(rows_of(report, "jobs"), 1);

  const std::string pg = test::fresh_pg_database();
  const Ran to_pg = run({"migrate", "--from", from, "--to", pg});
  ASSERT_EQ(to_pg.code, 0) << to_pg.err;
  EXPECT_THAT(to_pg.out, HasSubstr("every table's count matches"));
  EXPECT_THAT(to_pg.out, HasSubstr("instances"));
  auto copied = store::open_sql_store(pg);
  EXPECT_EQ(copied->instances(true).size(), 2u);
  EXPECT_EQ(copied->bad_hosts().size(), 1u);
  EXPECT_TRUE(copied->job_by_request("porep-1-1").has_value());

  // A second run into the same database is refused: it is not empty any more.
  const Ran again = run({"migrate", "--from", from, "--to", pg});
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("the target is not empty"));
  EXPECT_EQ(copied->instances(true).size(), 2u);
}

TEST(MigrateCli, APasswordOnTheCommandLineIsRefusedAndNeverRepeated) {
  testing::TempDir dir("pf_migrate_cli");
  const std::string from = make_fleet(dir.path());
  const Ran r = run({"migrate", "--from", from, "--to", "postgres://pf:hunter2@127.0.0.1:1/x"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("--to: a password in a database URL is refused"));
  EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
  const Ran same = run({"migrate", "--from", from, "--to", from});
  EXPECT_EQ(same.code, 1);
  EXPECT_THAT(same.err, HasSubstr("name the same database"));
}

}  // namespace
}  // namespace pf
