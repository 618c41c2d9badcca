// Parameter manifests: which proof-parameter files an agent fetches, from where, and how each
// is checked. Two shapes are read:
//   - lotus' own (build/proof-params/parameters.json): an object from file name to
//     {cid, digest, sector_size}; each file is fetched from <gateway><cid>, as curio's
//     lib/fastparamfetch and lotus' go-paramfetch do;
//   - the manager's list, handed to agents at registration: an array of
//     {name, url | cid, bytes?, digest?, sector_size?}.
// The shipped manifests (params/*.json, lotus' shape) are compiled in and named
// "builtin:NAME"; "builtin:porep-snap-32gib" (PoRep C2 and SnapDeals, 32 GiB) is the default of
// deploy.params_manifest, "builtin:porep-32gib-c2" the PoRep-only one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tl/expected.hpp>
#include <vector>

#include "util/bounded_json.h"

namespace pf::agent {

struct ParamFile {
  std::string name;
  std::string url;
  // The file's length; 0: not in the manifest (lotus' list publishes none), asked of the
  // source before fetching (a 1-byte ranged GET's Content-Range).
  std::uint64_t bytes = 0;
  std::string digest;             // lower-case hex, 32 characters; empty: size check only
  std::string cid{};              // the IPFS content id when the file comes from a gateway
  std::uint64_t sector_size = 0;  // the sector size the circuit serves (lotus' sector_size)
};

// The gateway lotus and curio fetch parameters from (curio lib/fastparamfetch/paramfetch.go,
// `const gateway`); IPFS_GATEWAY overrides it there, deploy.params_gateway here.
inline constexpr const char* kDefaultParamsGateway = "https://proofs.filecoin.io/ipfs/";
inline constexpr const char* kDefaultParamsManifest = "builtin:porep-snap-32gib";

// Larger than any Filecoin parameter file (the largest, 64 GiB PoSt, is under 128 GiB): a
// manifest or a source claiming more is refused, not trusted with the disk.
inline constexpr std::uint64_t kMaxParamFileBytes = 256ull << 30;

// Limits for a manifest's text: a few dozen entries in practice.
inline constexpr util::JsonLimits kManifestLimits{
    .max_bytes = 4u << 20, .max_depth = 8, .max_values = 100'000, .max_string_bytes = 64u << 10};

struct ManifestOptions {
  // Prefix of a cid's URL; must be http(s). A missing trailing '/' is added.
  std::string gateway = kDefaultParamsGateway;
};

// Either shape (see above). Errors name the entry and field; names must be plain file names
// (no '/', no leading '.'), cids plain base58/base32 text.
tl::expected<std::vector<ParamFile>, std::string> parse_param_manifest(
    const nlohmann::json& params, const ManifestOptions& options = {});

// The same from JSON text (a manifest file or reply body), parsed with kManifestLimits.
tl::expected<std::vector<ParamFile>, std::string> parse_param_manifest_text(
    std::string_view text, const ManifestOptions& options = {});

// The list an agent is handed (the array shape, urls resolved): parse_param_manifest reads it
// back unchanged.
nlohmann::json param_manifest_json(const std::vector<ParamFile>& files);

// "builtin:NAME" → the shipped manifest's text; nullopt for another string. An unknown NAME
// is an error listing the known ones.
tl::expected<std::optional<std::string_view>, std::string> builtin_param_manifest(
    std::string_view where);

struct BuiltinManifest {
  std::string_view name;  // params/NAME.json
  std::string_view text;
};
// Defined in the build-time generated builtin_param_manifests.cpp (params/embed.cmake).
std::span<const BuiltinManifest> builtin_param_manifests();

}  // namespace pf::agent
