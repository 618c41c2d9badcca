// Schema 12 (issue 14) on both stores: jobs keyed by (client, request_id), instances found by
// their machine_id column, the replicas' shared settings, and the upgrade of a schema-11
// database (rows kept, client "" on old jobs, machine_id backfilled from the offer snapshots).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "market/offer_json.h"
#include "store/pg_connection.h"
#include "store/sql_migrations.h"
#include "store/sql_store.h"
#include "store/sqlite_connection.h"
#include "support/store_backends.h"
#include "util/sha256.h"

namespace pf::store {
namespace {

using pf::testing::Backend;
using pf::testing::TestDatabase;

core::Job job_for(const std::string& client, const std::string& request_id) {
  core::Job job;
  job.client = client;
  job.request_id = request_id;
  job.input_digest = util::sha256_hex(client + "/" + request_id);
  job.input_bytes = 10;
  return job;
}

core::InstanceRecord rental(const std::string& deployment, std::int64_t machine_id,
                            core::InstanceState state = core::InstanceState::Proving) {
  core::InstanceRecord r;
  r.deployment_id = deployment;
  r.offer.id = 1000 + machine_id;
  r.offer.machine_id = machine_id;
  r.offer.gpu_name = "RTX 4090";
  r.offer.num_gpus = 1;
  r.state = state;
  if (state == core::InstanceState::Destroyed) r.destroyed_at = 5;
  return r;
}

class ClientJobsStore : public ::testing::TestWithParam<Backend> {
 protected:
  TestDatabase db_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Db, ClientJobsStore, pf::testing::kAllStoreBackends,
                         pf::testing::backend_name);

TEST_P(ClientJobsStore, RequestIdsAreUniquePerClientNotAcrossClients) {
  auto store = db_.open();
  const auto a = store->insert_job(job_for("10.0.0.7", "porep-1"));
  const auto b = store->insert_job(job_for("10.0.0.8", "porep-1"));  // another client's id
  EXPECT_NE(a, b);
  EXPECT_THROW(store->insert_job(job_for("10.0.0.7", "porep-1")), StoreError);

  ASSERT_TRUE(store->client_job("10.0.0.7", "porep-1"));
  EXPECT_EQ(store->client_job("10.0.0.7", "porep-1")->id, a);
  EXPECT_EQ(store->client_job("10.0.0.7", "porep-1")->client, "10.0.0.7");
  EXPECT_EQ(store->client_job("10.0.0.8", "porep-1")->id, b);
  EXPECT_FALSE(store->client_job("10.0.0.9", "porep-1"));
  EXPECT_FALSE(store->client_job("", "porep-1"));
  // The operator's lookup by request_id alone: the newest.
  EXPECT_EQ(store->job_by_request("porep-1")->id, b);

  // The client survives an update of the row.
  auto job = *store->job(a);
  job.state = core::JobState::Cancelled;
  store->update_job(job);
  EXPECT_EQ(store->job(a)->client, "10.0.0.7");
  EXPECT_EQ(store->job(a)->state, core::JobState::Cancelled);
}

TEST_P(ClientJobsStore, InstancesOnAMachineAreItsRentalsOnly) {
  auto store = db_.open();
  const auto first = store->insert_instance(rental("d1", 42, core::InstanceState::Destroyed));
  store->insert_instance(rental("d2", 43));
  const auto again = store->insert_instance(rental("d3", 42));
  std::vector<std::int64_t> ids;
  for (const auto& r : store->instances_on_machine(42)) ids.push_back(r.id);
  EXPECT_THAT(ids, ::testing::ElementsAre(first, again));
  EXPECT_TRUE(store->instances_on_machine(7).empty());

  // The column follows the offer a row is rewritten with.
  auto moved = *store->instance(again);
  moved.offer.machine_id = 7;
  store->update_instance(moved);
  ASSERT_EQ(store->instances_on_machine(7).size(), 1u);
  EXPECT_EQ(store->instances_on_machine(7)[0].id, again);
  EXPECT_EQ(store->instances_on_machine(42).size(), 1u);
}

TEST_P(ClientJobsStore, SettingOrPutKeepsTheFirstValue) {
  auto store = db_.open();
  EXPECT_EQ(store->setting_or_put("replica_relay_token", "first"), "first");
  EXPECT_EQ(store->setting_or_put("replica_relay_token", "second"), "first");
  EXPECT_EQ(store->setting("replica_relay_token"), "first");
}

// Replicas starting together on one database: each stores its own value if none is there; all
// read one.
class SharedSettings : public ::testing::TestWithParam<Backend> {
 protected:
  TestDatabase db_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Db, SharedSettings, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(SharedSettings, ReplicasRacingOnANewSettingAllGetOneValue) {
  constexpr int kReplicas = 4;
  std::vector<std::unique_ptr<SqlStore>> stores;
  for (int i = 0; i < kReplicas; ++i) stores.push_back(db_.open());
  std::vector<std::string> got(kReplicas);
  std::vector<std::thread> threads;
  for (int i = 0; i < kReplicas; ++i) {
    threads.emplace_back([&, i] {
      got[static_cast<std::size_t>(i)] = stores[static_cast<std::size_t>(i)]->setting_or_put(
          "shared", "value-" + std::to_string(i));
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& value : got) EXPECT_EQ(value, got[0]);
  EXPECT_EQ(stores[0]->setting("shared"), got[0]);
}

// A database written by schema 11 upgrades: its jobs keep their ids, proofs and request ids
// (client "": recorded before clients were), and instances gain machine_id from their offers.
class SchemaTwelveUpgrade : public ::testing::TestWithParam<Backend> {
 protected:
  std::unique_ptr<sql::Connection> connect() const {
    if (db_.is_postgres()) return std::make_unique<PgConnection>(db_.url());
    return std::make_unique<SqliteConnection>(db_.url().substr(std::string("sqlite:").size()));
  }
  TestDatabase db_{GetParam(), pf::test::PgSchema::Empty};  // migrated to 11 by the test
};

INSTANTIATE_TEST_SUITE_P(Db, SchemaTwelveUpgrade, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(SchemaTwelveUpgrade, KeepsJobsAndBackfillsMachineIds) {
  {
    auto old = connect();
    sql::migrate(*old, "test database", 11);
    ASSERT_EQ(old->schema_version(), 11);
    for (const auto& [dep, machine] : {std::pair{"on-42", 42}, std::pair{"on-43", 43}}) {
      core::Offer offer;
      offer.id = 1;
      offer.machine_id = machine;
      sql::Statement s(
          *old,
          "INSERT INTO instances (deployment_id, offer_json, offer_extra_json, state, "
          "created_at, state_since, deadline_at, destroy_reason, secret_hash, token_hash, "
          "last_heartbeat_at, market_status, market_status_since, params_done_bytes, "
          "params_total_bytes, params_rate_bps, prover_crashes, ooms, proofs_benchmark, "
          "proofs_production, gpu_util, peak_memory_gib, spend_usd, billed_until, plan_json, "
          "origin) VALUES (:dep, :offer, :extra, 'proving', 0, 0, 0, '', '', '', 0, '', 0, 0, 0, "
          "0, 0, 0, 0, 0, 0, 0, 0, 0, '', '')",
          "inserting a schema-11 instance");
      s.bind_text(":dep", dep);
      s.bind_text(":offer", market::offer_to_vast_json(offer).dump());
      s.bind_text(":extra", R"({"usable_ram_gib":1,"usable_cores":2,"gpu_total_ram_gib":3,)"
                            R"("data_flags":[]})");
      s.run();
    }
    sql::Statement job(
        *old,
        "INSERT INTO jobs (request_id, kind, priority, state, input_digest, input_bytes, "
        "attempts, failures, instance_id, lease_expires_at, submitted_at, deadline_at, "
        "assigned_at, started_at, finished_at, delivered_at, proof_digest, proof, error, "
        "avoid_instances, rejections, prove_ms, gpu_ms, queue_ms) VALUES ('porep-old', "
        "'porep-c2', 0, 'done', 'digest', 5, 1, 0, 1, 0, 10, 20, 11, 12, 13, 0, 'pd', :proof, "
        "'', '[1]', 0, 1, 2, 3)",
        "inserting a schema-11 job");
    job.bind_blob(":proof", std::string("pro\0of", 6));
    job.run();
  }
  auto store = db_.open();
  EXPECT_EQ(store->schema_version(), latest_schema_version());
  ASSERT_EQ(store->instances_on_machine(42).size(), 1u);
  EXPECT_EQ(store->instances_on_machine(42)[0].deployment_id, "on-42");
  EXPECT_EQ(store->instances_on_machine(43)[0].deployment_id, "on-43");

  const auto old_job = store->client_job("", "porep-old");
  ASSERT_TRUE(old_job);
  EXPECT_EQ(old_job->state, core::JobState::Done);
  EXPECT_THAT(old_job->avoid_instances, ::testing::ElementsAre(1));
  EXPECT_EQ(old_job->submitted_at, 10);
  EXPECT_EQ(store->job_proof(old_job->id), std::string("pro\0of", 6));
  // Ids go on after the copied rows, and another client may use the same request_id.
  const auto next = store->insert_job(job_for("10.0.0.7", "porep-old"));
  EXPECT_GT(next, old_job->id);
  EXPECT_THROW(store->insert_job(job_for("", "porep-old")), StoreError);
}

}  // namespace
}  // namespace pf::store
