// Fuzz target: the parameter manifest (agent::parse_param_manifest), as the agent reads it
// from the register reply and `serve` from --params-manifest (lotus' shape included), and the
// register reply's benchmark input offer (agent::parse_benchmark_input).
#include "agent/benchmark_input.h"
#include "agent/params.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pf::agent::parse_param_manifest_text(pf::fuzz::as_text(data, size));
  const nlohmann::json doc = pf::fuzz::parse_json(pf::fuzz::as_text(data, size));
  if (doc.is_discarded()) return 0;
  // The register reply carries it under "params".
  if (doc.is_object() && doc.contains("params"))
    (void)pf::agent::parse_param_manifest(doc["params"]);
  if (doc.is_object() && doc.contains("benchmark_input"))
    (void)pf::agent::parse_benchmark_input(doc["benchmark_input"], "http://127.0.0.1:8470");
  return 0;
}
