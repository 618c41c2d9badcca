// The shipped manifest (params/porep-32gib-c2.json, compiled in), lotus' parameters.json shape,
// cids resolved against a gateway, and files the manifest gives no size for: sized by the
// source's Content-Range, verified by digest, not asked again once verified.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/param_manifest.h"
#include "agent/params.h"
#include "cli/config.h"
#include "core/proof_params.h"
#include "support/param_server.h"
#include "support/temp_dir.h"

namespace pf::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kPorepParams =
    "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
    "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.params";
constexpr const char* kPorepVk =
    "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
    "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820.vk";

std::vector<ParamFile> builtin(const std::string& where, const ManifestOptions& options = {}) {
  auto text = builtin_param_manifest(where);
  EXPECT_TRUE(text && *text) << (text ? "not builtin" : text.error());
  if (!text || !*text) return {};
  auto files = parse_param_manifest_text(**text, options);
  EXPECT_TRUE(files) << files.error();
  return files ? *files : std::vector<ParamFile>{};
}

// The values are lotus' build/proof-params/parameters.json (commit 10af768c); a change to the
// shipped file that is not a copy of that list fails here.
TEST(BuiltinManifest, IsThe32GiBPoRepCircuitFromLotusList) {
  const auto files = builtin("builtin:porep-32gib-c2");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].name, kPorepParams);
  EXPECT_EQ(files[0].cid, "QmengpM684XLQfG8754ToonszgEg2bQeAGUan5uXTHUQzJ");
  EXPECT_EQ(files[0].digest, "6a388072a518cf46ebd661f5cc46900a");
  EXPECT_EQ(files[0].sector_size, 34359738368u);
  EXPECT_EQ(files[0].url,
            "https://proofs.filecoin.io/ipfs/QmengpM684XLQfG8754ToonszgEg2bQeAGUan5uXTHUQzJ");
  EXPECT_EQ(files[1].name, kPorepVk);
  EXPECT_EQ(files[1].cid, "Qmf93EMrADXAK6CyiSfE8xx45fkMfR3uzKEPCvZC1n2kzb");
  EXPECT_EQ(files[1].digest, "0c7b4aac1c40fdb7eb82bc355b41addf");
  EXPECT_EQ(files[1].sector_size, 34359738368u);
  // lotus' list gives no byte sizes: the agent asks the source.
  EXPECT_EQ(files[0].bytes, 0u);
  EXPECT_EQ(files[1].bytes, 0u);
}

// The default covers PoRep C2 and SnapDeals at 32 GiB (issue 25 item 5): the files cuzk loads for
// those circuits, copied from lotus' list (commit 10af768c).
TEST(BuiltinManifest, TheDefaultCoversPorepAndSnapDeals32GiB) {
  const auto files = builtin(kDefaultParamsManifest);
  ASSERT_EQ(files.size(), 4u);
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.name);
  EXPECT_EQ(core::kinds_of_param_files(names),
            core::kind_bit(core::JobKind::PorepC2) | core::kind_bit(core::JobKind::SnapUpdate));
  const std::string snap(core::params_stem_32gib(core::JobKind::SnapUpdate));
  for (const auto& f : files) {
    if (f.name == snap + ".params") {
      EXPECT_EQ(f.cid, "QmNPc75iEfcahCwNKdqnWLtxnjspUGGR4iscjiz3wP3RtS");
      EXPECT_EQ(f.digest, "1b3cfd761a961543f9eb273e435a06a2");
    }
    if (f.name == snap + ".vk") {
      EXPECT_EQ(f.cid, "QmdFFUe1gcz9MMHc6YW8aoV48w4ckvcERjt7PkydQAMfCN");
      EXPECT_EQ(f.digest, "3a6941983754737fde880d29c7094905");
    }
    EXPECT_EQ(f.sector_size, 34359738368u);
  }
  // The PoRep-only manifest proves PoRep only; stand-ins prove nothing by their names.
  std::vector<std::string> porep;
  for (const auto& f : builtin("builtin:porep-32gib-c2")) porep.push_back(f.name);
  EXPECT_EQ(core::kinds_of_param_files(porep), core::kind_bit(core::JobKind::PorepC2));
  EXPECT_EQ(core::kinds_of_param_files({std::string(snap) + ".params"}), 0);
  EXPECT_EQ(core::describe_kinds(core::kFleetKinds), "porep-c2, snap-update");
}

TEST(BuiltinManifest, TheGatewayIsConfigurable) {
  const auto files = builtin("builtin:porep-32gib-c2", {.gateway = "http://10.0.0.5:8080/ipfs"});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[1].url,
            "http://10.0.0.5:8080/ipfs/Qmf93EMrADXAK6CyiSfE8xx45fkMfR3uzKEPCvZC1n2kzb");
  auto bad = parse_param_manifest(json::object(), {.gateway = "ipfs://x/"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("gateway must be an http(s) URL"), std::string::npos) << bad.error();
}

TEST(BuiltinManifest, UnknownNamesListTheKnownOnesAndOtherStringsAreNotBuiltin) {
  auto unknown = builtin_param_manifest("builtin:porep-64gib");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("builtin:porep-32gib-c2"), std::string::npos) << unknown.error();
  auto file = builtin_param_manifest("/etc/proverfleet/params.json");
  ASSERT_TRUE(file);
  EXPECT_FALSE(*file);
}

TEST(BuiltinManifest, IsTheDeployDefaultAndTheExampleConfigSaysSo) {
  const cli::DeploySettings defaults;
  EXPECT_EQ(defaults.params_manifest, "builtin:porep-snap-32gib");
  EXPECT_EQ(defaults.params_gateway, "https://proofs.filecoin.io/ipfs/");
  EXPECT_TRUE(defaults.benchmark_input.empty());
  auto example = cli::load_config(std::string(PF_SOURCE_DIR) + "/proverfleet.example.toml");
  ASSERT_TRUE(example) << example.error();
  EXPECT_EQ(example->deploy.params_manifest, defaults.params_manifest);
  EXPECT_EQ(example->deploy.params_gateway, defaults.params_gateway);
  auto set = cli::parse_config(R"([deploy]
params_manifest = ""
params_gateway = "http://gw.lan/ipfs/"
benchmark_input = "/srv/c1.json"
)",
                               "t.toml");
  ASSERT_TRUE(set) << set.error();
  EXPECT_TRUE(set->deploy.params_manifest.empty());
  EXPECT_EQ(set->deploy.params_gateway, "http://gw.lan/ipfs/");
  EXPECT_EQ(set->deploy.benchmark_input, "/srv/c1.json");
}

TEST(ParamManifest, LotusShapeNeedsCidAndDigestAndPlainNames) {
  auto err = [](const char* text) {
    auto r = parse_param_manifest(json::parse(text));
    return r ? std::string() : r.error();
  };
  EXPECT_NE(err(R"({"a.vk": {"cid": "QmengpM684XLQfG8754ToonszgEg2bQeAGUan5uXTHUQzJ"}})")
                .find("digest is missing"),
            std::string::npos);
  EXPECT_NE(err(R"({"a.vk": {"digest": "0c7b4aac1c40fdb7eb82bc355b41addf"}})")
                .find("needs a url or a cid"),
            std::string::npos);
  EXPECT_NE(err(R"({"a.vk": {"cid": "Qm../../x", "digest": "0c7b4aac1c40fdb7eb82bc355b41addf"}})")
                .find("cid must be an IPFS content id"),
            std::string::npos);
  EXPECT_NE(err(R"({"../a.vk": {"cid": "QmengpM684XLQfG8754ToonszgEg2bQeAGUan5uXTHUQzJ",
                                "digest": "0c7b4aac1c40fdb7eb82bc355b41addf"}})")
                .find("not a plain file name"),
            std::string::npos);
  EXPECT_NE(err(R"([{"name": "a", "url": "http://x", "bytes": 300000000000}])").find("bytes"),
            std::string::npos);
}

TEST(ParamManifest, TheListHandedToAgentsReadsBackUnchanged) {
  const auto files = builtin(kDefaultParamsManifest, {.gateway = "http://gw.example/ipfs/"});
  auto again = parse_param_manifest(param_manifest_json(files), {.gateway = "http://other/"});
  ASSERT_TRUE(again) << again.error();
  ASSERT_EQ(again->size(), files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    EXPECT_EQ((*again)[i].name, files[i].name);
    EXPECT_EQ((*again)[i].url, files[i].url);  // the url wins over the other gateway
    EXPECT_EQ((*again)[i].cid, files[i].cid);
    EXPECT_EQ((*again)[i].digest, files[i].digest);
    EXPECT_EQ((*again)[i].bytes, files[i].bytes);
  }
}

TEST(ParamDigest, MatchesLotusAndCurioOnKnownVectors) {
  // hex(BLAKE2b-512(x)[:16]) as curio's lib/fastparamfetch checkFile computes it (RFC 7693).
  EXPECT_EQ(param_digest_of(""), "786a02f742015903c6c6fd852552d272");
  EXPECT_EQ(param_digest_of("abc"), "ba80a53f981c4d0d6a2797b69f12f6e9");
}

// A lotus-shaped manifest whose gateway is a local server: the files are served under their
// cids, as an IPFS gateway serves them.
class GatewayFetchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    params_ = test::ParamServer::random_bytes(300 * 1024 + 17, 11);
    server_.put("QmParamsCid0000000000000000000000000000000001", params_);
    server_.put("QmVkCid00000000000000000000000000000000000002", "verifying key bytes");
    const json manifest = {{"v28-x.params",
                            {{"cid", "QmParamsCid0000000000000000000000000000000001"},
                             {"digest", param_digest_of(params_)},
                             {"sector_size", 34359738368u}}},
                           {"v28-x.vk",
                            {{"cid", "QmVkCid00000000000000000000000000000000000002"},
                             {"digest", param_digest_of("verifying key bytes")},
                             {"sector_size", 34359738368u}}}};
    std::string gateway = server_.url("");
    auto files = parse_param_manifest(manifest, {.gateway = gateway});
    ASSERT_TRUE(files) << files.error();
    files_ = *files;
    options_.dir = dir_.file("params");
    options_.chunk_bytes = 64 * 1024;
    options_.retry_base_s = 0.01;
    options_.retry_cap_s = 0.05;
    options_.chunk_attempts = 3;
    options_.free_gib = [](const std::string&) { return std::optional<double>(100.0); };
    options_.log = [this](const std::string& line) { log_.push_back(line); };
  }

  bool logged(const std::string& text) const {
    for (const auto& l : log_) {
      if (l.find(text) != std::string::npos) return true;
    }
    return false;
  }

  pf::testing::TempDir dir_;
  test::ParamServer server_;
  std::string params_;
  std::vector<ParamFile> files_;
  FetchOptions options_;
  FetchProgress progress_;
  std::vector<std::string> log_;
};

TEST_F(GatewayFetchTest, UnlistedSizesComeFromTheSourceAndTheDigestDecides) {
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->bytes, params_.size() + 19);
  EXPECT_TRUE(logged("v28-x.params: " + std::to_string(params_.size()) + " bytes at "));
  std::ifstream in(options_.dir + "/v28-x.params", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), params_);
  const auto snap = progress_.snapshot(1);
  EXPECT_EQ(snap.total_bytes, params_.size() + 19);
  EXPECT_EQ(snap.done_bytes, snap.total_bytes);

  // A restart finds both verified: no request at all, not even to size them.
  const int before = server_.requests.load();
  FetchProgress again;
  auto second = fetch_params(files_, options_, again);
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(second->downloaded, 0u);
  EXPECT_EQ(server_.requests.load(), before);
}

TEST_F(GatewayFetchTest, ACorruptGatewayIsRefusedAfterOneRefetchAndLeavesNothing) {
  server_.corrupt = true;
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("corrupt at its source"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find(files_[0].digest), std::string::npos) << r.error();
  EXPECT_TRUE(logged("fetching it once more"));
  EXPECT_FALSE(fs::exists(options_.dir + "/v28-x.params"));
  EXPECT_FALSE(fs::exists(options_.dir + "/v28-x.params.part"));
}

TEST_F(GatewayFetchTest, AnUnlistedSizeNeedsRangeSupport) {
  server_.ignore_ranges = true;
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("ignores byte ranges"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("\"bytes\""), std::string::npos) << r.error();
}

TEST_F(GatewayFetchTest, AMissingCidIsAClearErrorNotARetryLoop) {
  files_[1].url = server_.url("QmNotThere");
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("HTTP 404"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("v28-x.vk"), std::string::npos) << r.error();
}

TEST_F(GatewayFetchTest, AnInterruptedDownloadOfAnUnlistedSizeResumes) {
  // The first run is cut off after a few chunks (the source fails for good); the second run
  // sizes the file again and fetches only the chunks not recorded.
  {
    FetchOptions cut = options_;
    cut.connections = 1;
    cut.chunk_attempts = 1;
    cut.cancelled = [&] {
      // Cancel once 3 chunks of the large file have been served.
      return server_.served.load() >= 3 * options_.chunk_bytes;
    };
    FetchProgress p;
    auto r = fetch_params(files_, cut, p);
    ASSERT_FALSE(r);
  }
  const auto served_before = server_.served.load();
  ASSERT_GE(served_before, 3 * options_.chunk_bytes);
  auto r = fetch_params(files_, options_, progress_);
  ASSERT_TRUE(r) << r.error();
  EXPECT_TRUE(logged("resuming v28-x.params"));
  EXPECT_LT(r->downloaded, params_.size() + 19);
  std::ifstream in(options_.dir + "/v28-x.params", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), params_);
}

}  // namespace
}  // namespace pf::agent
