// The agent's side of the benchmark input (manager/benchmark_input.h): the register reply names
// the C1 file's name, size, digest and route; the agent fetches it from the manager with its
// token by byte ranges (agent/params.h: resumable, digest-checked, a mismatch fetched once more
// then refused) into <param_dir>/benchmark-input/, once per machine: a verified copy is reused
// without a request. Benchmark proofs (cuzk) prove that file.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tl/expected.hpp>

#include "agent/params.h"

namespace pf::agent {

struct BenchmarkInputOffer {
  ParamFile file;  // url = <manager>/<path>; bytes and digest always set
  std::uint64_t chunk_bytes = 4u << 20;
};

// The register reply's "benchmark_input" (null or absent: none offered). The route must be a
// path on the manager (it gets the agent's token); errors name the field.
tl::expected<std::optional<BenchmarkInputOffer>, std::string> parse_benchmark_input(
    const nlohmann::json& field, const std::string& manager_url);

// Fetches the offer into `options.dir` with the manager's authorization header; the verified
// file's path. The offer's chunk_bytes replaces options.chunk_bytes (the manager's reply bound).
tl::expected<std::string, std::string> fetch_benchmark_input(const BenchmarkInputOffer& offer,
                                                             FetchOptions options,
                                                             const std::string& authorization);

}  // namespace pf::agent
