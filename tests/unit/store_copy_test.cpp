// Moving a fleet's history between databases (store/store_copy.h, `proverfleet migrate`):
// everything arrives as it was (ids, numbers to the bit, proof bytes), the target's next ids
// follow the copied ones, and a copy that cannot be made leaves the target as it was.
#include "store/store_copy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "manager/views.h"
#include "store/sql_store.h"
#include "support/pg_server.h"
#include "support/temp_dir.h"

namespace pf::store {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

core::InstanceRecord instance(const std::string& deployment, double at) {
  core::InstanceRecord r;
  r.deployment_id = deployment;
  r.market_id = static_cast<std::int64_t>(at) % 100000;
  r.offer.id = 7001;
  r.offer.machine_id = 11;
  r.offer.host_id = 5;
  r.offer.gpu_name = "RTX 4090";
  r.offer.num_gpus = 1;
  r.offer.dph_total = 0.4;
  r.state = core::InstanceState::Proving;
  r.created_at = at;
  r.state_since = at + 0.125;
  r.spend_usd = 0.1 + 0.2;  // must arrive bit-identical
  r.secret_hash = "sha256:s-" + deployment;
  r.token_hash = "sha256:t-" + deployment;
  r.verdict = core::Verdict{core::Verdict::Decision::Accept, 61.4, 55.1, 67.9, 12, 40.5, "ok"};
  return r;
}

// A fleet with a row in every table a store has.
void fill(Store& s) {
  const auto a = s.insert_instance(instance("dep-a", 1.7e9));
  auto destroyed = instance("dep-b", 1.7e9 + 60);
  destroyed.state = core::InstanceState::Destroyed;
  destroyed.destroyed_at = 1.7e9 + 3600;
  destroyed.destroy_reason = "deadline";
  destroyed.close_cause = core::CloseCause::Deadline;
  const auto b = s.insert_instance(destroyed);
  for (int i = 0; i < 3; ++i) {
    core::InstanceEvent e;
    e.instance_id = i == 2 ? b : a;
    e.at = 1.7e9 + i;
    e.kind = "state";
    e.message = "event " + std::to_string(i) + " 'quoted' ünïcode";
    s.append_event(e);
  }
  EXPECT_TRUE(s.mark_agent_seq(a, 4));
  core::ProofSample p;
  p.instance_id = a;
  p.seq = 4;
  p.at = 1.7e9 + 10;
  p.seconds = 58.25;
  s.insert_proof_sample(p);
  core::BenchRun run;
  run.host = {11, "RTX 4090", 1};
  run.instance_id = a;
  run.at = 1.7e9 + 20;
  run.rate = 61.4;
  s.insert_bench_run(run);
  core::BadHost bad;
  bad.machine_id = 12;
  bad.source = "operator";
  bad.reason = "slow";
  bad.added_at = 1.7e9;
  bad.expires_at = 1.7e9 + 7200;
  s.put_bad_host(bad);
  s.put_setting("autopilot_paused", "1");
  s.append_agent_log(a, 1.7e9 + 5, "agent log line\n", 1 << 20);
  core::MemoryObservation m;
  m.instance_id = a;
  m.machine_id = 11;
  m.gpu_name = "RTX 4090";
  m.num_gpus = 1;
  m.at = 1.7e9 + 30;
  m.partitions = 6;
  m.observed_peak_gib = 201.5;
  s.insert_memory_observation(m);
  core::Job job;
  job.client = "10.0.0.7";
  job.request_id = "porep-1000-1";
  job.state = core::JobState::Done;
  job.input_digest = std::string(64, 'a');
  job.input_bytes = 52428800;
  job.instance_id = a;
  job.submitted_at = 1.7e9 + 40;
  job.finished_at = 1.7e9 + 100;
  job.avoid_instances = {b};
  const auto job_id = s.insert_job(job);
  s.put_job_proof(job_id, std::string("\0\xff proof bytes", 14));
  s.put_job_failure_streak(a, 2);
}

// Everything a store answers, as text (compared between source and target).
json everything(Store& s) {
  json out;
  for (const auto& rec : s.instances(true)) {
    out["instances"].push_back(manager::to_json(rec));
    out["secrets"].push_back(rec.secret_hash + "/" + rec.token_hash);
    for (const auto& e : s.events(rec.id, 0)) out["events"].push_back(manager::to_json(e));
    for (const auto& p : s.proof_samples(rec.id)) out["samples"].push_back(manager::to_json(p));
    out["logs"].push_back(s.agent_log(rec.id));
  }
  for (const auto& r : s.all_bench_runs()) out["bench"].push_back(manager::to_json(r));
  for (const auto& b : s.bad_hosts()) out["bad_hosts"].push_back(manager::to_json(b));
  for (const auto& j : s.jobs({}, 0)) {
    out["jobs"].push_back(manager::to_json(j, 1.7e9 + 200, core::PriceConfig{}));
    out["proofs"].push_back(s.job_proof(j.id).value_or("(none)"));
  }
  for (const auto& [id, n] : s.job_failure_streaks()) out["streaks"].push_back({id, n});
  out["memory"] = s.memory_observations(11, "RTX 4090").size();
  out["on_machine_11"] = s.instances_on_machine(11).size();  // schema 12's machine_id column
  out["setting"] = s.setting("autopilot_paused").value_or("");
  return out;
}

class StoreCopyTest : public ::testing::TestWithParam<std::string> {
 protected:
  // A new empty database of the parameter's kind.
  std::string fresh_url() {
    if (GetParam() == "postgres") return pf::test::fresh_pg_database();
    return (std::filesystem::path(dir_.path()) / ("db" + std::to_string(++files_) + ".db"))
        .string();
  }

  pf::testing::TempDir dir_{"pf_store_copy"};
  int files_ = 0;
};

TEST_P(StoreCopyTest, EveryTableArrivesAsItWasAndTheTargetsNextIdsFollowTheCopiedOnes) {
  auto source = open_sql_store((std::filesystem::path(dir_.path()) / "source.db").string());
  fill(*source);
  auto target = open_sql_store(fresh_url());

  std::vector<std::string> progressed;
  const auto copied = copy_store(source->connection(), target->connection(),
                                 [&](const CopyProgress& p) { progressed.push_back(p.table); });
  EXPECT_EQ(everything(*target), everything(*source));
  ASSERT_FALSE(copied.empty());
  EXPECT_EQ(copied.front().table, "instances");  // parents first
  std::int64_t rows = 0;
  for (const auto& c : copied) {
    EXPECT_EQ(c.source_rows, c.target_rows) << c.table;
    EXPECT_NE(std::find(progressed.begin(), progressed.end(), c.table), progressed.end());
    rows += c.target_rows;
  }
  EXPECT_GE(rows, 14);

  // New rows get ids after the copied ones (a PostgreSQL sequence was moved past them).
  const auto next = target->insert_instance(instance("dep-c", 1.7e9 + 500));
  EXPECT_GT(next, source->instances(true).back().id);
  core::Job job;
  job.request_id = "porep-1000-2";
  job.input_digest = std::string(64, 'b');
  EXPECT_GT(target->insert_job(job), source->jobs({}, 0).front().id);
}

TEST_P(StoreCopyTest, ATargetInUseIsRefusedAndLeftAsItWas) {
  auto source = open_sql_store((std::filesystem::path(dir_.path()) / "source.db").string());
  fill(*source);
  auto target = open_sql_store(fresh_url());
  target->insert_instance(instance("dep-own", 1.6e9));
  const json before = everything(*target);
  try {
    copy_store(source->connection(), target->connection());
    ADD_FAILURE() << "copied into a database in use";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("the target is not empty: table instances holds 1 rows"));
  }
  EXPECT_EQ(everything(*target), before);
}

TEST_P(StoreCopyTest, AFailureHalfwayLeavesTheTargetEmpty) {
  auto source = open_sql_store((std::filesystem::path(dir_.path()) / "source.db").string());
  fill(*source);
  // A source the target cannot take in full: a column the target's bad_hosts lacks, so the
  // copy fails after instances (copied first) have been written.
  source->connection().exec("ALTER TABLE bad_hosts ADD COLUMN stray TEXT", "breaking a table");
  auto target = open_sql_store(fresh_url());
  EXPECT_THROW(copy_store(source->connection(), target->connection()), StoreError);
  EXPECT_TRUE(target->instances(true).empty());
  EXPECT_TRUE(target->jobs({}, 0).empty());
}

INSTANTIATE_TEST_SUITE_P(Targets, StoreCopyTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           return param_info.param;
                         });

}  // namespace
}  // namespace pf::store
