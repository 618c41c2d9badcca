#include "gateway/gateway_server.h"

#include <fcntl.h>
#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/resource_quota.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <mutex>
#include <thread>

#include "gateway/client_allow.h"
#include "gateway/gateway_front.h"
#include "gateway/proving_service.h"
#include "gateway/request_check.h"
#include "net/listen_fds.h"
#include "util/bounded_json.h"
#include "util/unique_fd.h"

namespace pf::gateway {
namespace {

constexpr std::size_t kMaxPemBytes = 1u << 20;
constexpr int kMaxWindow = 10'000;
constexpr std::chrono::seconds kShutdownGrace{2};

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

// The PEM pair, read once and checked here so a bad file stops `serve` with its name instead of
// failing every client's handshake later.
tl::expected<grpc::SslServerCredentialsOptions::PemKeyCertPair, std::string> load_tls(
    const std::string& cert_path, const std::string& key_path) {
  auto cert = util::read_bounded_file(cert_path, kMaxPemBytes);
  if (!cert) return tl::unexpected("gateway TLS certificate '" + cert_path + "': " + cert.error());
  auto key = util::read_bounded_file(key_path, kMaxPemBytes);
  if (!key) return tl::unexpected("gateway TLS key '" + key_path + "': " + key.error());
  std::unique_ptr<BIO, BioFree> cert_bio(
      BIO_new_mem_buf(cert->data(), static_cast<int>(cert->size())));
  std::unique_ptr<X509, X509Free> x509(
      cert_bio ? PEM_read_bio_X509(cert_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!x509) {
    return tl::unexpected("gateway TLS certificate '" + cert_path + "': not a PEM certificate");
  }
  std::unique_ptr<BIO, BioFree> key_bio(
      BIO_new_mem_buf(key->data(), static_cast<int>(key->size())));
  std::unique_ptr<EVP_PKEY, KeyFree> pkey(
      key_bio ? PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!pkey) {
    return tl::unexpected("gateway TLS key '" + key_path +
                          "': not a PEM private key (or it is encrypted)");
  }
  if (X509_check_private_key(x509.get(), pkey.get()) != 1) {
    return tl::unexpected("gateway TLS key '" + key_path +
                          "' does not belong to the certificate '" + cert_path + "'");
  }
  return grpc::SslServerCredentialsOptions::PemKeyCertPair{std::move(*key), std::move(*cert)};
}

// The certificates a follower trusts for the leader's gateway, read and checked at start.
tl::expected<std::string, std::string> load_ca(const std::string& path) {
  auto pem = util::read_bounded_file(path, kMaxPemBytes);
  if (!pem) return tl::unexpected("gateway TLS CA '" + path + "': " + pem.error());
  std::unique_ptr<BIO, BioFree> bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  std::unique_ptr<X509, X509Free> first(
      bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!first) return tl::unexpected("gateway TLS CA '" + path + "': not a PEM certificate");
  return std::move(*pem);
}

}  // namespace

// Accepts on the gateway's listening socket and passes each connection to the gRPC server
// (ServerBuilder::experimental().AddExternalConnectionAcceptor, grpcpp/server_builder.h): gRPC
// itself binds only addresses it is given, not descriptors, and a socket it bound could not be
// handed to a successor. The socket is one a supervisor handed over or one the gateway bound
// itself (net::listen_tcp). Polls so that stop() needs nothing from the socket: the supervisor
// or a successor keeps it, shared, for the next process.
class HandedSocketLoop {
 public:
  HandedSocketLoop(int fd, std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor)
      : fd_(fd), acceptor_(std::move(acceptor)) {}
  ~HandedSocketLoop() { stop(); }
  HandedSocketLoop(const HandedSocketLoop&) = delete;
  HandedSocketLoop& operator=(const HandedSocketLoop&) = delete;

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  // Stops accepting (connections still in the backlog wait there for the next process) and
  // closes this process's descriptor of the socket. Idempotent; not from the loop's thread.
  void stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(fd_mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // A second descriptor of the socket (close-on-exec), for a successor; -1 once stopped.
  util::UniqueFd duplicate() {
    std::lock_guard lock(fd_mu_);
    return util::UniqueFd(fd_ >= 0 ? ::fcntl(fd_, F_DUPFD_CLOEXEC, 0) : -1);
  }

 private:
  void run() {
    while (!stopping_) {
      pollfd ready{fd_, POLLIN, 0};
      if (::poll(&ready, 1, 200) <= 0) continue;  // a timeout or EINTR: look at stopping_
      const int connection = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (connection < 0) {
        // EAGAIN: another process took it; ECONNABORTED: the client left. Out of descriptors
        // (EMFILE, ENFILE): the connection waits in the backlog; do not spin on it.
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        continue;
      }
      grpc::experimental::ExternalConnectionAcceptor::NewConnectionParameters params;
      params.listener_fd = fd_;
      params.fd = connection;
      acceptor_->HandleNewConnection(&params);  // the server owns the connection from here
    }
  }

  std::mutex fd_mu_;  // guards fd_ against stop() while a successor's copy is made
  int fd_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> acceptor_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

GatewayServer::~GatewayServer() {
  shutdown();
}

const GatewayMetrics& GatewayServer::metrics() const {
  return front_->metrics();
}

void GatewayServer::serve_queue(jobs::JobQueue& queue) {
  ServiceOptions options;
  options.max_input_bytes = max_input_bytes_;
  front_->serve(std::make_shared<ProvingService>(queue, options, front_->metrics()));
}

void GatewayServer::stop_serving_queue() {
  front_->serve(nullptr);
}

std::uint64_t GatewayServer::relayed() const {
  return front_->proxy() ? front_->proxy()->relayed() : 0;
}

int GatewayServer::open_calls() const {
  return front_->open_calls();
}

tl::expected<util::UniqueFd, std::string> GatewayServer::duplicate_listening_socket() {
  util::UniqueFd copy = handed_ ? handed_->duplicate() : util::UniqueFd();
  if (copy.get() < 0) {
    return tl::unexpected(std::string("the gateway no longer accepts on its socket"));
  }
  return copy;
}

void GatewayServer::stop_accepting() {
  if (handed_) handed_->stop();
  if (front_->proxy()) front_->proxy()->reconnect();
}

void GatewayServer::end_held_calls() {
  front_->stop();
  if (front_->proxy()) front_->proxy()->cancel_relayed("this replica is stopping");
}

void GatewayServer::shutdown() {
  if (!server_) return;
  if (handed_) handed_->stop();  // new connections wait in the socket's backlog
  front_->stop();
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
  server_.reset();
}

int open_call_window(const GatewayConfig& config) {
  if (config.max_pending_window > 0) return config.max_pending_window;
  const std::int64_t product =
      static_cast<std::int64_t>(config.curio_nodes) * config.curio_max_pending;
  return static_cast<int>(std::min<std::int64_t>(product, kMaxWindow));
}

std::chrono::milliseconds all_connections_told_to_go(const GatewayConfig& config) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(config.max_connection_age_s * 1100)) +
         std::chrono::seconds(2);
}

int max_gateway_threads(const GatewayConfig& config) {
  return 2 * open_call_window(config) + kThreadHeadroom;
}

tl::expected<void, std::string> check_gateway_config(const GatewayConfig& config) {
  const auto host = listen_host(config.listen);
  if (!host) {
    return tl::unexpected(
        "gateway listen address: expected HOST:PORT (e.g. 127.0.0.1:9820), got \"" + config.listen +
        "\"");
  }
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return tl::unexpected(
        std::string("gateway TLS: tls_cert and tls_key go together: give both or neither"));
  }
  if (config.max_pending_window < 0 || config.max_pending_window > kMaxWindow) {
    return tl::unexpected(
        "gateway max_pending_window must be 0 (curio_nodes × curio_max_pending) "
        "to " +
        std::to_string(kMaxWindow));
  }
  if (!(config.failover_hold_s >= 0 && config.failover_hold_s <= 3600)) {
    return tl::unexpected(std::string("gateway failover_hold_s must be 0 to 3600 seconds"));
  }
  if (!(config.max_connection_age_s >= 1 && config.max_connection_age_s <= 3600)) {
    return tl::unexpected(std::string("gateway max_connection_age_s must be 1 to 3600 seconds"));
  }
  if (config.curio_nodes < 1 || config.curio_max_pending < 1) {
    return tl::unexpected(
        std::string("gateway curio_nodes and curio_max_pending must be at least 1"));
  }
  if (!config.local_cuzk.empty()) {
    if (auto ok = check_local_cuzk_address(config.local_cuzk); !ok) {
      return tl::unexpected("gateway local_cuzk: " + ok.error());
    }
    if (config.local_cuzk == config.listen) {
      return tl::unexpected("gateway local_cuzk (" + config.local_cuzk +
                            ") is the gateway's own listen address: PoSt would loop back here");
    }
  }
  if (config.max_input_bytes < 1) {
    return tl::unexpected(std::string("gateway max input size must be at least 1 byte"));
  }
  if (auto refusal = exposure_refusal(*host, !config.allow.empty(), !config.tls_cert.empty(),
                                      config.allow_any)) {
    return tl::unexpected(*refusal);
  }
  if (auto allow = parse_allow_list(config.allow); !allow) {
    return tl::unexpected("gateway allow-list: " + allow.error());
  }
  if (!config.tls_cert.empty()) {
    if (auto pair = load_tls(config.tls_cert, config.tls_key); !pair) {
      return tl::unexpected(pair.error());
    }
  }
  if (!config.tls_ca.empty()) {
    if (config.tls_cert.empty()) {
      return tl::unexpected(std::string(
          "gateway TLS: tls_ca is what replicas trust for each other's TLS gateway; it needs "
          "tls_cert and tls_key"));
    }
    if (auto roots = load_ca(config.tls_ca); !roots) return tl::unexpected(roots.error());
  }
  return {};
}

tl::expected<std::unique_ptr<GatewayServer>, std::string> start_gateway(
    jobs::JobQueue& queue, const GatewayConfig& config) {
  auto gateway = start_replica_gateway(config, {});
  if (gateway) (*gateway)->serve_queue(queue);
  return gateway;
}

tl::expected<std::unique_ptr<GatewayServer>, std::string> start_replica_gateway(
    const GatewayConfig& config, ReplicaGatewayOptions replica) {
  if (auto ok = check_gateway_config(config); !ok) return tl::unexpected(ok.error());
  const std::string host = *listen_host(config.listen);
  const bool tls = !config.tls_cert.empty();
  auto allow = parse_allow_list(config.allow);
  if (!allow) return tl::unexpected("gateway allow-list: " + allow.error());
  const std::int64_t max_message =
      std::min<std::int64_t>(config.max_input_bytes + kMessageMargin, INT32_MAX);

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  std::string tls_root_pem;
  std::string tls_root_source;
  if (tls) {
    auto pair = load_tls(config.tls_cert, config.tls_key);
    if (!pair) return tl::unexpected(pair.error());
    if (config.tls_ca.empty()) {
      // Replicas that share one certificate trust it when relaying.
      tls_root_pem = pair->cert_chain;
      tls_root_source = "this replica's own certificate (tls_cert '" + config.tls_cert +
                        "'; set [gateway] tls_ca when replicas have their own)";
    } else {
      auto roots = load_ca(config.tls_ca);
      if (!roots) return tl::unexpected(roots.error());
      tls_root_pem = std::move(*roots);
      tls_root_source = "tls_ca '" + config.tls_ca + "'";
    }
    grpc::SslServerCredentialsOptions options;
    options.pem_key_cert_pairs.push_back(std::move(*pair));
    credentials = grpc::SslServerCredentials(options);
  }

  std::unique_ptr<LeaderProxy> proxy;
  if (replica.leader) {
    LeaderProxyOptions proxy_options;
    proxy_options.replica_id = replica.replica_id;
    proxy_options.leader = std::move(replica.leader);
    proxy_options.replica_token = replica.replica_token;
    proxy_options.tls_root_pem = std::move(tls_root_pem);
    proxy_options.tls_root_source = std::move(tls_root_source);
    proxy_options.max_message_bytes = static_cast<int>(max_message);
    proxy = std::make_unique<LeaderProxy>(std::move(proxy_options));
  }
  std::unique_ptr<GatewayServer> gateway(new GatewayServer());
  gateway->max_input_bytes_ = config.max_input_bytes;
  FrontRules rules;
  rules.auth = config.client_auth;
  rules.keep_local = config.keep_local;
  rules.failover_hold_s = config.failover_hold_s;
  if (!config.local_cuzk.empty()) rules.local_cuzk = std::make_unique<LocalCuzk>(config.local_cuzk);
  gateway->front_ = std::make_unique<GatewayFront>(
      std::move(*allow), std::move(proxy), std::move(replica.replica_token), std::move(rules));

  // The listening socket: handed over (a supervisor, a predecessor), or bound here.
  util::UniqueFd listening(config.listening_fd);
  if (listening.get() < 0) {
    const auto colon = config.listen.rfind(':');
    int port = -1;
    const std::string port_text = config.listen.substr(colon + 1);
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 ||
        port > 65535) {
      return tl::unexpected("gateway listen address: the port of \"" + config.listen +
                            "\" is not a number from 0 to 65535");
    }
    auto bound = net::listen_tcp(host, port);
    if (!bound) {
      return tl::unexpected("gateway: " + bound.error() +
                            " (address in use, or not an address of this machine)");
    }
    listening = std::move(*bound);
  }
  const auto where = net::socket_address(listening.get());
  if (!where) return tl::unexpected("gateway: the listening socket: " + where.error());
  gateway->port_ = where->port;
  grpc::ServerBuilder builder;
  auto acceptor = builder.experimental().AddExternalConnectionAcceptor(
      grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD, credentials);
  // Curio holds Prove calls open for up to 30 minutes; let its keepalive pings through.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS,
                             static_cast<int>(config.max_connection_age_s * 1000));
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message));
  grpc::ResourceQuota quota("proverfleet-gateway");
  quota.SetMaxThreads(max_gateway_threads(config));
  builder.SetResourceQuota(quota);
  builder.RegisterService(gateway->front_.get());
  gateway->server_ = builder.BuildAndStart();
  if (!gateway->server_)
    return tl::unexpected(std::string("gateway: the gRPC server did not start"));
  gateway->handed_ = std::make_unique<HandedSocketLoop>(listening.release(), std::move(acceptor));
  gateway->handed_->start();
  spdlog::info(
      "gateway: cuzk.v1.ProvingEngine on {}:{}{} ({}; sized for {} open Prove calls, threads for "
      "{}; inputs up to {} MiB; PoSt{} {}). Point every Curio node's [Cuzk] Address here.",
      host.find(':') != std::string::npos ? "[" + host + "]" : host, gateway->port_,
      tls ? " (TLS)" : "",
      config.allow.empty() ? std::string("any client")
                           : std::to_string(config.allow.size()) + " allowed address blocks",
      open_call_window(config), max_gateway_threads(config),
      std::min(config.max_input_bytes, kCuzkMaxInputBytes) >> 20,
      config.keep_local.empty() ? "" : " and keep_local kinds",
      config.local_cuzk.empty() ? "refused (no local_cuzk)"
                                : "relayed to the operator's cuzk at " + config.local_cuzk);
  return gateway;
}

}  // namespace pf::gateway
