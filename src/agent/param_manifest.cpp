#include "agent/param_manifest.h"

#include <algorithm>
#include <cctype>

#include "util/hex.h"

namespace pf::agent {
namespace {

using nlohmann::json;

bool valid_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name.front() != '.' &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

bool valid_digest(const std::string& d) {
  return util::is_lower_hex(d, 32);
}

// CIDv0 ("Qm…", base58) and CIDv1 in base32 ("b…") are letters and digits only, so a cid is
// safe to append to a URL as is.
bool valid_cid(const std::string& cid) {
  return cid.size() >= 8 && cid.size() <= 128 && std::all_of(cid.begin(), cid.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) != 0;
         });
}

bool http_url(const std::string& url) {
  return url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0;
}

// The fields both shapes share, read from `e` into `f` (name already set).
tl::expected<void, std::string> read_entry(const json& e, const std::string& where,
                                           const std::string& gateway, bool digest_required,
                                           ParamFile& f) {
  if (e.contains("url") && !e["url"].is_null()) {
    if (!e["url"].is_string()) return tl::unexpected(where + ".url must be a string");
    f.url = e["url"].get<std::string>();
    if (!http_url(f.url)) {
      return tl::unexpected(where + ".url must be an http(s) URL, got '" + f.url + "'");
    }
  }
  if (e.contains("cid") && !e["cid"].is_null()) {
    if (!e["cid"].is_string() || !valid_cid(e["cid"].get<std::string>())) {
      return tl::unexpected(where + ".cid must be an IPFS content id (letters and digits)");
    }
    f.cid = e["cid"].get<std::string>();
    if (f.url.empty()) f.url = gateway + f.cid;
  }
  if (f.url.empty()) return tl::unexpected(where + " needs a url or a cid");
  if (e.contains("bytes") && !e["bytes"].is_null()) {
    const json& b = e["bytes"];
    if (!b.is_number_integer() || b.get<std::int64_t>() < 0 ||
        b.get<std::uint64_t>() > kMaxParamFileBytes) {
      return tl::unexpected(where + ".bytes must be an integer from 0 (unknown) to " +
                            std::to_string(kMaxParamFileBytes));
    }
    f.bytes = b.get<std::uint64_t>();
  }
  if (e.contains("sector_size") && !e["sector_size"].is_null()) {
    if (!e["sector_size"].is_number_unsigned()) {
      return tl::unexpected(where + ".sector_size must be a non-negative integer");
    }
    f.sector_size = e["sector_size"].get<std::uint64_t>();
  }
  if (e.contains("digest") && !e["digest"].is_null()) {
    if (!e["digest"].is_string()) return tl::unexpected(where + ".digest must be a string");
    f.digest = e["digest"].get<std::string>();
    std::transform(f.digest.begin(), f.digest.end(), f.digest.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (!f.digest.empty() && !valid_digest(f.digest)) {
      return tl::unexpected(where + ".digest must be 32 hex digits (first 16 bytes of " +
                            "BLAKE2b-512), got '" + f.digest + "'");
    }
  }
  if (digest_required && f.digest.empty()) {
    return tl::unexpected(where + ".digest is missing: lotus' list gives every file one");
  }
  if (f.bytes == 0 && f.digest.empty()) {
    return tl::unexpected(where + " has neither bytes nor a digest: nothing could check it");
  }
  return {};
}

}  // namespace

tl::expected<std::vector<ParamFile>, std::string> parse_param_manifest_text(
    std::string_view text, const ManifestOptions& options) {
  auto parsed = util::parse_json(text, kManifestLimits);
  if (!parsed) return tl::unexpected("not valid JSON: " + parsed.error());
  return parse_param_manifest(*parsed, options);
}

tl::expected<std::vector<ParamFile>, std::string> parse_param_manifest(
    const json& params, const ManifestOptions& options) {
  std::string gateway = options.gateway;
  if (!http_url(gateway)) {
    return tl::unexpected("the parameter gateway must be an http(s) URL, got '" + gateway + "'");
  }
  if (gateway.back() != '/') gateway += '/';

  std::vector<ParamFile> out;
  if (params.is_object()) {
    // lotus' shape; nlohmann keeps keys sorted, so the order is the names' order.
    for (const auto& [name, e] : params.items()) {
      const std::string where = "\"" + name.substr(0, 120) + "\"";
      if (!valid_name(name)) {
        return tl::unexpected(where + " is not a plain file name (no '/', no leading '.')");
      }
      if (!e.is_object()) return tl::unexpected(where + " must map to {cid, digest, sector_size}");
      ParamFile f;
      f.name = name;
      if (auto r = read_entry(e, where, gateway, true, f); !r) return tl::unexpected(r.error());
      out.push_back(std::move(f));
    }
    return out;
  }
  if (!params.is_array()) {
    return tl::unexpected(
        std::string("params must be an array of {name, url | cid, bytes, digest} or lotus' ") +
        "parameters.json object, got " + params.type_name());
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    const json& e = params[i];
    const std::string where = "params[" + std::to_string(i) + "]";
    if (!e.is_object()) return tl::unexpected(where + " must be an object");
    ParamFile f;
    if (!e.contains("name") || !e["name"].is_string() ||
        !valid_name(e["name"].get<std::string>())) {
      return tl::unexpected(where + ".name must be a plain file name (no '/', no leading '.')");
    }
    f.name = e["name"].get<std::string>();
    if (auto r = read_entry(e, where, gateway, false, f); !r) return tl::unexpected(r.error());
    for (const auto& prev : out) {
      if (prev.name == f.name)
        return tl::unexpected(where + ".name '" + f.name + "' is listed twice");
    }
    out.push_back(std::move(f));
  }
  return out;
}

json param_manifest_json(const std::vector<ParamFile>& files) {
  json out = json::array();
  for (const auto& f : files) {
    json e = {{"name", f.name}, {"url", f.url}, {"bytes", f.bytes}, {"digest", f.digest}};
    if (!f.cid.empty()) e["cid"] = f.cid;
    if (f.sector_size > 0) e["sector_size"] = f.sector_size;
    out.push_back(std::move(e));
  }
  return out;
}

tl::expected<std::optional<std::string_view>, std::string> builtin_param_manifest(
    std::string_view where) {
  constexpr std::string_view kPrefix = "builtin:";
  if (where.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view name = where.substr(kPrefix.size());
  std::string known;
  for (const auto& m : builtin_param_manifests()) {
    if (m.name == name) return m.text;
    known += (known.empty() ? "" : ", ") + std::string(kPrefix) + std::string(m.name);
  }
  return tl::unexpected("no shipped parameter manifest '" + std::string(where) +
                        "' (known: " + (known.empty() ? std::string("none") : known) + ")");
}

}  // namespace pf::agent
