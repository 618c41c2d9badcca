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
// `handed_fd`: the gRPC socket a supervisor handed over (net/listen_fds.h), served instead of
// binding the listen address.
std::optional<gateway::GatewayConfig> gateway_config(const AppConfig& config,
                                                     const std::optional<std::string>& listen_flag,
                                                     bool allow_any,
                                                     std::optional<int> handed_fd = std::nullopt);

}  // namespace pf::cli
