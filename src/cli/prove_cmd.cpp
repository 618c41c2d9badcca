// `proverfleet prove`: one proof through the gateway's gRPC API, the way Curio asks for it
// (cli/prove_request.h builds the request; Prove blocks until the proof or an error). Prints the
// job id, status and timings (a table, or JSON with --json) and writes the proof to --out.
// Exit 0 only for a COMPLETED proof.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/prove_request.h"
#include "cli/secrets.h"
#include "cli/table.h"
#include "cuzk/v1/proving.grpc.pb.h"
#include "gateway/client_tokens.h"
#include "gateway/request_check.h"
#include "util/bounded_json.h"

namespace pf::cli {
namespace {

constexpr std::size_t kMaxInputFileBytes = 2000ULL << 20;
constexpr std::size_t kMaxCaFileBytes = 1u << 20;
constexpr int kMaxMessageBytes = INT32_MAX;

struct ProveOptions {
  std::string input;
  std::string kind = "porep-c2";
  std::string gateway = "127.0.0.1:9820";
  std::optional<std::string> tls_ca;
  std::optional<std::string> client_token_file;
  ProveInputs fields;
  std::optional<std::uint64_t> sector;
  double timeout_s = 3600;
  bool json = false;
  std::optional<std::string> out;
};

const char* status_name(cuzk::v1::AwaitProofResponse::Status status) {
  switch (status) {
    case cuzk::v1::AwaitProofResponse::COMPLETED:
      return "COMPLETED";
    case cuzk::v1::AwaitProofResponse::FAILED:
      return "FAILED";
    case cuzk::v1::AwaitProofResponse::CANCELLED:
      return "CANCELLED";
    case cuzk::v1::AwaitProofResponse::TIMEOUT:
      return "TIMEOUT";
    default:
      return "UNKNOWN";
  }
}

// What a gRPC failure means for someone running this command.
std::string explain(const grpc::Status& status, const std::string& gateway) {
  const std::string detail = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return "cannot reach the gateway at " + gateway +
             " (is `proverfleet serve` running with --grpc-listen there?): " + detail;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "no proof within --timeout; the job goes on: run the same command with "
             "--request-id to join it (" +
             detail + ")";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "the gateway refused this client's address ([gateway] allow): " + detail;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "the gateway refused the request: " + detail;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "the gateway refused the request as too large or too many: " + detail;
    default:
      return "the gateway answered " + std::to_string(static_cast<int>(status.error_code())) +
             ": " + detail;
  }
}

void print_result(const std::string& request_id, const cuzk::v1::AwaitProofResponse& result,
                  double wall_s, const std::optional<std::string>& out, bool as_json) {
  if (as_json) {
    nlohmann::json j{{"job_id", result.job_id().empty() ? request_id : result.job_id()},
                     {"status", status_name(result.status())},
                     {"proof_bytes", result.proof().size()},
                     {"queue_wait_ms", result.queue_wait_ms()},
                     {"gpu_compute_ms", result.gpu_compute_ms()},
                     {"total_ms", result.total_ms()},
                     {"wall_s", std::round(wall_s * 10) / 10}};
    if (!result.error_message().empty()) j["error"] = result.error_message();
    if (out) j["out"] = *out;
    std::cout << j.dump(2) << "\n";
    return;
  }
  Table table({{"job id"},
               {"status"},
               {"proof bytes", Table::Align::Right},
               {"queue ms", Table::Align::Right},
               {"gpu ms", Table::Align::Right},
               {"total ms", Table::Align::Right},
               {"wall s", Table::Align::Right}});
  char wall[32];
  std::snprintf(wall, sizeof wall, "%.1f", wall_s);
  table.add_row({result.job_id().empty() ? request_id : result.job_id(),
                 status_name(result.status()), std::to_string(result.proof().size()),
                 std::to_string(result.queue_wait_ms()), std::to_string(result.gpu_compute_ms()),
                 std::to_string(result.total_ms()), wall});
  table.print(std::cout);
  if (!result.error_message().empty()) std::cout << "error: " << result.error_message() << "\n";
  if (out) std::cout << "proof written to " << *out << "\n";
}

void run_prove(ProveOptions o) {
  const auto kind = core::parse_job_kind(o.kind);
  if (!kind) {
    throw CommandFailed(
        "--kind: expected porep-c2, snap-update, window-post or winning-post, got \"" + o.kind +
        "\"");
  }
  if (!std::isfinite(o.timeout_s) || o.timeout_s < 1 || o.timeout_s > 7 * 86400) {
    throw CommandFailed("--timeout must be between 1 and 604800 seconds");
  }
  o.fields.kind = *kind;
  o.fields.sector = o.sector;
  if (o.fields.request_id.empty()) o.fields.request_id = gateway::generate_request_id();
  if (auto ok = gateway::check_request_id(o.fields.request_id, "--request-id"); !ok) {
    throw CommandFailed(ok.error().message);
  }
  auto file = util::read_bounded_file(o.input, kMaxInputFileBytes);
  if (!file) throw CommandFailed("--input '" + o.input + "': " + file.error());
  auto request = build_prove_request(o.fields, std::move(*file));
  if (!request) throw CommandFailed(request.error());

  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (o.tls_ca) {
    auto roots = util::read_bounded_file(*o.tls_ca, kMaxCaFileBytes);
    if (!roots) throw CommandFailed("--tls-ca '" + *o.tls_ca + "': " + roots.error());
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = std::move(*roots);
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  auto channel = grpc::CreateCustomChannel(o.gateway, credentials, args);
  auto stub = cuzk::v1::ProvingEngine::NewStub(channel);

  if (!o.json) {
    std::cerr << "proving " << o.kind << " " << o.fields.request_id << " ("
              << request->ByteSizeLong() << " bytes) through " << o.gateway << "...\n";
  }
  cuzk::v1::ProveRequest prove;
  *prove.mutable_submit() = std::move(*request);
  cuzk::v1::ProveResponse reply;
  grpc::ClientContext ctx;
  if (o.client_token_file) {
    // A client of its own, with request ids of its own (gateway/client_tokens.h).
    ctx.AddMetadata(gateway::kClientTokenMetadata,
                    "Bearer " + read_secret_file(*o.client_token_file, "client token"));
  }
  const auto started = std::chrono::steady_clock::now();
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000)));
  const grpc::Status status = stub->Prove(&ctx, prove, &reply);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!status.ok()) throw CommandFailed(explain(status, o.gateway));

  const auto& result = reply.result();
  const bool completed = result.status() == cuzk::v1::AwaitProofResponse::COMPLETED;
  if (completed && o.out) {
    std::ofstream file_out(*o.out, std::ios::binary | std::ios::trunc);
    file_out.write(result.proof().data(), static_cast<std::streamsize>(result.proof().size()));
    file_out.close();
    if (!file_out) throw CommandFailed("--out '" + *o.out + "': cannot write the proof");
  }
  print_result(o.fields.request_id, result, wall_s, completed ? o.out : std::nullopt, o.json);
  if (!completed) {
    throw CommandFailed(std::string("the proof ended ") + status_name(result.status()) +
                        (result.error_message().empty() ? "" : ": " + result.error_message()));
  }
}

}  // namespace

void register_prove(CLI::App& app) {
  auto o = std::make_shared<ProveOptions>();
  auto* cmd = app.add_subcommand(
      "prove",
      "Prove one input through the fleet's cuzk-compatible gateway (gRPC Prove), like Curio.\n"
      "Blocks until the proof, then prints job id, status and timings.");
  cmd->footer(
      "Inputs by kind:\n"
      "  porep-c2     --input = the C1 output envelope (JSON {SectorNum, Phase1Out, SectorSize});\n"
      "               sector number and size default to the envelope's\n"
      "  snap-update  --input = JSON array of base64 partition proofs; --comm-r-old/--comm-r-new/\n"
      "               --comm-d-new (hex, 32 bytes each)\n"
      "  window-post, winning-post  --input = JSON array of base64 sector proofs; --randomness\n"
      "               (hex, 32 bytes), --partition\n"
      "A request id that is queued or proving joins that job: after a timeout, run the same\n"
      "command with the --request-id it printed to wait for the same proof.");
  cmd->add_option("--input", o->input, "Input file (see below)")->required();
  cmd->add_option("--kind", o->kind, "porep-c2 | snap-update | window-post | winning-post")
      ->capture_default_str();
  cmd->add_option("--gateway", o->gateway, "Gateway address HOST:PORT (serve --grpc-listen)")
      ->envname("PROVERFLEET_GATEWAY")
      ->capture_default_str();
  cmd->add_option("--tls-ca", o->tls_ca, "PEM roots to verify a TLS gateway with");
  cmd->add_option("--client-token-file", o->client_token_file,
                  "File (mode 0600) holding a client token from [gateway] client_tokens_file: "
                  "the call is that client's, with request ids of its own (default: the "
                  "operator's cluster, as every Curio node)");
  cmd->add_option("--request-id", o->fields.request_id,
                  "Idempotency key (default: a new pf-... id); reuse it to join a job");
  cmd->add_option("--sector", o->sector, "Sector number");
  cmd->add_option("--miner", o->fields.miner, "Miner actor id (number)");
  cmd->add_option("--registered-proof", o->fields.registered_proof,
                  "Registered proof type number, as Curio sends it");
  cmd->add_option("--partition", o->fields.partition, "WindowPoSt partition index");
  cmd->add_option("--randomness", o->fields.randomness_hex, "PoSt randomness, 64 hex digits");
  cmd->add_option("--comm-r-old", o->fields.comm_r_old_hex, "SnapDeals comm_r_old, 64 hex digits");
  cmd->add_option("--comm-r-new", o->fields.comm_r_new_hex, "SnapDeals comm_r_new, 64 hex digits");
  cmd->add_option("--comm-d-new", o->fields.comm_d_new_hex, "SnapDeals comm_d_new, 64 hex digits");
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the proof")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_option("--out", o->out, "Write the proof bytes to this file");
  cmd->callback([o] { run_prove(*o); });
}

}  // namespace pf::cli
