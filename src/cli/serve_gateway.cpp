#include "cli/serve_gateway.h"

#include "cli/commands.h"

namespace pf::cli {

std::optional<gateway::GatewayConfig> gateway_config(const AppConfig& config,
                                                     const std::optional<std::string>& listen_flag,
                                                     bool allow_any) {
  const std::string listen = listen_flag.value_or(config.gateway.listen);
  if (listen.empty() || listen == "off") return std::nullopt;
  if (!gateway::listen_host(listen)) {
    throw CommandFailed(
        "--grpc-listen: expected HOST:PORT (e.g. 127.0.0.1:9820), \"\" or \"off\", got \"" +
        listen + "\"");
  }
  gateway::GatewayConfig out;
  out.listen = listen;
  out.tls_cert = config.gateway.tls_cert;
  out.tls_key = config.gateway.tls_key;
  out.tls_ca = config.gateway.tls_ca;
  out.allow = config.gateway.allow;
  out.allow_any = allow_any;
  out.max_pending_window = config.gateway.max_pending_window;
  out.max_input_bytes = static_cast<std::int64_t>(config.jobs.max_input_mib) << 20;
  if (auto problem = gateway::check_gateway_config(out); !problem) {
    throw CommandFailed(problem.error());
  }
  return out;
}

}  // namespace pf::cli
