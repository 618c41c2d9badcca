// The hot read paths (issue 14) read only live rows and what the database totals for them, yet
// show exactly what the old full scans showed: the store's aggregates, the fleet summary, the
// jobs report's money and the dashboard's instance list are each compared, on a seeded store,
// with the computation over every row they replaced (the reference oracles below).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "core/job_economics.h"
#include "jobs/job_queue.h"
#include "manager/dashboard.h"
#include "manager/jobs_report.h"
#include "manager/manager.h"
#include "store/sql_connection.h"
#include "store/store_copy.h"
#include "support/fake_market.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"

namespace pf::manager {
namespace {

using S = core::InstanceState;
using nlohmann::json;

constexpr double kNow = 1'000'000'000;
constexpr double kWindow = 3600;

// ---- the computations the hot paths replaced, over every row ------------------------------

struct OldTotals {
  std::map<std::string, int> by_state;
  double spend_usd = 0, dollars_per_hour = 0, proofs_per_hour = 0;
  int proofs = 0;
};

OldTotals old_summary(const std::vector<core::InstanceRecord>& every_row) {
  OldTotals t;
  for (const auto& r : every_row) {
    t.by_state[core::to_string(r.state)]++;
    t.spend_usd += r.spend_usd;
    t.proofs += r.proofs_production;
    if (r.state == S::Destroyed) continue;
    t.dollars_per_hour += r.offer.dph_total;
    if (r.state == S::Proving && r.verdict) t.proofs_per_hour += r.verdict->rate;
  }
  return t;
}

bool old_in_window(const core::InstanceRecord& r, double since) {
  return r.state == S::Destroyed &&
         (!r.destroyed_at || *r.destroyed_at >= since || r.billed_until >= since);
}

std::vector<std::int64_t> ids_of(const std::vector<core::InstanceRecord>& rows) {
  std::vector<std::int64_t> ids;
  for (const auto& r : rows) ids.push_back(r.id);
  return ids;
}

// ---- a seeded history ---------------------------------------------------------------------

// Rows in every state, most destroyed over the past days; some closed inside the window, some
// billed into it after closing, a few without destroyed_at; bench runs of both kinds, and runs
// whose instance_id names no row (imported history).
void seed(store::Store& store, unsigned seed_value) {
  std::mt19937 rng(seed_value);
  std::uniform_real_distribution<double> unit(0, 1);
  store.transaction([&] {
    for (int n = 0; n < 400; ++n) {
      core::InstanceRecord r;
      r.deployment_id = "seed-" + std::to_string(n);
      r.offer.id = 1000 + n;
      r.offer.machine_id = 50 + n % 37;
      r.offer.gpu_name = n % 2 ? "RTX 4090" : "A100";
      r.offer.num_gpus = 1 + n % 3;
      r.offer.dph_total = 0.1 + unit(rng);
      r.state = unit(rng) < 0.7 ? S::Destroyed : static_cast<S>(n % 8);
      r.created_at = kNow - 20 * 86400 * unit(rng) - 3600;
      r.state_since = r.created_at + 60;
      r.spend_usd = 30 * unit(rng);
      r.proofs_production = static_cast<int>(500 * unit(rng));
      r.billed_until = kNow - 600 * unit(rng);
      if (unit(rng) < 0.6) {
        core::Verdict v;
        v.decision =
            unit(rng) < 0.7 ? core::Verdict::Decision::Accept : core::Verdict::Decision::Reject;
        v.rate = 10 + 50 * unit(rng);
        r.verdict = v;
      }
      if (r.state == S::Destroyed) {
        const double x = unit(rng);
        if (x < 0.05) {
          r.destroyed_at.reset();
        } else if (x < 0.25) {
          r.destroyed_at = kNow - kWindow * unit(rng);  // closed inside the window
        } else {
          r.destroyed_at = kNow - kWindow - 10 * 86400 * unit(rng);
          // Most stopped billing when they closed; some were billed into the window.
          r.billed_until = unit(rng) < 0.8 ? *r.destroyed_at : kNow - kWindow * unit(rng);
        }
      }
      const std::int64_t id = store.insert_instance(r);
      for (const char* kind : {"benchmark", "production"}) {
        if (unit(rng) < 0.5) continue;
        core::BenchRun run;
        run.host = {r.offer.machine_id, r.offer.gpu_name, r.offer.num_gpus};
        run.instance_id = id;
        run.at = r.created_at + 1200 * unit(rng);
        run.rate = 30;
        run.kind = kind;
        store.insert_bench_run(run);
      }
    }
    core::BenchRun imported;
    imported.host = {9, "V100", 1};
    imported.instance_id = 99'999;
    imported.at = kNow - 100;
    store.insert_bench_run(imported);
  });
}

// A row at the exact edge of the window, and one closed at exactly `since` by billing only.
void seed_edges(store::Store& store, double since) {
  core::InstanceRecord r;
  r.deployment_id = "edge-destroyed";
  r.offer.id = 1;
  r.state = S::Destroyed;
  r.destroyed_at = since;
  r.billed_until = since - 100;
  store.insert_instance(r);
  r.deployment_id = "edge-billed";
  r.destroyed_at = since - 1;
  r.billed_until = since;
  store.insert_instance(r);
  r.deployment_id = "edge-before";
  r.destroyed_at = since - 1;
  r.billed_until = since - 1;
  store.insert_instance(r);
}

TEST(HotReadsStore, InstanceTotalsMatchEveryRow) {
  for (unsigned seed_value : {1u, 2u, 3u}) {
    auto store = store::open_store(":memory:");
    seed(*store, seed_value);
    const auto every_row = store->instances(true);
    const OldTotals want = old_summary(every_row);
    std::map<std::string, int> by_state;
    double spend = 0;
    std::int64_t proofs = 0;
    for (const auto& [state, totals] : store->instance_totals()) {
      by_state[core::to_string(state)] = static_cast<int>(totals.instances);
      spend += totals.spend_usd;
      proofs += totals.proofs_production;
    }
    EXPECT_EQ(by_state, want.by_state) << "seed " << seed_value;
    EXPECT_NEAR(spend, want.spend_usd, 1e-9 * want.spend_usd) << "seed " << seed_value;
    EXPECT_EQ(proofs, want.proofs) << "seed " << seed_value;
  }
}

TEST(HotReadsStore, TotalsOfAnEmptyStoreAreEmpty) {
  auto store = store::open_store(":memory:");
  EXPECT_TRUE(store->instance_totals().empty());
}

TEST(HotReadsStore, DestroyedSinceIsTheWindowsShareOfEveryRow) {
  auto store = store::open_store(":memory:");
  seed(*store, 7);
  const double since = kNow - kWindow;
  seed_edges(*store, since);
  const auto every_row = store->instances(true);
  for (double at : {since, kNow - 10 * 86400.0, kNow, kNow + 1}) {
    std::vector<core::InstanceRecord> want;
    for (const auto& r : every_row)
      if (old_in_window(r, at)) want.push_back(r);
    EXPECT_EQ(ids_of(store->destroyed_instances_since(at)), ids_of(want)) << "since " << at;
  }
  // The edges: destroyed exactly at `since`, billed exactly to it; not the one before both.
  std::vector<std::string> edges;
  for (const auto& r : store->destroyed_instances_since(since))
    if (r.deployment_id.rfind("edge-", 0) == 0) edges.push_back(r.deployment_id);
  EXPECT_EQ(edges, (std::vector<std::string>{"edge-destroyed", "edge-billed"}));
}

TEST(HotReadsStore, InstanceBenchRunsAreTheInstancesShareOfAllRuns) {
  auto store = store::open_store(":memory:");
  seed(*store, 11);
  const auto all = store->all_bench_runs();
  for (std::int64_t id : {std::int64_t{1}, std::int64_t{5}, std::int64_t{77}, std::int64_t{99'999},
                          std::int64_t{123'456}}) {
    std::vector<std::int64_t> want, got;
    for (const auto& run : all)
      if (run.instance_id == id) want.push_back(run.id);
    for (const auto& run : store->instance_bench_runs(id)) got.push_back(run.id);
    EXPECT_EQ(got, want) << "instance " << id;
  }
}

TEST(HotReadsStore, LiveListingLeavesOutOnlyTheDestroyed) {
  auto store = store::open_store(":memory:");
  seed(*store, 13);
  std::vector<core::InstanceRecord> want;
  for (const auto& r : store->instances(true))
    if (r.state != S::Destroyed) want.push_back(r);
  EXPECT_EQ(ids_of(store->instances(false)), ids_of(want));
}

// ---- the manager's hot paths against the old computation -----------------------------------

class HotReadsManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = store::open_store(":memory:");
    seed(*store_, 17);
    seed_edges(*store_, kNow - kWindow);
    ManagerConfig cfg;
    cfg.rank.predictor = core::default_predictor_config();
    cfg.rank.economics.revenue_per_proof_usd = 0.05;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [] { return kNow; });
  }

  // Gateway jobs held by live and closed instances, some delivered in the window; the queue's
  // record begins long before it.
  jobs::JobQueue& queue() {
    const auto every_row = store_->instances(true);
    store_->transaction([&] {
      for (std::size_t i = 0; i < every_row.size(); i += 3) {
        core::Job job;
        job.request_id = "job-" + std::to_string(i);
        job.input_digest = std::string(64, 'a');
        job.instance_id = every_row[i].id;
        job.submitted_at = kNow - 2 * kWindow + static_cast<double>(i) * 10;
        job.deadline_at = job.submitted_at + 900;
        job.assigned_at = job.submitted_at + 30;
        job.attempts = 1;
        job.state = i % 2 ? core::JobState::Done : core::JobState::Proving;
        if (job.state == core::JobState::Done) {
          job.finished_at = job.delivered_at = job.assigned_at + 300;
        }
        store_->insert_job(job);
      }
      store_->put_setting("jobs.observed_since", std::to_string(kNow - 30 * 86400));
    });
    jobs::JobQueueConfig qc;
    qc.data_dir = dir_.file("data");
    queue_ =
        std::make_unique<jobs::JobQueue>(*store_, qc, manager_->job_hooks(), [] { return kNow; });
    return *queue_;
  }

  pf::testing::TempDir dir_{"pf_hot_reads"};
  std::unique_ptr<store::Store> store_;
  testing::FakeMarket market_;
  std::unique_ptr<Manager> manager_;
  std::unique_ptr<jobs::JobQueue> queue_;
};

TEST_F(HotReadsManagerTest, FleetSummaryShowsWhatTheFullScanShowed) {
  const OldTotals want = old_summary(store_->instances(true));
  const FleetSummary got = manager_->summary();
  EXPECT_EQ(got.by_state, want.by_state);
  EXPECT_NEAR(got.spend_usd, want.spend_usd, 1e-9 * want.spend_usd);
  EXPECT_EQ(got.proofs, want.proofs);
  EXPECT_DOUBLE_EQ(got.dollars_per_hour, want.dollars_per_hour);
  EXPECT_DOUBLE_EQ(got.proofs_per_hour, want.proofs_per_hour);
  ASSERT_TRUE(got.cost_per_proof);
  EXPECT_DOUBLE_EQ(*got.cost_per_proof, want.dollars_per_hour / want.proofs_per_hour);
  EXPECT_DOUBLE_EQ(got.profit_per_hour, want.proofs_per_hour * 0.05 - want.dollars_per_hour);
  const core::Hearing hearing = manager_->hearing();
  EXPECT_EQ(got.hearing.agents_expected, hearing.agents_expected);
  EXPECT_EQ(got.hearing.agents_silent, hearing.agents_silent);
}

TEST_F(HotReadsManagerTest, JobsMoneyIsWhatEveryRowAndRunGave) {
  JobsReportOptions options;
  options.prices.per_proof[core::JobKind::PorepC2] = 0.5;
  options.window_s = kWindow;
  const JobsReport report = build_jobs_report(*manager_, queue(), options, kNow);
  ASSERT_TRUE(report.has_jobs);
  ASSERT_EQ(report.since, kNow - kWindow);
  const auto every_row = store_->instances(true);
  const core::JobsMoney want = core::jobs_money(
      report.scanned, every_row, accepted_spans(every_row, store_->all_bench_runs(), kNow),
      options.prices, report.since, kNow);
  EXPECT_GT(want.spend_usd, 0);
  EXPECT_GT(want.idle_hours, 0);
  EXPECT_NEAR(report.money.spend_usd, want.spend_usd, 1e-9 * want.spend_usd);
  EXPECT_NEAR(report.money.idle_hours, want.idle_hours, 1e-9 * want.idle_hours);
  EXPECT_EQ(report.money.delivered_on_time, want.delivered_on_time);
  EXPECT_DOUBLE_EQ(report.money.revenue_usd, want.revenue_usd);
  ASSERT_EQ(report.money.realised_cost_per_proof.has_value(),
            want.realised_cost_per_proof.has_value());
}

TEST_F(HotReadsManagerTest, DashboardListsTheLiveAndTheRecentlyDestroyed) {
  DashboardOptions options;
  options.clock = [] { return kNow; };
  options.recent_destroyed_s = kWindow;
  Dashboard dashboard(*manager_, options);
  const json snapshot = dashboard.snapshot();
  std::vector<std::int64_t> want;
  for (const auto& r : store_->instances(true)) {
    if (r.state == S::Destroyed && (!r.destroyed_at || *r.destroyed_at < kNow - kWindow)) continue;
    want.push_back(r.id);
  }
  std::vector<std::int64_t> got;
  for (const auto& row : snapshot["instances"]) got.push_back(row["id"].get<std::int64_t>());
  EXPECT_EQ(got, want);
  EXPECT_EQ(snapshot["summary"]["by_state"]["destroyed"],
            old_summary(store_->instances(true)).by_state["destroyed"]);
}

// ---- both stores: the running totals follow every write (migration 11) ---------------------

// The figures a full scan gives, compared with what the store totals, the fleet summary and the
// dashboard's snapshot show.
void expect_totals_match_every_row(store::Store& store, Manager& manager, const std::string& at) {
  SCOPED_TRACE(at);
  const auto every_row = store.instances(true);
  const OldTotals want = old_summary(every_row);
  std::map<std::string, int> by_state;
  double spend = 0;
  std::int64_t proofs = 0;
  for (const auto& [state, totals] : store.instance_totals()) {
    by_state[core::to_string(state)] = static_cast<int>(totals.instances);
    spend += totals.spend_usd;
    proofs += totals.proofs_production;
  }
  EXPECT_EQ(by_state, want.by_state);
  EXPECT_NEAR(spend, want.spend_usd, 1e-9 * std::max(1.0, want.spend_usd));
  EXPECT_EQ(proofs, want.proofs);

  const FleetSummary summary = manager.summary();
  EXPECT_EQ(summary.by_state, want.by_state);
  EXPECT_NEAR(summary.spend_usd, want.spend_usd, 1e-9 * std::max(1.0, want.spend_usd));
  EXPECT_EQ(summary.proofs, want.proofs);
  EXPECT_DOUBLE_EQ(summary.dollars_per_hour, want.dollars_per_hour);
  EXPECT_DOUBLE_EQ(summary.proofs_per_hour, want.proofs_per_hour);

  DashboardOptions options;
  options.clock = [] { return kNow; };
  options.recent_destroyed_s = kWindow;
  Dashboard dashboard(manager, options);
  const json snapshot = dashboard.snapshot();
  const json& shown = snapshot["summary"];
  for (const auto& [state, count] : want.by_state) EXPECT_EQ(shown["by_state"][state], count);
  EXPECT_NEAR(shown["spend_usd"].get<double>(), want.spend_usd,
              1e-9 * std::max(1.0, want.spend_usd));
  EXPECT_EQ(shown["proofs"], want.proofs);
  EXPECT_DOUBLE_EQ(shown["dollars_per_hour"].get<double>(), want.dollars_per_hour);
  std::vector<std::int64_t> want_rows, got_rows;
  for (const auto& r : every_row) {
    if (r.state == S::Destroyed && (!r.destroyed_at || *r.destroyed_at < kNow - kWindow)) continue;
    want_rows.push_back(r.id);
  }
  for (const auto& row : snapshot["instances"]) got_rows.push_back(row["id"].get<std::int64_t>());
  EXPECT_EQ(got_rows, want_rows);
}

class HotReadsBackendTest : public ::testing::TestWithParam<testing::Backend> {
 protected:
  // A Manager over a store opened again on the same database: what a restarted serve sees.
  void restart() {
    manager_.reset();
    store_ = db_.open();
    ManagerConfig cfg;
    manager_ = std::make_unique<Manager>(*store_, market_, cfg, [] { return kNow; });
  }

  testing::TestDatabase db_{GetParam()};
  testing::FakeMarket market_;
  std::unique_ptr<store::SqlStore> store_;
  std::unique_ptr<Manager> manager_;
};

// Creates, destroys, billing after the destroy, rewrites that change nothing, a rolled-back
// destroy, a row deleted by hand, and restarts, in a seeded order: after each round every total
// is what a scan of every row gives.
TEST_P(HotReadsBackendTest, TotalsFollowCreatesDestroysBillingAndRestarts) {
  restart();
  seed(*store_, 23);  // history inserted as it is (destroyed rows among them)
  expect_totals_match_every_row(*store_, *manager_, "after the seed");
  std::mt19937 rng(29);
  std::uniform_real_distribution<double> unit(0, 1);
  int created = 0;
  for (int round = 0; round < 6; ++round) {
    store_->transaction([&] {
      for (int i = 0; i < 15; ++i) {
        core::InstanceRecord r;
        r.deployment_id = "round-" + std::to_string(created++);
        r.offer.id = 5000 + created;
        r.offer.dph_total = 0.2 + unit(rng);
        r.state = S::Booting;
        r.created_at = kNow - 600;
        r.spend_usd = unit(rng);
        store_->insert_instance(r);
      }
    });
    auto live = store_->instances(false);
    std::shuffle(live.begin(), live.end(), rng);
    for (std::size_t i = 0; i < live.size() / 4; ++i) {
      auto rec = live[i];
      // Billing and proofs while live (a heartbeat), then the close and the destroy.
      rec.spend_usd += 2 * unit(rng);
      rec.proofs_production += 7;
      store_->update_agent_progress(rec);
      rec.state = S::Destroying;
      store_->update_instance(rec);
      rec.state = S::Destroyed;
      rec.destroyed_at = kNow - kWindow * unit(rng) * 2;
      store_->update_instance(rec);
      // The market bills the last minutes after the destroy; a rewrite changes nothing.
      rec.spend_usd += 0.1 * unit(rng);
      rec.billed_until = kNow;
      store_->update_agent_progress(rec);
      store_->update_instance(rec);
    }
    // A destroy that fails half-way rolls its totals back with it.
    if (!live.empty()) {
      auto rec = live.back();
      EXPECT_THROW(store_->transaction([&] {
        rec.state = S::Destroyed;
        rec.spend_usd += 1000;
        store_->update_instance(rec);
        throw std::runtime_error("the destroy failed");
      }),
                   std::runtime_error);
    }
    expect_totals_match_every_row(*store_, *manager_, "round " + std::to_string(round));
    if (round % 2 == 1) restart();
  }
  // A destroyed row removed by hand (no store method deletes one) leaves the totals too.
  const auto every_row = store_->instances(true);
  const auto gone = std::find_if(every_row.begin(), every_row.end(), [](const auto& r) {
    return r.state == S::Destroyed && r.deployment_id.rfind("round-", 0) == 0;
  });
  ASSERT_NE(gone, every_row.end());
  store_->transaction([&] {
    store_->connection().exec("DELETE FROM instances WHERE id = " + std::to_string(gone->id),
                              "deleting a row by hand");
  });
  expect_totals_match_every_row(*store_, *manager_, "after a delete");
}

// A database from before migration 11 gets totals of the history it already holds.
TEST_P(HotReadsBackendTest, MigrationElevenBackfillsTheHistory) {
  restart();
  seed(*store_, 31);
  auto& conn = store_->connection();
  const bool pg = db_.is_postgres();
  conn.begin();
  for (const char* trigger :
       {"destroyed_totals_insert", "destroyed_totals_update", "destroyed_totals_delete"}) {
    conn.exec(std::string("DROP TRIGGER ") + trigger + (pg ? " ON instances" : ""), "undoing 11");
  }
  conn.exec("DROP TABLE destroyed_totals", "undoing 11");
  if (pg) conn.exec("DROP FUNCTION destroyed_totals_follow()", "undoing 11");
  conn.set_schema_version(10);
  conn.commit();
  // More history, written by a build without the totals.
  for (int n = 0; n < 20; ++n) {
    core::InstanceRecord r;
    r.deployment_id = "old-build-" + std::to_string(n);
    r.state = n % 4 ? S::Destroyed : S::Proving;
    r.destroyed_at = kNow - 100.0 * n;
    r.spend_usd = 1.25 * n;
    r.proofs_production = 3 * n;
    store_->insert_instance(r);
  }
  // Migrations 12 to 19 came after 11 (and this build's inserts write their columns): undone
  // now, so the file really is a schema-10 database (17's index goes with 16's table).
  conn.begin();
  if (pg) {  // SQLite's migration 12 rebuilds `jobs` without them
    for (const char* column :
         {"hedge_instance_id", "hedge_assigned_at", "hedge_lease_expires_at"}) {
      conn.exec(std::string("ALTER TABLE jobs DROP COLUMN ") + column, "undoing 19");
    }
  }
  conn.exec("DROP TABLE job_inputs", "undoing 18");
  conn.exec("DROP TABLE job_input_chunks", "undoing 18");
  conn.exec("DROP TABLE job_events", "undoing 16");
  conn.exec("ALTER TABLE instances DROP COLUMN market_stops", "undoing 15");
  conn.exec("ALTER TABLE instances DROP COLUMN bid_price", "undoing 15");
  conn.exec("ALTER TABLE instances DROP COLUMN market_stopped_s", "undoing 14");
  for (const char* column : {"storage_spend_usd", "bandwidth_spend_usd", "disk_gb"}) {
    conn.exec(std::string("ALTER TABLE instances DROP COLUMN ") + column, "undoing 13");
  }
  conn.exec("DROP INDEX instances_machine", "undoing 12");
  conn.exec("ALTER TABLE instances DROP COLUMN machine_id", "undoing 12");
  if (pg) {
    conn.exec("DROP INDEX jobs_client_request", "undoing 12");
    conn.exec("DROP INDEX jobs_request_id", "undoing 12");
    conn.exec("ALTER TABLE jobs DROP COLUMN client", "undoing 12");
    conn.exec("ALTER TABLE jobs ADD CONSTRAINT jobs_request_id_key UNIQUE (request_id)",
              "undoing 12");
  }  // SQLite's migration 12 rebuilds `jobs` from its columns: it runs again as it is.
  conn.commit();
  restart();
  EXPECT_EQ(store_->schema_version(), store::latest_schema_version());
  expect_totals_match_every_row(*store_, *manager_, "after migrating to 10");
}

// `proverfleet migrate` leaves the totals out of the copy: the target's triggers add the rows up
// again as they land.
TEST_P(HotReadsBackendTest, ACopiedStoreTotalsWhatItHolds) {
  restart();
  pf::testing::TempDir dir;
  auto source = store::open_sql_store("sqlite:" + dir.file("source.db"));
  seed(*source, 41);
  store::copy_store(source->connection(), store_->connection(), nullptr);
  restart();
  expect_totals_match_every_row(*store_, *manager_, "after the copy");
  const auto copied = store_->instance_totals();
  ASSERT_EQ(copied.size(), source->instance_totals().size());
  for (const auto& [state, totals] : source->instance_totals()) {
    EXPECT_EQ(copied.at(state).instances, totals.instances) << core::to_string(state);
    EXPECT_EQ(copied.at(state).proofs_production, totals.proofs_production);
    EXPECT_NEAR(copied.at(state).spend_usd, totals.spend_usd, 1e-9 * (1 + totals.spend_usd));
  }
}

// A dashboard keeps each row's text between snapshots (dashboard_snapshot.h): every change of a
// row since the last snapshot shows, and a long-lived dashboard shows what a new one builds.
TEST_P(HotReadsBackendTest, AKeptDashboardShowsEveryChangeOfARow) {
  restart();
  seed(*store_, 43);
  DashboardOptions options;
  options.clock = [] { return kNow; };
  options.recent_destroyed_s = kWindow;
  Dashboard kept(*manager_, options);
  const std::string before = kept.snapshot_text();
  auto live = store_->instances(false);
  ASSERT_GE(live.size(), 3u);
  live[0].last_heartbeat_at = kNow - 1;  // a heartbeat: billing and progress
  live[0].spend_usd += 1.5;
  live[0].proofs_production += 2;
  store_->update_agent_progress(live[0]);
  live[1].state = S::Destroyed;  // closed just now: still listed, as destroyed
  live[1].destroyed_at = kNow - 10;
  store_->update_instance(live[1]);
  live[2].offer.geolocation = "Iceland, IS";  // a field of the offer the row shows
  store_->update_instance(live[2]);

  const std::string after = kept.snapshot_text();
  EXPECT_NE(after, before);
  Dashboard fresh(*manager_, options);
  EXPECT_EQ(after, fresh.snapshot_text());
  const json shown = json::parse(after);
  std::map<std::int64_t, json> rows;
  for (const auto& row : shown["instances"]) rows[row["id"].get<std::int64_t>()] = row;
  EXPECT_DOUBLE_EQ(rows.at(live[0].id)["spend_usd"].get<double>(), live[0].spend_usd);
  EXPECT_EQ(rows.at(live[0].id)["proofs_production"], live[0].proofs_production);
  EXPECT_EQ(rows.at(live[1].id)["state"], "destroyed");
  EXPECT_EQ(rows.at(live[2].id)["offer"]["geolocation"], "Iceland, IS");
  EXPECT_EQ(shown, kept.snapshot());
}

INSTANTIATE_TEST_SUITE_P(Db, HotReadsBackendTest, testing::kStoreBackends, testing::backend_name);

}  // namespace
}  // namespace pf::manager
