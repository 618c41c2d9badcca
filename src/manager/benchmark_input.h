// The benchmark input: the C1 file (a PoRep C2 input envelope) every agent's benchmark proofs
// prove. The manager reads it once at start (deploy.benchmark_input), tells agents its name,
// size and digest when they register, and serves it at GET kBenchmarkInputRoute to agents with
// their token, by byte ranges, so an agent fetches it once per machine, resumes a broken
// download and checks the digest before using it. No image carries it and no onstart names it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pf::manager {

inline constexpr const char* kBenchmarkInputRoute = "/api/v1/agent/benchmark-input";
// A 32 GiB PoRep C1 output is about 51 MB; larger files are refused at start.
inline constexpr std::size_t kMaxBenchmarkInputBytes = 512u << 20;

struct BenchmarkInput {
  std::string name;  // a plain file name: what the agent stores it as
  std::shared_ptr<const std::string> bytes = std::make_shared<const std::string>();
  std::string digest;  // first 16 bytes of BLAKE2b-512, hex (as parameter files)
  // The most one reply carries; told to agents as their download unit (chunk_bytes), so the
  // manager's bound and the agent's ranges are one number.
  std::size_t reply_bytes = 4u << 20;
};

// What the register reply says: {name, bytes, digest, path, chunk_bytes}.
nlohmann::json to_json(const BenchmarkInput& input);

struct BenchmarkInputReply {
  int status = 200;  // 200 whole file, 206 a range, 416 a range past the end
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Range, ETag, ...
};

// GET with an optional "Range: bytes=FIRST-[LAST]" already parsed (LAST inclusive). Without a
// range the whole file comes back when it fits one reply (200), else its first reply_bytes
// (206); a range is served from FIRST up to LAST, the end or reply_bytes, whichever comes first.
BenchmarkInputReply benchmark_input_reply(
    const BenchmarkInput& input,
    std::optional<std::pair<std::int64_t, std::optional<std::int64_t>>> range);

}  // namespace pf::manager
