// Bench helper: PoRep-shaped Prove calls for the benches that drive a gateway (gateway_bench,
// replicas_bench). Header-only.
//
//   auto request = pf::bench::porep_prove_request(job, 50'000'000, 1);
//   auto stub = pf::bench::proving_stub("127.0.0.1:9820", 256 << 20);
#pragma once

#include <grpcpp/grpcpp.h>
#include <openssl/evp.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "cuzk/v1/proving.grpc.pb.h"

namespace pf::bench {

// A Prove call whose vanilla proof is a C1 envelope of about `input_bytes` (Phase1Out: base64 of
// random bytes drawn from seed `seed + job`, so distinct per job), request id
// "porep-1000-<job>".
inline cuzk::v1::ProveRequest porep_prove_request(int job, std::size_t input_bytes,
                                                  std::uint64_t seed) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(job) + seed);
  std::string raw(input_bytes / 4 * 3, '\0');
  for (std::size_t i = 0; i + 8 <= raw.size(); i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(&raw[i], &v, 8);
  }
  std::string b64(4 * ((raw.size() + 2) / 3) + 1, '\0');
  b64.resize(static_cast<std::size_t>(EVP_EncodeBlock(
      reinterpret_cast<unsigned char*>(b64.data()),
      reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()))));
  cuzk::v1::ProveRequest r;
  auto* s = r.mutable_submit();
  s->set_request_id("porep-1000-" + std::to_string(job));
  s->set_proof_kind(cuzk::v1::POREP_SEAL_COMMIT);
  s->set_sector_size(34359738368ULL);
  s->set_registered_proof(8);
  s->set_sector_number(static_cast<std::uint64_t>(job));
  s->set_miner_id(1000);
  s->set_vanilla_proof(R"({"SectorNum":)" + std::to_string(job) + R"(,"Phase1Out":")" + b64 +
                       R"(","SectorSize":34359738368})");
  return r;
}

// A plaintext stub to a gateway at HOST:PORT taking messages up to `max_message_bytes`.
inline std::unique_ptr<cuzk::v1::ProvingEngine::Stub> proving_stub(const std::string& address,
                                                                   int max_message_bytes) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(max_message_bytes);
  args.SetMaxReceiveMessageSize(max_message_bytes);
  return cuzk::v1::ProvingEngine::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

}  // namespace pf::bench
