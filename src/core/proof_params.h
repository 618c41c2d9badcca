// Which proof kinds a prover can prove from the parameter files it holds (issue 25 item 5). cuzk
// loads one SRS per circuit (extern/cuzk/cuzk-core/src/srs_manager.rs:80-96 at the pinned curio
// commit: `.params`) and its proofs' self-checks read the circuit's `.vk` (srs_manager.rs:99-108,
// cuzk-core/src/prover.rs:369-379); its engine runs the 32 GiB circuits (engine.rs:2491-2496).
// A kind is provable when both files of its 32 GiB circuit are present:
//  - porep-c2: v28-stacked-proof-of-replication-…-8-8-0-sha256_hasher-82a357d2….{params,vk}
//  - snap-update: v28-empty-sector-update-…-8-8-0-3b7f44a9….{params,vk}
// The PoSt kinds never go to a rented machine (gateway/local_cuzk.h), so their files do not
// count here. Names as lotus' build/proof-params/parameters.json lists them (params/README.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"

namespace pf::core {

// The circuit file stem (without .params / .vk) each fleet kind needs at 32 GiB.
std::string_view params_stem_32gib(JobKind kind);

// The fleet kinds whose 32 GiB `.params` and `.vk` are both among `file_names`.
KindSet kinds_of_param_files(const std::vector<std::string>& file_names);

// "porep-c2, snap-update" (for messages); "none" for an empty set.
std::string describe_kinds(KindSet kinds);

}  // namespace pf::core
