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
#include "util/hex.h"

namespace pf::cli {
namespace {

constexpr std::uint64_t kSectorSize32G = 34359738368ULL;
constexpr std::uint64_t kStackedDrg32GiBV1_1 = 8;  // filecoin's RegisteredSealProof
// RegisteredUpdateProof / RegisteredPoStProof numbers for 32 GiB (cuzk-bench's help).
constexpr std::uint64_t kUpdate32GiB = 3;
constexpr std::uint64_t kWinningPost32GiB = 3;
constexpr std::uint64_t kWindowPost32GiBV1_1 = 13;
constexpr int kSnapPartitions32G = 16;

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

std::string random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::string out(n, '\0');
  for (auto& c : out) c = static_cast<char>(rng() & 0xff);
  return out;
}

// Go's %d of a byte slice ("[12 34 …]"), as Curio formats WindowPoSt request ids
// (lib/ffi/cuzk_funcs.go:179).
std::string go_bytes_d(const std::string& bytes) {
  std::string out = "[";
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i > 0) out += " ";
    out += std::to_string(static_cast<unsigned char>(bytes[i]));
  }
  return out + "]";
}

// The request Curio's task of this kind sends (lib/ffi/cuzk_funcs.go:66-75, 149-161, 178-188,
// 219-228); the same for every try of the task.
cuzk::v1::SubmitProofRequest curio_request(core::JobKind kind, std::int64_t sector,
                                           std::int64_t miner, std::size_t vanilla_bytes,
                                           std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ static_cast<std::uint64_t>(sector) * 0x9e3779b97f4a7c15ULL);
  const std::string m = std::to_string(miner);
  cuzk::v1::SubmitProofRequest r;
  r.set_sector_size(kSectorSize32G);
  r.set_miner_id(static_cast<std::uint64_t>(miner));
  switch (kind) {
    case core::JobKind::PorepC2:
      r.set_request_id("porep-" + m + "-" + std::to_string(sector));
      r.set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
      r.set_registered_proof(kStackedDrg32GiBV1_1);
      r.set_priority(cuzk::v1::NORMAL);
      r.set_vanilla_proof(c1_envelope(sector, vanilla_bytes, rng));
      r.set_sector_number(static_cast<std::uint64_t>(sector));
      break;
    case core::JobKind::SnapUpdate:
      r.set_request_id("snap-" + m + "-" + std::to_string(sector));
      r.set_proof_kind(cuzk::v1::SNAP_DEALS_UPDATE);
      r.set_registered_proof(kUpdate32GiB);
      r.set_priority(cuzk::v1::NORMAL);
      for (int i = 0; i < kSnapPartitions32G; ++i) {
        r.add_vanilla_proofs(random_bytes(vanilla_bytes / kSnapPartitions32G + 1, rng));
      }
      r.set_sector_number(static_cast<std::uint64_t>(sector));
      r.set_comm_r_old(random_bytes(32, rng));
      r.set_comm_r_new(random_bytes(32, rng));
      r.set_comm_d_new(random_bytes(32, rng));
      break;
    case core::JobKind::WindowPost: {
      const std::string randomness = random_bytes(32, rng);
      r.set_request_id("wdpost-" + m + "-0-" + go_bytes_d(randomness.substr(0, 8)));
      r.set_proof_kind(cuzk::v1::WINDOW_POST_PARTITION);
      r.set_registered_proof(kWindowPost32GiBV1_1);
      r.set_priority(cuzk::v1::HIGH);
      r.add_vanilla_proofs(random_bytes(vanilla_bytes, rng));
      r.set_randomness(randomness);
      r.set_partition_index(0);
      break;
    }
    case core::JobKind::WinningPost: {
      const std::string randomness = random_bytes(32, rng);
      r.set_request_id(
          "winpost-" + m + "-" +
          util::lower_hex(reinterpret_cast<const unsigned char*>(randomness.data()), 8));
      r.set_proof_kind(cuzk::v1::WINNING_POST);
      r.set_registered_proof(kWinningPost32GiB);
      r.set_priority(cuzk::v1::CRITICAL);
      r.add_vanilla_proofs(random_bytes(vanilla_bytes, rng));
      r.set_randomness(randomness);
      break;
    }
  }
  return r;
}

core::JobKind draw_kind(const ProofMix& mix, std::mt19937_64& rng) {
  const double total = std::max(0.0, mix.porep) + std::max(0.0, mix.snap) +
                       std::max(0.0, mix.window_post) + std::max(0.0, mix.winning_post);
  if (!(total > 0)) return core::JobKind::PorepC2;
  double u = std::uniform_real_distribution<double>(0, total)(rng);
  for (auto [share, kind] : {std::pair{mix.porep, core::JobKind::PorepC2},
                             std::pair{mix.snap, core::JobKind::SnapUpdate},
                             std::pair{mix.window_post, core::JobKind::WindowPost}}) {
    if (u < std::max(0.0, share)) return kind;
    u -= std::max(0.0, share);
  }
  return core::JobKind::WinningPost;
}

}  // namespace

struct LoadGenerator::Node {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<cuzk::v1::ProvingEngine::Stub> engine;
};

CurioRetry curio_retry(core::JobKind kind, int failures) {
  switch (kind) {
    case core::JobKind::PorepC2:
      // RetryWait: min(time.Second << retries, 2 min) (tasks/seal/task_porep.go:216-219).
      return {10, std::min(std::ldexp(1.0, std::min(failures, 16)), 120.0)};
    case core::JobKind::SnapUpdate:
      return {3, 0};
    case core::JobKind::WindowPost:
      return {5, 0};
    case core::JobKind::WinningPost:
      return {1, 0};
  }
  return {1, 0};
}

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
  o_.nodes = std::clamp(o_.nodes, 1, 16);
  if (!(o_.time_scale > 0)) o_.time_scale = 1;
  for (int i = 0; i < o_.nodes; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(256 << 20);  // Curio's client (lib/cuzk/client.go:83)
    args.SetMaxReceiveMessageSize(256 << 20);
    // Each node its own connection: channels in one process would otherwise share one.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetString("pf.curio_node", std::to_string(i));
    auto node = std::make_unique<Node>();
    node->channel = grpc::CreateCustomChannel(o_.target, grpc::InsecureChannelCredentials(), args);
    node->engine = cuzk::v1::ProvingEngine::NewStub(node->channel);
    nodes_.push_back(std::move(node));
  }
  open_per_node_.assign(static_cast<std::size_t>(o_.nodes), 0);
}

LoadGenerator::~LoadGenerator() {
  stop();
}

void LoadGenerator::start() {
  std::lock_guard lock(mu_);
  if (!threads_.empty() || stopping_) return;
  threads_.emplace_back([this] { run_arrivals(); });
  for (int node = 0; node < o_.nodes; ++node) {
    for (int i = 0; i < o_.max_pending; ++i) {
      threads_.emplace_back([this, node] { run_node_slot(node); });
    }
  }
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
  s.waiting = static_cast<std::int64_t>(tasks_.size());
  s.in_flight = static_cast<std::int64_t>(calls_.size());
  return s;
}

void LoadGenerator::note(const std::string& line) const {
  // The first lines, then one in a hundred: a refusing gateway must not flood the log.
  const auto n = notes_.fetch_add(1);
  if (o_.log && (n < 20 || n % 100 == 0)) o_.log(line);
}

void LoadGenerator::run_arrivals() {
  using Clock = std::chrono::steady_clock;
  auto pass_start = Clock::now();
  std::int64_t sector = o_.first_sector;
  std::mt19937_64 kinds(o_.seed ^ 0x5eedULL);
  for (std::uint64_t pass = 0;; ++pass) {
    std::uint64_t state = o_.seed + pass;
    const auto at =
        wall_arrivals(o_.demand, o_.horizon_s, o_.time_scale, scenario::splitmix64(state));
    for (double t : at) {
      const auto when = pass_start + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(t));
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, when, [this] { return stopping_; })) return;
      Task task;
      task.kind = draw_kind(o_.mix, kinds);
      task.sector = sector++;
      task.eligible_at = Clock::now();
      tasks_.push_back(task);
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

std::optional<LoadGenerator::Task> LoadGenerator::claim(
    int node, std::chrono::steady_clock::time_point& until) {
  // Any node may claim a released task; the node that just failed one leaves it a moment to the
  // others (it polls again later in Curio too), so a retry usually runs elsewhere.
  constexpr auto kOwnRetryGrace = std::chrono::milliseconds(200);
  const auto now = std::chrono::steady_clock::now();
  auto own = tasks_.end();
  until = std::chrono::steady_clock::time_point::max();
  for (auto it = tasks_.begin(); it != tasks_.end(); ++it) {
    if (it->eligible_at > now) {
      until = std::min(until, it->eligible_at);
      continue;
    }
    if (it->last_node != node) {
      Task task = *it;
      tasks_.erase(it);
      return task;
    }
    if (own == tasks_.end()) own = it;
  }
  if (own == tasks_.end()) return std::nullopt;
  if (o_.nodes > 1 && now - own->eligible_at < kOwnRetryGrace) {
    until = std::min(until, own->eligible_at + kOwnRetryGrace);
    return std::nullopt;
  }
  Task task = *own;
  tasks_.erase(own);
  return task;
}

void LoadGenerator::run_node_slot(int node) {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mu_);
      for (;;) {
        if (stopping_) return;
        std::chrono::steady_clock::time_point until;
        if (auto claimed = claim(node, until)) {
          task = *claimed;
          break;
        }
        if (until == std::chrono::steady_clock::time_point::max()) {
          cv_.wait(lock);
        } else {
          cv_.wait_until(lock, until);
        }
      }
      if (task.failures > 0) {
        ++stats_.retries;
        if (task.last_node != node) ++stats_.retries_elsewhere;
      }
      auto& open = open_per_node_[static_cast<std::size_t>(node)];
      ++open;
      stats_.max_open_per_node = std::max(stats_.max_open_per_node, open);
    }
    const bool done = prove(node, task);
    std::unique_lock lock(mu_);
    --open_per_node_[static_cast<std::size_t>(node)];
    if (stopping_) return;
    if (done) {
      ++stats_.proved;
      if (task.kind == core::JobKind::WindowPost || task.kind == core::JobKind::WinningPost) {
        ++stats_.proved_post;
      }
      continue;
    }
    ++task.failures;
    task.last_node = node;
    const CurioRetry retry = curio_retry(task.kind, task.failures);
    if (task.failures >= retry.max_tries) {
      ++stats_.failed;
      lock.unlock();
      note("load: " + std::string(core::to_string(task.kind)) + " task of sector " +
           std::to_string(task.sector) + " gave up after " + std::to_string(task.failures) +
           " tries, as Curio does");
      continue;
    }
    task.eligible_at = std::chrono::steady_clock::now() +
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(retry.wait_s / o_.time_scale));
    tasks_.push_back(task);
    lock.unlock();
    cv_.notify_all();
  }
}

bool LoadGenerator::prove(int node, const Task& task) {
  cuzk::v1::ProveRequest request;
  *request.mutable_submit() =
      curio_request(task.kind, task.sector, o_.miner_id, o_.vanilla_bytes, o_.seed);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<std::int64_t>(o_.prove_timeout_s * 1000)));
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    calls_.insert(&ctx);
  }
  cuzk::v1::ProveResponse response;
  const grpc::Status status =
      nodes_[static_cast<std::size_t>(node)]->engine->Prove(&ctx, request, &response);
  {
    std::lock_guard lock(mu_);
    calls_.erase(&ctx);
    if (stopping_) return false;
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
        (task.kind == core::JobKind::WindowPost || task.kind == core::JobKind::WinningPost)) {
      ++stats_.post_refused;
    }
  }
  // As lib/cuzk/client.go:128-144 reads the answer: only COMPLETED with a proof is a proof.
  if (status.ok() && response.result().status() == cuzk::v1::AwaitProofResponse::COMPLETED &&
      !response.result().proof().empty()) {
    return true;
  }
  if (task.failures == 0 || !status.ok()) {
    note("load: " + request.submit().request_id() + " try " + std::to_string(task.failures + 1) +
         " failed: " +
         (status.ok()
              ? "status " + cuzk::v1::AwaitProofResponse::Status_Name(response.result().status()) +
                    ": " + response.result().error_message()
              : std::to_string(static_cast<int>(status.error_code())) + " " +
                    status.error_message()));
  }
  return false;
}

}  // namespace pf::cli
