// The agent's side of the job protocol (agent/work_client.h, agent/work_loop.h) against an
// in-process fake of the manager's job routes: leases, an input download cut mid-way and
// resumed, a partial file from an earlier run, a digest mismatch refused and fetched again,
// started/result retried until the manager has them, and the work loop filling its slots,
// naming its jobs and dropping what the manager drops.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/manager_client.h"
#include "agent/prover_sim.h"
#include "agent/work_client.h"
#include "agent/work_loop.h"
#include "support/eventually.h"
#include "support/loopback_server.h"
#include "support/param_server.h"
#include "util/base64.h"
#include "util/sha256.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using pf::test::eventually;
using ::testing::HasSubstr;

// The manager's job routes, scripted: one input per job id, leases handed out from a list.
class FakeJobManager {
 public:
  FakeJobManager() {
    server_.Post("/api/v1/agent/jobs/lease",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   if (req.get_header_value("Authorization") != "Bearer agent-token") {
                     res.status = 401;
                     return;
                   }
                   const json body = json::parse(req.body);
                   json jobs = json::array();
                   {
                     std::lock_guard lock(mu_);
                     ++lease_calls;
                     const int max = body.at("max_jobs").get<int>();
                     max_jobs_asked.push_back(max);
                     while (!to_lease_.empty() && static_cast<int>(jobs.size()) < max) {
                       jobs.push_back(to_lease_.front());
                       to_lease_.erase(to_lease_.begin());
                     }
                   }
                   if (jobs.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
                   res.set_content(json{{"jobs", jobs}}.dump(), "application/json");
                 });
    server_.Get(R"(/api/v1/agent/jobs/(\d+)/input)", [this](const httplib::Request& req,
                                                            httplib::Response& res) {
      const std::int64_t id = std::stoll(req.matches[1].str());
      std::shared_ptr<const std::string> content;
      std::size_t cut = 0;
      {
        std::lock_guard lock(mu_);
        ranges_seen.push_back(req.get_header_value("Range"));
        attempts_seen.push_back(req.get_param_value("attempt"));
        auto it = inputs_.find(id);
        if (it == inputs_.end()) {
          res.status = 410;
          res.set_content(R"({"error":"job taken back"})", "application/json");
          return;
        }
        content = it->second;
        if (corrupt_next > 0) {
          --corrupt_next;
          auto copy = std::make_shared<std::string>(*content);
          (*copy)[copy->size() / 2] = static_cast<char>((*copy)[copy->size() / 2] ^ 0x5A);
          content = copy;
        }
        if (!cut_after.empty()) {
          cut = cut_after.front();
          cut_after.erase(cut_after.begin());
        }
      }
      res.set_content_provider(
          content->size(), "application/octet-stream",
          [content, cut, sent = std::size_t{0}](std::size_t offset, std::size_t length,
                                                httplib::DataSink& sink) mutable {
            std::size_t n = std::min<std::size_t>(16 * 1024, length);
            if (cut > 0 && sent + n > cut) n = cut - sent;
            if (n == 0) return false;  // the connection dies mid-body
            if (!sink.write(content->data() + offset, n)) return false;
            sent += n;
            return true;
          });
    });
    auto report = [this](const char* what) {
      return [this, what](const httplib::Request& req, httplib::Response& res) {
        std::lock_guard lock(mu_);
        posts.push_back({std::string(what) + " " + req.matches[1].str(), json::parse(req.body)});
        if (fail_reports > 0) {
          --fail_reports;
          res.status = 503;
          res.set_content(R"({"error":"busy"})", "application/json");
          return;
        }
        if (refuse_reports) {
          res.status = 409;
          res.set_content(R"({"error":"attempt not held"})", "application/json");
          return;
        }
        res.set_content(json{{"applied", true}, {"reason", ""}}.dump(), "application/json");
      };
    };
    server_.Post(R"(/api/v1/agent/jobs/(\d+)/started)", report("started"));
    server_.Post(R"(/api/v1/agent/jobs/(\d+)/result)", report("result"));
    serving_.emplace(server_);
  }
  ~FakeJobManager() { serving_.reset(); }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(serving_->port()); }

  // A job with `input`, leased on the next lease call.
  json add_job(std::int64_t id, std::string input, int attempt = 1) {
    json lease = {{"id", id},
                  {"attempt", attempt},
                  {"kind", "porep-c2"},
                  {"input_digest", util::sha256_hex(input)},
                  {"input_bytes", input.size()},
                  {"deadline_at", 2e9},
                  {"lease_s", 60}};
    std::lock_guard lock(mu_);
    inputs_[id] = std::make_shared<const std::string>(std::move(input));
    to_lease_.push_back(lease);
    return lease;
  }
  void take_back(std::int64_t id) {
    std::lock_guard lock(mu_);
    inputs_.erase(id);
  }
  std::vector<std::pair<std::string, json>> posts_of(const std::string& what) {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::string, json>> out;
    for (const auto& p : posts) {
      if (p.first.rfind(what, 0) == 0) out.push_back(p);
    }
    return out;
  }
  std::vector<std::string> ranges() {
    std::lock_guard lock(mu_);
    return ranges_seen;
  }

  std::mutex mu_;
  std::vector<std::size_t> cut_after;  // per input reply: bytes before the connection dies
  int corrupt_next = 0;
  int fail_reports = 0;
  bool refuse_reports = false;
  int lease_calls = 0;
  std::vector<int> max_jobs_asked;
  std::vector<std::string> ranges_seen, attempts_seen;
  std::vector<std::pair<std::string, json>> posts;

 private:
  httplib::Server server_;
  std::optional<test::LoopbackServing> serving_;
  std::map<std::int64_t, std::shared_ptr<const std::string>> inputs_;
  std::vector<json> to_lease_;
};

class AgentWork : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("pf-agent-work-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    manager_client_ = std::make_unique<ManagerClient>(fake_.url());
    manager_client_->set_token("agent-token");
  }
  void TearDown() override { fs::remove_all(dir_); }

  WorkClientOptions options() {
    WorkClientOptions o;
    o.cache_dir = (dir_ / "job-inputs").string();
    o.lease_wait = std::chrono::milliseconds(100);
    o.retry_base_s = 0.01;
    o.retry_max_s = 0.05;
    o.log = [this](const std::string& line) {
      std::lock_guard lock(log_mu_);
      log_ += line + "\n";
    };
    return o;
  }

  LeasedJob lease_one(WorkClient& client) {
    auto leased = client.lease(1);
    EXPECT_TRUE(leased) << (leased ? "" : leased.error().message);
    EXPECT_EQ(leased ? leased->size() : 0u, 1u);
    return leased && !leased->empty() ? leased->front() : LeasedJob{};
  }

  FakeJobManager fake_;
  fs::path dir_;
  std::unique_ptr<ManagerClient> manager_client_;
  std::mutex log_mu_;
  std::string log_;
};

TEST_F(AgentWork, ALeaseReplyIsCheckedFieldByField) {
  json good = {{"jobs",
                {{{"id", 7},
                  {"attempt", 2},
                  {"kind", "snap-update"},
                  {"input_digest", std::string(64, 'a')},
                  {"input_bytes", 10},
                  {"deadline_at", 1.5e9},
                  {"lease_s", 60}}}}};
  auto parsed = parse_leases(good, 1000);
  ASSERT_TRUE(parsed) << parsed.error();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0].id, 7);
  EXPECT_EQ((*parsed)[0].attempt, 2);
  EXPECT_EQ((*parsed)[0].kind, core::JobKind::SnapUpdate);

  // A digest is a file name in the cache: nothing but 64 lowercase hex digits passes.
  json bad = good;
  bad["jobs"][0]["input_digest"] = "../../../../etc/passwd";
  auto refused = parse_leases(bad, 1000);
  ASSERT_FALSE(refused);
  EXPECT_THAT(refused.error(), HasSubstr("jobs[0].input_digest"));
  bad = good;
  bad["jobs"][0]["input_bytes"] = 1001;  // over what the agent takes
  EXPECT_THAT(parse_leases(bad, 1000).error(), HasSubstr("jobs[0].input_bytes"));
  bad = good;
  bad["jobs"][0]["kind"] = "mystery";
  EXPECT_THAT(parse_leases(bad, 1000).error(), HasSubstr("jobs[0].kind"));
  EXPECT_FALSE(parse_leases(json{{"jobs", "x"}}, 1000));
}

TEST_F(AgentWork, ACutDownloadResumesWhereItStoppedAndTheInputIsCachedByDigest) {
  const std::string input = test::ParamServer::random_bytes(600 * 1024, 1);
  fake_.add_job(11, input);
  fake_.cut_after = {200 * 1024, 150 * 1024};  // two replies die mid-body
  WorkClient client(*manager_client_, options());
  const LeasedJob job = lease_one(client);
  ASSERT_EQ(job.id, 11);

  auto fetched = client.fetch_input(job, {});
  ASSERT_TRUE(fetched) << fetched.error().message << "\n" << log_;
  EXPECT_EQ(**fetched, input);
  // Each request asked from where the part file ended; the first from byte 0.
  const auto ranges = fake_.ranges();
  ASSERT_EQ(ranges.size(), 3u) << log_;
  EXPECT_EQ(ranges[0], "bytes=0-" + std::to_string(input.size() - 1));
  EXPECT_EQ(ranges[1],
            "bytes=" + std::to_string(200 * 1024) + "-" + std::to_string(input.size() - 1));
  EXPECT_EQ(ranges[2],
            "bytes=" + std::to_string(350 * 1024) + "-" + std::to_string(input.size() - 1));
  EXPECT_EQ(fake_.attempts_seen[0], "1");
  client.wait_for_cache();  // written behind the proof
  EXPECT_TRUE(fs::exists(client.cache_path(job.input_digest)));
  EXPECT_FALSE(fs::exists(client.cache_path(job.input_digest) + ".part"));

  // Another job with the same input (a client that sent it again) comes from the cache.
  LeasedJob again = job;
  again.id = 12;
  auto cached = client.fetch_input(again, {});
  ASSERT_TRUE(cached);
  EXPECT_EQ(**cached, input);
  EXPECT_EQ(fake_.ranges().size(), 3u);
}

TEST_F(AgentWork, APartFileFromAnEarlierRunIsResumed) {
  const std::string input = test::ParamServer::random_bytes(100 * 1024, 2);
  fake_.add_job(21, input);
  WorkClient client(*manager_client_, options());
  const LeasedJob job = lease_one(client);
  fs::create_directories(dir_ / "job-inputs");
  {
    std::ofstream part(client.cache_path(job.input_digest) + ".part", std::ios::binary);
    part.write(input.data(), 40 * 1024);
  }
  auto fetched = client.fetch_input(job, {});
  ASSERT_TRUE(fetched) << fetched.error().message;
  EXPECT_EQ(**fetched, input);
  const auto ranges = fake_.ranges();
  ASSERT_EQ(ranges.size(), 1u);
  EXPECT_EQ(ranges[0],
            "bytes=" + std::to_string(40 * 1024) + "-" + std::to_string(input.size() - 1));
}

TEST_F(AgentWork, AFetchThatEndsUnfinishedLeavesItsBytesForTheNext) {
  const std::string input = test::ParamServer::random_bytes(300 * 1024, 5);
  fake_.add_job(41, input);
  fake_.cut_after = {120 * 1024};
  WorkClient client(*manager_client_, options());
  const LeasedJob job = lease_one(client);
  // The agent stops after the cut: what arrived stays in the part file.
  auto stopped = client.fetch_input(job, [&] { return !fake_.ranges().empty(); });
  ASSERT_FALSE(stopped);
  EXPECT_EQ(stopped.error().kind, InputError::Kind::Cancelled);
  const std::string part = client.cache_path(job.input_digest) + ".part";
  ASSERT_TRUE(fs::exists(part));
  EXPECT_EQ(fs::file_size(part), 120u * 1024);

  auto fetched = client.fetch_input(job, {});
  ASSERT_TRUE(fetched) << fetched.error().message << "\n" << log_;
  EXPECT_EQ(**fetched, input);
  const auto ranges = fake_.ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[1],
            "bytes=" + std::to_string(120 * 1024) + "-" + std::to_string(input.size() - 1));
  EXPECT_FALSE(fs::exists(part));
  client.wait_for_cache();
  EXPECT_TRUE(fs::exists(client.cache_path(job.input_digest)));
}

TEST_F(AgentWork, AnInputThatDoesNotMatchItsDigestIsRefusedAndFetchedAgain) {
  const std::string input = test::ParamServer::random_bytes(64 * 1024, 3);
  fake_.add_job(31, input);
  fake_.corrupt_next = 1;
  WorkClient client(*manager_client_, options());
  const LeasedJob job = lease_one(client);
  auto fetched = client.fetch_input(job, {});
  ASSERT_TRUE(fetched) << fetched.error().message;
  EXPECT_EQ(**fetched, input);
  EXPECT_EQ(fake_.ranges().size(), 2u);
  EXPECT_THAT(log_, HasSubstr("is not the"));

  // Corrupt every time: a clear failure, and no bad bytes left behind to be trusted later.
  fake_.add_job(32, test::ParamServer::random_bytes(64 * 1024, 4));
  const LeasedJob bad = lease_one(client);
  fake_.corrupt_next = 2;
  auto refused = client.fetch_input(bad, {});
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, InputError::Kind::Failed);
  EXPECT_THAT(refused.error().message, HasSubstr("did not match"));
  EXPECT_FALSE(fs::exists(client.cache_path(bad.input_digest)));
  EXPECT_FALSE(fs::exists(client.cache_path(bad.input_digest) + ".part"));

  // A cached file that rotted on disk is not used: it is fetched again.
  client.wait_for_cache();
  {
    std::fstream f(client.cache_path(job.input_digest),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('\x42');
  }
  auto refetched = client.fetch_input(job, {});
  ASSERT_TRUE(refetched);
  EXPECT_EQ(**refetched, input);
}

TEST_F(AgentWork, AJobTakenBackIsNotOurs) {
  fake_.add_job(41, "some input");
  WorkClient client(*manager_client_, options());
  const LeasedJob job = lease_one(client);
  fake_.take_back(41);
  auto r = client.fetch_input(job, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, InputError::Kind::NotOurs);
}

TEST_F(AgentWork, ResultsAreRetriedUntilTheManagerHasThemAndAFinalRefusalEndsIt) {
  WorkClient client(*manager_client_, options());
  fake_.fail_reports = 3;
  JobReport report;
  report.job_id = 51;
  report.attempt = 2;
  report.ok = true;
  report.proof = std::string("\x00\x01proof\xff", 8);
  report.prove_ms = 1234;
  const Delivery d = client.report_result(report, {});
  EXPECT_EQ(d.kind, Delivery::Kind::Applied);
  const auto posts = fake_.posts_of("result 51");
  ASSERT_EQ(posts.size(), 4u);  // three 503s, then 200
  const json& body = posts.back().second;
  EXPECT_EQ(body["attempt"], 2);
  EXPECT_EQ(body["ok"], true);
  EXPECT_EQ(util::base64_decode(body["proof_b64"].get<std::string>()).value(), report.proof);
  EXPECT_EQ(body["prove_ms"], 1234);

  fake_.refuse_reports = true;  // 409: the attempt is not ours any more
  report.job_id = 52;
  EXPECT_EQ(client.report_result(report, {}).kind, Delivery::Kind::Refused);
  EXPECT_EQ(fake_.posts_of("result 52").size(), 1u);
  EXPECT_EQ(client.report_started(52, 2, {}).kind, Delivery::Kind::Refused);

  // A caller that gives up (the agent stopping) is not held in the retry loop.
  fake_.refuse_reports = false;
  fake_.fail_reports = 1000;
  std::atomic<int> polls{0};
  report.job_id = 53;
  const Delivery given_up = client.report_result(report, [&] { return ++polls > 3; });
  EXPECT_EQ(given_up.kind, Delivery::Kind::Abandoned);
}

TEST_F(AgentWork, TheWorkLoopFillsItsSlotsProvesAndReportsEachJobWithItsOwnProof) {
  WorkClient client(*manager_client_, options());
  WorkLoop loop(client, {0.01, 0.05, {}, {}});
  std::vector<std::string> inputs;
  for (int i = 0; i < 5; ++i) {
    inputs.push_back("input of job " + std::to_string(100 + i));
    fake_.add_job(100 + i, inputs.back());
  }
  EXPECT_EQ(loop.phase_for("proving"), "proving");  // no work yet: as the agent says
  loop.set_slots(2);
  loop.on_heartbeat(true, {});
  EXPECT_EQ(loop.phase_for("warming_up"), "warming_up");
  auto prove = [](ProofJob job) {
    ProofOutcome out;
    out.kind = ProofOutcome::Kind::Completed;
    out.seconds = 2;
    out.proof = sim_proof_of(*job.input);
    return out;
  };
  int proved = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (proved < 5 && std::chrono::steady_clock::now() < deadline) {
    // Never more held (leased, fetching, proving) than the slots, nor more results waiting
    // for upload than the slots (WorkLoop::lease_room_locked).
    EXPECT_LE(loop.held_json().size(), 2u + 2u);
    auto out = loop.prove_next(std::chrono::milliseconds(200), prove, [] { return false; });
    if (out) ++proved;
  }
  ASSERT_EQ(proved, 5);
  eventually([&] { return fake_.posts_of("result").size() >= 5; });
  const auto results = fake_.posts_of("result");
  ASSERT_EQ(results.size(), 5u);
  for (const auto& [what, body] : results) {
    const int id = std::stoi(what.substr(what.find(' ') + 1));
    EXPECT_EQ(util::base64_decode(body["proof_b64"].get<std::string>()).value(),
              sim_proof_of(inputs[static_cast<std::size_t>(id - 100)]))
        << what;
  }
  // Every job was reported started before its result.
  EXPECT_EQ(fake_.posts_of("started").size(), 5u);
  for (int asked : fake_.max_jobs_asked) EXPECT_LE(asked, 2);
  eventually([&] { return loop.held_count() == 0; });
  EXPECT_EQ(loop.held_count(), 0);
  EXPECT_EQ(loop.phase_for("proving"), "idle");
  loop.stop(std::chrono::milliseconds(0));
}

TEST_F(AgentWork, WhileResultsCannotBeUploadedNoMoreJobsAreLeasedThanTwiceTheSlots) {
  WorkClient client(*manager_client_, options());
  WorkLoop loop(client, {0.01, 0.05, {}, {}});
  for (int i = 0; i < 8; ++i) fake_.add_job(300 + i, "input " + std::to_string(i));
  fake_.fail_reports = 1'000'000;  // every report answers 503: nothing is ever delivered
  loop.set_slots(2);
  loop.on_heartbeat(true, {});
  auto prove = [](ProofJob job) {
    ProofOutcome out;
    out.kind = ProofOutcome::Kind::Completed;
    out.proof = sim_proof_of(*job.input);
    return out;
  };
  int proved = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (proved < 4 && std::chrono::steady_clock::now() < deadline) {
    if (loop.prove_next(std::chrono::milliseconds(200), prove, [] { return false; })) ++proved;
  }
  ASSERT_EQ(proved, 4);  // two slots' worth proved, their results stuck
  // The feeder would have had slots free for the rest: it waits for the uploads instead.
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(loop.prove_next(std::chrono::milliseconds(50), prove, [] { return false; }));
  }
  EXPECT_EQ(loop.held_count(), 4);
  EXPECT_EQ(loop.counters().leased, 4);
  {
    std::lock_guard lock(fake_.mu_);
    fake_.fail_reports = 0;  // the manager takes results again: leasing resumes
  }
  while (proved < 8 && std::chrono::steady_clock::now() < deadline) {
    if (loop.prove_next(std::chrono::milliseconds(200), prove, [] { return false; })) ++proved;
  }
  EXPECT_EQ(proved, 8);
  loop.stop(std::chrono::milliseconds(2000));
}

TEST_F(AgentWork, DroppedJobsAreForgottenAndACutShortProofRunsAgain) {
  WorkClient client(*manager_client_, options());
  WorkLoop loop(client, {0.01, 0.05, {}, {}});
  fake_.add_job(201, "first");
  fake_.add_job(202, "second");
  loop.set_slots(2);
  loop.on_heartbeat(true, {});
  eventually([&] { return loop.held_count() >= 2; });
  ASSERT_EQ(loop.held_count(), 2);
  json held = loop.held_json();
  ASSERT_EQ(held.size(), 2u);
  EXPECT_EQ(held[0]["id"], 201);
  EXPECT_EQ(held[0]["attempt"], 1);

  // The manager drops 201 (cancelled, or re-leased elsewhere): never proved, never reported.
  loop.on_heartbeat(true, {201});
  EXPECT_EQ(loop.held_json().size(), 1u);

  // 202's proof is cut short by a prover restart: it stays held and runs again.
  int calls = 0;
  auto stopped_then_done = [&](ProofJob job) {
    ProofOutcome out;
    out.kind = ++calls == 1 ? ProofOutcome::Kind::Stopped : ProofOutcome::Kind::Completed;
    out.proof = sim_proof_of(*job.input);
    return out;
  };
  auto first = loop.prove_next(std::chrono::seconds(5), stopped_then_done, [] { return true; });
  ASSERT_TRUE(first);
  EXPECT_EQ(first->kind, ProofOutcome::Kind::Stopped);
  EXPECT_EQ(loop.held_json().size(), 1u);
  auto second = loop.prove_next(std::chrono::seconds(5), stopped_then_done, [] { return false; });
  ASSERT_TRUE(second);
  EXPECT_EQ(second->kind, ProofOutcome::Kind::Completed);
  eventually([&] { return !fake_.posts_of("result").empty(); });
  const auto results = fake_.posts_of("result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].first, "result 202");
  EXPECT_EQ(loop.counters().requeued, 1);

  // An OOM is reported as such (not the job's fault), unless the session was already ending.
  fake_.add_job(203, "third");
  auto oom = [](ProofJob) {
    ProofOutcome out;
    out.kind = ProofOutcome::Kind::OutOfMemory;
    out.message = "killed";
    return out;
  };
  std::optional<ProofOutcome> third;
  for (int i = 0; i < 50 && !third; ++i) {
    third = loop.prove_next(std::chrono::milliseconds(200), oom, [] { return false; });
  }
  ASSERT_TRUE(third);
  eventually([&] { return !fake_.posts_of("result 203").empty(); });
  const auto oom_report = fake_.posts_of("result 203");
  ASSERT_EQ(oom_report.size(), 1u);
  EXPECT_EQ(oom_report[0].second["ok"], false);
  EXPECT_EQ(oom_report[0].second["oom"], true);
  loop.stop(std::chrono::milliseconds(0));
}

// A job the manager drops while its proof runs (a client's CancelProof) is cancelled in the
// prover; the cancelled proof is neither reported nor counted against the prover, and the slot
// takes the next job.
TEST_F(AgentWork, ADroppedJobsRunningProofIsCancelledInTheProverAndItsSlotTakesNewWork) {
  WorkClient client(*manager_client_, options());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int64_t> cancelled;
  bool proving = false;
  WorkLoopOptions lo{0.01, 0.05, {}, {}};
  lo.cancel_proof = [&](std::int64_t id) {
    std::lock_guard lock(mu);
    cancelled.push_back(id);
    cv.notify_all();
  };
  WorkLoop loop(client, lo);
  fake_.add_job(301, "doomed");
  loop.set_slots(1);
  loop.on_heartbeat(true, {});
  // A prover whose proof runs until it is cancelled.
  auto until_cancelled = [&](ProofJob job) {
    std::unique_lock lock(mu);
    proving = true;
    cv.notify_all();
    ProofOutcome out;
    out.kind = cv.wait_for(lock, std::chrono::seconds(30),
                           [&] {
                             return std::find(cancelled.begin(), cancelled.end(), job.job_id) !=
                                    cancelled.end();
                           })
                   ? ProofOutcome::Kind::Cancelled
                   : ProofOutcome::Kind::Completed;
    out.proof = sim_proof_of(*job.input);
    return out;
  };
  std::optional<ProofOutcome> outcome;
  bool returned = false;
  std::thread worker([&] {
    std::optional<ProofOutcome> out;
    for (int i = 0; i < 50 && !out; ++i) {
      out = loop.prove_next(std::chrono::milliseconds(200), until_cancelled, [] { return false; });
      std::lock_guard lock(mu);
      if (proving) break;  // the doomed proof ran and ended: out says how
    }
    std::lock_guard lock(mu);
    outcome = out;
    returned = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return proving; }));
  }
  loop.on_heartbeat(true, {301});  // the manager's drop_jobs
  {
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return returned; }));
  }
  worker.join();
  EXPECT_EQ(cancelled, std::vector<std::int64_t>{301});
  EXPECT_FALSE(outcome) << "a cancelled proof is no outcome of the prover's";
  EXPECT_EQ(loop.held_count(), 0);

  // The slot is free: the next job is leased and proved; the doomed one was never reported.
  fake_.add_job(302, "next");
  auto done = [](ProofJob job) {
    ProofOutcome out;
    out.kind = ProofOutcome::Kind::Completed;
    out.proof = sim_proof_of(*job.input);
    return out;
  };
  std::optional<ProofOutcome> next;
  for (int i = 0; i < 50 && !next; ++i) {
    next = loop.prove_next(std::chrono::milliseconds(200), done, [] { return false; });
  }
  ASSERT_TRUE(next);
  EXPECT_EQ(next->kind, ProofOutcome::Kind::Completed);
  eventually([&] { return !fake_.posts_of("result 302").empty(); });
  EXPECT_EQ(fake_.posts_of("result 302").size(), 1u);
  EXPECT_TRUE(fake_.posts_of("result 301").empty());
  loop.stop(std::chrono::milliseconds(0));
}

TEST(SimProof, IsDerivedFromTheInput) {
  EXPECT_EQ(sim_proof_of("abc"), util::sha256_hex(std::string("pf-sim-proof:abc")));
  EXPECT_NE(sim_proof_of("abc"), sim_proof_of("abd"));
  EXPECT_EQ(util::sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Base64, RoundTripsAndRefusesWhatIsNotBase64) {
  for (const std::string& s :
       {std::string(), std::string("f"), std::string("fo"), std::string("foo"), std::string("foob"),
        std::string("\0\xff\x10", 3)}) {
    EXPECT_EQ(util::base64_decode(util::base64_encode(s)).value(), s);
  }
  EXPECT_EQ(util::base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(util::base64_encode("fo"), "Zm8=");
  EXPECT_FALSE(util::base64_decode("Zm9"));       // length
  EXPECT_FALSE(util::base64_decode("Zm=v"));      // padding in the middle
  EXPECT_FALSE(util::base64_decode("Zm9v!A=="));  // alphabet
  EXPECT_FALSE(util::base64_decode("Zg==Zg=="));  // padding before the end
}

}  // namespace
}  // namespace pf::agent
