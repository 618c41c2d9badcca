#include "gateway/gateway_front.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <type_traits>
#include <utility>

#include "gateway/request_check.h"

namespace pf::gateway {
namespace {

constexpr std::size_t kMaxDeniedAddressesTracked = 1024;
constexpr std::chrono::milliseconds kFirstHoldPause{250};
constexpr std::chrono::milliseconds kMaxHoldPause{2000};

// Counts a call as open for as long as its handler runs (GatewayFront::open_calls).
class OpenCall {
 public:
  explicit OpenCall(std::atomic<int>& count) : count_(count) { ++count_; }
  ~OpenCall() { --count_; }
  OpenCall(const OpenCall&) = delete;
  OpenCall& operator=(const OpenCall&) = delete;

 private:
  std::atomic<int>& count_;
};

// Logging a refused client at its 1st, 10th, 100th... call keeps a scanner from filling the log.
bool worth_logging(std::uint64_t nth) {
  while (nth % 10 == 0) nth /= 10;
  return nth == 1;
}

}  // namespace

GatewayFront::GatewayFront(std::vector<AddressBlock> allow, std::unique_ptr<LeaderProxy> proxy,
                           std::string replica_token, FrontRules rules)
    : allow_(std::move(allow)),
      proxy_(std::move(proxy)),
      replica_token_(std::move(replica_token)),
      rules_(std::move(rules)) {}

void GatewayFront::count_refusal(const std::string& peer, const char* method,
                                 const std::string& why) {
  metrics_.count_denied();
  std::uint64_t nth = 0;
  {
    const std::string address = peer.substr(0, std::min<std::size_t>(peer.rfind(':'), 128));
    std::lock_guard lock(denied_mutex_);
    if (!denied_by_address_.count(address) &&
        denied_by_address_.size() >= kMaxDeniedAddressesTracked) {
      denied_by_address_.clear();  // forget old scanners rather than grow
    }
    nth = ++denied_by_address_[address];
  }
  if (worth_logging(nth)) {
    spdlog::warn("gateway: {} from {} refused: {} ({} refused calls)", method, peer.substr(0, 128),
                 why, nth);
  }
}

tl::expected<Caller, grpc::Status> GatewayFront::admitted(grpc::ServerContext* ctx,
                                                          const char* method) {
  const std::string peer = ctx->peer();
  auto caller = identify_caller(ctx->client_metadata(), replica_token_, rules_.auth);
  if (!caller) {
    count_refusal(peer, method, caller.error());
    return tl::unexpected(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, caller.error()));
  }
  // A replica's relay was admitted by that replica's own allow-list.
  if (caller->relayed || allowed(allow_, peer_ip(peer))) return std::move(*caller);
  count_refusal(peer, method, "not in [gateway] allow");
  return tl::unexpected(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                     "this client's address is not in the gateway's allow-list"));
}

template <typename Call>
grpc::Status GatewayFront::dispatch(const char* method, grpc::ServerContext* ctx, Call&& call) {
  const OpenCall open(open_calls_);
  grpc::Status status;
  auto caller = admitted(ctx, method);
  if (!caller) {
    metrics_.count_call(method, caller.error().error_code());
    return caller.error();
  }
  const auto held_since = std::chrono::steady_clock::now();
  auto pause = kFirstHoldPause;
  // The local service takes the request's bulk (it keeps no second copy of a large input), so
  // a call it answered cannot be tried again; one the leader's relay answered can.
  bool consumed = false;
  for (int tries = 0;; ++tries) {
    if (stopping_) {
      status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway is shutting down");
      break;
    }
    std::shared_ptr<ProvingService> local;
    {
      std::lock_guard lock(mu_);
      local = local_;  // kept alive by this call even if the term ends meanwhile
    }
    try {
      if (local) {
        consumed = true;
        status = call(*local, caller->client);
      } else if (proxy_) {
        status = call(*proxy_, caller->client);
      } else {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway has no job queue now");
      }
    } catch (const std::exception& e) {
      spdlog::error("gateway: {} failed: {}", method, e.what());
      status = grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
    if (consumed || !held_through_failover(ctx, status, held_since, pause)) {
      if (tries > 0 && status.ok()) metrics_.count_held();
      break;
    }
    pause = std::min(pause * 2, kMaxHoldPause);
  }
  metrics_.count_call(method, status.error_code());
  return status;
}

bool GatewayFront::held_through_failover(grpc::ServerContext* ctx, const grpc::Status& status,
                                         std::chrono::steady_clock::time_point held_since,
                                         std::chrono::milliseconds pause) {
  // Only a replica's gateway has a failover to wait out; a lone one's UNAVAILABLE is final. A
  // call another replica relayed here is held by that replica, which tries again where it should
  // (holding it here too would keep its answer, say a relay loop's, from it for the whole hold).
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE || !proxy_ ||
      rules_.failover_hold_s <= 0 || stopping_ || ctx->IsCancelled() ||
      ctx->client_metadata().count(kRelayedByMetadata) != 0) {
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - held_since + pause > std::chrono::duration<double>(rules_.failover_hold_s)) {
    return false;
  }
  // Keep a second of the client's deadline for the answer.
  if (ctx->deadline() - std::chrono::system_clock::now() < pause + std::chrono::seconds(1)) {
    return false;
  }
  std::unique_lock lock(mu_);
  hold_cv_.wait_for(lock, pause, [this] { return stopping_.load(); });
  return !stopping_;
}

template <typename Call>
grpc::Status GatewayFront::dispatch_local(const char* method, grpc::ServerContext* ctx,
                                          cuzk::v1::ProofKind kind, Call&& call) {
  const OpenCall open(open_calls_);
  grpc::Status status;
  auto caller = admitted(ctx, method);
  if (!caller) {
    status = caller.error();
  } else if (stopping_) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway is shutting down");
  } else if (!rules_.local_cuzk) {
    status = no_local_cuzk(kind);
    metrics_.count_local(kind, false);
  } else {
    status = call(*rules_.local_cuzk);
    metrics_.count_local(kind, true);
  }
  metrics_.count_call(method, status.error_code());
  return status;
}

void GatewayFront::serve(std::shared_ptr<ProvingService> local) {
  const bool leads = local != nullptr;
  std::shared_ptr<ProvingService> previous;
  {
    std::lock_guard lock(mu_);
    previous = std::exchange(local_, std::move(local));
  }
  if (previous) previous->stop();
  if (leads && proxy_) proxy_->cancel_relayed("this replica leads now");
  hold_cv_.notify_all();  // held calls try again now: here, or at the new leader
}

void GatewayFront::stop() {
  stopping_ = true;
  hold_cv_.notify_all();
  serve(nullptr);
}

grpc::Status GatewayFront::SubmitProof(grpc::ServerContext* ctx,
                                       const cuzk::v1::SubmitProofRequest* request,
                                       cuzk::v1::SubmitProofResponse* reply) {
  if (proved_locally(request->proof_kind(), rules_.keep_local)) {
    return dispatch_local("SubmitProof", ctx, request->proof_kind(),
                          [&](LocalCuzk& local) { return local.SubmitProof(ctx, request, reply); });
  }
  return dispatch("SubmitProof", ctx, [&](auto& target, const std::string& client) {
    return target.SubmitProof(ctx, client, request, reply);
  });
}

grpc::Status GatewayFront::AwaitProof(grpc::ServerContext* ctx,
                                      const cuzk::v1::AwaitProofRequest* request,
                                      cuzk::v1::AwaitProofResponse* reply) {
  const grpc::Status status =
      dispatch("AwaitProof", ctx, [&](auto& target, const std::string& client) {
        if constexpr (std::is_same_v<std::decay_t<decltype(target)>, ProvingService>) {
          std::string kept;
          const grpc::Status ended = target.AwaitProof(ctx, client, request, reply, &kept);
          if (kept.empty()) return ended;
          return follow_kept_job(ctx, client, kept, await_timeout(request->timeout_ms()), reply,
                                 ended);
        } else {
          return target.AwaitProof(ctx, client, request, reply);
        }
      });
  // A job id the fleet does not know may be one SubmitProof relayed to the local daemon.
  if (status.error_code() == grpc::StatusCode::NOT_FOUND && rules_.local_cuzk) {
    return rules_.local_cuzk->AwaitProof(ctx, request, reply);
  }
  return status;
}

grpc::Status GatewayFront::Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* request,
                                 cuzk::v1::ProveResponse* reply) {
  if (request->has_submit() && proved_locally(request->submit().proof_kind(), rules_.keep_local)) {
    return dispatch_local("Prove", ctx, request->submit().proof_kind(),
                          [&](LocalCuzk& local) { return local.Prove(ctx, request, reply); });
  }
  return dispatch("Prove", ctx, [&](auto& target, const std::string& client) {
    if constexpr (std::is_same_v<std::decay_t<decltype(target)>, ProvingService>) {
      std::string kept;
      const grpc::Status ended = target.Prove(ctx, client, request, reply, &kept);
      if (kept.empty()) return ended;
      return follow_kept_job(ctx, client, kept, std::nullopt, reply->mutable_result(), ended);
    } else {
      return target.Prove(ctx, client, request, reply);
    }
  });
}

grpc::Status GatewayFront::follow_kept_job(grpc::ServerContext* ctx, const std::string& client,
                                           const std::string& job_id,
                                           std::optional<std::chrono::milliseconds> timeout,
                                           cuzk::v1::AwaitProofResponse* reply,
                                           grpc::Status ended) {
  const auto held_since = std::chrono::steady_clock::now();
  auto pause = kFirstHoldPause;
  cuzk::v1::AwaitProofRequest await;
  await.set_job_id(job_id);
  grpc::Status status = ended;
  while (held_through_failover(ctx, status, held_since, pause)) {
    if (timeout) {
      const auto left = *timeout - std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now() - held_since);
      if (left <= std::chrono::milliseconds::zero()) {
        reply->Clear();
        reply->set_job_id(job_id);
        reply->set_status(cuzk::v1::AwaitProofResponse::TIMEOUT);
        reply->set_error_message("not finished within timeout_ms; the job goes on");
        return grpc::Status::OK;
      }
      await.set_timeout_ms(static_cast<std::uint64_t>(left.count()));
    }
    std::shared_ptr<ProvingService> local;
    {
      std::lock_guard lock(mu_);
      local = local_;
    }
    reply->Clear();
    std::string kept_again;
    // The next term may be this replica's own (a successor that did not take over after all).
    status = local ? local->AwaitProof(ctx, client, &await, reply, &kept_again)
                   : proxy_->AwaitProof(ctx, client, &await, reply);
    pause = std::min(pause * 2, kMaxHoldPause);
  }
  if (status.ok()) {
    metrics_.count_held();
    spdlog::info(
        "gateway: job {} of {} answered by the next leader (this replica's term ended under its "
        "call)",
        job_id, client);
  }
  return status;
}

grpc::Status GatewayFront::CancelProof(grpc::ServerContext* ctx,
                                       const cuzk::v1::CancelProofRequest* request,
                                       cuzk::v1::CancelProofResponse* reply) {
  return dispatch("CancelProof", ctx, [&](auto& target, const std::string& client) {
    return target.CancelProof(ctx, client, request, reply);
  });
}

grpc::Status GatewayFront::GetStatus(grpc::ServerContext* ctx,
                                     const cuzk::v1::GetStatusRequest* request,
                                     cuzk::v1::GetStatusResponse* reply) {
  return dispatch("GetStatus", ctx, [&](auto& target, const std::string& client) {
    return target.GetStatus(ctx, client, request, reply);
  });
}

grpc::Status GatewayFront::GetMetrics(grpc::ServerContext* ctx,
                                      const cuzk::v1::GetMetricsRequest* request,
                                      cuzk::v1::GetMetricsResponse* reply) {
  return dispatch("GetMetrics", ctx, [&](auto& target, const std::string& client) {
    return target.GetMetrics(ctx, client, request, reply);
  });
}

grpc::Status GatewayFront::PreloadSRS(grpc::ServerContext* ctx,
                                      const cuzk::v1::PreloadSrsRequest* request,
                                      cuzk::v1::PreloadSrsResponse* reply) {
  return dispatch("PreloadSRS", ctx, [&](auto& target, const std::string& client) {
    return target.PreloadSRS(ctx, client, request, reply);
  });
}

grpc::Status GatewayFront::EvictSRS(grpc::ServerContext* ctx,
                                    const cuzk::v1::EvictSrsRequest* request,
                                    cuzk::v1::EvictSrsResponse* reply) {
  return dispatch("EvictSRS", ctx, [&](auto& target, const std::string& client) {
    return target.EvictSRS(ctx, client, request, reply);
  });
}

}  // namespace pf::gateway
