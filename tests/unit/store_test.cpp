#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>
#include <vector>

// The store on every database it runs on (tests/support/store_backends.h): SQLite in memory,
// SQLite in a file, PostgreSQL. What only one of them has (SQLite's files, WAL and
// user_version) is tested on it alone, with its PostgreSQL counterpart where there is one.
#include "market/offer_json.h"
#include "store/pg_connection.h"
#include "store/sql_connection.h"
#include "store/sql_migrations.h"
#include "store/sql_store.h"
#include "store/store.h"
#include "support/eventually.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"

namespace pf::store {
namespace {

using pf::test::eventually;
using pf::testing::Backend;
using pf::testing::TempDir;
using pf::testing::TestDatabase;

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with everything in it.
// Sets PRAGMA user_version behind the store's back, as a newer proverfleet would have.
void set_user_version(const std::string& path, int version) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  const std::string sql = "PRAGMA user_version = " + std::to_string(version);
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
}

std::string journal_mode(const std::string& path) {
  sqlite3* raw = nullptr;
  if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) return "open failed";
  sqlite3_stmt* stmt = nullptr;
  std::string mode;
  if (sqlite3_prepare_v2(raw, "PRAGMA journal_mode", -1, &stmt, nullptr) == SQLITE_OK &&
      sqlite3_step(stmt) == SQLITE_ROW) {
    mode = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  }
  sqlite3_finalize(stmt);
  sqlite3_close(raw);
  return mode;
}

core::Offer full_offer() {
  core::Offer o;
  o.id = 987654321;
  o.machine_id = 4242;
  o.host_id = 77;
  o.gpu_name = "RTX 4090";
  o.num_gpus = 2;
  o.gpu_ram_gib = 23.98828125;
  o.gpu_total_ram_gib = 0;  // vast sometimes omits it; must not be "repaired" on reload
  o.cpu_name = "AMD EPYC 7B13 64-Core";
  o.cpu_cores = 128;
  o.cpu_cores_effective = 32.5;
  o.cpu_ram_gib = 125.7;
  o.pcie_bw_gbs = 24.3;
  o.pci_gen = 4;
  o.inet_down_mbps = 843.1;
  o.inet_up_mbps = 702.9;
  o.inet_down_cost_per_gb = 0.0031;
  o.disk_space_gb = 512.25;
  o.cuda_max_good = 12.4;
  o.compute_cap = 890;
  o.reliability = 0.9931;
  o.verified = true;
  o.geolocation = "Sweden, SE";
  o.dph_total = 0.1234567890123;
  o.storage_cost_gb_month = 0.15;
  o.dlperf = 101.3;
  o.usable_ram_gib = 96.5;  // e.g. narrowed by the agent's measurement
  o.usable_cores = 30;
  o.data_flags = {"inet_down missing: download speed unknown", "custom note \"quoted\""};
  return o;
}

core::InstanceRecord full_record(const std::string& deployment_id) {
  core::InstanceRecord r;
  r.deployment_id = deployment_id;
  r.market_id = 31337;
  r.offer = full_offer();
  r.state = core::InstanceState::Benchmarking;
  r.created_at = 1700000000.125;
  r.state_since = 1700000123.5;
  r.deadline_at = 1700003600.75;
  r.destroy_reason = "";
  r.destroyed_at = std::nullopt;
  r.secret_hash = "sha256:abc";
  r.token_hash = "sha256:def";
  r.last_heartbeat_at = 1700000200.0625;
  r.market_status = "running";
  r.market_status_since = 1700000050.5;
  r.market_stopped_s = 321.25;
  r.market_stops = 2;
  r.bid_price = 0.275;
  r.params_done_bytes = 12345678901.0;
  r.params_total_bytes = 98765432109.0;
  r.params_rate_bps = 1.0 / 3.0;
  r.prover_crashes = 1;
  r.ooms = 2;
  r.proofs_benchmark = 3;
  r.proofs_production = 4;
  r.gpu_util = 0.87;
  r.peak_memory_gib = 201.3;
  r.spend_usd = 0.1 + 0.2;  // not representable exactly: must come back bit-identical
  r.billed_until = 1700000300.25;
  r.storage_spend_usd = 0.07;
  r.bandwidth_spend_usd = 0.03;
  r.disk_gb = 250;
  r.verdict = core::Verdict{core::Verdict::Decision::Accept, 61.4, 55.1, 67.9, 12, 40.5,
                            "rate above break-even"};
  r.plan_json = R"({"partitions":3})";
  r.origin = "autopilot";
  r.close_cause = core::CloseCause::Deadline;
  r.bench_since = 4321.5;
  r.gpu_throttled = true;
  r.production_windows = 3;
  r.oom_partitions = 12;
  return r;
}

void expect_same_offer(const core::Offer& a, const core::Offer& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.machine_id, b.machine_id);
  EXPECT_EQ(a.host_id, b.host_id);
  EXPECT_EQ(a.gpu_name, b.gpu_name);
  EXPECT_EQ(a.num_gpus, b.num_gpus);
  EXPECT_EQ(a.gpu_ram_gib, b.gpu_ram_gib);
  EXPECT_EQ(a.gpu_total_ram_gib, b.gpu_total_ram_gib);
  EXPECT_EQ(a.cpu_name, b.cpu_name);
  EXPECT_EQ(a.cpu_cores, b.cpu_cores);
  EXPECT_EQ(a.cpu_cores_effective, b.cpu_cores_effective);
  EXPECT_EQ(a.cpu_ram_gib, b.cpu_ram_gib);
  EXPECT_EQ(a.pcie_bw_gbs, b.pcie_bw_gbs);
  EXPECT_EQ(a.pci_gen, b.pci_gen);
  EXPECT_EQ(a.inet_down_mbps, b.inet_down_mbps);
  EXPECT_EQ(a.inet_up_mbps, b.inet_up_mbps);
  EXPECT_EQ(a.inet_down_cost_per_gb, b.inet_down_cost_per_gb);
  EXPECT_EQ(a.disk_space_gb, b.disk_space_gb);
  EXPECT_EQ(a.cuda_max_good, b.cuda_max_good);
  EXPECT_EQ(a.compute_cap, b.compute_cap);
  EXPECT_EQ(a.reliability, b.reliability);
  EXPECT_EQ(a.verified, b.verified);
  EXPECT_EQ(a.geolocation, b.geolocation);
  EXPECT_EQ(a.dph_total, b.dph_total);
  EXPECT_EQ(a.storage_cost_gb_month, b.storage_cost_gb_month);
  EXPECT_EQ(a.dlperf, b.dlperf);
  EXPECT_EQ(a.usable_ram_gib, b.usable_ram_gib);
  EXPECT_EQ(a.usable_cores, b.usable_cores);
  EXPECT_EQ(a.data_flags, b.data_flags);
}

// Exact comparisons on purpose: the store must give back the very same doubles.
void expect_same(const core::InstanceRecord& a, const core::InstanceRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.deployment_id, b.deployment_id);
  EXPECT_EQ(a.market_id, b.market_id);
  expect_same_offer(a.offer, b.offer);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.created_at, b.created_at);
  EXPECT_EQ(a.state_since, b.state_since);
  EXPECT_EQ(a.deadline_at, b.deadline_at);
  EXPECT_EQ(a.destroy_reason, b.destroy_reason);
  EXPECT_EQ(a.destroyed_at, b.destroyed_at);
  EXPECT_EQ(a.secret_hash, b.secret_hash);
  EXPECT_EQ(a.token_hash, b.token_hash);
  EXPECT_EQ(a.last_heartbeat_at, b.last_heartbeat_at);
  EXPECT_EQ(a.market_status, b.market_status);
  EXPECT_EQ(a.market_status_since, b.market_status_since);
  EXPECT_EQ(a.market_stopped_s, b.market_stopped_s);
  EXPECT_EQ(a.market_stops, b.market_stops);
  EXPECT_EQ(a.bid_price, b.bid_price);
  EXPECT_EQ(a.params_done_bytes, b.params_done_bytes);
  EXPECT_EQ(a.params_total_bytes, b.params_total_bytes);
  EXPECT_EQ(a.params_rate_bps, b.params_rate_bps);
  EXPECT_EQ(a.prover_crashes, b.prover_crashes);
  EXPECT_EQ(a.ooms, b.ooms);
  EXPECT_EQ(a.proofs_benchmark, b.proofs_benchmark);
  EXPECT_EQ(a.proofs_production, b.proofs_production);
  EXPECT_EQ(a.gpu_util, b.gpu_util);
  EXPECT_EQ(a.peak_memory_gib, b.peak_memory_gib);
  EXPECT_EQ(a.spend_usd, b.spend_usd);
  EXPECT_EQ(a.billed_until, b.billed_until);
  ASSERT_EQ(a.verdict.has_value(), b.verdict.has_value());
  if (a.verdict) {
    EXPECT_EQ(a.verdict->decision, b.verdict->decision);
    EXPECT_EQ(a.verdict->rate, b.verdict->rate);
    EXPECT_EQ(a.verdict->low, b.verdict->low);
    EXPECT_EQ(a.verdict->high, b.verdict->high);
    EXPECT_EQ(a.verdict->samples, b.verdict->samples);
    EXPECT_EQ(a.verdict->break_even_rate, b.verdict->break_even_rate);
    EXPECT_EQ(a.verdict->reason, b.verdict->reason);
  }
  EXPECT_EQ(a.plan_json, b.plan_json);
  EXPECT_EQ(a.origin, b.origin);
  EXPECT_EQ(a.close_cause, b.close_cause);
  EXPECT_EQ(a.bench_since, b.bench_since);
  EXPECT_EQ(a.gpu_throttled, b.gpu_throttled);
  EXPECT_EQ(a.production_windows, b.production_windows);
  EXPECT_EQ(a.oom_partitions, b.oom_partitions);
}

core::InstanceEvent event(std::int64_t instance_id, double at, std::string message) {
  core::InstanceEvent e;
  e.instance_id = instance_id;
  e.at = at;
  e.kind = "state";
  e.message = std::move(message);
  e.data_json = R"({"k":1})";
  return e;
}

std::vector<std::string> messages(const std::vector<core::InstanceEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.message);
  return out;
}

core::BenchRun bench(const core::HostKey& host, double at, double rate) {
  core::BenchRun b;
  b.host = host;
  b.instance_id = 1;
  b.at = at;
  b.rate = rate;
  b.low = rate - 2.5;
  b.high = rate + 2.5;
  b.samples = 9;
  b.kind = "benchmark";
  b.plan_json = R"({"gpu_workers":2})";
  return b;
}

// Every behaviour test runs on SQLite in memory, SQLite in a file and PostgreSQL.
class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override { store_ = db_.open(); }

  TestDatabase db_{GetParam()};
  std::unique_ptr<Store> store_;
};

INSTANTIATE_TEST_SUITE_P(Db, StoreTest, pf::testing::kAllStoreBackends, pf::testing::backend_name);

// Tests that open a database more than once (a restart, a second process): one every store of
// the test shares, SQLite's file or PostgreSQL's database, empty at first (the first open
// migrates it, as a new fleet's does).
class SharedStoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  TestDatabase db_{GetParam(), pf::test::PgSchema::Empty};
};

INSTANTIATE_TEST_SUITE_P(Db, SharedStoreTest, pf::testing::kStoreBackends,
                         pf::testing::backend_name);

TEST_P(StoreTest, InsertedInstanceRoundTripsEveryField) {
  auto record = full_record("dep-1");
  record.id = 999;  // ignored: the store assigns ids
  const auto id = store_->insert_instance(record);
  EXPECT_GT(id, 0);
  record.id = id;

  auto got = store_->instance(id);
  ASSERT_TRUE(got);
  expect_same(*got, record);

  auto by_dep = store_->instance_by_deployment("dep-1");
  ASSERT_TRUE(by_dep);
  expect_same(*by_dep, record);
  auto by_market = store_->instance_by_market_id(31337);
  ASSERT_TRUE(by_market);
  expect_same(*by_market, record);
}

TEST_P(StoreTest, UpdateReplacesEveryFieldIncludingClearedOptionals) {
  auto record = full_record("dep-1");
  record.id = store_->insert_instance(record);

  // The other way round: optionals that were empty get values and vice versa.
  auto changed = record;
  changed.deployment_id = "dep-1b";
  changed.market_id = std::nullopt;
  changed.offer.id = 0;  // an adopted instance's snapshot may carry no ask id
  changed.offer.data_flags.clear();
  changed.offer.gpu_name = "H100 SXM";
  changed.offer.verified = false;
  changed.state = core::InstanceState::Destroyed;
  changed.destroy_reason = "rejected: rate below break-even";
  changed.destroyed_at = 1700009999.875;
  changed.verdict = std::nullopt;
  changed.prover_crashes = 0;
  changed.spend_usd = 1.0 / 7.0;
  changed.origin = "adopted";
  store_->update_instance(changed);

  auto got = store_->instance(record.id);
  ASSERT_TRUE(got);
  expect_same(*got, changed);
  EXPECT_FALSE(store_->instance_by_deployment("dep-1"));
  EXPECT_FALSE(store_->instance_by_market_id(31337));

  // And back: a verdict with every decision kind survives.
  for (auto d : {core::Verdict::Decision::Continue, core::Verdict::Decision::Reject}) {
    changed.verdict = core::Verdict{d, 1, 0.5, 1.5, 3, 2, "why"};
    store_->update_instance(changed);
    got = store_->instance(record.id);
    ASSERT_TRUE(got && got->verdict);
    EXPECT_EQ(got->verdict->decision, d);
  }
}

TEST_P(StoreTest, EveryInstanceStateRoundTrips) {
  auto record = full_record("dep-states");
  record.id = store_->insert_instance(record);
  for (auto s :
       {core::InstanceState::Renting, core::InstanceState::Booting, core::InstanceState::Registered,
        core::InstanceState::FetchingParams, core::InstanceState::WarmingUp,
        core::InstanceState::Benchmarking, core::InstanceState::Proving,
        core::InstanceState::Destroying, core::InstanceState::Destroyed}) {
    record.state = s;
    store_->update_instance(record);
    EXPECT_EQ(store_->instance(record.id)->state, s) << core::to_string(s);
  }
}

TEST_P(StoreTest, UpdatingUnknownInstanceThrows) {
  auto record = full_record("dep-x");
  record.id = 12345;
  try {
    store_->update_instance(record);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("12345"));
    EXPECT_THAT(e.what(), HasSubstr("no such instance"));
  }
}

// Destroyed is final: a whole-row write of a copy read before another process closed the row
// (the leader's tick accruing spend while a paused ex-leader closes a create its fence refused:
// seen in Replicas.APausedExLeaderRentsNothingOnceItWakes) changes nothing.
TEST_P(StoreTest, AStaleCopyNeverBringsADestroyedRowBack) {
  auto record = full_record("dep-final");
  record.state = core::InstanceState::Renting;
  record.id = store_->insert_instance(record);
  const core::InstanceRecord stale = *store_->instance(record.id);
  auto closed = stale;
  closed.state = core::InstanceState::Destroyed;
  closed.destroyed_at = 100;
  store_->update_instance(closed);
  auto accrued = stale;
  accrued.spend_usd += 1;
  store_->update_instance(accrued);  // no throw: the stale writer loses
  EXPECT_EQ(store_->instance(record.id)->state, core::InstanceState::Destroyed);
  EXPECT_EQ(store_->instance(record.id)->spend_usd, closed.spend_usd);
  closed.spend_usd += 2;  // a destroyed row's own later writes still land
  store_->update_instance(closed);
  EXPECT_EQ(store_->instance(record.id)->spend_usd, closed.spend_usd);
}

TEST_P(StoreTest, AgentProgressUpdateWritesOnlyProgressColumns) {
  const auto stored = [&] {
    auto r = full_record("dep-progress");
    r.id = store_->insert_instance(r);
    return r;
  }();

  // Every field changes in memory; only the agent progress ones may reach the row.
  auto changed = stored;
  changed.last_heartbeat_at += 10.5;
  changed.params_done_bytes += 1e9;
  changed.params_total_bytes += 2e9;
  changed.params_rate_bps = 2.0 / 3.0;
  changed.prover_crashes += 1;
  changed.ooms += 1;
  changed.proofs_benchmark += 1;
  changed.proofs_production += 1;
  changed.gpu_util = 0.5;
  changed.peak_memory_gib = 222.25;
  changed.plan_json = R"({"partitions":5})";
  changed.spend_usd = 0.7 + 0.1;
  changed.storage_spend_usd = 0.08;
  changed.bandwidth_spend_usd = 0.04;
  changed.billed_until += 60;
  auto expected = changed;  // what the row must hold afterwards
  changed.disk_gb = 999;    // set at create: not the agent's to change
  changed.deployment_id = "dep-other";
  changed.market_id = 1;
  changed.offer.gpu_name = "H100 SXM";
  changed.state = core::InstanceState::Destroying;
  changed.state_since += 1;
  changed.deadline_at += 1;
  changed.destroy_reason = "must not be written";
  changed.token_hash = "other";
  changed.market_status = "exited";
  changed.verdict = std::nullopt;
  changed.origin = "other";
  store_->update_agent_progress(changed);

  auto got = store_->instance(stored.id);
  ASSERT_TRUE(got);
  expect_same(*got, expected);
}

TEST_P(StoreTest, AgentProgressUpdateOfUnknownInstanceThrows) {
  auto record = full_record("dep-x");
  record.id = 54321;
  try {
    store_->update_agent_progress(record);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("54321"));
    EXPECT_THAT(e.what(), HasSubstr("no such instance"));
  }
  record.spend_usd = std::numeric_limits<double>::quiet_NaN();
  record.id = store_->insert_instance(full_record("dep-y"));
  EXPECT_THROW(store_->update_agent_progress(record), StoreError);
  EXPECT_EQ(store_->instance(record.id)->spend_usd, full_record("dep-y").spend_usd);
}

// Statements are prepared once and reused: a use that failed half-way (a value refused while
// binding, a constraint hit while running) must leave nothing behind for the next one.
TEST_P(StoreTest, AFailedWriteLeavesTheNextOneClean) {
  auto half_bound = full_record("dep-reuse");
  half_bound.spend_usd = std::numeric_limits<double>::quiet_NaN();  // bound late in the row
  EXPECT_THROW(store_->insert_instance(half_bound), StoreError);
  auto first = full_record("dep-reuse");
  first.verdict = std::nullopt;
  first.id = store_->insert_instance(first);
  EXPECT_THROW(store_->insert_instance(full_record("dep-reuse")), StoreError);  // UNIQUE
  auto second = full_record("dep-reuse-2");
  second.market_id = std::nullopt;
  second.id = store_->insert_instance(second);
  expect_same(*store_->instance(first.id), first);
  expect_same(*store_->instance(second.id), second);
  EXPECT_EQ(store_->instances(true).size(), 2u);
}

TEST_P(StoreTest, InstanceByTokenHash) {
  auto a = full_record("dep-a");
  a.token_hash = "hash-a";
  auto b = full_record("dep-b");
  b.token_hash = "";
  auto id = store_->insert_instance(a);
  store_->insert_instance(b);
  auto found = store_->instance_by_token_hash("hash-a");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->id, id);
  EXPECT_FALSE(store_->instance_by_token_hash("hash-x"));
  EXPECT_FALSE(store_->instance_by_token_hash(""));  // never matches a row without a token
}

TEST_P(StoreTest, DuplicateDeploymentIdIsRefused) {
  store_->insert_instance(full_record("dep-dup"));
  try {
    store_->insert_instance(full_record("dep-dup"));
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("dep-dup"));
    EXPECT_THAT(e.what(), ContainsRegex("UNIQUE|unique constraint"));
  }
  EXPECT_EQ(store_->instances(true).size(), 1u);
}

TEST_P(StoreTest, NaNFieldIsRefusedByName) {
  auto record = full_record("dep-nan");
  record.spend_usd = std::numeric_limits<double>::quiet_NaN();
  try {
    store_->insert_instance(record);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("spend_usd is NaN"));
  }
  EXPECT_FALSE(store_->instance_by_deployment("dep-nan"));
}

TEST_P(StoreTest, MissingLookupsGiveNothing) {
  EXPECT_FALSE(store_->instance(1));
  EXPECT_FALSE(store_->instance_by_deployment("nope"));
  EXPECT_FALSE(store_->instance_by_market_id(1));
  EXPECT_TRUE(store_->instances(true).empty());
}

TEST_P(StoreTest, ListingOrdersByIdAndHidesDestroyedOnRequest) {
  auto a = full_record("a");
  auto b = full_record("b");
  b.state = core::InstanceState::Destroyed;
  b.destroyed_at = 5;
  auto c = full_record("c");
  c.state = core::InstanceState::Destroying;  // still billing: live
  c.market_id = std::nullopt;
  const auto ida = store_->insert_instance(a);
  const auto idb = store_->insert_instance(b);
  const auto idc = store_->insert_instance(c);

  auto all = store_->instances(true);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, ida);
  EXPECT_EQ(all[1].id, idb);
  EXPECT_EQ(all[2].id, idc);

  auto live = store_->instances(false);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].deployment_id, "a");
  EXPECT_EQ(live[1].deployment_id, "c");
  EXPECT_FALSE(live[1].market_id);
}

TEST_P(StoreTest, EventsAreChronologicalAndLimitKeepsTheMostRecent) {
  const auto id = store_->insert_instance(full_record("dep-ev"));
  const auto other = store_->insert_instance(full_record("dep-other"));
  store_->append_event(event(id, 10, "first"));
  store_->append_event(event(other, 11, "not mine"));
  store_->append_event(event(id, 30, "third"));
  store_->append_event(event(id, 20, "second (reported late)"));
  store_->append_event(event(id, 30, "fourth (same second as third)"));

  const std::vector<std::string> all{"first", "second (reported late)", "third",
                                     "fourth (same second as third)"};
  EXPECT_EQ(messages(store_->events(id, 0)), all);
  EXPECT_EQ(messages(store_->events(id, 100)), all);
  EXPECT_EQ(messages(store_->events(id, 2)),
            (std::vector<std::string>{"third", "fourth (same second as third)"}));
  EXPECT_EQ(messages(store_->events(id, 1)),
            (std::vector<std::string>{"fourth (same second as third)"}));

  const auto one = store_->events(other, 0);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_GT(one[0].id, 0);
  EXPECT_EQ(one[0].instance_id, other);
  EXPECT_EQ(one[0].at, 11);
  EXPECT_EQ(one[0].kind, "state");
  EXPECT_EQ(one[0].data_json, R"({"k":1})");
  EXPECT_TRUE(store_->events(999, 0).empty());
}

TEST_P(StoreTest, EventForUnknownInstanceViolatesForeignKey) {
  try {
    store_->append_event(event(424242, 1, "orphan"));
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("424242"));
    EXPECT_THAT(e.what(), ContainsRegex("FOREIGN KEY|foreign key constraint"));
  }
}

TEST_P(StoreTest, AgentSeqIsAppliedOnce) {
  const auto a = store_->insert_instance(full_record("a"));
  const auto b = store_->insert_instance(full_record("b"));
  EXPECT_TRUE(store_->mark_agent_seq(a, 1));
  EXPECT_FALSE(store_->mark_agent_seq(a, 1));
  EXPECT_TRUE(store_->mark_agent_seq(a, 2));
  EXPECT_TRUE(store_->mark_agent_seq(b, 1));  // per instance
  EXPECT_FALSE(store_->mark_agent_seq(b, 1));
}

// The agent path's writes (update_agent_progress, insert_proof_sample) may be held back to the
// transaction's next read or its COMMIT (PostgreSQL): the transaction still reads them back, and
// a failure later in it undoes them with everything else.
TEST_P(StoreTest, AgentWritesAreReadBackInTheirTransactionAndUndoneWithIt) {
  const auto id = store_->insert_instance(full_record("dep-held"));
  store_->transaction([&] {
    auto r = store_->instance(id);
    ASSERT_TRUE(r);
    r->params_done_bytes = 5e9;
    r->last_heartbeat_at = 1234.5;
    store_->update_agent_progress(*r);
    store_->insert_proof_sample({id, 1, 10, 600, 1, 2, core::ProofPhase::Warmup});
    EXPECT_EQ(store_->instance(id)->params_done_bytes, 5e9);
    EXPECT_EQ(store_->proof_samples(id).size(), 1u);
  });
  EXPECT_EQ(store_->instance(id)->last_heartbeat_at, 1234.5);

  EXPECT_THROW(store_->transaction([&] {
    auto r = store_->instance(id);
    r->params_done_bytes = 9e9;
    store_->update_agent_progress(*r);
    store_->insert_proof_sample({id, 2, 20, 600, 1, 2, core::ProofPhase::Warmup});
    auto missing = *r;
    missing.id = id + 1000;
    store_->update_instance(missing);  // throws: no such instance
  }),
               StoreError);
  EXPECT_EQ(store_->instance(id)->params_done_bytes, 5e9);
  EXPECT_EQ(store_->proof_samples(id).size(), 1u);

  // Outside a transaction the write runs at once and its check holds.
  auto missing = *store_->instance(id);
  missing.id = id + 1000;
  EXPECT_THROW(store_->update_agent_progress(missing), StoreError);
}

TEST_P(StoreTest, TheWrittenCopyIsTheStoredRowAfterEveryWriteAndARollbackDropsIt) {
  const auto id = store_->insert_instance(full_record("dep-copy"));
  auto first = store_->instance_as_written(id);  // read once, then kept
  ASSERT_TRUE(first);
  expect_same(*first, *store_->instance(id));

  auto whole = *first;
  whole.state = core::InstanceState::Proving;
  whole.destroy_reason = "not yet";
  whole.verdict.reset();
  store_->update_instance(whole);
  expect_same(*store_->instance_as_written(id), *store_->instance(id));

  auto progress = whole;
  progress.last_heartbeat_at = 4321.25;
  progress.params_done_bytes = 7e9;
  progress.spend_usd = 12.5;
  progress.proofs_production = 9;
  progress.plan_json = R"({"partitions":4})";
  progress.destroy_reason = "not written by update_agent_progress";
  store_->transaction([&] { store_->update_agent_progress(progress); });
  expect_same(*store_->instance_as_written(id), *store_->instance(id));
  EXPECT_EQ(store_->instance_as_written(id)->destroy_reason, "not yet");
  EXPECT_EQ(store_->instance_as_written(id)->spend_usd, 12.5);

  // A transaction that fails undoes its writes and the copy with them.
  EXPECT_THROW(store_->transaction([&] {
    auto r = *store_->instance_as_written(id);
    r.params_done_bytes = 9e9;
    store_->update_agent_progress(r);
    EXPECT_EQ(store_->instance_as_written(id)->params_done_bytes, 9e9);  // its own write
    throw StoreError("the caller gives up");
  }),
               StoreError);
  EXPECT_EQ(store_->instance_as_written(id)->params_done_bytes, 7e9);
  expect_same(*store_->instance_as_written(id), *store_->instance(id));

  // A destroyed row is not kept: it is read as stored.
  whole = *store_->instance(id);
  whole.state = core::InstanceState::Destroyed;
  whole.destroyed_at = 5000;
  store_->update_instance(whole);
  EXPECT_EQ(store_->instance_as_written(id)->state, core::InstanceState::Destroyed);
  EXPECT_FALSE(store_->instance_as_written(id + 1000));
}

TEST_P(StoreTest, AgentSeqsRecordedInAFailedTransactionAreNotRemembered) {
  const auto id = store_->insert_instance(full_record("dep-seqs"));
  store_->transaction([&] {
    EXPECT_TRUE(store_->mark_agent_seq(id, 1));
    EXPECT_FALSE(store_->mark_agent_seq(id, 1));  // the same batch repeats it
    EXPECT_TRUE(store_->mark_agent_seq(id, 2));
  });
  EXPECT_THROW(store_->transaction([&] {
    EXPECT_TRUE(store_->mark_agent_seq(id, 3));
    throw StoreError("the batch fails");
  }),
               StoreError);
  store_->transaction([&] {
    EXPECT_FALSE(store_->mark_agent_seq(id, 2));
    EXPECT_TRUE(store_->mark_agent_seq(id, 3));  // its retry applies it
  });
  EXPECT_FALSE(store_->mark_agent_seq(id, 3));
}

// The agent path's writes (a heartbeat's row, an event's seq and sample) in one sent
// transaction, as Manager::agent_events makes them.
Confirm send_agent_writes(Store& store, std::int64_t id, std::int64_t seq, double heartbeat_at) {
  return store.transaction_sent([&] {
    auto r = *store.instance_as_written(id);
    r.last_heartbeat_at = heartbeat_at;
    store.update_agent_progress(r);
    if (store.mark_agent_seq(id, seq)) {
      store.insert_proof_sample({id, seq, heartbeat_at, 600, 1, 2, core::ProofPhase::Warmup});
    }
  });
}

// What Confirm::then told, from whichever thread told it.
class Told {
 public:
  std::function<void(const std::string&)> callback() {
    return [this](const std::string& error) {
      std::lock_guard lock(mu_);
      errors_.push_back(error);
      changed_.notify_all();
    };
  }
  // The outcomes told so far, once there are `n` (or at a generous timeout).
  std::vector<std::string> wait_for(std::size_t n) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return errors_.size() >= n; });
    return errors_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> errors_;
};

TEST_P(StoreTest, ASentTransactionIsDurableOnceConfirmedAndAFailedOneThrowsThere) {
  const auto id = store_->insert_instance(full_record("dep-sent"));
  auto agent_writes = [&](std::int64_t seq, double heartbeat_at) {
    return send_agent_writes(*store_, id, seq, heartbeat_at);
  };
  agent_writes(1, 100).wait();  // the first: reads the row and seqs, prepares the statements
  const auto second = agent_writes(2, 200);
  const auto third = agent_writes(3, 300);
  third.wait();
  second.wait();
  EXPECT_EQ(store_->instance(id)->last_heartbeat_at, 300);
  EXPECT_EQ(store_->proof_samples(id).size(), 3u);

  // A sent transaction that fails (seq 4 recorded behind the copies' back, as another writer
  // would) throws at its confirmation; nothing of it is written and the copies are dropped.
  if (db_.backend() != Backend::SqliteMemory) {  // (a second :memory: store is another database)
    auto other = db_.open();
    {
      other->transaction([&] { EXPECT_TRUE(other->mark_agent_seq(id, 4)); });
      EXPECT_THROW(agent_writes(4, 400).wait(), StoreError);
      EXPECT_EQ(store_->instance(id)->last_heartbeat_at, 300);
      EXPECT_EQ(store_->proof_samples(id).size(), 3u);
      agent_writes(4, 400).wait();  // the retry reads what is stored: a repeat, skipped
      EXPECT_EQ(store_->instance(id)->last_heartbeat_at, 400);
      EXPECT_EQ(store_->proof_samples(id).size(), 3u);
    }
  }
  // Inside another transaction it is part of that one.
  store_->transaction([&] { agent_writes(5, 500).wait(); });
  EXPECT_EQ(store_->proof_samples(id).size(), 4u);
}

TEST_P(StoreTest, ASentTransactionTellsThenItsOutcomeWithoutAnyoneWaiting) {
  const auto id = store_->insert_instance(full_record("dep-then"));
  send_agent_writes(*store_, id, 1, 100).wait();  // reads the row and seqs, prepares

  // Told once applied, by the store's own reader: nobody waits and nothing else runs.
  Told applied;
  send_agent_writes(*store_, id, 2, 200).then(applied.callback());
  EXPECT_EQ(applied.wait_for(1), std::vector<std::string>{""});
  EXPECT_EQ(store_->instance(id)->last_heartbeat_at, 200);

  // Told also when another use of the store read the outcome first.
  Told read_by_another;
  send_agent_writes(*store_, id, 3, 300).then(read_by_another.callback());
  EXPECT_EQ(store_->proof_samples(id).size(), 3u);
  EXPECT_EQ(read_by_another.wait_for(1), std::vector<std::string>{""});

  // An outcome known already is told at once, on this thread.
  Told known;
  Confirm().then(known.callback());
  EXPECT_EQ(known.wait_for(0), std::vector<std::string>{""});

  if (db_.backend() != Backend::SqliteMemory) {  // (a second :memory: store is another database)
    // A failed one is told its error (SQLite commits in place: it throws at once); nothing of
    // it is written.
    auto other = db_.open();
    other->transaction([&] { EXPECT_TRUE(other->mark_agent_seq(id, 4)); });
    Told failed;
    try {
      send_agent_writes(*store_, id, 4, 400).then(failed.callback());
    } catch (const StoreError& e) {
      failed.callback()(e.what());
    }
    const auto errors = failed.wait_for(1);
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_THAT(errors[0], HasSubstr("agent_seqs")) << errors[0];
    EXPECT_EQ(store_->instance(id)->last_heartbeat_at, 300);

    // A store closed while callbacks wait tells each of them, once, before it is gone.
    Told closing;
    {
      auto closed = db_.open();
      for (std::int64_t seq = 10; seq < 13; ++seq) {
        send_agent_writes(*closed, id, seq, 1000 + static_cast<double>(seq))
            .then(closing.callback());
      }
    }
    EXPECT_EQ(closing.wait_for(3).size(), 3u);
  }
}

TEST_P(StoreTest, DuplicateProofSampleIsRejectedAndTheFirstKept) {
  const auto id = store_->insert_instance(full_record("dep-p"));
  core::ProofSample s{id, 7, 100.5, 612.25, 401234.5, 12.75, core::ProofPhase::Benchmark};
  store_->insert_proof_sample(s);
  auto dup = s;
  dup.seconds = 1;
  store_->insert_proof_sample(dup);
  store_->insert_proof_sample({id, 3, 50, 700, 1, 2, core::ProofPhase::Warmup});
  store_->insert_proof_sample({id, 9, 150, 600, 1, 2, core::ProofPhase::Production});

  const auto samples = store_->proof_samples(id);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(samples[0].seq, 3);
  EXPECT_EQ(samples[0].phase, core::ProofPhase::Warmup);
  EXPECT_EQ(samples[1].seq, 7);
  EXPECT_EQ(samples[1].instance_id, id);
  EXPECT_EQ(samples[1].at, 100.5);
  EXPECT_EQ(samples[1].seconds, 612.25);
  EXPECT_EQ(samples[1].gpu_ms, 401234.5);
  EXPECT_EQ(samples[1].queue_ms, 12.75);
  EXPECT_EQ(samples[1].phase, core::ProofPhase::Benchmark);
  EXPECT_EQ(samples[2].phase, core::ProofPhase::Production);
  EXPECT_TRUE(store_->proof_samples(id + 1).empty());
}

TEST_P(StoreTest, BenchRunsAreNeverOverwritten) {
  const core::HostKey host{4242, "RTX 4090", 1};
  const core::HostKey two{4242, "RTX 4090", 2};
  auto clean = bench(host, 100, 61.4);
  auto contended = bench(host, 200, 46.2);
  contended.contended = true;
  contended.throttled = true;
  contended.kind = "production";
  const auto id1 = store_->insert_bench_run(clean);
  const auto id2 = store_->insert_bench_run(contended);
  const auto id3 = store_->insert_bench_run(clean);  // identical run: a second row
  store_->insert_bench_run(bench(two, 50, 90));
  EXPECT_NE(id1, id2);
  EXPECT_NE(id1, id3);

  const auto runs = store_->bench_runs(host);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].id, id1);
  EXPECT_EQ(runs[0].host, host);
  EXPECT_EQ(runs[0].rate, 61.4);
  EXPECT_EQ(runs[0].low, 61.4 - 2.5);
  EXPECT_EQ(runs[0].high, 61.4 + 2.5);
  EXPECT_EQ(runs[0].samples, 9);
  EXPECT_EQ(runs[0].instance_id, 1);
  EXPECT_EQ(runs[0].plan_json, R"({"gpu_workers":2})");
  EXPECT_FALSE(runs[0].contended);
  EXPECT_EQ(runs[1].id, id3);  // same time as the first, inserted later
  EXPECT_EQ(runs[2].id, id2);
  EXPECT_TRUE(runs[2].contended);
  EXPECT_TRUE(runs[2].throttled);
  EXPECT_EQ(runs[2].kind, "production");

  const auto all = store_->all_bench_runs();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].host, two);  // oldest first across hosts
  EXPECT_TRUE(store_->bench_runs({4242, "RTX 3090", 1}).empty());
}

TEST_P(StoreTest, BadHostsPutReplaceRemoveAndKeepExpiry) {
  core::BadHost op{4242, "bad PCIe", R"({"pcie":1.1})", 100, std::nullopt, 1, "operator"};
  core::BadHost automatic{4242, "crashed twice", "{}", 200, 300.5, 2, "auto"};
  core::BadHost other{7, "slow", "{}", 50, 60, 1, "auto"};
  store_->put_bad_host(op);
  store_->put_bad_host(automatic);
  store_->put_bad_host(other);

  auto list = store_->bad_hosts();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].machine_id, 7);
  EXPECT_EQ(list[1].source, "auto");
  EXPECT_EQ(list[1].expires_at, 300.5);
  EXPECT_EQ(list[2].source, "operator");
  EXPECT_FALSE(list[2].expires_at);
  EXPECT_EQ(list[2].evidence_json, R"({"pcie":1.1})");
  EXPECT_EQ(list[2].reason, "bad PCIe");
  EXPECT_EQ(list[2].added_at, 100);
  // Expired entries are still listed; callers filter.
  EXPECT_FALSE(core::is_active(list[0], 100));
  EXPECT_TRUE(core::is_active(list[2], 1e12));

  automatic.strikes = 3;
  automatic.expires_at = std::nullopt;
  automatic.reason = "crashed three times";
  store_->put_bad_host(automatic);
  list = store_->bad_hosts();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].strikes, 3);
  EXPECT_EQ(list[1].reason, "crashed three times");
  EXPECT_FALSE(list[1].expires_at);

  EXPECT_TRUE(store_->remove_bad_host(4242, "auto"));
  EXPECT_FALSE(store_->remove_bad_host(4242, "auto"));
  EXPECT_FALSE(store_->remove_bad_host(999, "operator"));
  list = store_->bad_hosts();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[1].source, "operator");
}

TEST_P(StoreTest, SettingsAreStoredAndOverwritten) {
  EXPECT_FALSE(store_->setting("autopilot.paused"));
  store_->put_setting("autopilot.paused", "true");
  store_->put_setting("token", std::string("a\0b", 3));
  EXPECT_EQ(store_->setting("autopilot.paused"), "true");
  store_->put_setting("autopilot.paused", "false");
  EXPECT_EQ(store_->setting("autopilot.paused"), "false");
  EXPECT_EQ(store_->setting("token"), std::string("a\0b", 3));
  store_->put_setting("empty", "");
  EXPECT_EQ(store_->setting("empty"), "");
}

TEST_P(StoreTest, TransactionCommitsAllWrites) {
  std::int64_t id = 0;
  store_->transaction([&] {
    id = store_->insert_instance(full_record("t"));
    store_->append_event(event(id, 1, "rented"));
  });
  EXPECT_TRUE(store_->instance(id));
  EXPECT_EQ(store_->events(id, 0).size(), 1u);
}

TEST_P(StoreTest, TransactionRollsBackOnExceptionAndRethrows) {
  EXPECT_THROW(store_->transaction([&] {
    const auto id = store_->insert_instance(full_record("t"));
    store_->append_event(event(id, 1, "rented"));
    store_->put_setting("k", "v");
    throw std::logic_error("boom");
  }),
               std::logic_error);
  EXPECT_TRUE(store_->instances(true).empty());
  EXPECT_FALSE(store_->setting("k"));
  // The store is usable afterwards.
  EXPECT_GT(store_->insert_instance(full_record("t")), 0);
}

TEST_P(StoreTest, StoreErrorInsideTransactionUndoesEarlierWrites) {
  store_->insert_instance(full_record("taken"));
  EXPECT_THROW(store_->transaction([&] {
    store_->put_setting("k", "v");
    store_->insert_instance(full_record("taken"));
  }),
               StoreError);
  EXPECT_FALSE(store_->setting("k"));
}

TEST_P(StoreTest, NestedTransactionJoinsTheOuterOne) {
  EXPECT_THROW(store_->transaction([&] {
    store_->put_setting("outer", "1");
    store_->transaction([&] { store_->put_setting("inner", "1"); });
    throw std::runtime_error("outer fails after inner finished");
  }),
               std::runtime_error);
  EXPECT_FALSE(store_->setting("outer"));
  EXPECT_FALSE(store_->setting("inner"));  // the inner commit was not a real commit

  store_->transaction([&] {
    store_->put_setting("outer", "2");
    try {
      store_->transaction([&] {
        store_->put_setting("inner", "2");
        throw std::runtime_error("inner fails");
      });
    } catch (const std::runtime_error&) {
      // The caller handles the inner failure and carries on.
    }
    store_->put_setting("after", "2");
  });
  EXPECT_EQ(store_->setting("outer"), "2");
  EXPECT_FALSE(store_->setting("inner"));
  EXPECT_EQ(store_->setting("after"), "2");
}

TEST_P(StoreTest, ConcurrentWritersLoseNothing) {
  const auto id = store_->insert_instance(full_record("busy"));
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string msg = std::to_string(t) + ":" + std::to_string(i);
        if (i % 2 == 0) {
          store_->append_event(event(id, i, msg));
        } else {
          // Interleave transactions with plain calls from other threads.
          store_->transaction([&] {
            store_->append_event(event(id, i, msg));
            store_->mark_agent_seq(id, t * kPerThread + i);
          });
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  const auto all = store_->events(id, 0);
  ASSERT_EQ(all.size(), static_cast<std::size_t>(kThreads * kPerThread));
  std::set<std::string> unique;
  for (const auto& e : all) unique.insert(e.message);
  EXPECT_EQ(unique.size(), all.size());
  // Every transactional seq landed exactly once.
  for (int t = 0; t < kThreads; ++t) EXPECT_FALSE(store_->mark_agent_seq(id, t * kPerThread + 1));
}

// --- memory observations (issue 13: the memory model learns from observed peaks) -------------

core::MemoryObservation memory_seen(std::int64_t machine, const std::string& gpu, double at,
                                    bool oom = false) {
  core::MemoryObservation o;
  o.instance_id = 7;
  o.machine_id = machine;
  o.gpu_name = gpu;
  o.num_gpus = 2;
  o.at = at;
  o.partitions = 20;
  o.observed_peak_gib = oom ? 0 : 391.5;
  o.model_peak_gib = 350;
  o.usable_ram_gib = 400;
  o.oom = oom;
  return o;
}

TEST_P(StoreTest, MemoryObservationsByMachineOrGpuModelNewestFirst) {
  store_->insert_memory_observation(memory_seen(1, "RTX 4090", 100));
  store_->insert_memory_observation(memory_seen(1, "RTX 4090", 300, /*oom=*/true));
  store_->insert_memory_observation(memory_seen(2, "rtx 4090", 200));
  store_->insert_memory_observation(memory_seen(3, "RTX 3090", 400));
  const auto seen = store_->memory_observations(1, "RTX 4090");
  ASSERT_EQ(seen.size(), 3u);  // machine 1's two and machine 2's (same model, any case)
  EXPECT_DOUBLE_EQ(seen[0].at, 300);
  EXPECT_TRUE(seen[0].oom);
  EXPECT_DOUBLE_EQ(seen[0].observed_peak_gib, 0);
  EXPECT_EQ(seen[1].machine_id, 2);
  EXPECT_EQ(seen[2].instance_id, 7);
  EXPECT_EQ(seen[2].gpu_name, "RTX 4090");
  EXPECT_EQ(seen[2].num_gpus, 2);
  EXPECT_EQ(seen[2].partitions, 20);
  EXPECT_DOUBLE_EQ(seen[2].observed_peak_gib, 391.5);
  EXPECT_DOUBLE_EQ(seen[2].model_peak_gib, 350);
  EXPECT_DOUBLE_EQ(seen[2].usable_ram_gib, 400);
  EXPECT_FALSE(seen[2].oom);
  EXPECT_EQ(store_->memory_observations(3, "A100").size(), 1u);         // by machine alone
  EXPECT_EQ(store_->memory_observations(1, "RTX 4090", 2).size(), 2u);  // bounded
}

TEST_P(SharedStoreTest, MemoryObservationsSurviveAReopen) {
  db_.open()->insert_memory_observation(memory_seen(5, "RTX 5090", 10));
  EXPECT_EQ(db_.open()->memory_observations(5, "RTX 5090").size(), 1u);
}

// The written copies assume one writer (the leader); what another process wrote is read once
// the copies are forgotten (a term begins), and an agent event it recorded is never applied twice.
TEST_P(SharedStoreTest, AnotherWritersChangesAreReadAfterForgettingAndItsSeqsFailTheBatch) {
  auto leader = db_.open();
  auto other = db_.open();
  const auto id = leader->insert_instance(full_record("dep-two"));
  ASSERT_TRUE(leader->instance_as_written(id));
  leader->transaction([&] { EXPECT_TRUE(leader->mark_agent_seq(id, 1)); });

  auto row = *other->instance(id);
  row.state = core::InstanceState::Destroying;
  other->update_instance(row);
  EXPECT_TRUE(other->mark_agent_seq(id, 2));
  EXPECT_NE(leader->instance_as_written(id)->state, core::InstanceState::Destroying);  // stale

  // The leader's copy does not know seq 2: the batch that would apply it again fails whole.
  EXPECT_THROW(leader->transaction([&] {
    EXPECT_TRUE(leader->mark_agent_seq(id, 2));
    leader->insert_proof_sample({id, 2, 10, 600, 1, 2, core::ProofPhase::Warmup});
  }),
               StoreError);
  EXPECT_TRUE(leader->proof_samples(id).empty());
  // The failure dropped the copies: the retry sees seq 2 recorded and the row as stored.
  leader->transaction([&] { EXPECT_FALSE(leader->mark_agent_seq(id, 2)); });
  EXPECT_EQ(leader->instance_as_written(id)->state, core::InstanceState::Destroying);

  row.state = core::InstanceState::Destroyed;
  row.destroyed_at = 99;
  other->update_instance(row);
  leader->forget_written_copies();
  EXPECT_EQ(leader->instance_as_written(id)->state, core::InstanceState::Destroyed);
}

// --- opening, migrations, files ----------------------------------------------------------------

TEST_P(SharedStoreTest, ReopeningKeepsDataAndMigratesNothingTwice) {
  std::int64_t id = 0;
  auto record = full_record("persist");
  {
    auto store = db_.open();
    EXPECT_EQ(store->schema_version(), latest_schema_version());
    id = store->insert_instance(record);
    store->append_event(event(id, 1, "rented"));
    store->put_setting("k", "v");
    store->insert_bench_run(bench({1, "A100", 1}, 5, 10));
  }
  for (int round = 0; round < 2; ++round) {
    auto store = db_.open();  // a re-applied CREATE TABLE would throw here
    EXPECT_EQ(store->schema_version(), latest_schema_version());
    auto got = store->instance(id);
    ASSERT_TRUE(got);
    record.id = id;
    expect_same(*got, record);
    EXPECT_EQ(store->events(id, 0).size(), 1u);
    EXPECT_EQ(store->setting("k"), "v");
    EXPECT_EQ(store->all_bench_runs().size(), 1u);
  }
  if (!db_.is_postgres()) {
    EXPECT_EQ(journal_mode(db_.url().substr(7)), "wal");
  }
}

// Replicas starting together on a new database: each applies what the other has not, and
// neither fails because the other got there first.
TEST_P(SharedStoreTest, StoresOpeningANewDatabaseTogetherBothMigrateIt) {
  constexpr int kStores = 3;
  std::vector<std::unique_ptr<SqlStore>> stores(kStores);
  std::vector<std::string> errors(kStores);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStores; ++i) {
    threads.emplace_back([&, i] {
      try {
        stores[i] = db_.open();
      } catch (const StoreError& e) {
        errors[i] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStores; ++i) {
    ASSERT_EQ(errors[i], "") << "store " << i;
    EXPECT_EQ(stores[i]->schema_version(), latest_schema_version());
  }
  stores[0]->put_setting("k", "v");
  EXPECT_EQ(stores[kStores - 1]->setting("k"), "v");
}

// Runs SQL behind the store's back.
void raw_exec(const std::string& path, const std::string& sql) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &raw), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
      << sqlite3_errmsg(raw);
  sqlite3_close(raw);
}

// A database of schema 1 (no close cause, restart state in memory) upgrades: operator destroys
// keep their cooldown, recorded production windows and the benchmark clock are found again.
TEST(SqliteStoreOpen, SchemaOneUpgradesWithCausesAndRestartState) {
  TempDir dir;
  const std::string path = dir.file("fleet.db");
  std::int64_t by_operator = 0, dropped = 0;
  {
    auto store_opened = open_sql_store(path);
    SqlStore& store = *store_opened;
    auto a = full_record("by-operator");
    a.state = core::InstanceState::Destroyed;
    a.destroy_reason = "operator request";
    by_operator = store.insert_instance(a);
    auto b = full_record("dropped");
    b.state = core::InstanceState::Proving;
    b.destroy_reason = "";
    dropped = store.insert_instance(b);
    core::ProofSample warm;
    warm.instance_id = dropped;
    warm.seq = 1;
    warm.at = 1234;
    warm.phase = core::ProofPhase::Warmup;
    store.insert_proof_sample(warm);
    auto run = bench({1, "A100", 1}, 5, 10);
    run.instance_id = dropped;
    run.kind = "production";
    store.insert_bench_run(run);
    store.insert_bench_run(run);
  }
  // What schema 1 looked like.
  raw_exec(path,
           "DROP TRIGGER destroyed_totals_insert;"
           "DROP TRIGGER destroyed_totals_update;"
           "DROP TRIGGER destroyed_totals_delete;"
           "DROP TABLE destroyed_totals;"
           "DROP TABLE job_failure_streaks;"
           "DROP TABLE jobs;"
           "DROP TABLE job_events;"
           "DROP TABLE job_inputs;"
           "DROP TABLE job_input_chunks;"
           "DROP TABLE agent_logs;"
           "DROP TABLE memory_observations;"
           "DROP INDEX instances_live;"
           "DROP INDEX instances_destroyed;"
           "DROP INDEX instances_destroyed_billed;"
           "DROP INDEX bench_runs_instance;"
           "CREATE INDEX instances_state ON instances(state);"
           "DROP TABLE leader_lease;"
           "DROP INDEX instances_machine;"
           "ALTER TABLE instances DROP COLUMN machine_id;"
           "ALTER TABLE instances DROP COLUMN close_cause;"
           "ALTER TABLE instances DROP COLUMN bench_since;"
           "ALTER TABLE instances DROP COLUMN gpu_throttled;"
           "ALTER TABLE instances DROP COLUMN production_windows;"
           "ALTER TABLE instances DROP COLUMN oom_partitions;"
           "ALTER TABLE instances DROP COLUMN storage_spend_usd;"
           "ALTER TABLE instances DROP COLUMN bandwidth_spend_usd;"
           "ALTER TABLE instances DROP COLUMN disk_gb;"
           "ALTER TABLE instances DROP COLUMN market_stopped_s;"
           "ALTER TABLE instances DROP COLUMN bid_price;"
           "ALTER TABLE instances DROP COLUMN market_stops;"
           "PRAGMA user_version = 1;");
  auto store_opened = open_sql_store(path);
  SqlStore& store = *store_opened;
  EXPECT_EQ(store.schema_version(), latest_schema_version());
  EXPECT_EQ(store.instance(by_operator)->close_cause, core::CloseCause::Operator);
  const auto proving = *store.instance(dropped);
  EXPECT_FALSE(proving.close_cause);
  EXPECT_EQ(proving.bench_since, 1234);
  EXPECT_EQ(proving.production_windows, 2);
  EXPECT_FALSE(proving.gpu_throttled);
  // Schema 12's machine_id, from the offer snapshots.
  EXPECT_EQ(store.instances_on_machine(full_offer().machine_id).size(), 2u);
  // Schema 13: spend from before it has no storage or bandwidth part, the disk is unknown.
  EXPECT_EQ(proving.storage_spend_usd, 0);
  EXPECT_EQ(proving.disk_gb, 0);
  // Schema 14: no time stopped by the market is known from before it.
  EXPECT_EQ(proving.market_stopped_s, 0);
  // Schema 15: rentals from before it were on-demand, never seen stopped.
  EXPECT_FALSE(proving.bid_price);
  EXPECT_EQ(proving.market_stops, 0);
}

TEST(SqliteStoreOpen, NewerSchemaVersionIsRefused) {
  TempDir dir;
  const std::string path = dir.file("fleet.db");
  { open_sql_store(path); }
  const int newer = latest_schema_version() + 1;
  set_user_version(path, newer);
  try {
    open_sql_store(path);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("database schema version " + std::to_string(newer) +
                                    " is newer than this proverfleet (" +
                                    std::to_string(latest_schema_version()) + ")"));
  }
}

// The PostgreSQL counterparts: its schema version lives in a table the migrations keep.
TEST(PgStoreOpen, NewerSchemaVersionIsRefused) {
  const std::string url = pf::test::fresh_pg_database();
  EXPECT_EQ(open_sql_store(url)->schema_version(), latest_schema_version());
  const int newer = latest_schema_version() + 1;
  {
    PgConnection behind_its_back(url);
    behind_its_back.begin();
    behind_its_back.set_schema_version(newer);
    behind_its_back.commit();
  }
  try {
    open_sql_store(url);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("database schema version " + std::to_string(newer) +
                                    " is newer than this proverfleet (" +
                                    std::to_string(latest_schema_version()) + ")"));
  }
}

// A database at schema 1 (written by the first proverfleet) upgrades as SQLite's does.
TEST(PgStoreOpen, SchemaOneUpgradesWithCausesAndRestartState) {
  const std::string url = pf::test::fresh_pg_database();
  {
    PgConnection old(url);
    sql::migrate(old, "test database", 1);
    EXPECT_EQ(old.schema_version(), 1);
    const char* insert_instance =
        "INSERT INTO instances (deployment_id, offer_json, offer_extra_json, state, created_at, "
        "state_since, deadline_at, destroy_reason, secret_hash, token_hash, last_heartbeat_at, "
        "market_status, market_status_since, params_done_bytes, params_total_bytes, "
        "params_rate_bps, prover_crashes, ooms, proofs_benchmark, proofs_production, gpu_util, "
        "peak_memory_gib, spend_usd, billed_until, plan_json, origin) VALUES (:dep, :offer, "
        ":extra, "
        ":state, 0, 0, 0, :reason, '', '', 0, '', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '', '') "
        "RETURNING id";
    for (const auto& [dep, state, reason] :
         {std::tuple{"by-operator", "destroyed", "operator request"},
          std::tuple{"dropped", "proving", ""}}) {
      sql::Statement s(old, insert_instance, "inserting a schema-1 instance");
      s.bind_text(":dep", dep);
      s.bind_text(":offer", market::offer_to_vast_json(full_offer()).dump());
      s.bind_text(":extra", R"({"usable_ram_gib":1,"usable_cores":2,"gpu_total_ram_gib":3,)"
                            R"("data_flags":[]})");
      s.bind_text(":state", state);
      s.bind_text(":reason", reason);
      s.run();
    }
    old.exec(
        "INSERT INTO proof_samples (instance_id, seq, at, seconds, gpu_ms, queue_ms, phase) "
        "VALUES (2, 1, 1234, 0, 0, 0, 'warmup');"
        "INSERT INTO bench_runs (machine_id, gpu_name, num_gpus, instance_id, at, rate, low, "
        "high, samples, kind, contended, throttled, plan_json) VALUES "
        "(1, 'A100', 1, 2, 5, 10, 9, 11, 3, 'production', 0, 0, ''), "
        "(1, 'A100', 1, 2, 6, 10, 9, 11, 3, 'production', 0, 0, '')",
        "writing schema-1 rows");
  }
  auto store = open_sql_store(url);
  EXPECT_EQ(store->schema_version(), latest_schema_version());
  ASSERT_TRUE(store->instance_by_deployment("by-operator"));
  EXPECT_EQ(store->instance_by_deployment("by-operator")->close_cause, core::CloseCause::Operator);
  const auto proving = *store->instance_by_deployment("dropped");
  EXPECT_FALSE(proving.close_cause);
  EXPECT_EQ(proving.bench_since, 1234);
  EXPECT_EQ(proving.production_windows, 2);
  EXPECT_FALSE(proving.gpu_throttled);
  EXPECT_EQ(store->instances_on_machine(full_offer().machine_id).size(), 2u);
  // Ids carry on after the rows written before (identity columns).
  EXPECT_GT(store->insert_instance(full_record("new")), proving.id);
}

// A password in the URL never reaches an error (the server here is not listening).
TEST(PgStoreOpen, APasswordInTheUrlIsNeverShown) {
  for (const std::string url : {"postgres://fleet:s3cret-pw@127.0.0.1:1/fleet",
                                "postgresql://fleet@127.0.0.1:1/fleet?password=s3cret-pw"}) {
    try {
      open_store(url);
      FAIL() << "expected StoreError";
    } catch (const StoreError& e) {
      EXPECT_THAT(e.what(), Not(HasSubstr("s3cret-pw")));
      EXPECT_THAT(e.what(), HasSubstr("***"));
    }
  }
}

TEST(SqliteStoreOpen, UrlForms) {
  TempDir dir;
  EXPECT_NO_THROW(open_store(":memory:"));
  EXPECT_NO_THROW(open_store("sqlite::memory:"));
  const std::string plain = dir.file("plain.db");
  open_store(plain)->put_setting("k", "plain");
  EXPECT_EQ(open_store("sqlite:" + plain)->setting("k"), "plain");
  EXPECT_EQ(open_store("sqlite://" + plain)->setting("k"), "plain");  // sqlite:///abs/path
}

TEST(SqliteStoreOpen, BadUrlsAndPathsGiveClearErrors) {
  TempDir dir;
  auto message = [](const std::string& url) -> std::string {
    try {
      open_store(url);
    } catch (const StoreError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(message(""), HasSubstr("names no database path"));
  EXPECT_THAT(message("sqlite:"), HasSubstr("names no database path"));
  EXPECT_THAT(message("mysql://db/fleet"), HasSubstr("unsupported store URL"));

  const std::string missing_dir = dir.file("no/such/dir") + "/fleet.db";
  const std::string msg = message(missing_dir);
  EXPECT_THAT(msg, HasSubstr("directory"));
  EXPECT_THAT(msg, HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(dir.file("no")));  // and nothing was created

  const std::string junk = dir.file("junk.db");
  std::ofstream(junk) << "this is not an SQLite database, just text long enough to matter....."
                         "..........................................................";
  EXPECT_THAT(message(junk), HasSubstr("not a database"));
  EXPECT_THAT(message(junk), HasSubstr(junk));
}

fs::perms mode_of(const std::string& path) {
  return fs::status(path).permissions() & fs::perms::all;
}

// Reproduction (issue 10): the database and its WAL/SHM were created 0644 although they hold
// token hashes, logs and the event trail.
TEST(SqliteStoreOpen, DatabaseWalAndShmAreOwnerOnly) {
  TempDir dir;
  const std::string path = dir.file("fleet.db");
  const mode_t old_mask = ::umask(022);  // the usual one, which made them world-readable
  {
    auto store_opened = open_sql_store(path);
    SqlStore& store = *store_opened;
    store.put_setting("k", "v");
    ASSERT_TRUE(fs::exists(path + "-wal"));
    ASSERT_TRUE(fs::exists(path + "-shm"));
    const auto owner_rw = fs::perms::owner_read | fs::perms::owner_write;
    EXPECT_EQ(mode_of(path), owner_rw);
    EXPECT_EQ(mode_of(path + "-wal"), owner_rw);
    EXPECT_EQ(mode_of(path + "-shm"), owner_rw);
  }
  ::umask(old_mask);
}

TEST(SqliteStoreOpen, FilesLeftReadableByAnOlderBuildAreMadePrivate) {
  TempDir dir;
  const std::string path = dir.file("fleet.db");
  { open_sql_store(path)->put_setting("k", "v"); }
  for (const std::string& f : {path, path + "-wal", path + "-shm"}) {
    if (!fs::exists(f)) std::ofstream(f).flush();
    fs::permissions(f, fs::perms::group_read | fs::perms::others_read, fs::perm_options::add);
  }
  auto store_opened = open_sql_store(path);
  SqlStore& store = *store_opened;
  EXPECT_EQ(store.setting("k"), "v");
  for (const std::string& f : {path, path + "-wal", path + "-shm"}) {
    EXPECT_EQ(mode_of(f) & (fs::perms::group_all | fs::perms::others_all), fs::perms::none) << f;
  }
}

TEST(SqliteStoreOpen, AWorldWritableDirectoryIsRefused) {
  TempDir dir;
  const fs::path shared = dir.file("shared");
  fs::create_directory(shared);
  fs::permissions(shared, fs::perms::all);  // 0777, as /tmp without its sticky bit
  const std::string path = (shared / "fleet.db").string();
  try {
    open_sql_store(path);
    FAIL() << "expected StoreError";
  } catch (const StoreError& e) {
    EXPECT_THAT(e.what(), HasSubstr("writable by every user"));
    EXPECT_THAT(e.what(), HasSubstr(shared.string()));
  }
  EXPECT_FALSE(fs::exists(path));  // nothing created there
}

TEST_P(SharedStoreTest, UncommittedWritesAreInvisibleToAnotherConnection) {
  auto writer_opened = db_.open();
  SqlStore& writer = *writer_opened;
  auto reader_opened = db_.open();
  SqlStore& reader = *reader_opened;
  writer.transaction([&] {
    writer.put_setting("k", "v");
    EXPECT_FALSE(reader.setting("k"));  // the reader sees the last commit
  });
  EXPECT_EQ(reader.setting("k"), "v");
}

// Reads reuse prepared statements and parsed offer snapshots; neither may hide what another
// connection wrote since.
TEST_P(SharedStoreTest, RowsRewrittenByAnotherConnectionAreReadFresh) {
  auto manager_opened = db_.open();
  SqlStore& manager = *manager_opened;
  auto other_opened = db_.open();
  SqlStore& other = *other_opened;
  auto record = full_record("dep-fresh");
  record.id = manager.insert_instance(record);
  expect_same(*manager.instance(record.id), record);

  record.offer.gpu_name = "H100 SXM";
  record.offer.data_flags = {"rewritten"};
  record.offer.usable_ram_gib = 64;
  record.state = core::InstanceState::Proving;
  other.update_instance(record);
  expect_same(*manager.instance(record.id), record);
  expect_same(*manager.instance_by_deployment("dep-fresh"), record);

  record.proofs_production = 99;
  record.last_heartbeat_at += 30;
  other.update_agent_progress(record);
  expect_same(*manager.instance(record.id), record);
  ASSERT_EQ(manager.instances(false).size(), 1u);
  expect_same(manager.instances(false)[0], record);
}

// The WAL is copied back into the database file by the store's own checkpoint thread (commits
// no longer do it). Without it the database file would never grow: in WAL mode only a
// checkpoint writes it.
TEST(SqliteStoreOpen, WalIsCheckpointedIntoTheDatabaseFile) {
  TempDir dir;
  const std::string path = dir.file("fleet.db");
  auto store_opened = open_sql_store(path);
  SqlStore& store = *store_opened;
  const auto id = store.insert_instance(full_record("dep-wal"));
  const auto before = fs::file_size(path);
  // Well over SQLite's 1000-page threshold, each event in a commit of its own.
  const std::string big(3000, 'x');
  for (int i = 0; i < 2500; ++i) store.append_event(event(id, i, big));
  // The copy is asynchronous: wait for it (generously; it normally takes milliseconds).
  eventually([&] { return fs::file_size(path) > before + 2 * 1024 * 1024; },
             std::chrono::seconds(60));
  EXPECT_GT(fs::file_size(path), before + 2 * 1024 * 1024);
  EXPECT_EQ(store.events(id, 0).size(), 2500u);
}

TEST_P(SharedStoreTest, TwoConnectionsOnOneDatabaseWriteConcurrently) {
  auto a_opened = db_.open();
  SqlStore& a = *a_opened;
  auto b_opened = db_.open();
  SqlStore& b = *b_opened;
  const auto id = a.insert_instance(full_record("shared"));
  constexpr int kPerThread = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    SqlStore& store = t % 2 == 0 ? a : b;
    threads.emplace_back([&store, id, t] {
      for (int i = 0; i < kPerThread; ++i) {
        store.transaction([&] { store.append_event(event(id, t, std::to_string(t))); });
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(a.events(id, 0).size(), 4u * kPerThread);
  EXPECT_EQ(b.events(id, 0).size(), 4u * kPerThread);
}

}  // namespace
}  // namespace pf::store
