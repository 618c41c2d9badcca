// Fuzz target: the scenario parser (scenario::parse_scenario_text: bounded JSON, then the strict
// scenario reader) over the bytes of a scenario file.
#include "fuzz/fuzz_input.h"
#include "scenario/scenario.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  (void)pf::scenario::parse_scenario_text(pf::fuzz::as_text(data, size));
  return 0;
}
