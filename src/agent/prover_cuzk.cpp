#include "agent/prover_cuzk.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "core/proof_params.h"
#include "core/text.h"
#include "cuzk/v1/proving.grpc.pb.h"
#include "market/http_client.h"
#include "util/bounded_json.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::chrono::system_clock::time_point deadline_in(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

RpcError to_error(const grpc::Status& s) {
  return RpcError{static_cast<int>(s.error_code()), s.error_message()};
}

std::string random_hex(std::size_t bytes) {
  std::random_device rd;
  std::string out;
  static constexpr char kHex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < bytes; ++i) {
    const auto b = static_cast<unsigned>(rd()) & 0xFF;
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xF]);
  }
  return out;
}

}  // namespace

bool RpcError::transport() const {
  switch (static_cast<grpc::StatusCode>(code)) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNKNOWN:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return true;
    default:
      return false;
  }
}

struct CuzkPreparedProof {
  std::string serialized;  // a ProveRequest whose submit lacks only the request id
};

struct CuzkClient::Impl {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<cuzk::v1::ProvingEngine::Stub> stub;
  std::unique_ptr<grpc::GenericStub> generic;
  std::mutex mu;
  std::set<grpc::ClientContext*> active;  // Prove calls in flight, for cancel_all
};

CuzkClient::CuzkClient(const std::string& address) : impl_(std::make_unique<Impl>()) {
  std::string target = address;
  for (const char* scheme : {"http://", "grpc://"}) {
    if (target.rfind(scheme, 0) == 0) target = target.substr(std::string(scheme).size());
  }
  grpc::ChannelArguments args;
  // A PoRep C1 input is ~51 MB; Curio's client allows 256 MiB both ways.
  args.SetMaxSendMessageSize(256 << 20);
  args.SetMaxReceiveMessageSize(256 << 20);
  impl_->channel = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  impl_->stub = cuzk::v1::ProvingEngine::NewStub(impl_->channel);
  impl_->generic = std::make_unique<grpc::GenericStub>(impl_->channel);
}

CuzkClient::~CuzkClient() = default;

std::shared_ptr<const CuzkPreparedProof> CuzkClient::prepare(const CuzkProofInput& in) {
  cuzk::v1::ProveRequest req;
  auto* submit = req.mutable_submit();
  submit->set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  submit->set_sector_size(in.sector_size);
  submit->set_registered_proof(in.registered_proof);
  submit->set_priority(cuzk::v1::PRIORITY_UNSPECIFIED);
  submit->set_vanilla_proof(in.vanilla_proof);
  submit->set_sector_number(in.sector_number);
  submit->set_miner_id(in.miner_id);
  auto prepared = std::make_shared<CuzkPreparedProof>();
  req.SerializeToString(&prepared->serialized);
  return prepared;
}

tl::expected<std::shared_ptr<const CuzkPreparedProof>, std::string> CuzkClient::prepare_request(
    const std::string& submit_request) {
  cuzk::v1::ProveRequest req;
  if (!req.mutable_submit()->ParseFromString(submit_request)) {
    return tl::unexpected(std::string("the job input is not a cuzk.v1.SubmitProofRequest"));
  }
  req.mutable_submit()->clear_request_id();
  auto prepared = std::make_shared<CuzkPreparedProof>();
  req.SerializeToString(&prepared->serialized);
  return prepared;
}

tl::expected<CuzkProofResult, RpcError> CuzkClient::prove(
    std::shared_ptr<const CuzkPreparedProof> proof, const std::string& request_id,
    double timeout_s) {
  cuzk::v1::ProveRequest id_only;
  id_only.mutable_submit()->set_request_id(request_id);
  std::string tail;
  id_only.SerializeToString(&tail);
  // Protobuf merges repeated occurrences of an embedded message field, so "submit" sent in two
  // pieces arrives as one: the shared constant part goes out of its buffer without a copy.
  grpc::Slice slices[2] = {
      grpc::Slice(proof->serialized.data(), proof->serialized.size(), grpc::Slice::STATIC_SLICE),
      grpc::Slice(tail)};
  grpc::ByteBuffer request(slices, 2);
  grpc::ByteBuffer response;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(timeout_s));
  {
    std::lock_guard lock(impl_->mu);
    impl_->active.insert(&ctx);
  }
  std::promise<grpc::Status> done;
  auto finished = done.get_future();
  impl_->generic->UnaryCall(&ctx, "/cuzk.v1.ProvingEngine/Prove", grpc::StubOptions(), &request,
                            &response, [&done](grpc::Status st) { done.set_value(std::move(st)); });
  const grpc::Status s = finished.get();
  {
    std::lock_guard lock(impl_->mu);
    impl_->active.erase(&ctx);
  }
  if (!s.ok()) return tl::unexpected(to_error(s));
  std::vector<grpc::Slice> parts;
  std::string body;
  if (response.Dump(&parts).ok()) {
    for (const auto& part : parts) {
      body.append(reinterpret_cast<const char*>(part.begin()), part.size());
    }
  }
  cuzk::v1::ProveResponse resp;
  if (!resp.ParseFromString(body)) {
    return tl::unexpected(RpcError{static_cast<int>(grpc::StatusCode::INTERNAL),
                                   "cuzk sent a ProveResponse that does not parse"});
  }
  const auto& a = resp.result();
  CuzkProofResult out;
  switch (a.status()) {
    case cuzk::v1::AwaitProofResponse::COMPLETED:
      out.status = CuzkProofResult::Status::Completed;
      break;
    case cuzk::v1::AwaitProofResponse::FAILED:
      out.status = CuzkProofResult::Status::Failed;
      break;
    case cuzk::v1::AwaitProofResponse::CANCELLED:
      out.status = CuzkProofResult::Status::Cancelled;
      break;
    case cuzk::v1::AwaitProofResponse::TIMEOUT:
      out.status = CuzkProofResult::Status::Timeout;
      break;
    default:
      out.status = CuzkProofResult::Status::Unknown;
      break;
  }
  out.error_message = a.error_message();
  out.proof_bytes = a.proof().size();
  out.proof = a.proof();
  out.queue_wait_ms = a.queue_wait_ms();
  out.srs_load_ms = a.srs_load_ms();
  out.synthesis_ms = a.synthesis_ms();
  out.gpu_compute_ms = a.gpu_compute_ms();
  out.total_ms = a.total_ms();
  return out;
}

void CuzkClient::cancel_all() {
  std::lock_guard lock(impl_->mu);
  for (auto* ctx : impl_->active) ctx->TryCancel();
}

tl::expected<bool, RpcError> CuzkClient::cancel(const std::string& request_id, double timeout_s) {
  cuzk::v1::CancelProofRequest req;
  req.set_job_id(request_id);  // cuzk's job id is the request id it was given
  cuzk::v1::CancelProofResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(timeout_s));
  const grpc::Status s = impl_->stub->CancelProof(&ctx, req, &resp);
  if (!s.ok()) return tl::unexpected(to_error(s));
  return resp.was_running();
}

tl::expected<CuzkStatus, RpcError> CuzkClient::status(double timeout_s) {
  cuzk::v1::GetStatusRequest req;
  cuzk::v1::GetStatusResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_in(timeout_s));
  const grpc::Status s = impl_->stub->GetStatus(&ctx, req, &resp);
  if (!s.ok()) return tl::unexpected(to_error(s));
  CuzkStatus out;
  out.completed = resp.total_proofs_completed();
  out.failed = resp.total_proofs_failed();
  out.uptime_s = resp.uptime_seconds();
  out.gpu_workers = resp.gpus_size();
  for (const auto& g : resp.gpus()) {
    if (!g.current_job_id().empty()) out.gpu_workers_busy++;
  }
  for (const auto& q : resp.queues()) {
    out.pending += q.pending();
    out.in_progress += q.in_progress();
  }
  return out;
}

// --- CuzkProver ------------------------------------------------------------------------------

CuzkProver::CuzkProver(CuzkOptions options) : options_(std::move(options)), nonce_(random_hex(4)) {
  client_ = std::make_unique<CuzkClient>(options_.listen);
}

CuzkProver::~CuzkProver() {
  stop();
}

void CuzkProver::log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

bool CuzkProver::needs_cache_warmup() const {
  if (options_.param_dir.empty()) return false;
  std::error_code ec;
  return !fs::exists(fs::path(options_.param_dir) / kPorepPceFile, ec);
}

tl::expected<std::string, std::string> CuzkProver::start(const core::ProverPlan& plan,
                                                         bool warmup) {
  stop();
  stopping_ = false;
  if (!prepared_) {
    if (options_.c1_path.empty()) {
      return tl::unexpected(std::string(
          "cuzk needs a benchmark input (C1 file): set deploy.benchmark_input in the manager's "
          "config (agents fetch it), or pass --c1 to an agent run by hand"));
    }
    std::ifstream in(options_.c1_path, std::ios::binary);
    if (!in) return tl::unexpected("cannot read the C1 input " + options_.c1_path);
    std::ostringstream ss;
    ss << in.rdbuf();
    CuzkProofInput input;
    input.vanilla_proof = ss.str();
    if (input.vanilla_proof.empty()) {
      return tl::unexpected("the C1 input " + options_.c1_path + " is empty");
    }
    input.sector_size = options_.sector_size;
    input.registered_proof = options_.registered_proof;
    input.sector_number = options_.sector_number;
    input.miner_id = options_.miner_id;
    prepared_ = CuzkClient::prepare(input);
  }
  const int partitions = warmup ? plan.warmup_partitions : plan.partitions;
  std::string description;
  if (!options_.daemon.empty()) {
    core::CuzkEndpoints ep;
    ep.listen = options_.listen;
    ep.status_listen = options_.status_listen;
    ep.param_cache = options_.param_dir;
    ep.log_level = options_.log_level;
    {
      std::ofstream out(options_.config_path, std::ios::trunc);
      out << core::cuzk_config_toml(plan, warmup, ep);
      if (!out) return tl::unexpected("cannot write the cuzk config " + options_.config_path);
    }
    ChildOptions co;
    co.argv = {options_.daemon, "-c", options_.config_path};
    co.env = options_.env;
    co.on_line = [this](const std::string& line, bool) { log("cuzk: " + line); };
    const auto oom_before = read_oom_kills(options_.probe_root);
    auto child = ChildProcess::spawn(std::move(co));
    if (!child) return tl::unexpected(child.error());
    std::lock_guard lock(mu_);
    daemon_ = std::move(*child);
    oom_kills_before_ = oom_before;
    exit_.reset();
    peak_gib_.reset();
    description = options_.daemon + " pid " + std::to_string(daemon_->pid()) + ", ";
  } else {
    description = "external cuzk at " + options_.listen + ", ";
  }
  description += std::to_string(partitions) + " partitions, budget " +
                 core::fixed(warmup ? plan.warmup_budget_gib : plan.total_budget_gib, 0) + " GiB";

  // Ready when GetStatus answers. The daemon loads nothing heavy at start (SRS loads on the
  // first proof), so this is quick unless it cannot start at all.
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(options_.startup_timeout_s));
  std::string last_error;
  while (Clock::now() < deadline) {
    if (stopping_) return tl::unexpected(std::string("stopped while starting"));
    {
      std::lock_guard lock(mu_);
      if (daemon_) {
        if (auto st = daemon_->poll()) {
          exit_ = *st;
          return tl::unexpected(options_.daemon + " exited while starting (" + st->describe() +
                                ")");
        }
      }
    }
    auto s = client_->status(2);
    if (s) return description;
    last_error = s.error().message;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  stop();
  return tl::unexpected("cuzk did not answer GetStatus at " + options_.listen + " within " +
                        core::fixed(options_.startup_timeout_s, 0) + " s: " + last_error);
}

ProofOutcome CuzkProver::prove(const ProofJob& job) {
  if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
  if (!prepared_) return {ProofOutcome::Kind::Failed, 0, 0, 0, "cuzk prover not started"};
  std::shared_ptr<const CuzkPreparedProof> request = prepared_;
  std::string request_id = "pf-" + nonce_ + "-" + std::to_string(job.index);
  if (job.input) {
    request_id += "-job" + std::to_string(job.job_id);
    {
      std::lock_guard lock(mu_);
      job_requests_[job.job_id] = request_id;
      job_cancelled_[job.job_id] = false;
    }
    auto prepared = CuzkClient::prepare_request(*job.input);
    if (!prepared) {
      std::lock_guard lock(mu_);
      job_requests_.erase(job.job_id);
      job_cancelled_.erase(job.job_id);
      return {ProofOutcome::Kind::Failed, 0, 0, 0, prepared.error()};
    }
    request = std::move(*prepared);
    std::lock_guard lock(mu_);
    if (job_cancelled_[job.job_id]) {  // cancelled before the daemon had it
      job_requests_.erase(job.job_id);
      job_cancelled_.erase(job.job_id);
      return {ProofOutcome::Kind::Cancelled, 0, 0, 0, "cancelled"};
    }
  }
  const auto t0 = Clock::now();
  auto r = client_->prove(request, request_id, options_.prove_timeout_s);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  bool cancelled = false;
  if (job.input) {
    std::lock_guard lock(mu_);
    cancelled = job_cancelled_[job.job_id];
    job_requests_.erase(job.job_id);
    job_cancelled_.erase(job.job_id);
  }
  if (stopping_) return {ProofOutcome::Kind::Stopped, 0, 0, 0, "stopped"};
  if (cancelled && !(r && r->status == CuzkProofResult::Status::Completed)) {
    return {ProofOutcome::Kind::Cancelled, 0, 0, 0, "cancelled"};
  }
  if (!r) {
    if (r.error().transport()) {
      return {ProofOutcome::Kind::Transport, 0, 0, 0,
              "cuzk transport error (gRPC code " + std::to_string(r.error().code) +
                  "): " + r.error().message};
    }
    return {ProofOutcome::Kind::Failed, 0, 0, 0,
            "cuzk rejected the proof (gRPC code " + std::to_string(r.error().code) +
                "): " + r.error().message};
  }
  if (r->status != CuzkProofResult::Status::Completed) {
    static const char* kNames[] = {"UNKNOWN", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"};
    return {ProofOutcome::Kind::Failed, 0, 0, 0,
            std::string("cuzk proof ") + kNames[static_cast<int>(r->status)] +
                (r->error_message.empty() ? "" : ": " + r->error_message)};
  }
  ProofOutcome out;
  out.kind = ProofOutcome::Kind::Completed;
  out.seconds = std::max(seconds, 1e-3);
  out.gpu_ms = static_cast<double>(r->gpu_compute_ms);
  out.queue_ms = static_cast<double>(r->queue_wait_ms);
  if (job.input) out.proof = std::move(r->proof);
  peak_memory_gib();  // samples VmHWM while the daemon lives
  return out;
}

ProverHealth CuzkProver::health() {
  std::lock_guard lock(mu_);
  ProverHealth h;
  if (!daemon_) {
    if (exit_) {
      h.message = options_.daemon + " " + exit_->describe();
      return h;
    }
    // An external daemon: alive if it answers.
    h.running = !options_.daemon.empty() ? false : client_->status(5).has_value();
    h.message = h.running ? "running" : "cuzk at " + options_.listen + " does not answer";
    return h;
  }
  if (auto st = daemon_->poll()) {
    exit_ = *st;
    h.running = false;
    h.oom = killed_for_memory(*st, oom_kills_before_, read_oom_kills(options_.probe_root));
    h.message = options_.daemon + " " + st->describe() + (h.oom ? " (out of memory)" : "");
    return h;
  }
  h.running = true;
  h.message = "running";
  return h;
}

core::KindSet CuzkProver::proof_kinds(const std::vector<std::string>& param_files) const {
  return core::kinds_of_param_files(param_files);
}

void CuzkProver::cancel(std::int64_t job_id) {
  std::string request_id;
  {
    std::lock_guard lock(mu_);
    auto it = job_requests_.find(job_id);
    if (it == job_requests_.end()) return;
    request_id = it->second;
    job_cancelled_[job_id] = true;
  }
  auto r = client_->cancel(request_id, 10);
  if (!r) {
    log("cuzk did not cancel " + request_id + " (gRPC code " + std::to_string(r.error().code) +
        "): " + r.error().message + "; it runs to its end");
  } else {
    log("cuzk cancelled " + request_id + (*r ? "" : " (it was not running)"));
  }
}

void CuzkProver::stop() {
  stopping_ = true;
  client_->cancel_all();
  std::unique_ptr<ChildProcess> daemon;
  {
    std::lock_guard lock(mu_);
    daemon = std::move(daemon_);
    if (daemon) {
      if (auto peak = process_peak_rss_gib(daemon->pid())) {
        peak_gib_ = std::max(peak_gib_.value_or(0), *peak);
      }
    }
  }
  if (daemon) {
    // cuzk handles SIGINT only: it stops its engine (cuzk-daemon/src/main.rs:235-239 at the pinned
    // curio commit) but its gRPC server has no shutdown hook, so the process may not exit.
    // SIGTERM (no handler: the process ends) after a grace for the engine, SIGKILL after another
    // (docs/gateway.md, "What real Curio and cuzk do").
    const ExitStatus st = daemon->terminate(std::chrono::seconds(5), SIGINT);
    std::lock_guard lock(mu_);
    if (!exit_) exit_ = st;
  }
}

std::optional<double> CuzkProver::peak_memory_gib() {
  std::lock_guard lock(mu_);
  if (daemon_) {
    if (auto peak = process_peak_rss_gib(daemon_->pid())) {
      peak_gib_ = std::max(peak_gib_.value_or(0), *peak);
    }
  } else if (options_.daemon.empty()) {
    return read_cgroup_peak_gib(options_.probe_root);
  }
  return peak_gib_;
}

nlohmann::json CuzkProver::status_json() {
  using nlohmann::json;
  if (!options_.status_listen.empty()) {
    market::HttpOptions http;
    http.connect_timeout_s = 1;
    http.request_timeout_s = 2;
    market::HttpRequest req;
    req.url = "http://" + options_.status_listen + "/status";
    auto res = market::http_perform(http, req);
    if (res && res->status == 200) {
      const json s = util::parse_json(res->body).value_or(json());
      if (s.is_object()) {
        constexpr double kGiB = 1024.0 * 1024 * 1024;
        json out = json::object();
        if (s.contains("memory") && s["memory"].is_object()) {
          out["memory_used_gib"] = s["memory"].value("used_bytes", 0.0) / kGiB;
          out["memory_budget_gib"] = s["memory"].value("total_bytes", 0.0) / kGiB;
        }
        if (s.contains("synthesis") && s["synthesis"].is_object()) {
          out["synthesis_active"] = s["synthesis"].value("active", 0);
        }
        if (s.contains("pipelines") && s["pipelines"].is_array()) {
          out["pipelines"] = s["pipelines"].size();
        }
        if (s.contains("gpu_workers") && s["gpu_workers"].is_array()) {
          int busy = 0;
          for (const auto& w : s["gpu_workers"]) {
            if (w.is_object() && w.value("state", std::string()) == "proving") ++busy;
          }
          out["gpu_workers"] = s["gpu_workers"].size();
          out["gpu_workers_busy"] = busy;
        }
        if (s.contains("counters") && s["counters"].is_object()) {
          out["queue_depth"] = s["counters"].value("queue_depth", 0);
        }
        return out;
      }
    }
  }
  auto st = client_->status(2);
  if (!st) return nullptr;
  return {{"completed", st->completed},     {"failed", st->failed},
          {"gpu_workers", st->gpu_workers}, {"gpu_workers_busy", st->gpu_workers_busy},
          {"pending", st->pending},         {"in_progress", st->in_progress}};
}

}  // namespace pf::agent
