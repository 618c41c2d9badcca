#include "cli/serve_gateway.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "cli/commands.h"
#include "net/listen_fds.h"
#include "util/bounded_json.h"

namespace pf::cli {
namespace {

// The operator-issued client tokens: a secret file, so never readable by other users.
gateway::ClientAuth client_auth(const GatewaySettings& settings) {
  gateway::ClientAuth auth;
  auth.require_token = settings.require_client_token;
  if (settings.client_tokens_file.empty()) return auth;
  const std::string& path = settings.client_tokens_file;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw CommandFailed("[gateway] client_tokens_file '" + path + "': " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw CommandFailed("[gateway] client_tokens_file '" + path + "' is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%03o", static_cast<unsigned>(st.st_mode & 0777));
    throw CommandFailed("[gateway] client_tokens_file '" + path +
                        "' holds secrets but other users may read it (mode " + mode +
                        "); chmod 600 it");
  }
  auto text = util::read_bounded_file(path, gateway::kMaxClientTokensFileBytes);
  if (!text) throw CommandFailed("[gateway] client_tokens_file '" + path + "': " + text.error());
  auto tokens = gateway::parse_client_tokens(*text);
  if (!tokens) {
    throw CommandFailed("[gateway] client_tokens_file '" + path + "': " + tokens.error());
  }
  auth.tokens = std::move(*tokens);
  return auth;
}

}  // namespace

std::optional<gateway::GatewayConfig> gateway_config(const AppConfig& config,
                                                     const std::optional<std::string>& listen_flag,
                                                     bool allow_any, std::optional<int> handed_fd) {
  std::string listen = listen_flag.value_or(config.gateway.listen);
  if (handed_fd) {
    // A supervisor handed over the gRPC socket (net/listen_fds.h): it is the gateway's address,
    // whatever [gateway] listen says; the exposure checks apply to where it really listens.
    auto where = net::socket_address(*handed_fd);
    if (!where) throw CommandFailed("the \"grpc\" socket handed over: " + where.error());
    listen = where->text();
  }
  if (listen.empty() || listen == "off") return std::nullopt;
  if (!gateway::listen_host(listen)) {
    throw CommandFailed(
        "--grpc-listen: expected HOST:PORT (e.g. 127.0.0.1:9820), \"\" or \"off\", got \"" +
        listen + "\"");
  }
  gateway::GatewayConfig out;
  out.listen = listen;
  out.listening_fd = handed_fd.value_or(-1);
  out.tls_cert = config.gateway.tls_cert;
  out.tls_key = config.gateway.tls_key;
  out.tls_ca = config.gateway.tls_ca;
  out.allow = config.gateway.allow;
  out.allow_any = allow_any;
  out.curio_nodes = config.gateway.curio_nodes;
  out.curio_max_pending = config.gateway.curio_max_pending;
  out.max_pending_window = config.gateway.max_pending_window;
  out.max_input_bytes = static_cast<std::int64_t>(config.jobs.max_input_mib) << 20;
  out.local_cuzk = config.gateway.local_cuzk;
  for (const auto& kind : config.gateway.keep_local) {
    const auto parsed = core::parse_job_kind(kind);
    if (!parsed) throw CommandFailed("[gateway] keep_local: '" + kind + "' is not a proof kind");
    out.keep_local.push_back(*parsed);
  }
  out.client_auth = client_auth(config.gateway);
  out.failover_hold_s = config.gateway.failover_hold_s;
  out.max_connection_age_s = config.gateway.max_connection_age_s;
  if (auto problem = gateway::check_gateway_config(out); !problem) {
    throw CommandFailed(problem.error());
  }
  return out;
}

}  // namespace pf::cli
