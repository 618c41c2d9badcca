#include "gateway/gateway_front.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace pf::gateway {
namespace {

constexpr std::size_t kMaxDeniedAddressesTracked = 1024;
constexpr std::chrono::milliseconds kFirstHoldPause{250};
constexpr std::chrono::milliseconds kMaxHoldPause{2000};

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
  // Only a replica's gateway has a failover to wait out; a lone one's UNAVAILABLE is final.
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE || !proxy_ ||
      rules_.failover_hold_s <= 0 || stopping_ || ctx->IsCancelled()) {
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
        return target.AwaitProof(ctx, client, request, reply);
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
    return target.Prove(ctx, client, request, reply);
  });
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
