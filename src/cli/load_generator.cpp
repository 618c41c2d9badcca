#include "cli/load_generator.h"

#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "cuzk/v1/proving.grpc.pb.h"
#include "scenario/draws.h"
#include "scenario/truth_model.h"

namespace pf::cli {
namespace {

constexpr std::uint64_t kSectorSize32G = 34359738368ULL;
constexpr std::uint64_t kStackedDrg32GiBV1_1 = 8;  // filecoin's RegisteredSealProof

std::string base64(const std::string& bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(std::max(0, n)));
  return out;
}

// A C1 envelope shaped like Curio's wrapC1Output (SectorNum, Phase1Out, SectorSize); the
// random bytes make every job's input distinct.
std::string c1_envelope(std::int64_t sector, std::size_t random_bytes, std::mt19937_64& rng) {
  std::string noise(random_bytes, '\0');
  for (auto& c : noise) c = static_cast<char>(rng() & 0xff);
  const nlohmann::json phase1 = {
      {"registered_proof", "StackedDrg32GiBV1_1"}, {"sector", sector}, {"noise", base64(noise)}};
  return nlohmann::json{
      {"SectorNum", sector}, {"Phase1Out", base64(phase1.dump())}, {"SectorSize", kSectorSize32G}}
      .dump();
}

bool retried(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

}  // namespace

struct LoadGenerator::Stub {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<cuzk::v1::ProvingEngine::Stub> engine;
};

std::vector<double> wall_arrivals(const scenario::Demand& demand, double horizon_s,
                                  double time_scale, std::uint64_t seed) {
  scenario::Stream stream(seed);
  std::vector<double> at = scenario::draw_arrivals(demand, horizon_s, stream);
  // draw_arrivals is ascending within a segment and segments are ascending.
  for (double& t : at) t /= time_scale;
  return at;
}

std::optional<scenario::Demand> load_demand(const scenario::Scenario& s) {
  if (s.demand) return s.demand;
  if (!s.economics.demand_proofs_per_hour || *s.economics.demand_proofs_per_hour <= 0) {
    return std::nullopt;
  }
  scenario::Demand d;
  d.arrivals.push_back({0, s.hours, *s.economics.demand_proofs_per_hour});
  return d;
}

LoadGenerator::LoadGenerator(LoadGeneratorOptions options) : o_(std::move(options)) {
  o_.max_pending = std::clamp(o_.max_pending, 1, 256);
  if (!(o_.time_scale > 0)) o_.time_scale = 1;
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(256 << 20);
  args.SetMaxReceiveMessageSize(256 << 20);
  // Come back soon after the manager restarts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  stub_ = std::make_unique<Stub>();
  stub_->channel = grpc::CreateCustomChannel(o_.target, grpc::InsecureChannelCredentials(), args);
  stub_->engine = cuzk::v1::ProvingEngine::NewStub(stub_->channel);
}

LoadGenerator::~LoadGenerator() {
  stop();
}

void LoadGenerator::start() {
  std::lock_guard lock(mu_);
  if (!threads_.empty() || stopping_) return;
  threads_.emplace_back([this] { run_arrivals(); });
  for (int i = 0; i < o_.max_pending; ++i) threads_.emplace_back([this] { run_sender(); });
}

void LoadGenerator::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    for (auto* call : calls_) call->TryCancel();
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

LoadStats LoadGenerator::stats() const {
  std::lock_guard lock(mu_);
  LoadStats s = stats_;
  s.waiting = static_cast<std::int64_t>(waiting_.size());
  s.in_flight = static_cast<std::int64_t>(calls_.size());
  return s;
}

void LoadGenerator::note(const std::string& line) const {
  if (o_.log) o_.log(line);
}

void LoadGenerator::run_arrivals() {
  using Clock = std::chrono::steady_clock;
  auto pass_start = Clock::now();
  std::int64_t sector = o_.first_sector;
  for (std::uint64_t pass = 0;; ++pass) {
    std::uint64_t state = o_.seed + pass;
    const auto at =
        wall_arrivals(o_.demand, o_.horizon_s, o_.time_scale, scenario::splitmix64(state));
    for (double t : at) {
      const auto when = pass_start + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(t));
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, when, [this] { return stopping_; })) return;
      waiting_.push_back({sector++});
      ++stats_.arrived;
      lock.unlock();
      cv_.notify_all();
    }
    // The next pass starts where this horizon ends (wall), so the demand's daily shape repeats.
    pass_start += std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(o_.horizon_s / o_.time_scale));
    if (o_.horizon_s <= 0) return;
    std::unique_lock lock(mu_);
    if (cv_.wait_until(lock, pass_start, [this] { return stopping_; })) return;
  }
}

void LoadGenerator::run_sender() {
  for (;;) {
    std::int64_t sector = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (stopping_) return;
      sector = waiting_.front().sector;
      waiting_.pop_front();
    }
    prove(sector);
  }
}

void LoadGenerator::prove(std::int64_t sector) {
  std::mt19937_64 rng(o_.seed ^ static_cast<std::uint64_t>(sector) * 0x9e3779b97f4a7c15ULL);
  cuzk::v1::ProveRequest request;
  auto* submit = request.mutable_submit();
  submit->set_request_id("porep-" + std::to_string(o_.miner_id) + "-" + std::to_string(sector));
  submit->set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  submit->set_sector_size(kSectorSize32G);
  submit->set_registered_proof(kStackedDrg32GiBV1_1);
  submit->set_vanilla_proof(c1_envelope(sector, o_.vanilla_bytes, rng));
  submit->set_sector_number(static_cast<std::uint64_t>(sector));
  submit->set_miner_id(static_cast<std::uint64_t>(o_.miner_id));

  auto backoff = std::chrono::milliseconds(500);
  for (;;) {
    grpc::ClientContext ctx;
    ctx.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<std::int64_t>(o_.prove_timeout_s * 1000)));
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
      calls_.insert(&ctx);
    }
    cuzk::v1::ProveResponse response;
    const grpc::Status status = stub_->engine->Prove(&ctx, request, &response);
    std::unique_lock lock(mu_);
    calls_.erase(&ctx);
    if (stopping_) return;
    if (status.ok() && response.result().status() == cuzk::v1::AwaitProofResponse::COMPLETED) {
      ++stats_.proved;
      return;
    }
    if (!status.ok() && retried(status.error_code())) {
      ++stats_.retries;
      // Wait before retrying, unless stopping.
      if (cv_.wait_for(lock, backoff, [this] { return stopping_; })) return;
      backoff = std::min(backoff * 2, std::chrono::milliseconds(4000));
      continue;
    }
    ++stats_.failed;
    lock.unlock();
    note("load: " + submit->request_id() + " failed: " +
         (status.ok()
              ? "status " + cuzk::v1::AwaitProofResponse::Status_Name(response.result().status()) +
                    ": " + response.result().error_message()
              : std::to_string(static_cast<int>(status.error_code())) + " " +
                    status.error_message()));
    return;
  }
}

}  // namespace pf::cli
