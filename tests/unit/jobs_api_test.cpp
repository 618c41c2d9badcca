// The operator's view of gateway jobs over HTTP (issue 12 item 6): GET /api/v1/jobs and
// /api/v1/jobs/{id-or-request_id}, the fleet summary's "jobs" section and profit basis, and the
// jobs' series on /metrics. A real Manager and JobQueue on one in-memory store, the HTTP front
// on loopback, a manual clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "jobs/job_queue.h"
#include "manager/http_api.h"
#include "support/front_serving.h"
#include "support/manager_fixture.h"

namespace pf::manager {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kOperatorToken = "operator-token-jobs-5d1a";

json parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << "reply is not JSON: " << text;
  return j;
}

class JobsApiTest : public pf::test::ManagerFixture {
 protected:
  void SetUp() override {
    start_manager(default_config());
    data_dir_ = std::filesystem::temp_directory_path() /
                ("pf-jobs-api-" + std::to_string(::getpid()) + "-" +
                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(data_dir_);
    jobs::JobQueueConfig qc;
    qc.data_dir = data_dir_.string();
    qc.default_deadline_s = 1800;
    jobs::JobQueueHooks hooks;
    // One accepted instance (id 1) that proves a job in 60 s, two at a time.
    hooks.workers = [] { return std::vector<core::WorkerView>{{1, 60, 2, 0, -1}}; };
    hooks.strike = [](std::int64_t, const core::Strike&) {};
    hooks.event = [](std::int64_t, const std::string&) {};
    if (with_queue()) {
      queue_ = std::make_unique<jobs::JobQueue>(*store_, qc, hooks, [this] { return now_.load(); });
    }

    ApiOptions options;
    options.operator_token_hash = hash_token(kOperatorToken);
    options.clock = [this] { return now_.load(); };
    options.jobs = queue_.get();
    options.jobs_report.prices.per_proof[core::JobKind::PorepC2] = 0.05;
    api_ = std::make_unique<HttpApi>(*manager_, options);
    api_->mount(server_);
    serving_.emplace(server_);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", serving_->port());
  }

  void TearDown() override {
    serving_.reset();
    if (queue_) queue_->shutdown();
    std::filesystem::remove_all(data_dir_);
  }

  virtual bool with_queue() const { return true; }

  httplib::Result get(const std::string& path, bool token = true) {
    httplib::Headers headers;
    if (token) headers.emplace("Authorization", std::string("Bearer ") + kOperatorToken);
    return client_->Get(path.c_str(), headers);
  }

  json get_json(const std::string& path) {
    auto r = get(path);
    EXPECT_TRUE(r);
    if (!r) return nullptr;
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    return parse(r->body);
  }

  core::Job submit(const std::string& request_id, const std::string& input = "input") {
    jobs::SubmitRequest req;
    req.request_id = request_id;
    req.input = input + ":" + request_id;
    req.client = "127.0.0.1";
    auto submitted = queue_->submit(req);
    EXPECT_TRUE(submitted) << (submitted ? "" : submitted.error().message);
    return submitted ? submitted->job : core::Job{};
  }

  // Leases the job to instance 1, proves it after `prove_s` and hands the proof to its client.
  void prove_and_deliver(std::int64_t job_id, double prove_s) {
    auto leases = queue_->lease(1, 1, std::chrono::milliseconds(0));
    ASSERT_TRUE(leases) << leases.error().message;
    ASSERT_EQ(leases->size(), 1u);
    ASSERT_EQ(leases->front().job.id, job_id);
    const int attempt = leases->front().job.attempts;
    ASSERT_TRUE(queue_->started(1, job_id, attempt));
    now_ = now_.load() + prove_s;
    jobs::ProofReport report;
    report.job_id = job_id;
    report.attempt = attempt;
    report.ok = true;
    report.proof = "proof-" + std::to_string(job_id);
    report.prove_ms = prove_s * 1000;
    auto ack = queue_->report(1, report);
    ASSERT_TRUE(ack && ack->applied);
    auto finished = queue_->await(job_id, std::chrono::milliseconds(1000));
    ASSERT_TRUE(finished && *finished) << "the job did not finish";
  }

  void expect_error(const std::string& path, int status, const std::string& needle) {
    SCOPED_TRACE(path);
    auto r = get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << r->body;
    json body = parse(r->body);
    ASSERT_TRUE(body.is_object() && body.contains("error")) << r->body;
    EXPECT_THAT(body["error"].get<std::string>(), HasSubstr(needle));
  }

  std::filesystem::path data_dir_;
  std::unique_ptr<jobs::JobQueue> queue_;
  std::unique_ptr<HttpApi> api_;
  net::HttpServer server_;
  std::optional<pf::test::FrontServing> serving_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(JobsApiTest, BadQueryParametersAre400NamingTheParameter) {
  submit("r-1");
  expect_error("/api/v1/jobs?state=bogus", 400, "'state'");
  expect_error("/api/v1/jobs?state=queued,,done", 400, "'state'");
  expect_error("/api/v1/jobs?state=" + std::string(200, 'q'), 400, "'state'");
  expect_error("/api/v1/jobs?limit=0", 400, "'limit'");
  expect_error("/api/v1/jobs?limit=-3", 400, "'limit'");
  expect_error("/api/v1/jobs?limit=ten", 400, "'limit'");
  expect_error("/api/v1/jobs?limit=1001", 400, "'limit'");
  expect_error("/api/v1/jobs?limit=99999999999999999999", 400, "'limit'");
  expect_error("/api/v1/jobs?sort=id", 400, "unknown query parameter 'sort'");
  expect_error("/api/v1/jobs?cursor=0", 400, "'cursor'");
  expect_error("/api/v1/jobs?cursor=-1", 400, "'cursor'");
  expect_error("/api/v1/jobs?cursor=abc", 400, "'cursor'");
  expect_error("/api/v1/jobs?cursor=99999999999999999999", 400, "'cursor'");
  expect_error("/api/v1/jobs/" + std::string(300, 'x'), 400, "job id");
  expect_error("/api/v1/jobs/r-1?verbose=1", 400, "unknown query parameter");
  expect_error("/api/v1/jobs/no-such-request", 404, "unknown job");
  expect_error("/api/v1/jobs/987654", 404, "unknown job");
}

// Pages of at most `limit`, newest first: a full page names the next cursor; following it walks
// every job once; the last page has no cursor.
TEST_F(JobsApiTest, BadFiltersAre400NamingTheFilter) {
  expect_error("/api/v1/jobs?kind=porep", 400, "'kind'");
  expect_error("/api/v1/jobs?client=", 400, "'client'");
  expect_error("/api/v1/jobs?client=" + std::string(300, 'c'), 400, "'client'");
  expect_error("/api/v1/jobs?instance=0", 400, "'instance'");
  expect_error("/api/v1/jobs?instance=x", 400, "'instance'");
  expect_error("/api/v1/jobs?machine=-4", 400, "'machine'");
  expect_error("/api/v1/jobs?request=a%20b", 400, "'request'");
  expect_error("/api/v1/jobs?request=%C3%A9", 400, "'request'");
  for (const char* since : {"abc", "nan", "inf", "-1", "1e12", "", "1.5.2"}) {
    expect_error(std::string("/api/v1/jobs?since=") + since, 400, "'since'");
  }
  expect_error("/api/v1/jobs?until=1e300", 400, "'until'");
  expect_error("/api/v1/jobs?since=2000&until=1000", 400, "'until'");
  expect_error("/api/v1/jobs?late=maybe", 400, "'late'");
  expect_error("/api/v1/jobs?at_risk=2", 400, "'at_risk'");
}

TEST_F(JobsApiTest, FiltersNarrowTheListing) {
  const auto first = submit("sector-1");
  submit("sector-2");
  now_ = now_.load() + 100;
  const auto third = submit("snap-3");
  prove_and_deliver(first.id, 60);
  const auto ids = [&](const std::string& query) {
    std::vector<std::int64_t> out;
    for (const auto& row : get_json("/api/v1/jobs?" + query)) out.push_back(row["id"]);
    return out;
  };
  EXPECT_EQ(ids("request=sector-").size(), 2u);
  EXPECT_EQ(ids("request=snap"), std::vector<std::int64_t>{third.id});
  EXPECT_EQ(ids("client=127.0.0.1").size(), 3u);
  EXPECT_TRUE(ids("client=10.9.9.9").empty());
  EXPECT_EQ(ids("instance=1"), std::vector<std::int64_t>{first.id});
  EXPECT_TRUE(ids("instance=2").empty());
  EXPECT_EQ(ids("kind=porep-c2").size(), 3u);
  EXPECT_TRUE(ids("kind=snap-update").empty());
  EXPECT_EQ(ids("since=" + std::to_string(third.submitted_at)),
            std::vector<std::int64_t>{third.id});
  EXPECT_EQ(ids("until=" + std::to_string(third.submitted_at)).size(), 2u);
  EXPECT_TRUE(ids("late=1").empty());
  // One proof took 160 s from submission (the window's median): a queued job with less than
  // that left is at risk, as /metrics counts it; past its deadline it is late.
  EXPECT_TRUE(ids("at_risk=1").empty());
  now_ = third.deadline_at - 100;
  EXPECT_EQ(ids("at_risk=true"), std::vector<std::int64_t>{third.id});
  EXPECT_EQ(ids("at_risk=1&state=queued&kind=porep-c2"), std::vector<std::int64_t>{third.id});
  EXPECT_TRUE(ids("at_risk=1&state=done").empty());
  now_ = third.deadline_at + 1;
  EXPECT_EQ(ids("late=1").size(), 2u);  // both queued jobs; the done one was on time
}

TEST_F(JobsApiTest, AJobShowsItsTimeline) {
  const auto job = submit("r-9");
  prove_and_deliver(job.id, 75);
  const json got = get_json("/api/v1/jobs/r-9");
  ASSERT_TRUE(got["timeline"].is_array()) << got.dump();
  std::vector<std::string> kinds;
  for (const auto& step : got["timeline"]) kinds.push_back(step["kind"]);
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"recorded", "leased", "proving", "proved", "delivered"}));
  const json& leased = got["timeline"][1];
  EXPECT_EQ(leased["instance_id"], 1);
  EXPECT_EQ(leased["attempt"], 1);
  EXPECT_TRUE(leased["machine_id"].is_null());  // instance 1 has no row in this test's store
  EXPECT_FALSE(got["timeline_truncated"].get<bool>());
  EXPECT_TRUE(got["instance_cost_per_proof_usd"].is_null());  // no row for instance 1 here
  EXPECT_THAT(got["timeline"][3]["detail"].get<std::string>(), HasSubstr("75.0 s proving"));
}

// The money page's ledger (issue 36): the same revenue as the fleet's jobs window, per bucket
// and per instance; bad ranges named.
TEST_F(JobsApiTest, MoneyCountsWhatTheJobsReportCounts) {
  expect_error("/api/v1/money?range=year", 400, "'range'");
  expect_error("/api/v1/money?range=day&bucket=minute", 400, "'bucket'");
  expect_error("/api/v1/money?range=month&bucket=5m", 400, "'bucket'");
  expect_error("/api/v1/money?range=hour&bucket=day", 400, "'bucket'");
  expect_error("/api/v1/money?window=1", 400, "unknown query parameter");
  const auto job = submit("m-1");
  prove_and_deliver(job.id, 60);
  const json money = get_json("/api/v1/money?range=hour");
  EXPECT_EQ(money["range"], "hour");
  EXPECT_EQ(money["buckets"].size(), 12u);  // 5-minute buckets
  EXPECT_DOUBLE_EQ(money["total"]["revenue_usd"].get<double>(), 0.05);
  EXPECT_EQ(money["total"]["delivered_on_time"], 1);
  double by_bucket = 0;
  for (const auto& b : money["buckets"]) by_bucket += b["revenue_usd"].get<double>();
  EXPECT_DOUBLE_EQ(by_bucket, 0.05);
  const json fleet = get_json("/api/v1/fleet");
  EXPECT_DOUBLE_EQ(fleet["jobs"]["revenue_usd"].get<double>(),
                   money["total"]["revenue_usd"].get<double>());
  EXPECT_EQ(get_json("/api/v1/money")["buckets"].size(), 24u);  // a day by the hour
  EXPECT_EQ(get_json("/api/v1/money?range=week&bucket=hour")["buckets"].size(), 168u);
}

TEST_F(JobsApiTest, TheListingPagesWithACursor) {
  std::vector<std::string> submitted;
  for (int i = 0; i < 5; ++i) submitted.push_back(submit("p-" + std::to_string(i)).request_id);
  std::vector<std::string> seen;
  std::string path = "/api/v1/jobs?limit=2";
  for (int page = 0; page < 5; ++page) {
    auto r = get(path);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json rows = parse(r->body);
    ASSERT_TRUE(rows.is_array());
    for (const auto& row : rows) seen.push_back(row["request_id"].get<std::string>());
    if (!r->has_header(kNextCursorHeader)) {
      EXPECT_LT(rows.size(), 2u);  // the last page
      break;
    }
    EXPECT_EQ(rows.size(), 2u);
    EXPECT_EQ(r->get_header_value(kNextCursorHeader), std::to_string(rows.back()["id"].get<int>()));
    path = "/api/v1/jobs?limit=2&cursor=" + r->get_header_value(kNextCursorHeader);
  }
  EXPECT_EQ(seen, std::vector<std::string>(submitted.rbegin(), submitted.rend()));
}

TEST_F(JobsApiTest, JobRoutesNeedTheOperatorToken) {
  submit("r-1");
  for (const char* path : {"/api/v1/jobs", "/api/v1/jobs/r-1", "/api/v1/jobs/1"}) {
    auto r = get(path, false);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
}

TEST_F(JobsApiTest, ListsNewestFirstFiltersByStateAndLooksUpByRequestOrId) {
  const auto first = submit("r-1");
  submit("r-2");
  submit("r-3");
  prove_and_deliver(first.id, 120);

  const json all = get_json("/api/v1/jobs");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0]["request_id"], "r-3");
  EXPECT_EQ(all[2]["request_id"], "r-1");
  EXPECT_EQ(all[2]["state"], "done");
  EXPECT_EQ(all[2]["timeliness"], "on_time");
  EXPECT_DOUBLE_EQ(all[2]["earned_usd"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ(all[2]["end_to_end_s"].get<double>(), 120);
  EXPECT_EQ(all[0]["state"], "queued");
  EXPECT_TRUE(all[0]["finished_at"].is_null());
  EXPECT_TRUE(all[0]["queue_wait_s"].is_null());

  EXPECT_EQ(get_json("/api/v1/jobs?state=queued").size(), 2u);
  EXPECT_EQ(get_json("/api/v1/jobs?state=done,failed").size(), 1u);
  EXPECT_EQ(get_json("/api/v1/jobs?limit=1").size(), 1u);
  EXPECT_EQ(get_json("/api/v1/jobs?state=").size(), 3u);  // empty: every state

  const json by_request = get_json("/api/v1/jobs/r-1");
  EXPECT_EQ(by_request["id"], first.id);
  const json by_id = get_json("/api/v1/jobs/" + std::to_string(first.id));
  EXPECT_EQ(by_id["request_id"], "r-1");
  EXPECT_EQ(by_id["instance_id"], 1);
}

TEST_F(JobsApiTest, FleetCountsDeliveredJobsRevenueOnceTheGatewayHasJobs) {
  json fleet = get_json("/api/v1/fleet");
  EXPECT_EQ(fleet["profit_basis"], "proofs_measured");
  ASSERT_TRUE(fleet["jobs"].is_object());
  EXPECT_EQ(fleet["jobs"]["has_jobs"], false);

  const auto a = submit("r-a");
  const auto b = submit("r-b");
  submit("r-c");
  now_ = now_.load() + 30;  // the first two waited 30 s
  prove_and_deliver(a.id, 100);
  prove_and_deliver(b.id, 200);

  fleet = get_json("/api/v1/fleet");
  EXPECT_EQ(fleet["profit_basis"], "jobs_delivered");
  const json& jobs = fleet["jobs"];
  EXPECT_EQ(jobs["has_jobs"], true);
  EXPECT_EQ(jobs["open"]["queued"], 1);
  EXPECT_EQ(jobs["queued_by_kind"]["porep-c2"], 1);
  EXPECT_EQ(jobs["arrivals_last_hour"], 3);
  EXPECT_EQ(jobs["on_time"], 2);
  EXPECT_DOUBLE_EQ(jobs["on_time_share"].get<double>(), 1.0);
  EXPECT_EQ(jobs["end_to_end_s"]["count"], 2);
  EXPECT_EQ(jobs["delivered_on_time"], 2);
  EXPECT_NEAR(jobs["revenue_usd"].get<double>(), 0.10, 1e-12);
  EXPECT_DOUBLE_EQ(jobs["prices"]["usd_per_proof"]["porep-c2"].get<double>(), 0.05);
  EXPECT_TRUE(jobs["prices"]["usd_per_proof"]["snap-update"].is_null());
  // Revenue over the window the gateway has existed (330 s), not a whole hour.
  const double window_h = (jobs["at"].get<double>() - jobs["window"]["since"].get<double>()) / 3600;
  EXPECT_NEAR(fleet["revenue_per_hour"].get<double>(), 0.10 / window_h, 1e-9);
  EXPECT_NEAR(fleet["profit_per_hour"].get<double>(),
              0.10 / window_h - fleet["dollars_per_hour"].get<double>(), 1e-9);
}

TEST_F(JobsApiTest, MetricsCarryJobGaugesHistogramsAndRevenueCountedOnce) {
  const auto a = submit("r-a");
  submit("r-b");
  prove_and_deliver(a.id, 90);
  std::string text;
  for (int scrape = 0; scrape < 2; ++scrape) {  // a second scrape must not count anything twice
    auto r = get("/metrics", false);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200);
    text = r->body;
  }
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs{state=\"queued\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs{state=\"proving\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_queued{kind=\"porep-c2\"} 1\n"));
  // Both inputs are in the database (the delivered one within retention): "input:r-a" and
  // "input:r-b", 9 bytes each.
  EXPECT_THAT(text, HasSubstr("proverfleet_job_inputs_stored 2\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_inputs_stored_bytes 18\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_job_queue_wait_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_queue_wait_seconds_count 1\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE proverfleet_job_end_to_end_seconds histogram\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_bucket{le=\"60\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_bucket{le=\"120\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_job_end_to_end_seconds_sum 90\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_revenue_usd_total 0.05\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_delivered_on_time_total 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_on_time_share 1\n"));
  EXPECT_THAT(text, HasSubstr("proverfleet_jobs_cancelled_total 0\n"));

  // A client cancels the job still queued: counted, in /metrics and the fleet's jobs section.
  const auto c = submit("r-c");
  ASSERT_TRUE(queue_->cancel(c.id).has_value());
  auto r = get("/metrics", false);
  ASSERT_TRUE(r);
  EXPECT_THAT(r->body, HasSubstr("proverfleet_jobs_cancelled_total 1\n"));
  EXPECT_EQ(get_json("/api/v1/fleet")["jobs"]["cancelled"], 1);
}

class JobsApiWithoutGatewayTest : public JobsApiTest {
 protected:
  bool with_queue() const override { return false; }
};

TEST_F(JobsApiWithoutGatewayTest, JobRoutesSaySoAndTheFleetKeepsTheMeasuredEstimate) {
  expect_error("/api/v1/jobs", 409, "without a gateway");
  expect_error("/api/v1/jobs/r-1", 409, "without a gateway");
  expect_error("/api/v1/jobs?limit=0", 400, "'limit'");  // bad input is still named first
  const json fleet = get_json("/api/v1/fleet");
  EXPECT_EQ(fleet["profit_basis"], "proofs_measured");
  EXPECT_TRUE(fleet["jobs"].is_null());
  auto r = get("/metrics", false);
  ASSERT_TRUE(r);
  EXPECT_THAT(r->body, Not(HasSubstr("proverfleet_jobs")));
}

}  // namespace
}  // namespace pf::manager
