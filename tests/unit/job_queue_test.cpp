// The gateway's job queue over a real SQLite store and a real input directory: durability
// across restarts, idempotent request_ids, leases and their fencing, failures and strikes.
#include "jobs/job_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "jobs/input_store.h"
#include "store/pg_connection.h"
#include "store/sql_connection.h"
#include "store/sql_migrations.h"
#include "store/sql_store.h"
#include "store/sqlite_connection.h"
#include "support/eventually.h"
#include "support/groth16_stand_in.h"
#include "support/store_backends.h"
#include "support/temp_dir.h"
#include "util/bls12_381.h"
#include "util/sha256.h"

namespace pf::jobs {
namespace {

using pf::test::eventually;
using pf::testing::TempDir;

using ::testing::HasSubstr;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// What the sim prover does (issue 12 contract): a proof derived from its input, so every
// client can be checked to get the proof of its own input.
std::string proof_of(const std::string& input) {
  return util::sha256_hex("pf-sim-proof:" + input);
}

// The manager's side of the hooks: a settable fleet, recorded strikes and events.
struct FakeManager {
  std::mutex mu;
  std::vector<core::WorkerView> workers;
  std::vector<std::pair<std::int64_t, core::Strike>> strikes;
  std::vector<std::pair<std::int64_t, std::string>> events;

  void set_workers(std::vector<std::int64_t> ids, int slots = 1) {
    std::lock_guard lock(mu);
    workers.clear();
    for (auto id : ids) workers.push_back(core::WorkerView{id, 100, slots, 0, -1});
  }
  JobQueueHooks hooks() {
    JobQueueHooks h;
    h.workers = [this] {
      std::lock_guard lock(mu);
      return workers;
    };
    h.strike = [this](std::int64_t id, const core::Strike& s) {
      std::lock_guard lock(mu);
      strikes.emplace_back(id, s);
    };
    h.event = [this](std::int64_t id, const std::string& m) {
      std::lock_guard lock(mu);
      events.emplace_back(id, m);
    };
    return h;
  }
  bool has_event(std::int64_t id, const std::string& part) {
    std::lock_guard lock(mu);
    for (const auto& [i, m] : events)
      if (i == id && m.find(part) != std::string::npos) return true;
    return false;
  }
};

class JobQueueTest : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  JobQueueTest() {
    config_.data_dir = dir_.file("data");
    config_.lease_s = 60;
    open();
  }
  void open() {
    queue_.reset();
    store_.reset();
    store_ = db_.open();
    queue_ = std::make_unique<JobQueue>(*store_, config_, fleet_.hooks(),
                                        [this] { return now_.load(); });
  }
  Submitted submit(const std::string& request_id, const std::string& input,
                   const std::string& client = "") {
    SubmitRequest r;
    r.request_id = request_id;
    r.input = input;
    r.client = client;
    auto s = queue_->submit(r);
    if (!s) throw std::runtime_error("submit failed: " + s.error().message);
    return *s;
  }
  std::vector<Lease> lease(std::int64_t instance, int max_jobs = 8) {
    auto l = queue_->lease(instance, max_jobs, 0ms);
    if (!l) throw std::runtime_error("lease failed: " + l.error().message);
    return *l;
  }
  // The agent's round: download the input, prove it, upload the proof.
  ReportAck prove(std::int64_t instance, const Lease& l) {
    auto chunk = queue_->read_input(instance, l.job.id, l.job.attempts, 0, 1 << 20);
    if (!chunk) throw std::runtime_error("read_input failed: " + chunk.error().message);
    EXPECT_EQ(chunk->total, l.job.input_bytes);
    EXPECT_EQ(util::sha256_hex(chunk->bytes), l.job.input_digest);
    ProofReport r;
    r.job_id = l.job.id;
    r.attempt = l.job.attempts;
    r.ok = true;
    r.proof = proof_of(chunk->bytes);
    r.prove_ms = 1000;
    auto ack = queue_->report(instance, r);
    if (!ack) throw std::runtime_error("report failed: " + ack.error().message);
    return *ack;
  }
  // An upload without the download (an agent that held the input already).
  ReportAck upload(std::int64_t instance, const Lease& l, const std::string& proof) {
    ProofReport r;
    r.job_id = l.job.id;
    r.attempt = l.job.attempts;
    r.ok = true;
    r.proof = proof;
    auto ack = queue_->report(instance, r);
    if (!ack) throw std::runtime_error("report failed: " + ack.error().message);
    return *ack;
  }
  ReportAck fail(std::int64_t instance, const Lease& l, bool oom = false) {
    ProofReport r;
    r.job_id = l.job.id;
    r.attempt = l.job.attempts;
    r.ok = false;
    r.oom = oom;
    r.message = oom ? "out of memory" : "prover exited 1";
    auto ack = queue_->report(instance, r);
    if (!ack) throw std::runtime_error("report failed: " + ack.error().message);
    return *ack;
  }
  Finished await_now(std::int64_t job_id) {
    auto f = queue_->await(job_id, 5s);
    if (!f) throw std::runtime_error("await failed: " + f.error().message);
    if (!*f) throw std::runtime_error("await timed out");
    return **f;
  }
  // The digests of the whole inputs the database holds.
  std::vector<std::string> stored_inputs() {
    std::vector<std::string> out;
    for (const auto& input : store_->job_inputs()) out.push_back(input.digest);
    return out;
  }

  TempDir dir_;
  pf::testing::TestDatabase db_{GetParam()};
  JobQueueConfig config_;
  FakeManager fleet_;
  std::atomic<double> now_{1'000'000};
  std::unique_ptr<store::SqlStore> store_;
  std::unique_ptr<JobQueue> queue_;
};

INSTANTIATE_TEST_SUITE_P(Db, JobQueueTest, pf::testing::kStoreBackends, pf::testing::backend_name);

TEST_P(JobQueueTest, EveryClientGetsTheProofOfItsOwnInput) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input of a");
  const auto b = submit("req-b", "input of b");
  EXPECT_FALSE(a.joined);
  EXPECT_EQ(a.job.state, core::JobState::Queued);
  auto on7 = lease(7);
  auto on8 = lease(8);
  ASSERT_EQ(on7.size(), 1u);
  ASSERT_EQ(on8.size(), 1u);
  EXPECT_EQ(on7[0].job.state, core::JobState::Assigned);
  EXPECT_EQ(on7[0].job.attempts, 1);
  EXPECT_EQ(on7[0].lease_s, 60);
  ASSERT_TRUE(queue_->started(7, on7[0].job.id, 1)->applied);
  EXPECT_EQ(queue_->job(on7[0].job.id)->state, core::JobState::Proving);
  EXPECT_TRUE(prove(8, on8[0]).applied);
  EXPECT_TRUE(prove(7, on7[0]).applied);

  const auto done_a = await_now(a.job.id);
  const auto done_b = await_now(b.job.id);
  EXPECT_EQ(done_a.job.state, core::JobState::Done);
  EXPECT_EQ(done_a.proof, proof_of("input of a"));
  EXPECT_EQ(done_b.proof, proof_of("input of b"));
  EXPECT_EQ(done_a.job.proof_digest, util::sha256_hex(proof_of("input of a")));
  EXPECT_GT(queue_->job(a.job.id)->delivered_at, 0);
  EXPECT_EQ(queue_->status().completed, 2);
  EXPECT_TRUE(fleet_.has_event(7, "done"));
}

// Inputs live in the database, content-addressed, in chunks (issue 29): what an agent reads
// back, in any ranges across chunk boundaries, is exactly what the client sent, and a replica
// that never saw the submission reads it from the database alone.
// A lease asked for by a request whose caller hung up (an agent that died while its long-poll
// waited) hands out nothing: the job stays queued for the next agent instead of sitting out a
// lease nobody will renew. A waiting one ends as soon as it sees the hang-up.
TEST_P(JobQueueTest, ALeaseWhoseCallerHungUpHandsOutNothing) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input a");
  const auto gone = queue_->lease(7, 1, 0ms, [] { return true; });
  ASSERT_TRUE(gone);
  EXPECT_TRUE(gone->empty());
  EXPECT_EQ(queue_->job(a.job.id)->state, core::JobState::Queued);
  EXPECT_EQ(queue_->job(a.job.id)->attempts, 0);
  // Its agent's next request (one still there) gets it, as the first attempt.
  const auto again = lease(7, 1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].job.attempts, 1);

  // 8 (one slot; 7's is taken) waits for work and hangs up; then b arrives: not handed to it.
  std::atomic<bool> hung_up{false};
  auto waiting = std::async(
      std::launch::async, [&] { return queue_->lease(8, 1, 10s, [&] { return hung_up.load(); }); });
  std::this_thread::sleep_for(200ms);
  hung_up = true;
  const auto b = submit("req-b", "input b");
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);  // not its 10 s wait
  const auto got = waiting.get();
  ASSERT_TRUE(got);
  EXPECT_TRUE(got->empty());
  EXPECT_EQ(queue_->job(b.job.id)->state, core::JobState::Queued);
  EXPECT_EQ(queue_->job(b.job.id)->attempts, 0);
  EXPECT_EQ(lease(8, 1).size(), 1u);  // its agent's next request gets it
}

TEST_P(JobQueueTest, InputsAreStoredInChunksAndReadByRange) {
  fleet_.set_workers({7});
  std::string input(3 * jobs::kInputChunkBytes + 12345, '\0');
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<char>((i * 131) % 251);
  const auto a = submit("req-a", input);
  EXPECT_EQ(a.job.input_digest, util::sha256_hex(input));
  const auto header = store_->job_input(a.job.input_digest);
  ASSERT_TRUE(header);
  EXPECT_EQ(header->bytes, static_cast<std::int64_t>(input.size()));
  EXPECT_EQ(header->chunks, 4);
  EXPECT_EQ(store_->job_input_totals().bytes, static_cast<std::int64_t>(input.size()));

  const auto held = lease(7);
  ASSERT_EQ(held.size(), 1u);
  open();  // another process: nothing but the database
  std::string got;
  for (const std::int64_t step : {std::int64_t{1}, std::int64_t{777777}, jobs::kInputChunkBytes}) {
    got.clear();
    while (static_cast<std::int64_t>(got.size()) < a.job.input_bytes) {
      auto chunk = queue_->read_input(7, a.job.id, 1, static_cast<std::int64_t>(got.size()),
                                      got.empty() ? step : step + 777777);
      ASSERT_TRUE(chunk) << chunk.error().message;
      ASSERT_FALSE(chunk->bytes.empty());
      EXPECT_EQ(chunk->total, a.job.input_bytes);
      got += chunk->bytes;
    }
    EXPECT_EQ(got, input) << "reading " << step << " bytes first";
  }
  const auto past = queue_->read_input(7, a.job.id, 1, a.job.input_bytes, 10);
  ASSERT_TRUE(past);
  EXPECT_TRUE(past->bytes.empty());
  // The same bytes again are claimed, not written again.
  EXPECT_EQ(submit("req-b", input).job.input_digest, a.job.input_digest);
  EXPECT_EQ(store_->job_inputs().size(), 1u);
}

TEST_P(JobQueueTest, RestartLosesNoJobAndAReturningRequestGetsItsResult) {
  fleet_.set_workers({7}, 2);
  const auto a = submit("req-a", "input a");
  const auto b = submit("req-b", "input b");
  const auto c = submit("req-c", "input c");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 2u);
  ASSERT_TRUE(prove(7, leased[0]).applied);  // done, never delivered

  now_ = now_ + 3600;  // the manager was down for an hour
  open();
  EXPECT_EQ(queue_->list({}, 0).size(), 3u);
  // The lease still held survives with a fresh lease_s: its agent renews it.
  const auto held = *queue_->job(leased[1].job.id);
  EXPECT_EQ(held.state, core::JobState::Assigned);
  EXPECT_GE(held.lease_expires_at, now_.load() + 60);
  queue_->tick();
  EXPECT_EQ(queue_->job(leased[1].job.id)->state, core::JobState::Assigned);
  EXPECT_TRUE(queue_->renew(7, {{leased[1].job.id, 1}}).empty());
  EXPECT_TRUE(prove(7, leased[1]).applied);

  // The client whose proof was done before the restart comes back with its request_id.
  const std::string first_input = leased[0].job.id == a.job.id ? "input a" : "input b";
  const auto again = submit(leased[0].job.request_id, first_input);
  EXPECT_TRUE(again.joined);
  EXPECT_EQ(again.job.id, leased[0].job.id);
  EXPECT_EQ(await_now(again.job.id).proof, proof_of(first_input));

  // The job nobody took yet is still queued and still provable.
  auto rest = lease(7);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].job.id, c.job.id);
  EXPECT_TRUE(prove(7, rest[0]).applied);
  EXPECT_EQ(await_now(c.job.id).proof, proof_of("input c"));
  (void)b;
}

TEST_P(JobQueueTest, DuplicateRequestIdsJoinTheOpenJob) {
  fleet_.set_workers({7});
  const auto first = submit("req-a", "input a");
  const auto second = submit("req-a", "input a");
  EXPECT_TRUE(second.joined);
  EXPECT_FALSE(second.redo);
  EXPECT_EQ(second.job.id, first.job.id);
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  const auto third = submit("req-a", "input a");  // while it is being proved
  EXPECT_TRUE(third.joined);
  EXPECT_EQ(third.job.state, core::JobState::Assigned);
  EXPECT_EQ(queue_->list({}, 0).size(), 1u);
  EXPECT_EQ(stored_inputs().size(), 1u);
}

// A request_id names one request (issue 25): the same id with another input while the job is
// open is refused (AlreadyExists, naming the id) and changes nothing: not the job, not its
// input, not the queue.
TEST_P(JobQueueTest, AKnownRequestIdWithAnotherInputIsRefusedAndChangesNothing) {
  fleet_.set_workers({7});
  const auto first = submit("porep-1000-7", "input a");
  auto other = queue_->submit({"porep-1000-7", core::JobKind::PorepC2, 0, "input b", {}, ""});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, JobError::Code::AlreadyExists);
  EXPECT_THAT(other.error().message, HasSubstr("porep-1000-7"));
  EXPECT_THAT(other.error().message, HasSubstr("another input"));
  EXPECT_EQ(queue_->list({}, 0).size(), 1u);
  EXPECT_EQ(queue_->job(first.job.id)->input_digest, first.job.input_digest);
  // The job still proves its own input and the right retry still joins it.
  const auto again = submit("porep-1000-7", "input a");
  EXPECT_TRUE(again.joined);
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_TRUE(prove(7, leased[0]).applied);
  // Done, its proof not yet delivered: still refused.
  other = queue_->submit({"porep-1000-7", core::JobKind::PorepC2, 0, "input b", {}, ""});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, JobError::Code::AlreadyExists);
  EXPECT_EQ(await_now(first.job.id).proof, proof_of("input a"));
  // Delivered: another input is a new request under the old id, proved without blaming anyone.
  const auto renewed = submit("porep-1000-7", "input b");
  EXPECT_FALSE(renewed.joined);
  EXPECT_TRUE(renewed.redo);
  EXPECT_EQ(renewed.job.id, first.job.id);
  EXPECT_TRUE(fleet_.strikes.empty());
  leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_TRUE(prove(7, leased[0]).applied);
  EXPECT_EQ(await_now(first.job.id).proof, proof_of("input b"));
}

// --- proofs from untrusted hosts (jobs/proof_check.h, util/bls12_381.h; issue 25) -----------

TEST(Bls12381, TheGeneratorsAreOnTheirCurvesAndDamagedPointsAreNot) {
  const std::string g1 = test::from_hex(test::kG1GeneratorHex);
  const std::string g2 = test::from_hex(test::kG2GeneratorHex);
  EXPECT_EQ(util::g1_compressed_problem(g1), std::nullopt);
  EXPECT_EQ(util::g2_compressed_problem(g2), std::nullopt);
  std::string flags = g1;
  flags[0] = static_cast<char>(flags[0] & 0x7f);
  EXPECT_THAT(*util::g1_compressed_problem(flags), HasSubstr("not a compressed point"));
  std::string infinity(48, '\0');
  infinity[0] = static_cast<char>(0xc0);
  EXPECT_THAT(*util::g1_compressed_problem(infinity), HasSubstr("infinity"));
  std::string big(48, '\xff');
  big[0] = static_cast<char>(0x9f);
  EXPECT_THAT(*util::g1_compressed_problem(big), HasSubstr("modulus"));
  EXPECT_THAT(*util::g1_compressed_problem(g1.substr(1)), HasSubstr("47 bytes"));
  // Changing x moves it off the curve about half the time: over many single-byte changes both
  // outcomes occur, and the generators' own x is accepted each time it comes back.
  int off_g1 = 0, off_g2 = 0;
  for (int i = 1; i < 48; ++i) {
    std::string a = g1, b = g2;
    a[static_cast<std::size_t>(i)] = static_cast<char>(a[static_cast<std::size_t>(i)] ^ 1);
    b[static_cast<std::size_t>(i + 48)] =
        static_cast<char>(b[static_cast<std::size_t>(i + 48)] ^ 1);
    off_g1 += util::g1_compressed_problem(a).has_value();
    off_g2 += util::g2_compressed_problem(b).has_value();
  }
  EXPECT_GT(off_g1, 10);
  EXPECT_LT(off_g1, 37);
  EXPECT_GT(off_g2, 10);
  EXPECT_LT(off_g2, 37);
}

TEST(ProofCheck, Groth16ShapeSimEqualityAndNone) {
  const auto no_input = [] { return std::optional<std::string>(); };
  const std::string porep = test::groth16_stand_in_proof(10);
  EXPECT_EQ(proof_problem(ProofCheck::Groth16, core::JobKind::PorepC2, porep, no_input),
            std::nullopt);
  EXPECT_EQ(proof_problem(ProofCheck::Groth16, core::JobKind::SnapUpdate,
                          test::groth16_stand_in_proof(16), no_input),
            std::nullopt);
  EXPECT_THAT(*proof_problem(ProofCheck::Groth16, core::JobKind::SnapUpdate, porep, no_input),
              HasSubstr("3072"));
  EXPECT_THAT(*proof_problem(ProofCheck::Groth16, core::JobKind::PorepC2, std::string(1920, '\1'),
                             no_input),
              HasSubstr("partition 0 A"));
  std::string bad_b = porep;
  bad_b[192 * 3 + 48] = static_cast<char>(bad_b[192 * 3 + 48] & 0x7f);
  EXPECT_THAT(*proof_problem(ProofCheck::Groth16, core::JobKind::PorepC2, bad_b, no_input),
              HasSubstr("partition 3 B"));
  const auto input = [] { return std::optional<std::string>("the input"); };
  EXPECT_EQ(proof_problem(ProofCheck::Sim, core::JobKind::PorepC2, proof_of("the input"), input),
            std::nullopt);
  EXPECT_THAT(*proof_problem(ProofCheck::Sim, core::JobKind::PorepC2, proof_of("other"), input),
              HasSubstr("not the sim prover's proof"));
  EXPECT_EQ(proof_problem(ProofCheck::None, core::JobKind::PorepC2, "anything", no_input),
            std::nullopt);
  EXPECT_TRUE(proof_problem(ProofCheck::None, core::JobKind::PorepC2, "", no_input));
  EXPECT_EQ(parse_proof_check("groth16"), ProofCheck::Groth16);
  EXPECT_FALSE(parse_proof_check("Groth16"));
}

// A host returning a bad proof: the job runs again elsewhere, the host is struck at once with
// the evidence, and the client only ever gets the good proof.
TEST_P(JobQueueTest, AProofThatFailsItsCheckStrikesTheHostAndTheJobRunsElsewhere) {
  config_.proof_check = ProofCheck::Groth16;
  open();
  fleet_.set_workers({7});
  const auto s = submit("porep-1000-21", "input");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  std::string bad = test::groth16_stand_in_proof(10);
  bad[192] = static_cast<char>(bad[192] & 0x1f);
  const auto ack = upload(7, leased[0], bad);
  EXPECT_TRUE(ack.applied);
  EXPECT_EQ(ack.reason, "requeued");
  auto job = queue_->job(s.job.id);
  ASSERT_TRUE(job);
  EXPECT_EQ(job->state, core::JobState::Queued);
  EXPECT_THAT(job->error, HasSubstr("invalid proof: partition 1 A"));
  EXPECT_EQ(job->avoid_instances, std::vector<std::int64_t>{7});
  ASSERT_EQ(fleet_.strikes.size(), 1u);
  EXPECT_EQ(fleet_.strikes[0].first, 7);
  EXPECT_EQ(fleet_.strikes[0].second.kind, core::StrikeKind::InvalidProof);
  EXPECT_THAT(fleet_.strikes[0].second.reason, HasSubstr(util::sha256_hex(bad)));
  EXPECT_FALSE(store_->job_proof(s.job.id));  // the bad bytes were never stored
  fleet_.set_workers({7, 8});
  leased = lease(8);
  ASSERT_EQ(leased.size(), 1u);
  const std::string good = test::groth16_stand_in_proof(10);
  EXPECT_TRUE(upload(8, leased[0], good).applied);
  EXPECT_EQ(await_now(s.job.id).proof, good);
}

// Request ids are each client's idempotency key: two clients that happen to use one id get two
// jobs, each the proof of its own input; each client's retry joins its own job.
TEST_P(JobQueueTest, EqualRequestIdsOfTwoClientsAreTwoJobs) {
  fleet_.set_workers({7, 8});
  const auto a = submit("porep-1", "input of a", "10.0.0.7");
  const auto b = submit("porep-1", "input of b", "10.0.0.8");
  EXPECT_FALSE(b.joined);
  EXPECT_NE(a.job.id, b.job.id);
  EXPECT_EQ(a.job.client, "10.0.0.7");
  EXPECT_EQ(b.job.client, "10.0.0.8");
  const auto a_again = submit("porep-1", "input of a", "10.0.0.7");
  EXPECT_TRUE(a_again.joined);
  EXPECT_EQ(a_again.job.id, a.job.id);
  EXPECT_EQ(queue_->client_job("10.0.0.8", "porep-1")->id, b.job.id);
  EXPECT_FALSE(queue_->client_job("10.0.0.9", "porep-1"));

  auto on7 = lease(7);
  auto on8 = lease(8);
  ASSERT_EQ(on7.size() + on8.size(), 2u);
  for (const auto& l : on7) EXPECT_TRUE(prove(7, l).applied);
  for (const auto& l : on8) EXPECT_TRUE(prove(8, l).applied);
  EXPECT_EQ(await_now(a.job.id).proof, proof_of("input of a"));
  EXPECT_EQ(await_now(b.job.id).proof, proof_of("input of b"));
  // The jobs survive a restart with their clients.
  open();
  EXPECT_EQ(queue_->client_job("10.0.0.7", "porep-1")->id, a.job.id);
  EXPECT_EQ(queue_->client_job("10.0.0.8", "porep-1")->id, b.job.id);
}

// A job recorded before clients were (schema < 12: client "") is any client's, as every job
// was then: a client returning after the upgrade joins it instead of proving it again.
TEST_P(JobQueueTest, AJobFromBeforeClientsWereRecordedIsJoined) {
  fleet_.set_workers({7});
  const auto old = submit("porep-9", "input", "");
  const auto back = submit("porep-9", "input", "10.0.0.7");
  EXPECT_TRUE(back.joined);
  EXPECT_EQ(back.job.id, old.job.id);
  EXPECT_EQ(queue_->client_job("10.0.0.7", "porep-9")->id, old.job.id);
  EXPECT_EQ(queue_->list({}, 0).size(), 1u);
}

TEST_P(JobQueueTest, ARequestBackAfterDeliveryIsProvedElsewhereAndStrikesTheMaker) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input a");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  ASSERT_TRUE(prove(7, leased[0]).applied);
  ASSERT_EQ(await_now(a.job.id).proof, proof_of("input a"));

  const auto redo = submit("req-a", "input a");  // Curio rejected the proof
  EXPECT_TRUE(redo.redo);
  EXPECT_FALSE(redo.joined);
  EXPECT_EQ(redo.job.id, a.job.id);
  EXPECT_EQ(redo.job.state, core::JobState::Queued);
  EXPECT_EQ(redo.job.rejections, 1);
  EXPECT_THAT(redo.job.avoid_instances, ::testing::ElementsAre(7));
  {
    std::lock_guard lock(fleet_.mu);
    ASSERT_EQ(fleet_.strikes.size(), 1u);
    EXPECT_EQ(fleet_.strikes[0].first, 7);
    EXPECT_EQ(fleet_.strikes[0].second.kind, core::StrikeKind::RejectedProof);
  }
  EXPECT_TRUE(lease(7).empty());  // 8 can take it: the maker of the rejected proof does not
  auto elsewhere = lease(8);
  ASSERT_EQ(elsewhere.size(), 1u);
  EXPECT_EQ(elsewhere[0].job.attempts, 2);
  ASSERT_TRUE(prove(8, elsewhere[0]).applied);
  const auto again = await_now(a.job.id);
  EXPECT_EQ(again.job.instance_id, 8);
  EXPECT_EQ(again.proof, proof_of("input a"));
}

TEST_P(JobQueueTest, AProofThatNeverReachedItsClientIsNotARejection) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input a");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  ASSERT_TRUE(prove(7, leased[0]).applied);
  ASSERT_EQ(await_now(a.job.id).proof, proof_of("input a"));
  // The gateway saw the client gone when the proof arrived: its return is a retry.
  ASSERT_TRUE(queue_->undeliver(a.job.id));

  const auto retry = submit("req-a", "input a");
  EXPECT_FALSE(retry.redo);
  EXPECT_EQ(retry.job.state, core::JobState::Done);
  EXPECT_EQ(retry.job.rejections, 0);
  {
    std::lock_guard lock(fleet_.mu);
    EXPECT_TRUE(fleet_.strikes.empty());
  }
  EXPECT_EQ(await_now(a.job.id).proof, proof_of("input a"));
}

TEST_P(JobQueueTest, AnUnrenewedLeaseReturnsTheJobAndItsLateResultIsIgnored) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input a");
  auto first = lease(7);
  ASSERT_EQ(first.size(), 1u);
  now_ = now_ + 30;
  EXPECT_TRUE(queue_->renew(7, {{a.job.id, 1}}).empty());
  now_ = now_ + 59;
  queue_->tick();
  EXPECT_EQ(queue_->job(a.job.id)->state, core::JobState::Assigned);  // renewed 59 s ago
  now_ = now_ + 2;
  queue_->tick();
  EXPECT_EQ(queue_->job(a.job.id)->state, core::JobState::Queued);
  EXPECT_TRUE(fleet_.has_event(7, "lease was not renewed"));

  fleet_.set_workers({8});
  auto second = lease(8);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].job.attempts, 2);
  // Instance 7 comes back: told to drop the job; its result changes nothing.
  EXPECT_THAT(queue_->renew(7, {{a.job.id, 1}}), ::testing::ElementsAre(a.job.id));
  const auto late = upload(7, first[0], proof_of("input a"));
  EXPECT_FALSE(late.applied);
  EXPECT_THAT(late.reason, HasSubstr("leased to another instance"));
  EXPECT_FALSE(queue_->read_input(7, a.job.id, 1, 0, 100));
  EXPECT_TRUE(prove(8, second[0]).applied);
  EXPECT_FALSE(upload(8, second[0], proof_of("input a")).applied);  // a duplicate upload
  EXPECT_EQ(await_now(a.job.id).job.instance_id, 8);
}

// Hedged proving (core/job_hedge.h): instance 7's proof of job a has run 230 s against the
// 100 s it proves in (overdue from 220 s). Instance 8, asking with nothing queued, gets a copy
// of the same attempt; its proof finishes the job, 7 is told to drop it at its next heartbeat
// and its late proof changes nothing.
TEST_P(JobQueueTest, AnOverdueProofIsHedgedOnASpareInstanceAndTheFirstProofWins) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input a");
  const auto first = lease(7);
  ASSERT_EQ(first.size(), 1u);
  ASSERT_TRUE(queue_->started(7, a.job.id, 1)->applied);
  now_ = now_ + 200;
  ASSERT_TRUE(queue_->renew(7, {{a.job.id, 1}}).empty());
  EXPECT_TRUE(lease(8).empty());  // not overdue yet
  now_ = now_ + 30;
  ASSERT_TRUE(queue_->renew(7, {{a.job.id, 1}}).empty());
  const auto copy = lease(8);
  ASSERT_EQ(copy.size(), 1u);
  EXPECT_EQ(copy[0].job.id, a.job.id);
  EXPECT_EQ(copy[0].job.attempts, 1);  // the same attempt, told apart by instance
  auto held = queue_->job(a.job.id);
  EXPECT_EQ(held->instance_id, 7);
  EXPECT_EQ(held->hedge_instance_id, 8);
  EXPECT_EQ(held->state, core::JobState::Proving);
  EXPECT_TRUE(fleet_.has_event(8, "hedged here"));
  EXPECT_TRUE(fleet_.has_event(7, "hedged on instance 8"));
  EXPECT_TRUE(lease(8).empty());  // one hedge per job
  EXPECT_EQ(queue_->status().hedges_started, 1);
  EXPECT_EQ(queue_->status().hedges_won, 0);
  // Both copies are renewed by their own heartbeats.
  now_ = now_ + 50;
  EXPECT_TRUE(queue_->renew(8, {{a.job.id, 1}}).empty());
  EXPECT_TRUE(queue_->renew(7, {{a.job.id, 1}}).empty());
  EXPECT_TRUE(queue_->started(8, a.job.id, 1)->applied);
  EXPECT_EQ(queue_->job(a.job.id)->started_at, now_ - 280);  // the holder's start stands
  EXPECT_TRUE(prove(8, copy[0]).applied);
  const auto done = await_now(a.job.id);
  EXPECT_EQ(done.job.instance_id, 8);
  EXPECT_FALSE(done.job.hedge_instance_id);
  EXPECT_EQ(done.proof, proof_of("input a"));
  EXPECT_EQ(queue_->status().hedges_won, 1);
  EXPECT_TRUE(fleet_.has_event(7, "proved first by instance 8 (its hedge): this copy is dropped"));
  EXPECT_THAT(queue_->renew(7, {{a.job.id, 1}}), ::testing::ElementsAre(a.job.id));
  EXPECT_FALSE(upload(7, first[0], proof_of("input a")).applied);
  bool hedged_step = false;
  for (const auto& step : queue_->timeline(a.job.id, 0)) {
    if (step.kind == core::JobEventKind::Hedged) {
      hedged_step = true;
      EXPECT_EQ(step.instance_id, 8);
      EXPECT_THAT(step.detail, HasSubstr("has run 230 s against 100 s expected"));
    }
  }
  EXPECT_TRUE(hedged_step);
}

// A copy that fails or whose instance closes leaves the other copy holding the job: it neither
// fails nor returns to the queue while a copy proves. A hedge's own lease expiring ends only
// the hedge; a holder's, with a hedge running, leaves the job to the hedge.
TEST_P(JobQueueTest, AHedgedJobSurvivesEitherCopyFailingClosingOrGoingSilent) {
  fleet_.set_workers({7, 8, 9});
  const auto a = submit("req-a", "input a");
  ASSERT_EQ(lease(7).size(), 1u);
  // 7 goes silent (not heard for 30 s; its lease runs 60 s): a hedge on 8.
  now_ = now_ + 31;
  ASSERT_EQ(lease(8).size(), 1u);
  EXPECT_EQ(queue_->job(a.job.id)->hedge_instance_id, 8);
  EXPECT_THAT(fleet_.events.back().second, HasSubstr("not heard for 31 s"));
  // The hedge fails: 7 holds it alone; 8 is avoided from now on.
  auto ack = queue_->report(8, ProofReport{a.job.id, 1, false, "", "prover exited 1"});
  ASSERT_TRUE(ack);
  EXPECT_EQ(ack->reason, "the other copy runs on");
  auto job = queue_->job(a.job.id);
  EXPECT_EQ(job->instance_id, 7);
  EXPECT_FALSE(job->hedge_instance_id);
  EXPECT_TRUE(core::is_leased(job->state));
  EXPECT_EQ(job->failures, 1);
  // Still silent: 9 takes a copy (8 failed it); then 7 is closed: 9 holds the job alone.
  const auto on_nine = lease(9);
  ASSERT_EQ(on_nine.size(), 1u);
  queue_->return_jobs_of(7, "destroyed by the operator");
  job = queue_->job(a.job.id);
  EXPECT_EQ(job->instance_id, 9);
  EXPECT_FALSE(job->hedge_instance_id);
  EXPECT_EQ(job->state, core::JobState::Assigned);
  // 9 is renewed and proves; nothing went back to the queue.
  EXPECT_TRUE(queue_->renew(9, {{a.job.id, 1}}).empty());
  EXPECT_TRUE(prove(9, on_nine[0]).applied);
  EXPECT_EQ(await_now(a.job.id).job.instance_id, 9);
  // Two copies started (8, 9); none won a race: 9 proved alone once 7 was closed.
  EXPECT_EQ(queue_->status().hedges_started, 2);
  EXPECT_EQ(queue_->status().hedges_won, 0);

  // Lease expiries: b on 7, hedged on 8 when 7 goes quiet; 8 never renews: its copy ends at 60 s
  // and 7 (renewed) keeps the job. Then 7 stops renewing and 9 hedges it: once 7's lease ends
  // 9 holds the job.
  const auto b = submit("req-b", "input b");
  ASSERT_EQ(lease(7).size(), 1u);
  now_ = now_ + 31;
  ASSERT_EQ(lease(8).size(), 1u);  // 7 quiet: a copy on 8, which never renews it
  EXPECT_TRUE(queue_->renew(7, {{b.job.id, 1}}).empty());
  now_ = now_ + 30;
  EXPECT_TRUE(queue_->renew(7, {{b.job.id, 1}}).empty());
  now_ = now_ + 31;  // 8's copy: 61 s unrenewed
  queue_->tick();
  job = queue_->job(b.job.id);
  EXPECT_EQ(job->instance_id, 7);
  EXPECT_FALSE(job->hedge_instance_id);
  EXPECT_TRUE(fleet_.has_event(8, "this hedge's lease was not renewed"));
  fleet_.set_workers({7, 9});  // 7 quiet again (31 s): a copy on 9
  ASSERT_EQ(lease(9).size(), 1u);
  EXPECT_TRUE(queue_->renew(9, {{b.job.id, 1}}).empty());
  now_ = now_ + 30;  // 7's lease: 61 s since its last renewal
  queue_->tick();
  job = queue_->job(b.job.id);
  EXPECT_EQ(job->instance_id, 9);
  EXPECT_FALSE(job->hedge_instance_id);
  EXPECT_TRUE(core::is_leased(job->state));
  EXPECT_TRUE(fleet_.has_event(7, "left to its hedge"));
}

// Queued jobs come first: a spare slot is one the plan gives no queued job. A restart does not
// make every holder look silent (the manager's downtime is not its agents' silence), and a
// hedge survives the restart. `[jobs] hedge = false` hedges nothing.
TEST_P(JobQueueTest, HedgesTakeOnlySpareSlotsSurviveARestartAndCanBeTurnedOff) {
  fleet_.set_workers({7, 8});
  const auto a = submit("req-a", "input a");
  ASSERT_EQ(lease(7).size(), 1u);
  const auto b = submit("req-b", "input b");
  now_ = now_ + 300;  // a is overdue and 7 silent, but b is queued: 8 gets b, no hedge
  auto got = lease(8);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].job.id, b.job.id);
  EXPECT_FALSE(queue_->job(a.job.id)->hedge_instance_id);
  EXPECT_TRUE(prove(8, got[0]).applied);
  // Restart: 7 renewed just before; the queue reopens 200 s later. Overdue (its proof began
  // 500 s ago) but not silent: hedged for being overdue, and only that.
  EXPECT_TRUE(queue_->renew(7, {{a.job.id, 1}}).empty());
  now_ = now_ + 200;
  open();
  got = lease(8);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(fleet_.has_event(8, "has run 500 s against 100 s expected"));
  open();
  EXPECT_EQ(queue_->job(a.job.id)->hedge_instance_id, 8);
  const double holders_lease = store_->job(a.job.id)->lease_expires_at;
  now_ = now_ + 5;
  EXPECT_TRUE(queue_->renew(8, {{a.job.id, 1}}).empty());
  // Stored: the hedge's expiry moved, the holder's did not.
  EXPECT_EQ(store_->job(a.job.id)->hedge_lease_expires_at, now_ + config_.lease_s);
  EXPECT_EQ(store_->job(a.job.id)->lease_expires_at, holders_lease);
  EXPECT_TRUE(prove(8, got[0]).applied);

  config_.hedging.enabled = false;
  open();
  const auto c = submit("req-c", "input c");
  ASSERT_EQ(lease(7).size(), 1u);
  now_ = now_ + 1000;
  EXPECT_TRUE(lease(8).empty());
  EXPECT_FALSE(queue_->job(c.job.id)->hedge_instance_id);
}

TEST_P(JobQueueTest, AClosedInstanceReturnsItsJobsAtOnce) {
  fleet_.set_workers({7}, 2);
  submit("req-a", "input a");
  submit("req-b", "input b");
  ASSERT_EQ(lease(7).size(), 2u);
  queue_->return_jobs_of(7, "destroyed by the operator");
  for (const auto& job : queue_->list({}, 0)) {
    EXPECT_EQ(job.state, core::JobState::Queued);
    EXPECT_EQ(job.failures, 0);
  }
  EXPECT_TRUE(fleet_.has_event(7, "destroyed by the operator"));
  fleet_.set_workers({8}, 2);
  EXPECT_EQ(lease(8).size(), 2u);
}

// The Manager closes instances under its own lock and, at times, inside a store transaction
// (holding the store's lock), while other threads hold the queue's lock and wait for the
// store's. instance_closed must not wait for the queue's lock: no deadlock, and the jobs still
// come back (at once, or at the next queue call).
TEST_P(JobQueueTest, ClosingInsideAStoreTransactionNeverDeadlocks) {
  fleet_.set_workers({7}, 64);
  for (int i = 0; i < 20; ++i) submit("req-" + std::to_string(i), "input " + std::to_string(i));
  std::atomic<bool> stop{false};
  std::thread agent([&] {
    while (!stop) {
      auto leased = queue_->lease(7, 8, 0ms);
      for (const auto& l : leased ? *leased : std::vector<Lease>{})
        queue_->started(7, l.job.id, l.job.attempts);
      queue_->tick();
    }
  });
  std::atomic<bool> closed_all{false};
  std::thread manager([&] {
    for (int i = 0; i < 200; ++i) {
      store_->transaction([&] { queue_->return_jobs_of(7, "test close"); });
    }
    closed_all = true;
  });
  eventually([&] { return closed_all.load(); }, 120s);
  stop = true;
  agent.join();
  ASSERT_TRUE(closed_all) << "deadlock: instance_closed waited for the queue's lock";
  manager.join();
  queue_->return_jobs_of(7, "final close");
  queue_->tick();
  for (const auto& job : queue_->list({}, 0)) EXPECT_EQ(job.state, core::JobState::Queued);
}

TEST_P(JobQueueTest, CancelQueuedAndLeasedJobs) {
  fleet_.set_workers({7});
  const auto a = submit("req-a", "input a");
  const auto b = submit("req-b", "input b");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  const auto running = leased[0].job.id;
  const auto waiting = running == a.job.id ? b.job.id : a.job.id;
  EXPECT_EQ(queue_->cancel(waiting), false);
  EXPECT_EQ(queue_->cancel(running), true);
  EXPECT_EQ(await_now(running).job.state, core::JobState::Cancelled);
  EXPECT_EQ(await_now(waiting).job.state, core::JobState::Cancelled);
  EXPECT_THAT(queue_->renew(7, {{running, 1}}), ::testing::ElementsAre(running));
  EXPECT_FALSE(upload(7, leased[0], "late proof").applied);
  EXPECT_EQ(queue_->cancel(running), false);  // finished: left as it is
  EXPECT_EQ(queue_->cancel(12345).error().code, JobError::Code::NotFound);
}

TEST_P(JobQueueTest, BadRequestsAreRefusedNamingTheFieldAndWriteNothing) {
  config_.max_input_bytes = 10;
  open();
  SubmitRequest r;
  r.request_id = "req-a";
  r.input = std::string(11, 'x');
  auto big = queue_->submit(r);
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().code, JobError::Code::ResourceExhausted);
  EXPECT_THAT(big.error().message, HasSubstr("11 bytes"));
  r.input = "";
  EXPECT_THAT(queue_->submit(r).error().message, HasSubstr("input"));
  r.input = "ok";
  r.request_id = "";
  EXPECT_THAT(queue_->submit(r).error().message, HasSubstr("request_id"));
  r.request_id = std::string(257, 'r');
  EXPECT_EQ(queue_->submit(r).error().code, JobError::Code::InvalidArgument);
  r.request_id = "bad\nid";
  EXPECT_THAT(queue_->submit(r).error().message, HasSubstr("request_id"));
  EXPECT_TRUE(stored_inputs().empty());
  EXPECT_TRUE(queue_->list({}, 0).empty());
}

TEST_P(JobQueueTest, TheOpenJobsCapRefusesMore) {
  config_.max_open_jobs = 2;
  open();
  submit("a", "1");
  submit("b", "2");
  SubmitRequest r;
  r.request_id = "c";
  r.input = "3";
  EXPECT_EQ(queue_->submit(r).error().code, JobError::Code::ResourceExhausted);
  EXPECT_TRUE(submit("a", "1").joined);  // joining needs no room
}

TEST_P(JobQueueTest, AHalfWrittenInputIsNeverServedAndIsSwept) {
  fleet_.set_workers({7});
  const auto a = submit("req-a", "input a");
  // What a crash mid-write leaves: chunks with no header (never readable); and a whole input no
  // row names (a crash between the input and the row).
  const std::string half = util::sha256_hex("half written");
  const std::string_view piece = "half";
  store_->put_job_input_chunks(half, 0, std::span(&piece, 1), now_.load());
  jobs::InputStore inputs(*store_, [this] { return now_.load(); });
  EXPECT_THAT(inputs.read(half, 0, 10).error(), HasSubstr("not stored"));
  const auto orphan = inputs.put("orphan");

  open();  // the restart after the crash
  queue_->tick();
  // Within the grace: a submission on another replica may be about to name them.
  EXPECT_THAT(stored_inputs(), ::testing::UnorderedElementsAre(a.job.input_digest, orphan.digest));
  now_ = now_ + jobs::kInputGraceS + 1;
  open();
  queue_->tick();
  EXPECT_THAT(stored_inputs(), ::testing::ElementsAre(a.job.input_digest));
  EXPECT_TRUE(store_->job_input_chunks(half, 0, 10).empty());
  EXPECT_TRUE(store_->job_input_chunks(orphan.digest, 0, 10).empty());
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 1u);
  EXPECT_TRUE(prove(7, leased[0]).applied);
}

// Schema 18's upgrade: input files an open job names move into the database (and are read
// from there), files no job needs and temporary files are removed, a file whose bytes are not
// its name's and anything else are left where they are.
TEST_P(JobQueueTest, InputFilesFromBeforeTheDatabaseAreImported) {
  const auto b = submit("req-b", "input b");
  const auto c = submit("req-c", "input c");
  // As an older proverfleet left them: the inputs as files, no rows.
  {
    store::sql::Statement chunks(store_->connection(), "DELETE FROM job_input_chunks", "test");
    chunks.run();
    store::sql::Statement headers(store_->connection(), "DELETE FROM job_inputs", "test");
    headers.run();
  }
  const fs::path dir = fs::path(config_.data_dir) / "job-inputs";
  fs::create_directories(dir);
  std::ofstream(dir / b.job.input_digest) << "input b";
  std::ofstream(dir / c.job.input_digest) << "not input c";
  std::ofstream(dir / util::sha256_hex("nobody's")) << "nobody's";
  std::ofstream(dir / ".tmp-0123456789abcdef-1-0") << "half";
  std::ofstream(dir / "README") << "not ours";

  jobs::InputStore inputs(*store_, [this] { return now_.load(); });
  const auto imported =
      jobs::import_input_files(config_.data_dir, *store_, inputs, now_.load() - 3600);
  EXPECT_EQ(imported.imported, 1);
  EXPECT_EQ(imported.bytes, 7);
  EXPECT_EQ(imported.removed, 2);  // nobody's, the temporary file
  EXPECT_EQ(imported.errors.size(), 2u);
  EXPECT_THAT(::testing::PrintToString(imported.errors), HasSubstr("README"));
  EXPECT_THAT(::testing::PrintToString(imported.errors), HasSubstr(c.job.input_digest));
  EXPECT_FALSE(fs::exists(dir / b.job.input_digest));
  EXPECT_TRUE(fs::exists(dir / c.job.input_digest));
  EXPECT_TRUE(fs::exists(dir / "README"));
  EXPECT_EQ(inputs.read(b.job.input_digest, 0, 100)->bytes, "input b");
  EXPECT_FALSE(inputs.read(c.job.input_digest, 0, 100));
  // The wrong bytes written under c's name never become c: the real input, when it comes,
  // replaces them.
  EXPECT_EQ(inputs.put("input c").digest, c.job.input_digest);
  EXPECT_EQ(inputs.read(c.job.input_digest, 0, 100)->bytes, "input c");
  // Nothing to do once the directory is gone (or never was).
  fs::remove_all(dir);
  EXPECT_EQ(jobs::import_input_files(config_.data_dir, *store_, inputs, 0).imported, 0);
}

TEST_P(JobQueueTest, RetentionRemovesInputsAndProofsOfOldFinishedJobs) {
  config_.retention_s = 3600;
  open();
  fleet_.set_workers({7});
  const auto a = submit("req-a", "input a");
  ASSERT_TRUE(prove(7, lease(7)[0]).applied);
  ASSERT_EQ(await_now(a.job.id).proof, proof_of("input a"));
  queue_->tick();
  EXPECT_EQ(stored_inputs().size(), 1u);  // within retention
  now_ = now_ + 3601;
  queue_->tick();
  EXPECT_TRUE(stored_inputs().empty());
  EXPECT_FALSE(store_->job_proof(a.job.id));
  EXPECT_EQ(queue_->job(a.job.id)->state, core::JobState::Done);
}

TEST_P(JobQueueTest, FailuresRetryElsewhereUntilMaxAttemptsThenFail) {
  config_.max_attempts = 2;
  config_.strike_after_failures = 5;
  open();
  fleet_.set_workers({7, 8, 9});
  const auto a = submit("req-a", "input a");
  auto first = lease(7);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(fail(7, first[0]).reason, "requeued");
  auto job = *queue_->job(a.job.id);
  EXPECT_EQ(job.state, core::JobState::Queued);
  EXPECT_EQ(job.failures, 1);
  EXPECT_THAT(job.avoid_instances, ::testing::ElementsAre(7));
  EXPECT_TRUE(lease(7).empty());
  auto second = lease(8);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(fail(8, second[0]).reason, "failed");
  const auto finished = await_now(a.job.id);
  EXPECT_EQ(finished.job.state, core::JobState::Failed);
  EXPECT_EQ(finished.job.error, "prover exited 1");
  EXPECT_TRUE(lease(9).empty());
  std::lock_guard lock(fleet_.mu);
  EXPECT_TRUE(fleet_.strikes.empty());
}

TEST_P(JobQueueTest, AnOutOfMemoryIsNotTheJobsFault) {
  config_.max_attempts = 1;
  open();
  fleet_.set_workers({7});
  const auto a = submit("req-a", "input a");
  auto first = lease(7);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(fail(7, first[0], /*oom=*/true).reason, "requeued");
  const auto job = *queue_->job(a.job.id);
  EXPECT_EQ(job.failures, 0);
  EXPECT_TRUE(job.avoid_instances.empty());
  EXPECT_EQ(lease(7).size(), 1u);
}

TEST_P(JobQueueTest, FailedProofsInARowStrikeTheHost) {
  config_.strike_after_failures = 2;
  open();
  fleet_.set_workers({7}, 2);
  submit("req-a", "input a");
  submit("req-b", "input b");
  auto leased = lease(7);
  ASSERT_EQ(leased.size(), 2u);
  fail(7, leased[0]);
  {
    std::lock_guard lock(fleet_.mu);
    EXPECT_TRUE(fleet_.strikes.empty());
  }
  fail(7, leased[1]);
  std::lock_guard lock(fleet_.mu);
  ASSERT_EQ(fleet_.strikes.size(), 1u);
  EXPECT_EQ(fleet_.strikes[0].first, 7);
  EXPECT_EQ(fleet_.strikes[0].second.kind, core::StrikeKind::FailedProofs);
}

TEST_P(JobQueueTest, ALongPollWakesWhenAJobArrives) {
  fleet_.set_workers({7});
  std::atomic<bool> done{false};
  JobResult<std::vector<Lease>> got;
  std::thread agent([&] {
    got = queue_->lease(7, 1, 60s);
    done = true;
  });
  std::this_thread::sleep_for(100ms);
  submit("req-a", "input a");
  eventually([&] { return done.load(); });
  ASSERT_TRUE(done) << "the long-poll did not wake for the new job";
  agent.join();
  ASSERT_TRUE(got);
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].job.request_id, "req-a");
}

TEST_P(JobQueueTest, AwaitTimesOutThenShutdownWakesWaiters) {
  const auto a = submit("req-a", "input a");
  auto waited = queue_->await(a.job.id, 10ms);
  ASSERT_TRUE(waited);
  EXPECT_FALSE(*waited);
  JobResult<std::optional<Finished>> late;
  std::thread client([&] { late = queue_->await(a.job.id, 60s); });
  std::this_thread::sleep_for(50ms);
  queue_->shutdown();
  client.join();
  ASSERT_FALSE(late);
  EXPECT_EQ(late.error().code, JobError::Code::Unavailable);
  EXPECT_EQ(queue_->lease(7, 1, 10s).error().code, JobError::Code::Unavailable);
}

TEST_P(JobQueueTest, StatusReportsOnlyTheBacklogBeyondFreeSlotsAsPending) {
  fleet_.set_workers({7}, 3);
  for (int i = 0; i < 5; ++i) submit("req-" + std::to_string(i), "input " + std::to_string(i));
  auto s = queue_->status();
  EXPECT_EQ(s.free_slots, 3);
  EXPECT_EQ(s.by_kind[core::JobKind::PorepC2].pending, 2);
  ASSERT_EQ(lease(7).size(), 3u);
  s = queue_->status();
  EXPECT_EQ(s.free_slots, 0);
  EXPECT_EQ(s.by_kind[core::JobKind::PorepC2].pending, 2);
  EXPECT_EQ(s.by_kind[core::JobKind::PorepC2].in_progress, 3);
}

TEST_P(JobQueueTest, ArrivalsAndObservedSince) {
  const double opened = now_.load();
  submit("a", "1");
  now_ = now_ + 100;
  submit("b", "2");
  EXPECT_EQ(queue_->arrivals_since(opened + 50).size(), 1u);
  EXPECT_EQ(queue_->arrivals_since(0).size(), 2u);
  open();  // the record's start survives a restart
  EXPECT_EQ(queue_->observed_since(), opened);
}

// A schema-2 database (before jobs) upgrades and keeps its rows.
TEST(JobStoreMigration, SchemaTwoUpgradesKeepingRows) {
  TempDir dir;
  const std::string path = dir.file("fleet.db");
  {
    // Built by the real migrations up to 2, not by undoing later ones by hand.
    store::SqliteConnection old(path);
    store::sql::migrate(old, "test database", 2);
    old.exec(
        "INSERT INTO settings (key, value) VALUES ('operator_token_hash', 'abc');"
        "INSERT INTO bench_runs (machine_id, gpu_name, num_gpus, instance_id, at, rate, low, "
        "high, samples, kind, contended, throttled, plan_json) VALUES "
        "(42, 'RTX 4090', 1, 0, 0, 12, 0, 0, 0, '', 0, 0, '')",
        "writing schema-2 rows");
  }

  auto store_opened = store::open_sql_store(path);
  store::SqlStore& store = *store_opened;
  EXPECT_EQ(store.schema_version(), store::latest_schema_version());
  EXPECT_EQ(store.setting("operator_token_hash"), "abc");
  ASSERT_EQ(store.all_bench_runs().size(), 1u);
  EXPECT_EQ(store.all_bench_runs()[0].rate, 12);
  core::Job job;
  job.request_id = "r";
  job.input_digest = util::sha256_hex("x");
  job.avoid_instances = {3, 4};
  const auto id = store.insert_job(job);
  EXPECT_THAT(store.job(id)->avoid_instances, ::testing::ElementsAre(3, 4));
  EXPECT_THROW(store.insert_job(job), store::StoreError);  // (client, request_id) is unique
}

// The same upgrade on PostgreSQL: a schema-2 database gains the jobs table.
TEST(JobStoreMigration, PostgresSchemaTwoUpgradesKeepingRows) {
  const std::string url = pf::test::fresh_pg_database();
  {
    store::PgConnection old(url);
    store::sql::migrate(old, "test database", 2);
    old.exec(
        "INSERT INTO bench_runs (machine_id, gpu_name, num_gpus, instance_id, at, rate, low, "
        "high, samples, kind, contended, throttled, plan_json) VALUES "
        "(42, 'RTX 4090', 1, 0, 0, 12, 0, 0, 0, '', 0, 0, '')",
        "writing a schema-2 row");
  }
  auto store = store::open_sql_store(url);
  EXPECT_EQ(store->schema_version(), store::latest_schema_version());
  ASSERT_EQ(store->all_bench_runs().size(), 1u);
  EXPECT_EQ(store->all_bench_runs()[0].rate, 12);
  core::Job job;
  job.request_id = "r";
  job.input_digest = util::sha256_hex("x");
  job.avoid_instances = {3, 4};
  const auto id = store->insert_job(job);
  EXPECT_THAT(store->job(id)->avoid_instances, ::testing::ElementsAre(3, 4));
  EXPECT_THROW(store->insert_job(job), store::StoreError);  // (client, request_id) is unique
}

class JobStore : public ::testing::TestWithParam<pf::testing::Backend> {
 protected:
  pf::testing::TestDatabase db_{GetParam()};
};

INSTANTIATE_TEST_SUITE_P(Db, JobStore, pf::testing::kAllStoreBackends, pf::testing::backend_name);

// The store's job queries: listings by state, counts, arrivals, proofs with their rows and
// what retention keeps.
TEST_P(JobStore, QueriesAndRetention) {
  auto store_opened = db_.open();
  store::SqlStore& store = *store_opened;
  const auto make = [&](const std::string& rid, core::JobState state, double submitted,
                        double finished, double delivered) {
    core::Job j;
    j.request_id = rid;
    j.state = state;
    j.input_digest = util::sha256_hex(rid);
    j.submitted_at = submitted;
    j.finished_at = finished;
    j.delivered_at = delivered;
    return store.insert_job(j);
  };
  const auto open = make("open", core::JobState::Queued, 100, 0, 0);
  const auto old_done = make("old", core::JobState::Done, 200, 300, 400);
  const auto new_done = make("new", core::JobState::Done, 300, 900, 0);
  make("failed", core::JobState::Failed, 400, 500, 0);
  store.put_job_proof(old_done, std::string("p\0roof", 6));
  store.put_job_proof(new_done, "proof2");

  EXPECT_EQ(store.open_jobs().size(), 1u);
  EXPECT_EQ(store.open_jobs()[0].id, open);
  const auto done = store.jobs(store::JobFilter::in_states({core::JobState::Done}), 0);
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].id, new_done);  // newest first
  EXPECT_EQ(store.jobs({}, 3).size(), 3u);
  EXPECT_EQ(
      store.jobs(store::JobFilter::in_states({core::JobState::Done, core::JobState::Failed}), 0)
          .size(),
      3u);
  // Repeats change nothing; every state at once is every job.
  EXPECT_EQ(store
                .jobs(store::JobFilter::in_states(
                          {core::JobState::Done, core::JobState::Done, core::JobState::Queued}),
                      0)
                .size(),
            3u);
  EXPECT_EQ(
      store
          .jobs(store::JobFilter::in_states({core::JobState::Queued, core::JobState::Assigned,
                                             core::JobState::Proving, core::JobState::Done,
                                             core::JobState::Failed, core::JobState::Cancelled}),
                2)
          .size(),
      2u);
  EXPECT_EQ(store.job_counts()[core::JobState::Done], 2);
  EXPECT_EQ(store.job_arrivals_since(250).size(), 2u);
  EXPECT_EQ(store.job_proof(old_done), std::string("p\0roof", 6));  // bytes, not text
  EXPECT_FALSE(store.job_proof(open));

  // Kept since 450: the open job, and the job finished at 900; delivered at 400 is too old.
  auto in_use = store.job_inputs_in_use(450);
  std::sort(in_use.begin(), in_use.end());
  std::vector<std::string> expected{util::sha256_hex("open"), util::sha256_hex("new"),
                                    util::sha256_hex("failed")};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(in_use, expected);
  EXPECT_EQ(store.drop_job_proofs(450), 1);
  EXPECT_FALSE(store.job_proof(old_done));
  EXPECT_EQ(store.job_proof(new_done), "proof2");
  EXPECT_EQ(store.job_by_request("new")->id, new_done);
  EXPECT_FALSE(store.job_by_request("none"));
}

// The listing pages newest first: each page starts below the id the page before ended with,
// with the state filter applied to every page.
TEST_P(JobStore, ListingPagesByCursor) {
  auto store = db_.open();
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 7; ++i) {
    core::Job job;
    job.client = "10.0.0.7";
    job.request_id = "page-" + std::to_string(i);
    job.input_digest = util::sha256_hex(job.request_id);
    job.state = i % 2 == 0 ? core::JobState::Queued : core::JobState::Done;
    ids.push_back(store->insert_job(job));
  }
  std::vector<std::int64_t> seen;
  std::int64_t cursor = 0;
  for (int page = 0; page < 10; ++page) {
    const auto jobs = store->jobs({}, 3, cursor);
    for (const auto& j : jobs) seen.push_back(j.id);
    if (jobs.size() < 3) break;
    cursor = jobs.back().id;
  }
  EXPECT_EQ(seen, std::vector<std::int64_t>(ids.rbegin(), ids.rend()));
  const auto queued = store->jobs(store::JobFilter::in_states({core::JobState::Queued}), 2, ids[5]);
  ASSERT_EQ(queued.size(), 2u);
  EXPECT_EQ(queued[0].id, ids[4]);
  EXPECT_EQ(queued[1].id, ids[2]);
  EXPECT_TRUE(store->jobs({}, 3, ids[0]).empty());
}

}  // namespace
}  // namespace pf::jobs
