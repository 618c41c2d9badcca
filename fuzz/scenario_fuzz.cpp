// Fuzz target: the scenario parser (sim::parse_scenario) over the bytes of a scenario file.
#include "fuzz/fuzz_input.h"
#include "sim/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json doc = pf::fuzz::parse_json(pf::fuzz::as_text(data, size));
  if (doc.is_discarded()) return 0;
  (void)pf::sim::parse_scenario(doc);
  return 0;
}
