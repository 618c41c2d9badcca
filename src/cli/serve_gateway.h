// `serve`'s gateway settings: --grpc-listen and --grpc-allow-any over [gateway] and [jobs], as
// the config the gRPC endpoint starts with (gateway/gateway_server.h).
#pragma once

#include <optional>
#include <string>

#include "cli/config.h"
#include "gateway/gateway_server.h"

namespace pf::cli {

// nullopt: the gateway is off (listen "" or "off"). Throws CommandFailed, naming the flag or
// key, for a listen address that is not HOST:PORT, an exposure refused (gateway/listen_exposure.h),
// a bad allow-list entry or unreadable / mismatched TLS files: all before serve creates anything.
std::optional<gateway::GatewayConfig> gateway_config(const AppConfig& config,
                                                     const std::optional<std::string>& listen_flag,
                                                     bool allow_any);

}  // namespace pf::cli
