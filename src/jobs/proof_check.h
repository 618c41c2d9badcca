// What a proof from a rented machine must look like before the queue accepts it (issue 25):
// an untrusted host's proof is checked before any client sees it, because Curio itself verifies
// only PoRep and WindowPoSt (lib/ffi/cuzk_funcs.go:93-108, tasks/window/compute_do.go:219-229 at
// the pinned curio commit), never SnapDeals or WinningPoSt (cuzk_funcs.go:149-166). A proof that
// fails its check is a failed proof that the host is struck for at once, with this evidence; the
// job runs again elsewhere and the bad bytes reach no client.
//
//  - groth16 (serve's default): the bytes are the Groth16 proofs of the kind's 32 GiB circuit, as
//    cuzk returns them (the engine runs the 32 GiB circuits, cuzk-core/src/engine.rs:2491-2496):
//    192 bytes a partition, PoRep 10 partitions (1,920 bytes), SnapDeals 16 (3,072), each
//    partition's A (G1), B (G2), C (G1) a compressed point on its curve (util/bls12_381.h). A
//    structural check: a proof that is well formed but does not verify passes it (the pairing
//    and the verifying key would be needed; docs/gateway.md, "Proofs from untrusted hosts").
//  - sim: a fleet of sim provers (market-sim, the demo, tests): the proof must be the sim
//    prover's proof of the job's own input, hex SHA-256 of "pf-sim-proof:" + input
//    (agent/prover_sim.h), which is a complete check.
//  - none: an operator's `command` prover whose proofs have no known shape; nothing is checked
//    beyond a non-empty proof (serve warns at start).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "core/job.h"

namespace pf::jobs {

enum class ProofCheck { Groth16, Sim, None };

std::optional<ProofCheck> parse_proof_check(std::string_view text);
const char* to_string(ProofCheck check);

inline constexpr std::size_t kGroth16ProofBytes = 192;
// Partitions of each kind's 32 GiB circuit; 0 for kinds the fleet does not prove.
int partitions_32gib(core::JobKind kind);

// Why `proof` cannot be the proof of a job of `kind` whose input `input()` reads (called only by
// the sim check); nullopt when it passes. The message is the evidence a strike records.
std::optional<std::string> proof_problem(ProofCheck check, core::JobKind kind,
                                         std::string_view proof,
                                         const std::function<std::optional<std::string>()>& input);

}  // namespace pf::jobs
