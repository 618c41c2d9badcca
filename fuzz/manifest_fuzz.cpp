// Fuzz target: the parameter manifest (agent::parse_param_manifest), as the agent reads it
// from the register reply and `serve` from --params-manifest.
#include "agent/params.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pf::agent::parse_param_manifest_text(pf::fuzz::as_text(data, size));
  const nlohmann::json doc = pf::fuzz::parse_json(pf::fuzz::as_text(data, size));
  if (doc.is_discarded()) return 0;
  // The register reply carries it under "params".
  if (doc.is_object() && doc.contains("params"))
    (void)pf::agent::parse_param_manifest(doc["params"]);
  return 0;
}
