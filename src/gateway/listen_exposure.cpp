#include "gateway/listen_exposure.h"

#include "gateway/client_allow.h"

namespace pf::gateway {

bool is_loopback_host(const std::string& host) {
  if (host == "localhost") return true;
  const auto block = parse_address_block(host);
  if (!block) return false;
  const IpAddress& ip = block->base;
  if (!ip.v6) return ip.bytes[0] == 127;
  IpAddress v6_loopback;
  v6_loopback.v6 = true;
  v6_loopback.bytes[15] = 1;
  return ip == v6_loopback;
}

std::optional<std::string> listen_host(const std::string& listen) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) return std::nullopt;
  std::string host = listen.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) return std::nullopt;
  return host;
}

std::optional<std::string> exposure_refusal(const std::string& host, bool has_allow, bool has_tls,
                                            bool allow_any) {
  if (is_loopback_host(host) || has_allow || has_tls || allow_any) return std::nullopt;
  return "the gateway would serve " + host +
         " to anyone who reaches it, and the cuzk protocol has no credentials: anyone could "
         "queue proofs on your rented fleet. Set [gateway] allow (client IPs/CIDRs) or TLS "
         "(tls_cert/tls_key), listen on 127.0.0.1, or pass --grpc-allow-any if a firewall "
         "already guards the port";
}

tl::expected<void, std::string> check_local_cuzk_address(std::string_view address) {
  if (address.rfind("unix:", 0) == 0) {
    std::string_view path = address.substr(5);
    while (path.rfind("//", 0) == 0) path.remove_prefix(1);
    if (path.size() < 2 || path.front() != '/') {
      return tl::unexpected("a Unix socket is unix:///absolute/path, got \"" +
                            std::string(address.substr(0, 100)) + "\"");
    }
    return {};
  }
  if (!listen_host(std::string(address))) {
    return tl::unexpected("expected HOST:PORT (e.g. 127.0.0.1:9821) or unix:///path, got \"" +
                          std::string(address.substr(0, 100)) + "\"");
  }
  return {};
}

}  // namespace pf::gateway
