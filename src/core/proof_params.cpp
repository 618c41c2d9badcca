#include "core/proof_params.h"

#include <algorithm>

namespace pf::core {

std::string_view params_stem_32gib(JobKind kind) {
  switch (kind) {
    case JobKind::PorepC2:
      return "v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-"
             "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820";
    case JobKind::SnapUpdate:
      return "v28-empty-sector-update-merkletree-poseidon_hasher-8-8-0-"
             "3b7f44a9362e3985369454947bc94022e118211e49fd672d52bec1cbfd599d18";
    case JobKind::WindowPost:
      return "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-"
             "0377ded656c6f524f1618760bffe4e0a1c51d5a70c4509eedae8a27555733edc";
    case JobKind::WinningPost:
      return "v28-proof-of-spacetime-fallback-merkletree-poseidon_hasher-8-8-0-"
             "559e581f022bb4e4ec6e719e563bf0e026ad6de42e56c18714a2c692b1b88d7e";
  }
  return {};
}

KindSet kinds_of_param_files(const std::vector<std::string>& file_names) {
  const auto has = [&](const std::string& name) {
    return std::find(file_names.begin(), file_names.end(), name) != file_names.end();
  };
  KindSet out = 0;
  for (JobKind kind : {JobKind::PorepC2, JobKind::SnapUpdate}) {
    const std::string stem(params_stem_32gib(kind));
    if (has(stem + ".params") && has(stem + ".vk")) out |= kind_bit(kind);
  }
  return out;
}

std::string describe_kinds(KindSet kinds) {
  std::string out;
  for (JobKind kind :
       {JobKind::PorepC2, JobKind::SnapUpdate, JobKind::WindowPost, JobKind::WinningPost}) {
    if (!has_kind(kinds, kind)) continue;
    if (!out.empty()) out += ", ";
    out += to_string(kind);
  }
  return out.empty() ? "none" : out;
}

}  // namespace pf::core
