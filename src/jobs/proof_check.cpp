#include "jobs/proof_check.h"

#include "util/bls12_381.h"
#include "util/sha256.h"

namespace pf::jobs {

std::optional<ProofCheck> parse_proof_check(std::string_view text) {
  if (text == "groth16") return ProofCheck::Groth16;
  if (text == "sim") return ProofCheck::Sim;
  if (text == "none") return ProofCheck::None;
  return std::nullopt;
}

const char* to_string(ProofCheck check) {
  switch (check) {
    case ProofCheck::Groth16:
      return "groth16";
    case ProofCheck::Sim:
      return "sim";
    case ProofCheck::None:
      return "none";
  }
  return "unknown";
}

int partitions_32gib(core::JobKind kind) {
  switch (kind) {
    case core::JobKind::PorepC2:
      return 10;
    case core::JobKind::SnapUpdate:
      return 16;
    case core::JobKind::WindowPost:
    case core::JobKind::WinningPost:
      return 1;
  }
  return 0;
}

std::optional<std::string> proof_problem(ProofCheck check, core::JobKind kind,
                                         std::string_view proof,
                                         const std::function<std::optional<std::string>()>& input) {
  if (proof.empty()) return std::string("the proof is empty");
  switch (check) {
    case ProofCheck::None:
      return std::nullopt;
    case ProofCheck::Sim: {
      const auto bytes = input();
      if (!bytes) return std::string("the job's input could not be read to check the proof");
      if (proof != util::sha256_hex("pf-sim-proof:", *bytes)) {
        return "not the sim prover's proof of this job's input (got " +
               util::sha256_hex(proof).substr(0, 16) + "… by SHA-256)";
      }
      return std::nullopt;
    }
    case ProofCheck::Groth16: {
      const std::size_t partitions = static_cast<std::size_t>(partitions_32gib(kind));
      if (proof.size() != partitions * kGroth16ProofBytes) {
        return "a " + std::string(core::to_string(kind)) + " proof of a 32 GiB sector is " +
               std::to_string(partitions) + " Groth16 proofs of " +
               std::to_string(kGroth16ProofBytes) + " bytes (" +
               std::to_string(partitions * kGroth16ProofBytes) + "), got " +
               std::to_string(proof.size()) + " bytes";
      }
      for (std::size_t i = 0; i < partitions; ++i) {
        const std::string_view one = proof.substr(i * kGroth16ProofBytes, kGroth16ProofBytes);
        const std::string where = "partition " + std::to_string(i) + " ";
        if (auto p = util::g1_compressed_problem(one.substr(0, 48))) return where + "A: " + *p;
        if (auto p = util::g2_compressed_problem(one.substr(48, 96))) return where + "B: " + *p;
        if (auto p = util::g1_compressed_problem(one.substr(144, 48))) return where + "C: " + *p;
      }
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace pf::jobs
