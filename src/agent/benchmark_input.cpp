#include "agent/benchmark_input.h"

namespace pf::agent {

using nlohmann::json;

tl::expected<std::optional<BenchmarkInputOffer>, std::string> parse_benchmark_input(
    const json& field, const std::string& manager_url) {
  if (field.is_null()) return std::nullopt;
  if (!field.is_object()) return tl::unexpected(std::string("benchmark_input must be an object"));
  const json* path = field.contains("path") ? &field["path"] : nullptr;
  if (!path || !path->is_string() || path->get<std::string>().rfind("/api/", 0) != 0 ||
      path->get<std::string>().find_first_of("?#@\\") != std::string::npos) {
    return tl::unexpected(
        std::string("benchmark_input.path must be a path on the manager (/api/...)"));
  }
  if (!field.contains("digest") || !field["digest"].is_string() ||
      field["digest"].get<std::string>().empty()) {
    return tl::unexpected(
        std::string("benchmark_input.digest is missing: the file could not be checked"));
  }
  if (!field.contains("bytes") || !field["bytes"].is_number_unsigned() ||
      field["bytes"].get<std::uint64_t>() == 0) {
    return tl::unexpected(std::string("benchmark_input.bytes must be a positive integer"));
  }
  std::string base = manager_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  // The one-entry list goes through the manifest parser: names, digests and sizes are checked
  // by the same rules as parameter files.
  const json entry = json::array({{{"name", field.value("name", json(nullptr))},
                                   {"url", base + path->get<std::string>()},
                                   {"bytes", field["bytes"]},
                                   {"digest", field["digest"]}}});
  auto files = parse_param_manifest(entry);
  if (!files) return tl::unexpected("benchmark_input: " + files.error());
  BenchmarkInputOffer offer;
  offer.file = std::move(files->front());
  if (field.contains("chunk_bytes") && !field["chunk_bytes"].is_null()) {
    const json& c = field["chunk_bytes"];
    if (!c.is_number_unsigned() || c.get<std::uint64_t>() < 4096 ||
        c.get<std::uint64_t>() > (64u << 20)) {
      return tl::unexpected(std::string("benchmark_input.chunk_bytes must be 4 KiB to 64 MiB"));
    }
    offer.chunk_bytes = c.get<std::uint64_t>();
  }
  return offer;
}

tl::expected<std::string, std::string> fetch_benchmark_input(const BenchmarkInputOffer& offer,
                                                             FetchOptions options,
                                                             const std::string& authorization) {
  options.chunk_bytes = offer.chunk_bytes;
  options.headers.push_back(authorization);
  options.reserve_gib = 0;  // tens of MB next to the parameters' own reserve
  FetchProgress progress;   // small next to the parameters: not reported
  auto r = fetch_params({offer.file}, options, progress);
  if (!r) return tl::unexpected("benchmark input: " + r.error());
  return r->paths.front();
}

}  // namespace pf::agent
