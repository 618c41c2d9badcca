#include "gateway/gateway_front.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace pf::gateway {
namespace {

using Service = cuzk::v1::ProvingEngine::Service;

constexpr std::size_t kMaxDeniedAddressesTracked = 1024;

// Logging a refused client at its 1st, 10th, 100th... call keeps a scanner from filling the log.
bool worth_logging(std::uint64_t nth) {
  while (nth % 10 == 0) nth /= 10;
  return nth == 1;
}

}  // namespace

GatewayFront::GatewayFront(std::vector<AddressBlock> allow, std::unique_ptr<LeaderProxy> proxy)
    : allow_(std::move(allow)), proxy_(std::move(proxy)) {}

bool GatewayFront::admitted(grpc::ServerContext* ctx, const char* method) {
  const std::string peer = ctx->peer();
  if (allowed(allow_, peer_ip(peer))) return true;
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
    spdlog::warn("gateway: {} from {} refused: not in [gateway] allow ({} refused calls)", method,
                 peer.substr(0, 128), nth);
  }
  return false;
}

template <typename Request, typename Reply>
grpc::Status GatewayFront::dispatch(const char* method, grpc::ServerContext* ctx,
                                    const Request* request, Reply* reply,
                                    grpc::Status (Service::*call)(grpc::ServerContext*,
                                                                  const Request*, Reply*)) {
  grpc::Status status;
  if (!admitted(ctx, method)) {
    status = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "this client's address is not in the gateway's allow-list");
  } else if (stopping_) {
    status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway is shutting down");
  } else {
    std::shared_ptr<ProvingService> local;
    {
      std::lock_guard lock(mu_);
      local = local_;  // kept alive by this call even if the term ends meanwhile
    }
    try {
      if (local) {
        status = (local.get()->*call)(ctx, request, reply);
      } else if (proxy_) {
        status = (proxy_.get()->*call)(ctx, request, reply);
      } else {
        status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the gateway has no job queue now");
      }
    } catch (const std::exception& e) {
      spdlog::error("gateway: {} failed: {}", method, e.what());
      status = grpc::Status(grpc::StatusCode::INTERNAL, e.what());
    }
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
}

void GatewayFront::stop() {
  stopping_ = true;
  serve(nullptr);
}

grpc::Status GatewayFront::SubmitProof(grpc::ServerContext* ctx,
                                       const cuzk::v1::SubmitProofRequest* request,
                                       cuzk::v1::SubmitProofResponse* reply) {
  return dispatch("SubmitProof", ctx, request, reply, &Service::SubmitProof);
}

grpc::Status GatewayFront::AwaitProof(grpc::ServerContext* ctx,
                                      const cuzk::v1::AwaitProofRequest* request,
                                      cuzk::v1::AwaitProofResponse* reply) {
  return dispatch("AwaitProof", ctx, request, reply, &Service::AwaitProof);
}

grpc::Status GatewayFront::Prove(grpc::ServerContext* ctx, const cuzk::v1::ProveRequest* request,
                                 cuzk::v1::ProveResponse* reply) {
  return dispatch("Prove", ctx, request, reply, &Service::Prove);
}

grpc::Status GatewayFront::CancelProof(grpc::ServerContext* ctx,
                                       const cuzk::v1::CancelProofRequest* request,
                                       cuzk::v1::CancelProofResponse* reply) {
  return dispatch("CancelProof", ctx, request, reply, &Service::CancelProof);
}

grpc::Status GatewayFront::GetStatus(grpc::ServerContext* ctx,
                                     const cuzk::v1::GetStatusRequest* request,
                                     cuzk::v1::GetStatusResponse* reply) {
  return dispatch("GetStatus", ctx, request, reply, &Service::GetStatus);
}

grpc::Status GatewayFront::GetMetrics(grpc::ServerContext* ctx,
                                      const cuzk::v1::GetMetricsRequest* request,
                                      cuzk::v1::GetMetricsResponse* reply) {
  return dispatch("GetMetrics", ctx, request, reply, &Service::GetMetrics);
}

grpc::Status GatewayFront::PreloadSRS(grpc::ServerContext* ctx,
                                      const cuzk::v1::PreloadSrsRequest* request,
                                      cuzk::v1::PreloadSrsResponse* reply) {
  return dispatch("PreloadSRS", ctx, request, reply, &Service::PreloadSRS);
}

grpc::Status GatewayFront::EvictSRS(grpc::ServerContext* ctx,
                                    const cuzk::v1::EvictSrsRequest* request,
                                    cuzk::v1::EvictSrsResponse* reply) {
  return dispatch("EvictSRS", ctx, request, reply, &Service::EvictSRS);
}

}  // namespace pf::gateway
